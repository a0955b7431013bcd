"""aiter's parallel MLA decode planner, ``kn_get_mla_metadata_v1_2_parallel``.

Port of the multi-warp kernel in ``csrc/kernels/mla/metadata/v1_2_device.cuh``
(aiter commit e4048607a535ace3a2b51ded31b1c8c2d45c0879), written from the
source. aiter only launches it for single-token decode without query-tile
splits, sparsity, paging or head folding. Phase 1 scans the batches once and
records where each starts (cluster, remaining payload, works / reduce tiles /
partial rows before it); phase 2 fills every batch's fragments from that
alone (one warp per batch on the GPU, one loop turn here); phase 3 fills the
``reduce_indptr`` tail.
"""

from __future__ import annotations

from collections.abc import Sequence

from mla_golden.reference._cint import integer_divide_ceil
from mla_golden.reference.errors import UndefinedResultError
from mla_golden.reference.mla_v1_comm import (
    WORK_INFO_DWORDS,
    MlaV12Outputs,
    MlaV12Params,
    MlaV12Traits,
    QoState,
    mla_v12_compute_sum_blocks,
)


def kn_get_mla_metadata_v1_2_parallel(
    params: MlaV12Params,
    traits: MlaV12Traits,
    seqlens_qo_indptr: Sequence[int],
    seqlens_kv_indptr: Sequence[int],
    kv_last_page_lens: Sequence[int],
) -> MlaV12Outputs:
    """Plan as aiter's parallel kernel does; returns every store it makes.

    ``kv_last_page_lens`` is accepted for the common kernel signature; this
    kernel runs only with ``page_size == 1`` and never reads it.
    """
    num_batches = params.num_batches
    if num_batches < 0:
        raise UndefinedResultError(
            "seqlens_kv_indptr is empty: aiter's parallel MLA metadata planner then plans -1 "
            "batches and stores reduce_indptr[-1], before the start of the buffer"
        )
    ori_seqlen_qo = params.ori_seqlen_qo
    overhead = params.fixed_over_head_num_blocks
    kv_granularity = params.kv_granularity
    kv_granularity_log2 = params.kv_granularity_log2
    num_cu = params.num_cu
    lds_batch_info = traits.lds_batch_info

    sum_blocks, lds_seqlens_qo, lds_seqlens_kv = mla_v12_compute_sum_blocks(
        params, traits, seqlens_qo_indptr, seqlens_kv_indptr, ori_seqlen_qo, num_batches
    )
    qo_state = QoState(
        traits, params.uni_seqlen_qo, ori_seqlen_qo, lds_seqlens_qo, seqlens_qo_indptr
    )
    # aiter divides by num_splits even without batches; the quotient is then never used.
    payload = (
        integer_divide_ceil(sum_blocks, params.num_splits) + overhead if num_batches > 0 else 0
    )
    blocks_per_cu = payload - overhead

    # Both phases derive each batch's kv block count the same way; compute it once.
    seqlens_kv = (
        lds_seqlens_kv
        if lds_batch_info
        else [seqlens_kv_indptr[bid + 1] - seqlens_kv_indptr[bid] for bid in range(num_batches)]
    )
    batch_kv_blocks = [
        (seqlen_kv + kv_granularity - 1) >> kv_granularity_log2 for seqlen_kv in seqlens_kv
    ]

    # Phase 1: closed-form scan, one entry per batch.
    start_cus: list[int] = []
    remain_payloads: list[int] = []
    works_before: list[int] = []
    reduce_before: list[int] = []
    partial_before: list[int] = []
    curr_cu = 0
    remain_payload = payload
    num_works = 0
    last_reduce_indptr = 0
    partial_idx = 0
    seqlens_qo = qo_state.get_seqlens(num_batches)
    for bid in range(num_batches):
        start_cus.append(curr_cu)
        remain_payloads.append(remain_payload)
        works_before.append(num_works)
        reduce_before.append(last_reduce_indptr)
        partial_before.append(partial_idx)
        num_kv_blocks = batch_kv_blocks[bid]
        if num_kv_blocks + overhead <= remain_payload:
            num_works += 1
            remain_payload -= num_kv_blocks + overhead
            continue
        if remain_payload > overhead:
            remain_blocks = num_kv_blocks - (remain_payload - overhead)
            num_fresh_frags = integer_divide_ceil(remain_blocks, blocks_per_cu)
            num_frags = num_fresh_frags + 1
        else:
            remain_blocks = num_kv_blocks
            num_fresh_frags = integer_divide_ceil(num_kv_blocks, blocks_per_cu)
            num_frags = num_fresh_frags
        curr_cu += num_fresh_frags
        remain_payload = payload - (
            remain_blocks - (num_fresh_frags - 1) * blocks_per_cu + overhead
        )
        num_works += num_frags
        if num_frags > 1:
            last_reduce_indptr += num_frags
            partial_idx += num_frags * seqlens_qo[bid]
    total_works = num_works
    total_reduce = last_reduce_indptr

    out = MlaV12Outputs()
    # Phase 2a: every cluster ends at the last work unless a fragment closes it earlier.
    work_indptr = out.work_indptr
    work_indptr.append(0)
    work_indptr.extend([total_works] * num_cu)
    work_info_set: list[int | None] = [None] * (total_works * WORK_INFO_DWORDS)
    reduce_indptr: list[int | None] = [0] * (num_batches + 1)
    reduce_final_map: list[int | None] = [None] * (2 * num_batches)
    reduce_partial_map: list[int | None] = [None] * total_reduce

    # Phase 2b: each batch's fragments, from its phase-1 entry alone.
    kv_indptr0 = seqlens_kv_indptr[0] if num_batches > 0 else 0
    qo_begins = qo_state.get_begins(num_batches)
    qo_ends = qo_state.get_ends(num_batches)
    for bid in range(num_batches):
        start_cu = start_cus[bid]
        remain_payload = remain_payloads[bid]
        num_works_before = works_before[bid]
        batch_reduce_before = reduce_before[bid]
        partial_idx_before = partial_before[bid]
        kv_begin = seqlens_kv_indptr[bid] - kv_indptr0
        kv_end = seqlens_kv_indptr[bid + 1] - kv_indptr0
        num_kv_blocks = batch_kv_blocks[bid]
        qo_tile_size = seqlens_qo[bid]
        qo_start = qo_begins[bid]
        qo_end = qo_ends[bid]

        fits_current_cu = num_kv_blocks + overhead <= remain_payload
        waste_start_cu = False
        if fits_current_cu:
            num_fresh_frags = num_frags = 1
        elif remain_payload > overhead:
            remain_blocks = num_kv_blocks - (remain_payload - overhead)
            num_fresh_frags = integer_divide_ceil(remain_blocks, blocks_per_cu)
            num_frags = num_fresh_frags + 1
        else:
            num_fresh_frags = num_frags = integer_divide_ceil(num_kv_blocks, blocks_per_cu)
            waste_start_cu = True
        is_split = num_frags > 1
        first_frag_blocks = remain_payload - overhead

        if is_split:
            reduce_indptr[bid + 1] = batch_reduce_before + num_frags
            reduce_final_map[bid * 2] = qo_start
            reduce_final_map[bid * 2 + 1] = qo_end
        else:
            reduce_indptr[bid + 1] = batch_reduce_before
        if waste_start_cu and start_cu + 1 <= num_cu:
            work_indptr[start_cu + 1] = num_works_before

        for frag_idx in range(num_frags):
            if fits_current_cu:
                block_begin, block_end, frag_cu = 0, num_kv_blocks, start_cu
            elif not waste_start_cu:
                block_begin = (
                    0 if frag_idx == 0 else first_frag_blocks + (frag_idx - 1) * blocks_per_cu
                )
                block_end = (
                    first_frag_blocks + frag_idx * blocks_per_cu
                    if frag_idx < num_fresh_frags
                    else num_kv_blocks
                )
                frag_cu = start_cu + frag_idx
            else:
                block_begin = frag_idx * blocks_per_cu
                block_end = (
                    (frag_idx + 1) * blocks_per_cu
                    if frag_idx < num_fresh_frags - 1
                    else num_kv_blocks
                )
                frag_cu = start_cu + 1 + frag_idx
            frag_kv_start = kv_begin + block_begin * kv_granularity
            frag_kv_end = min(kv_begin + block_end * kv_granularity, kv_end)
            work_idx = num_works_before + frag_idx
            partial_qo_loc = partial_idx_before + frag_idx * qo_tile_size if is_split else -1
            row = work_idx * WORK_INFO_DWORDS
            work_info_set[row : row + WORK_INFO_DWORDS] = (
                bid,
                partial_qo_loc,
                qo_start,
                qo_end,
                frag_kv_start,
                frag_kv_end,
                kv_end - frag_kv_end,
                0,
            )
            if is_split:
                reduce_partial_map[batch_reduce_before + frag_idx] = partial_qo_loc
            # Non-final fragments fill (close) their cluster.
            if frag_idx != num_frags - 1 and frag_cu + 1 <= num_cu:
                work_indptr[frag_cu + 1] = work_idx + 1

    # Phase 3: the reduce_indptr tail (index num_batches already holds total_reduce).
    reduce_indptr.extend([total_reduce] * (params.reduce_indptr_size - num_batches - 1))

    out.work_info_set = work_info_set
    out.reduce_indptr = reduce_indptr
    out.reduce_final_map = reduce_final_map
    out.reduce_partial_map = reduce_partial_map
    return out
