"""The layout aiter's decode planner works in, for checking a plan without re-planning it.

:func:`decode_layout` runs the host side of ``get_mla_metadata_v1`` (input
checks, head folding, tiling: ``v1_2_device.cuh`` at aiter e4048607, as
:mod:`mla_golden.reference.mla_v1_dispatch` ports it) and answers what a plan
must cover: per planned batch its query range, query tiles and kv range, and
each tile's causal kv trim. What the scheduler decides (work placement, split
points, partial slots) is left to whoever checks a plan against this.

This is the one surface :mod:`mla_golden.checks` uses of the decode port.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from mla_golden.reference._cint import c_div, c_mod, integer_divide_ceil
from mla_golden.reference.dtypes import aiter_dtype_id
from mla_golden.reference.features import PlannerFeatures
from mla_golden.reference.mla_v1 import plan_mla_metadata_v1
from mla_golden.reference.mla_v1_comm import QoState, mla_v12_num_qo_tiles
from mla_golden.reference.mla_v1_dispatch import MlaV12Dispatch
from mla_golden.schema import to_dtype


class _NoneAfterEnd(list[int]):
    """An input as aiter indexes it: None past its end, where the GPU reads someone else's memory.

    (The planner port answers such reads with garbage to find what depends on
    them; a layout only needs to know that the value is not the input's.)
    """

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and index >= len(self):
            return None
        return super().__getitem__(index)


def _dtype_id(name: str | None) -> int | None:
    """AiterDtype id of a dtype param, as aiter's wrapper converts it: AssertionError ("Unsupported dtype") for
    one it cannot pass, as the planner raises."""
    dtype = to_dtype(name)
    return None if dtype is None else aiter_dtype_id(dtype)


@dataclass(frozen=True)
class DecodeBatch:
    """One batch as the decode planner plans it (after head folding / sparse expansion)."""

    index: int
    batch_idx: int
    #: None where aiter reads seqlens_qo_indptr past its end for it.
    qo_begin: int | None
    qo_end: int | None
    kv_begin: int
    kv_end: int
    num_tiles: int
    tile_size: int
    #: Added to kv_offset: sparse without folding stores the token's causal offset there.
    offset_extra: int
    #: kv_last_page_lens as aiter indexes it (None past its end).
    last_page_len: int | None


@dataclass(frozen=True)
class DecodeLayout:
    """aiter's host decision for one decode call: folding, tiling, how many CU parts."""

    dispatch: MlaV12Dispatch = dataclasses.field(repr=False)

    @property
    def num_cu(self) -> int:
        """CU parts (clusters) the plan fills."""
        return self.dispatch.params.num_cu

    @property
    def num_heads(self) -> int:
        """Heads per planned batch (after folding)."""
        return self.dispatch.params.num_heads

    @property
    def qk_batch_ratio(self) -> int:
        """Head folding: planned batches per batch."""
        return self.dispatch.params.qk_batch_ratio

    @property
    def page_size(self) -> int:
        return self.dispatch.params.page_size

    @property
    def uni_seqlen_qo(self) -> int:
        return self.dispatch.params.uni_seqlen_qo

    @property
    def is_sparse(self) -> bool:
        return self.dispatch.traits.is_sparse

    @property
    def uniform_qo(self) -> bool:
        """Every batch has the same query length (the kernel does not read it per batch)."""
        return self.dispatch.traits.is_unique

    @property
    def qo_splits(self) -> bool:
        """A batch's packed query rows may span several tiles."""
        return self.dispatch.traits.qo_splits

    @property
    def packed_qo_len_per_wg(self) -> int:
        return self.dispatch.traits.packed_qo_len_per_wg

    def refolded(self, ratio: int, batches: int) -> DecodeLayout:
        """The same call planned with head-folding ``ratio`` (over ``batches`` caller batches)."""
        p = self.dispatch.params
        heads = p.num_heads * p.qk_batch_ratio
        params = dataclasses.replace(p, num_batches=batches * ratio, num_heads=heads // ratio, qk_batch_ratio=ratio)
        return DecodeLayout(dataclasses.replace(self.dispatch, params=params))

    def batches(self, qo: list[int], kv: list[int], last: list[int]) -> list[DecodeBatch]:
        """Per planned batch: aiter's query range, tiling and kv range (``v1_2_device.cuh`` state machine).

        Head folding plans ``qk_batch_ratio`` batches per batch that share its
        kv range; sparse calls plan one batch per (batch, query token) with
        ``topk`` kv slots each. Query ranges come from aiter's ``QoState``,
        which under folding with variable lengths indexes seqlens_qo_indptr by
        folded batch (None past its end). Raises UndefinedResultError (or
        IndexError) where aiter's own layout is undefined.
        """
        p, t = self.dispatch.params, self.dispatch.traits
        ratio = p.qk_batch_ratio
        if t.is_sparse:
            ori_seqlen_qo = qo[1] - qo[0]
            count = p.num_batches * ori_seqlen_qo
        else:
            ori_seqlen_qo = p.ori_seqlen_qo
            count = p.num_batches

        def batch_of(unit: int) -> int:
            return c_div(c_div(unit, ori_seqlen_qo), ratio) if t.is_sparse else unit // ratio

        lds_seqlens_qo = [] if t.is_unique else [qo[batch_of(u) + 1] - qo[batch_of(u)] for u in range(count)]
        state = QoState(t, p.uni_seqlen_qo, ori_seqlen_qo, lds_seqlens_qo, _NoneAfterEnd(qo))
        seqlens, begins, ends = state.get_seqlens(count), state.get_begins(count), state.get_ends(count)
        planned = []
        kv_begin = kv_end = 0
        for u in range(count):
            if u % ratio == 0:  # aiter's curr_sub_head_idx wraps: a new kv batch
                seqlen_kv = kv[batch_of(u) + 1] - kv[batch_of(u)]
                if t.is_sparse:
                    seqlen_kv = min(seqlen_kv, p.topk)
                kv_begin = (kv_begin + p.topk if t.is_sparse else kv_end) if u else 0
                kv_end = kv_begin + seqlen_kv
            tiles = mla_v12_num_qo_tiles(p, t, seqlens[u])
            batch_idx = batch_of(u) if t.is_sparse else u
            planned.append(
                DecodeBatch(
                    index=u,
                    batch_idx=batch_idx,
                    qo_begin=begins[u],
                    qo_end=ends[u],
                    kv_begin=kv_begin,
                    kv_end=kv_end,
                    num_tiles=tiles,
                    tile_size=integer_divide_ceil(seqlens[u], tiles),
                    offset_extra=ori_seqlen_qo - 1 - c_mod(u, ori_seqlen_qo) if t.is_sparse and ratio == 1 else 0,
                    # read as aiter indexes it (None past its end); wrapping the list per batch was quadratic
                    last_page_len=last[batch_idx] if batch_idx < len(last) else None,
                )
            )
        return planned

    def dense_qo(self, qo: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor] | None:
        """Per planned batch of a dense call, what :meth:`batches` takes from aiter's ``QoState``, as int64
        tensors for a plan of a million batches: ``(lengths, reps, begins, ends)``, the query length of batch
        ``u`` being ``lengths[u // reps]`` (one length for a uniform call, one per kv batch else); None where it
        would read seqlens_qo_indptr (``qo``, flat int64) past its end (None there) or raise."""
        p, t = self.dispatch.params, self.dispatch.traits
        count = p.num_batches
        if t.is_sparse or count < 0 or p.qk_batch_ratio < 1:
            return None
        if t.is_unique:
            uniform = p.uni_seqlen_qo if t.uni_seqlen_qo == 0 else t.uni_seqlen_qo
            begin = torch.arange(count, dtype=torch.int64) * uniform
            return torch.tensor([uniform], dtype=torch.int64), max(count, 1), begin, begin + uniform
        batches = -(-count // p.qk_batch_ratio)  # batch u reads the length of kv batch u // ratio
        if count and (batches >= qo.numel() or count + 1 > qo.numel()):
            return None  # batches() would read past the end
        return qo[1 : batches + 1] - qo[:batches], p.qk_batch_ratio, qo[:count], qo[1 : count + 1]

    def tile_tail(self, batch: DecodeBatch, tile: int, qo_start: int) -> int:
        """KV tokens query tile ``tile`` must not see: aiter's per-tile causal ``batch_tail`` (page_size 1 only)."""
        p = self.dispatch.params
        if p.page_size != 1 or not p.is_causal:
            return 0
        tail = 0 if p.is_cp_round_robin else batch.num_tiles - 1 - tile
        if not self.dispatch.traits.is_sparse and p.qk_batch_ratio != 1:
            # folded rows interleave heads: the token is (row / ratio) mod the query length
            tail = batch.num_tiles - c_mod(c_div(qo_start, p.qk_batch_ratio), p.ori_seqlen_qo) - 1
        return max(tail, 0)


def decode_layout(
    inputs: Mapping[str, torch.Tensor],
    params: Mapping[str, Any],
    reduce_indptr_size: int,
    features: PlannerFeatures,
) -> DecodeLayout:
    """aiter's layout for a ``get_mla_metadata_v1`` call given by canonical ``params`` (as a golden stores them).

    ``features``: the aiter version whose host dispatch (head folding, tiling) to follow.

    Plans for the reference's current device and reads the planner env as
    aiter does: call it inside ``mla_golden.reference.device(...)`` and with
    the call's env set. Raises AiterCheckError where aiter aborts, AssertionError for a dtype its wrapper
    cannot pass, and UndefinedResultError where its decision is undefined.
    """
    p = params
    return DecodeLayout(
        plan_mla_metadata_v1(
            inputs["seqlens_qo_indptr"].to(torch.int32).contiguous(),
            inputs["seqlens_kv_indptr"].to(torch.int32).contiguous(),
            inputs["kv_last_page_lens"].to(torch.int32).contiguous(),
            p["num_heads_per_head_k"],
            p["num_heads_k"],
            bool(p["is_causal"]),
            reduce_indptr_size,
            page_size=p.get("page_size", 1),
            kv_granularity=p.get("kv_granularity", 16),
            max_seqlen_qo=p.get("max_seqlen_qo", -1),
            uni_seqlen_qo=p.get("uni_seqlen_qo", -1),
            topk=p.get("topk", -1),
            max_split_per_batch=p.get("max_split_per_batch", -1),
            is_cp_round_robin=bool(p.get("is_cp_round_robin", False)),
            mla_version=p.get("mla_version", 0),
            dtype_q_nope=_dtype_id(p.get("dtype_q_nope")),
            dtype_q_rope=_dtype_id(p.get("dtype_q_rope")),
            dtype_kv_nope=_dtype_id(p.get("dtype_kv_nope")),
            dtype_kv_rope=_dtype_id(p.get("dtype_kv_rope")),
            features=features,
        )
    )
