"""Small stand-in planners with the exact signatures aiter's get_mla_metadata_v1 had over time.

They share one toy planner (deterministic, dtype-dependent like the real one:
fp8 packs larger kv splits) so tests of binding, capture and diffing run
without aiter and without depending on the reference planners.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any, cast

import torch

#: CU parts the toy planner spreads work over.
TOY_CU_PARTS = 8


def toy_plan(
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    fp8: bool,
    ptrs: torch.Tensor,
    work_indptr: torch.Tensor,
    work_info: torch.Tensor,
    reduce_indptr: torch.Tensor,
    reduce_final_map: torch.Tensor,
    reduce_partial_map: torch.Tensor,
) -> None:
    """Split each batch's kv into chunks (64 tokens fp8, 32 otherwise), deal them round-robin to CU parts.

    Writes only a prefix of each buffer, as aiter does.
    """
    chunk = 64 if fp8 else 32
    qo, kv = qo_indptr.tolist(), kv_indptr.tolist()
    works: list[list[int]] = []
    groups: list[tuple[int, int, list[int]]] = []
    partial = 0
    for b in range(len(qo) - 1):
        starts = list(range(kv[b], kv[b + 1], chunk)) or [kv[b]]
        split = len(starts) > 1
        locs = []
        for s in starts:
            e = min(s + chunk, kv[b + 1])
            loc = partial if split else -1
            if split:
                locs.append(partial)
                partial += 1
            works.append([b, loc, qo[b], qo[b + 1], s, e, kv[b + 1] - e, 0])
        if split:
            groups.append((qo[b], qo[b + 1], locs))
    per_cu: list[list[list[int]]] = [[] for _ in range(TOY_CU_PARTS)]
    for i, w in enumerate(works):
        per_cu[i % TOY_CU_PARTS].append(w)
    ordered = [w for cu in per_cu for w in cu]
    indptr = [0]
    for cu in per_cu:
        indptr.append(indptr[-1] + len(cu))
    work_indptr[: len(indptr)] = torch.tensor(indptr, dtype=torch.int32)
    if ordered:
        work_info[: len(ordered)] = torch.tensor(ordered, dtype=torch.int32)
    red = [0]
    finals, partials = [], []
    for qs, qe, locs in groups:
        red.append(red[-1] + len(locs))
        finals.append([qs, qe])
        partials.extend(locs)
    reduce_indptr[: len(red)] = torch.tensor(red, dtype=torch.int32)
    if finals:
        reduce_final_map[: len(finals)] = torch.tensor(finals, dtype=torch.int32)
        reduce_partial_map[: len(partials)] = torch.tensor(partials, dtype=torch.int32)
    ptrs.copy_(torch.tensor([work_indptr.data_ptr(), work_info.data_ptr()], dtype=torch.uint64))


def _is_fp8(*dtypes: torch.dtype | None) -> bool:
    return any(d is not None and "float8" in str(d) for d in dtypes)


# --- the signature history of aiter's planners, oldest first -----------------------------


def mla_2025_10(
    seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: torch.Tensor, work_indptr: torch.Tensor, work_info: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1, fast_mode: bool = True, topk: int = -1,
) -> None:  # fmt: skip
    """Before 2025-11-17: no max_split_per_batch, no dtypes; indptr before work_info."""
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, False, work_metadata_ptrs, work_indptr, work_info,
             reduce_indptr, reduce_final_map, reduce_partial_map)  # fmt: skip


def mla_2025_12(
    seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: torch.Tensor, work_indptr: torch.Tensor, work_info: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1, fast_mode: bool = True, topk: int = -1,
    max_split_per_batch: int = -1, intra_batch_mode: bool = False, dtype_q: torch.dtype | None = None, dtype_kv: torch.dtype | None = None,
) -> None:  # fmt: skip
    """~2025-12: max_split_per_batch and legacy dtype_q/dtype_kv; still work_info after work_indptr."""
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(dtype_q, dtype_kv), work_metadata_ptrs, work_indptr,
             work_info, reduce_indptr, reduce_final_map, reduce_partial_map)  # fmt: skip


def mla_33d168a0(
    seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: torch.Tensor, work_info_set: torch.Tensor, work_indptr: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1, fast_mode: bool = True, topk: int = -1,
    max_split_per_batch: int = -1, intra_batch_mode: bool = False, dtype_q: torch.dtype | None = None, dtype_kv: torch.dtype | None = None,
) -> None:  # fmt: skip
    """aiter 33d168a0 (2026-02-02): work_info renamed work_info_set and moved before work_indptr."""
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(dtype_q, dtype_kv), work_metadata_ptrs, work_indptr,
             work_info_set, reduce_indptr, reduce_final_map, reduce_partial_map)  # fmt: skip


def mla_739c6317(
    seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, kv_last_page_lens: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: torch.Tensor, work_info_set: torch.Tensor, work_indptr: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    page_size: Any = 1, kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1, fast_mode: bool = True, topk: int = -1,
    max_split_per_batch: int = -1, intra_batch_mode: bool = False, dtype_q: torch.dtype | None = None, dtype_kv: torch.dtype | None = None,
) -> None:  # fmt: skip
    """aiter 739c63177e (2026-02-02): kv_last_page_lens (3rd positional) and page_size."""
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(dtype_q, dtype_kv), work_metadata_ptrs, work_indptr,
             work_info_set, reduce_indptr, reduce_final_map, reduce_partial_map)  # fmt: skip


def mla_e4048607(
    seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, kv_last_page_lens: torch.Tensor, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: torch.Tensor, work_info_set: torch.Tensor, work_indptr: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    page_size: Any = 1, kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1, fast_mode: bool = True, topk: int = -1,
    max_split_per_batch: int = -1, intra_batch_mode: bool = False, is_cp_round_robin: Any = False, mla_version: Any = 0,
    dtype_q_nope: Any = None, dtype_q_rope: Any = None, dtype_kv_nope: Any = None, dtype_kv_rope: Any = None, dtype_q: torch.dtype | None = None, dtype_kv: torch.dtype | None = None,
) -> None:  # fmt: skip
    """aiter e4048607 (2026-08): nope/rope dtypes, dtype_q/dtype_kv kept as legacy aliases."""
    q = dtype_q_nope if dtype_q_nope is not None else dtype_q
    kv = dtype_kv_nope if dtype_kv_nope is not None else dtype_kv
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(q, kv), work_metadata_ptrs, work_indptr,
             work_info_set, reduce_indptr, reduce_final_map, reduce_partial_map)  # fmt: skip


HISTORY = [mla_2025_10, mla_2025_12, mla_33d168a0, mla_739c6317, mla_e4048607]


def with_signature(template: Callable[..., Any], body: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    """A planner with ``template``'s exact signature whose body gets the bound arguments by name."""
    sig = inspect.signature(template)

    def planner(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(dict(bound.arguments))

    planner.__signature__ = sig  # type: ignore[attr-defined]
    planner.__name__ = planner.__qualname__ = template.__name__
    return planner


def toy_buffers(batch: int, max_kv: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Over-allocated output buffers as a builder would make them (torch.empty garbage included).

    In e4048607 positional order, so ``*toy_buffers(...).values()`` fits that signature.
    """
    works = batch * (max_kv // 32 + 1) + 4
    return {
        "work_metadata_ptrs": torch.empty(2, dtype=torch.uint64, device=device),
        "work_info_set": torch.empty(works, 8, dtype=torch.int32, device=device),
        "work_indptr": torch.empty(TOY_CU_PARTS + 4, dtype=torch.int32, device=device),
        "reduce_indptr": torch.empty(batch + 2, dtype=torch.int32, device=device),
        "reduce_final_map": torch.empty(batch + 1, 2, dtype=torch.int32, device=device),
        "reduce_partial_map": torch.empty(works, dtype=torch.int32, device=device),
    }


def fake_aiter(planner: Any = mla_e4048607, name: str = "aiter") -> types.ModuleType:
    """A module standing in for aiter, exposing ``planner`` as get_mla_metadata_v1."""
    module: Any = types.ModuleType(name)
    module.get_mla_metadata_v1 = planner
    return cast(types.ModuleType, module)


def toy_decode(aiter: types.ModuleType, bufs: dict[str, torch.Tensor], heads: int = 16, **kwargs: Any) -> None:
    """The tests' usual decode call: three requests (kv 50, 150, 10), one query token each, into ``bufs``.

    Looks ``get_mla_metadata_v1`` up on ``aiter`` now, so a spy's wrapper is the one called.
    """
    aiter.get_mla_metadata_v1(
        torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor([0, 50, 200, 210], dtype=torch.int32),
        torch.ones(3, dtype=torch.int32), heads, 1, True, *bufs.values(), **kwargs)  # fmt: skip
