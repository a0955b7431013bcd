"""Pieces shared by aiter's serial and parallel MLA decode planners.

Ports ``csrc/kernels/mla/metadata/v1_comm.cuh`` (integer helpers, ``QoState``)
and the parts of ``csrc/kernels/mla/metadata/v1_2_device.cuh`` that both
kernels use (traits, kernel parameters, ``mla_v12_num_qo_tiles``,
``mla_v12_compute_sum_blocks``), aiter commit
e4048607a535ace3a2b51ded31b1c8c2d45c0879. Written from the source, not copied.

The kernels work on plain Python lists. Integer arithmetic follows C (division
truncates toward zero), because aiter's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mla_golden.reference._cint import c_div
from mla_golden.reference.errors import UndefinedResultError
from mla_golden.reference.features import PlannerFeatures

#: aiter's ``MlaWorkInfo``: eight int32 per work.
WORK_INFO_DWORDS = 8


@dataclass(frozen=True)
class MlaV12Traits:
    """``MlaMetadataV12Traits``: the kernel's compile-time choices."""

    packed_qo_len_per_wg: int  # kPackedQoLenPerWg (128 or 64)
    qo_splits: bool  # kQoSplits: a batch's packed query rows may span several tiles
    uni_seqlen_qo: int  # kUniSeqlenQo: 1..4 constant, 0 = params.uni_seqlen_qo, -1 = per batch
    lds_batch_info: bool  # kLdsBatchInfo: per-batch kv lengths cached in LDS
    is_sparse: bool  # kIsSparse: topk >= 0
    #: The aiter version whose kernel source this is (its rules where versions differ).
    features: PlannerFeatures

    @property
    def packed_qo_len_per_wg_log2(self) -> int:
        return self.packed_qo_len_per_wg.bit_length() - 1

    @property
    def is_unique(self) -> bool:
        """``QoState::is_unique``: every batch has the same query length."""
        return self.uni_seqlen_qo >= 0


@dataclass(frozen=True)
class MlaV12Params:
    """``MlaMetadataV1KernelParameter`` (the scalar part; tensors are passed as lists)."""

    num_batches: int  # after head folding
    num_heads: int  # after head folding
    num_cu: int  # number of clusters the plan fills
    num_splits: int
    reduce_indptr_size: int
    page_size: int
    kv_granularity: int
    kv_granularity_log2: int
    uni_seqlen_qo: int
    ori_seqlen_qo: int
    topk: int  # in pages
    qk_batch_ratio: int
    is_causal: bool
    is_cp_round_robin: bool
    fixed_over_head_num_blocks: int
    tail_done_threshold: int
    lds_size: int  # LDS bytes the kernel may use


@dataclass
class MlaV12Outputs:
    """What a planner kernel stored: per buffer, flat element index -> value.

    ``None`` marks elements the kernel did not store to; a list may run past
    the caller's buffer (aiter writes out of bounds then).
    """

    work_indptr: list[int | None] = field(default_factory=list)
    work_info_set: list[int | None] = field(default_factory=list)
    reduce_indptr: list[int | None] = field(default_factory=list)
    reduce_final_map: list[int | None] = field(default_factory=list)
    reduce_partial_map: list[int | None] = field(default_factory=list)


class QoState:
    """``QoState<Traits>``: where each (possibly folded or sparse) batch's queries lie.

    aiter asks per batch (``get_seqlen(b)``, ``get_begin(b)``, ``get_end(b)``);
    the reference asks once for batches ``0 .. n-1`` and gets lists.
    """

    def __init__(
        self,
        traits: MlaV12Traits,
        uni_seqlen_qo: int,
        ori_seqlen_qo: int,
        lds_seqlens_qo: list[int],
        seqlens_qo_indptr: Sequence[int],
    ) -> None:
        self.mode = traits.uni_seqlen_qo
        self.is_sparse = traits.is_sparse
        self.uni_seqlen_qo = uni_seqlen_qo
        self.ori_seqlen_qo = ori_seqlen_qo
        self.lds_seqlens_qo = lds_seqlens_qo
        self.seqlens_qo_indptr = seqlens_qo_indptr

    def _bids(self, num_batches: int) -> list[int] | range:
        """Index into the per-batch arrays: sparse batches are (batch, token) pairs."""
        if self.is_sparse:
            return [c_div(batch, self.ori_seqlen_qo) for batch in range(num_batches)]
        return range(num_batches)

    def _uniform(self) -> int:
        return self.uni_seqlen_qo if self.mode == 0 else self.mode

    def get_seqlens(self, num_batches: int) -> list[int]:
        if self.mode >= 0:
            return [self._uniform()] * num_batches
        lds = self.lds_seqlens_qo
        return [lds[bid] for bid in self._bids(num_batches)]

    def get_begins(self, num_batches: int) -> list[int]:
        if self.mode >= 0:
            uniform = self._uniform()
            return [uniform * batch for batch in range(num_batches)]
        indptr = self.seqlens_qo_indptr
        return [indptr[bid] for bid in self._bids(num_batches)]

    def get_ends(self, num_batches: int) -> list[int]:
        if self.mode >= 0:
            uniform = self._uniform()
            return [uniform * (batch + 1) for batch in range(num_batches)]
        indptr = self.seqlens_qo_indptr
        return [indptr[bid + 1] for bid in self._bids(num_batches)]


def mla_v12_num_qo_tiles(params: MlaV12Params, traits: MlaV12Traits, seqlen_qo: int) -> int:
    """Query tiles of one batch: 1 unless kQoSplits; one per token when heads fill half a tile."""
    if not traits.qo_splits:
        return 1
    if traits.features.per_token_qo_tiles and params.num_heads * 2 > traits.packed_qo_len_per_wg:
        return seqlen_qo
    packed_qo_len = seqlen_qo * params.num_heads
    return (packed_qo_len + traits.packed_qo_len_per_wg - 1) >> traits.packed_qo_len_per_wg_log2


def check_lds_fits(params: MlaV12Params, lds_ints: int) -> None:
    """Refuse plans whose LDS arrays exceed the LDS aiter launched the kernel with."""
    if lds_ints * 4 > params.lds_size:
        raise UndefinedResultError(
            f"aiter's MLA metadata planner keeps {lds_ints} int32 per-batch values in LDS but "
            f"launches its kernel with {params.lds_size} bytes of it (too many batches with "
            "variable query lengths, or a sparse call: the kernel plans batch x query tokens "
            "where the host sized LDS for batches); accesses past the LDS allocation make the "
            "plan undefined"
        )


def mla_v12_compute_sum_blocks(
    params: MlaV12Params,
    traits: MlaV12Traits,
    seqlens_qo_indptr: Sequence[int],
    seqlens_kv_indptr: Sequence[int],
    ori_seqlen_qo: int,
    num_batches: int,
) -> tuple[int, list[int], list[int]]:
    """Total cost in kv blocks (plus per-tile overhead), and the LDS batch arrays.

    Returns ``(sum_blocks, lds_seqlens_qo, lds_seqlens_kv)``; the LDS lists are
    empty when the traits keep them out of LDS. With variable query lengths and
    kQoSplits aiter reads each batch's length from LDS before storing it there;
    that raises :class:`UndefinedResultError`.
    """
    if traits.qo_splits and not traits.is_unique and num_batches > 0:
        raise UndefinedResultError(
            "aiter's MLA metadata planner reads per-batch query lengths from LDS before "
            "writing them (mla_v12_compute_sum_blocks: lane 0 reads batch 0's length for its "
            "tile count, then stores it) when query lengths vary "
            f"(uni_seqlen_qo={params.uni_seqlen_qo}) and query tiles are split "
            "(max_seqlen_qo * num_heads_per_head_k is not in "
            f"1..{traits.packed_qo_len_per_wg}); its whole plan is undefined. Pass "
            "uni_seqlen_qo > 0 when query lengths are uniform"
        )
    ratio = params.qk_batch_ratio
    overhead = params.fixed_over_head_num_blocks
    granularity = params.kv_granularity
    log2 = params.kv_granularity_log2
    topk = params.topk
    is_sparse = traits.is_sparse
    keep_seqlens_qo = not traits.is_unique
    keep_seqlens_kv = traits.lds_batch_info
    lds_seqlens_qo: list[int] = []
    lds_seqlens_kv: list[int] = []
    # Without kQoSplits every batch is one tile; with it (checked above) all share one length.
    num_qo_tiles = 1
    if traits.qo_splits and traits.is_unique:
        uniform_seqlen_qo = traits.uni_seqlen_qo or params.uni_seqlen_qo
        num_qo_tiles = mla_v12_num_qo_tiles(params, traits, uniform_seqlen_qo)
    sum_blocks = 0
    for bid in range(num_batches):
        bid_ori = c_div(c_div(bid, ori_seqlen_qo), ratio) if is_sparse else bid // ratio
        seqlen_kv = seqlens_kv_indptr[bid_ori + 1] - seqlens_kv_indptr[bid_ori]
        if is_sparse:
            seqlen_kv = min(seqlen_kv, topk)
        if keep_seqlens_kv:
            lds_seqlens_kv.append(seqlen_kv)
        sum_blocks += (((seqlen_kv + granularity - 1) >> log2) + overhead) * num_qo_tiles
        if keep_seqlens_qo:
            lds_seqlens_qo.append(seqlens_qo_indptr[bid_ori + 1] - seqlens_qo_indptr[bid_ori])
    return sum_blocks, lds_seqlens_qo, lds_seqlens_kv
