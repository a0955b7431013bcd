"""Copies of the reference planners with planted bugs, for ``python:helpers.planted_planners:NAME`` sweeps.

Each object has the four functions a plug-in planner needs, in aiter's
signatures; a bug is a small change to the reference's result under a
condition on the call, so a sweep's reproducer can be judged minimal.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from types import SimpleNamespace
from typing import Any

import torch

from mla_golden import reference

#: Decode bug: a request this long (KV tokens) or longer gets a wrong last work_indptr entry.
LONG_REQUEST = 2000
#: Prefill sizing bug: from this batch size on, the helper sizes work_info one row too long.
BIG_BATCH = 4

_DECODE = inspect.signature(reference.get_mla_metadata_v1)
_PREFILL = inspect.signature(reference.get_ps_metadata_v1)


@functools.wraps(reference.get_mla_metadata_v1)  # a plug-in keeps aiter's signature: callers bind by it
def _decode_long_request_bug(*args: Any, **kwargs: Any) -> None:
    reference.get_mla_metadata_v1(*args, **kwargs)
    bound = _DECODE.bind(*args, **kwargs).arguments
    page = bound.get("page_size", 1)
    pages = bound["seqlens_kv_indptr"].diff()
    tokens = (pages - 1) * page + bound["kv_last_page_lens"]
    if int(tokens.max()) >= LONG_REQUEST:
        bound["work_indptr"][-1] += 1


def _prefill_sizing_bug(batch_size: int, num_head_k: int, max_qlen: int, qlen_granularity: int = 256) -> Any:
    sized = reference.get_ps_metadata_info_v1(batch_size, num_head_k, max_qlen, qlen_granularity)
    if batch_size < BIG_BATCH:
        return sized
    shape, dtype = sized[2]
    assert isinstance(shape, tuple)
    rows, columns = shape
    return (*sized[:2], ((rows + 1, columns), dtype), *sized[3:])


def _unpaged(
    seqlens_qo_indptr: Any, seqlens_kv_indptr: Any, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: Any, work_info_set: Any, work_indptr: Any, reduce_indptr: Any, reduce_final_map: Any,
    reduce_partial_map: Any, kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1,
    fast_mode: bool = True, topk: int = -1, max_split_per_batch: int = -1, intra_batch_mode: bool = False,
    is_cp_round_robin: bool = False, mla_version: int = 0, dtype_q_nope: Any = None, dtype_q_rope: Any = None,
    dtype_kv_nope: Any = None, dtype_kv_rope: Any = None,
) -> None:
    """The reference's decode planner in a signature without pages (no kv_last_page_lens, no page_size)."""
    ones = torch.ones(seqlens_kv_indptr.numel() - 1, dtype=torch.int32)
    reference.get_mla_metadata_v1(
        seqlens_qo_indptr, seqlens_kv_indptr, ones, num_heads_per_head_k, num_heads_k, is_causal, work_metadata_ptrs,
        work_info_set, work_indptr, reduce_indptr, reduce_final_map, reduce_partial_map, 1, kv_granularity,
        max_seqlen_qo, uni_seqlen_qo, fast_mode, topk, max_split_per_batch, intra_batch_mode, is_cp_round_robin,
        mla_version, dtype_q_nope, dtype_q_rope, dtype_kv_nope, dtype_kv_rope,
    )  # fmt: skip


def _prefill_always_causal(*args: Any, **kwargs: Any) -> None:
    """The prefill planner with is_causal dropped: every call plans as causal (its default)."""
    bound = _PREFILL.bind(*args, **kwargs)
    bound.arguments.pop("is_causal", None)
    reference.get_ps_metadata_v1(*bound.args, **bound.kwargs)


def _full_last_page_bug(
    seqlens_qo_indptr: Any, seqlens_kv_indptr: Any, kv_last_page_lens: Any, num_heads_per_head_k: int, num_heads_k: int,
    is_causal: bool, work_metadata_ptrs: Any, work_info_set: Any, work_indptr: Any, reduce_indptr: Any,
    reduce_final_map: Any, reduce_partial_map: Any, *args: Any, **kwargs: Any,
) -> None:  # fmt: skip
    """A plug-in written the natural way (aiter's leading parameters, the rest passed on as they came), whose change
    is that the works of a request whose last page is full (a KV length a multiple of the page size) end a token
    short."""
    reference.get_mla_metadata_v1(
        seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k, is_causal,
        work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map, reduce_partial_map,
        *args, **kwargs,
    )  # fmt: skip
    page = kwargs.get("page_size", 1)
    full = {int(b) for b in (kv_last_page_lens == page).nonzero().flatten()} if page > 1 else set()
    rows = work_info_set[: int(work_indptr[-1])]
    for row in rows:
        if int(row[0]) in full:
            row[5] -= 1


def _prefill_tile_multiple_bug(*args: Any, **kwargs: Any) -> None:
    """The prefill planner planning one query tile too many for a request whose length is a multiple of the tile
    (as if it held one more token): wrong works where the buffers hold them, an overflow where they do not."""
    bound = _PREFILL.bind(*args, **kwargs)
    bound.apply_defaults()
    values = bound.arguments
    lens = values["context_lens"].clone()
    lens[lens % values["qlen_granularity"] == 0] += 1
    indptr = torch.cat([torch.zeros(1, dtype=torch.int32), lens.cumsum(0, dtype=torch.int32)])
    values.update(seqlens_qo_indptr=indptr, pages_kv_indptr=indptr.clone(), context_lens=lens)
    reference.get_ps_metadata_v1(**values)


def _reduce_order_bug(*args: Any, **kwargs: Any) -> None:
    """The decode planner with its reduce groups in reverse order (reduce_indptr, reduce_final_map and
    reduce_partial_map rewritten to match), when a call has two or more."""
    values = _DECODE.bind(*args, **kwargs).arguments
    names = ("reduce_indptr", "reduce_final_map", "reduce_partial_map")
    runs = []
    for fill in (-1, -2):  # which elements the planner writes: those both fills lose
        scratch = {n: torch.full_like(values[n], fill) for n in names}
        reference.get_mla_metadata_v1(**{**values, **scratch})
        runs.append(scratch)
    reference.get_mla_metadata_v1(**values)
    written = {n: runs[0][n] == runs[1][n] for n in names}
    groups = int(written["reduce_indptr"].sum()) - 1
    if groups < 2:
        return
    indptr = values["reduce_indptr"][: groups + 1].tolist()
    order = range(groups - 1, -1, -1)
    sizes = [indptr[g + 1] - indptr[g] for g in order]
    values["reduce_indptr"][: groups + 1] = torch.tensor([0, *itertools.accumulate(sizes)], dtype=torch.int32) + indptr[0]
    values["reduce_final_map"][:groups] = values["reduce_final_map"][:groups].flip(0).clone()
    partials = values["reduce_partial_map"]
    segments = [partials[indptr[g] : indptr[g + 1]].clone() for g in order]
    partials[indptr[0] : indptr[-1]] = torch.cat(segments)


_REFERENCE = {
    name: getattr(reference, name)
    for name in ("get_mla_metadata_v1", "get_mla_metadata_info_v1", "get_ps_metadata_v1", "get_ps_metadata_info_v1")
}

#: The reference unchanged, as a plug-in.
clean = SimpleNamespace(**_REFERENCE)
#: One bug: long decode requests.
one_bug = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _decode_long_request_bug})
#: Two bugs: long decode requests, and prefill buffers sized for big batches.
two_bugs = SimpleNamespace(
    **{**_REFERENCE, "get_mla_metadata_v1": _decode_long_request_bug, "get_ps_metadata_info_v1": _prefill_sizing_bug}
)
#: No bug, but a signature without pages: a paged call is one it cannot make (skipped).
unpaged = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _unpaged})
#: One bug: prefill ignores is_causal=False (a non-causal call plans as causal).
causal_prefill = SimpleNamespace(**{**_REFERENCE, "get_ps_metadata_v1": functools.wraps(reference.get_ps_metadata_v1)(_prefill_always_causal)})
#: One bug in a plug-in taking ``*args, **kwargs``: works of a request with a full last page end a token short.
full_last_page = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _full_last_page_bug})
#: One bug: prefill plans a tile too many for a request whose length is a multiple of the query tile.
tile_multiple = SimpleNamespace(**{**_REFERENCE, "get_ps_metadata_v1": functools.wraps(reference.get_ps_metadata_v1)(_prefill_tile_multiple_bug)})
#: One bug: decode's reduce groups in reverse order.
reduce_order = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": functools.wraps(reference.get_mla_metadata_v1)(_reduce_order_bug)})
#: One bug: prefill's sizing helper sizes work_info a row too long from BIG_BATCH requests on.
prefill_sizing = SimpleNamespace(**{**_REFERENCE, "get_ps_metadata_info_v1": _prefill_sizing_bug})
#: Not a planner: the sizing helpers are missing.
incomplete = SimpleNamespace(get_mla_metadata_v1=reference.get_mla_metadata_v1)


def _misbehaving(what: str) -> Any:
    """A planner with aiter's signature (either op's) that raises ``what``, never returns (``loops``), ends its
    process with exit status 3 (``dies``) or is killed by SIGSEGV (``crashes``).

    The looping one first touches the file env ``MLA_GOLDEN_TEST_LOOPING`` names, so a test knows it is looping.
    """

    def planner(*args: Any, **kwargs: Any) -> None:
        if what in ("dies", "crashes"):
            import os
            import signal

            os.kill(os.getpid(), signal.SIGSEGV) if what == "crashes" else os._exit(3)
        if what == "loops":
            import os
            from pathlib import Path

            Path(os.environ["MLA_GOLDEN_TEST_LOOPING"]).touch()
            while True:
                pass
        raise SystemExit(0) if what == "exit" else KeyboardInterrupt

    return planner


def _with_signature(fn: Any, like: Any) -> Any:
    return functools.wraps(like)(fn)


#: Planners raising SystemExit(0) (as a plug-in calling sys.exit would), KeyboardInterrupt, looping forever, ending
#: their process (os._exit) or crashing it.
exits, interrupts, loops, dies, crashes = (
    SimpleNamespace(
        **{**_REFERENCE, **{op: _with_signature(_misbehaving(what), _REFERENCE[op]) for op in ("get_mla_metadata_v1", "get_ps_metadata_v1")}}
    )
    for what in ("exit", "interrupt", "loops", "dies", "crashes")
)
#: Sizing helpers raising SystemExit(0).
exiting_sizers = SimpleNamespace(
    **{**_REFERENCE, **{op: _with_signature(_misbehaving("exit"), _REFERENCE[op]) for op in ("get_mla_metadata_info_v1", "get_ps_metadata_info_v1")}}
)


def _opaque(*args: Any, **kwargs: Any) -> None:
    """A wrapper that says nothing of what it takes: Python binds it every argument, as aiter's callers pass them."""
    reference.get_mla_metadata_v1(*args, **kwargs)


#: Not aiter's signatures: the prefill sizing helper takes (batch, heads), not aiter's (batch_size, num_head_k, max_qlen).
unsigned = SimpleNamespace(
    **{**_REFERENCE, "get_ps_metadata_info_v1": lambda batch, heads: reference.get_ps_metadata_info_v1(batch, heads, 1)}
)
#: The reference behind a decode planner that takes (*args, **kwargs): aiter's signature as Python binds it.
opaque = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _opaque})
