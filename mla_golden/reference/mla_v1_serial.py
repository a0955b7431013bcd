"""aiter's serial MLA decode planner, ``kn_get_mla_metadata_v1_2``.

Port of the single-warp kernel in ``csrc/kernels/mla/metadata/v1_2_device.cuh``
(aiter commit e4048607a535ace3a2b51ded31b1c8c2d45c0879), written from the
source. One pass over the clusters ("cu parts"): each gets ``payload`` kv
blocks; a (batch, query tile) that does not fit is split across clusters and
recorded for the reduce step. The same kernel at 33d168a06297, 620287969c and
aded0f84013b differs in the causal trim, the KV tail and sparse batch indices
only; ``traits.features`` says which rules apply (each citing its commit).

The kernel's state variables keep aiter's names. Values that only depend on
the current batch (its query tiles and range) are computed up front for every
batch instead of once per loop turn; they are the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

from mla_golden.reference._cint import c_div, c_mod, integer_divide_ceil
from mla_golden.reference.mla_v1_comm import (
    MlaV12Outputs,
    MlaV12Params,
    MlaV12Traits,
    QoState,
    check_lds_fits,
    mla_v12_compute_sum_blocks,
    mla_v12_num_qo_tiles,
)


def paged_kv_offset(curr_kv_end: int, kv_end: int, page_size: int, kv_last_page_lens: Sequence[int], batch: int) -> int:
    """Tokens from ``kv_end`` (a page index) to the batch's end: whole pages, then the last page's fill."""
    if curr_kv_end == kv_end:
        return 0
    return (curr_kv_end - kv_end - 1) * page_size + kv_last_page_lens[batch]


def kn_get_mla_metadata_v1_2(
    params: MlaV12Params,
    traits: MlaV12Traits,
    seqlens_qo_indptr: Sequence[int],
    seqlens_kv_indptr: Sequence[int],
    kv_last_page_lens: Sequence[int],
) -> MlaV12Outputs:
    """Plan as aiter's serial kernel does; returns every store it makes."""
    is_sparse = traits.is_sparse
    ratio = params.qk_batch_ratio
    if is_sparse:
        # Sparse: every query token of a batch is planned as a batch of its own.
        ori_seqlen_qo = seqlens_qo_indptr[1] - seqlens_qo_indptr[0]
        num_batches = params.num_batches * ori_seqlen_qo
    else:
        ori_seqlen_qo = params.ori_seqlen_qo
        num_batches = params.num_batches
    check_lds_fits(
        params,
        num_batches * ((0 if traits.is_unique else 1) + (1 if traits.lds_batch_info else 0)),
    )

    sum_blocks, lds_seqlens_qo, lds_seqlens_kv = mla_v12_compute_sum_blocks(
        params, traits, seqlens_qo_indptr, seqlens_kv_indptr, ori_seqlen_qo, num_batches
    )
    qo_state = QoState(
        traits, params.uni_seqlen_qo, ori_seqlen_qo, lds_seqlens_qo, seqlens_qo_indptr
    )

    out = MlaV12Outputs()
    work_info_set = out.work_info_set
    reduce_indptr = out.reduce_indptr
    reduce_final_map = out.reduce_final_map
    reduce_partial_map = out.reduce_partial_map
    work_indptr = out.work_indptr
    reduce_indptr.append(0)
    work_indptr.append(0)
    if num_batches <= 0 or params.num_cu <= 0:
        # Nothing to place or nowhere to place it: aiter's payload is never used.
        work_indptr.extend([0] * params.num_cu)
        reduce_indptr.extend([0] * (params.reduce_indptr_size - 1))
        return out

    kv_granularity = params.kv_granularity
    kv_granularity_log2 = params.kv_granularity_log2
    overhead = params.fixed_over_head_num_blocks
    page_size = params.page_size
    topk = params.topk
    tail_done_threshold = params.tail_done_threshold
    is_causal = params.is_causal
    is_cp_round_robin = params.is_cp_round_robin
    lds_batch_info = traits.lds_batch_info
    qo_splits = traits.qo_splits

    # expected payload handled by each cu part
    payload = integer_divide_ceil(sum_blocks, params.num_splits) + overhead
    curr_batch = 0  # batch under review
    curr_kv_block = 0  # blocks handled by previous cu parts
    curr_n_split_idx = 0  # cu parts used for the current (batch, tile) so far
    curr_qo_tile_idx = 0
    curr_sub_head_idx = 0
    curr_kv_begin = 0
    if lds_batch_info:
        curr_kv_end = lds_seqlens_kv[0]
    elif is_sparse:
        curr_kv_end = min(seqlens_kv_indptr[1], topk)
    else:
        curr_kv_end = seqlens_kv_indptr[1]
    curr_kv_seqlen = curr_kv_end - curr_kv_begin

    num_works = 0
    partial_idx = 0
    tot_qo_tiles = 0
    last_reduce_indptr = 0
    cur_tail_done = False

    # Per-batch query tiling (aiter recomputes it every loop turn from curr_batch).
    seqlens_qo = qo_state.get_seqlens(num_batches)
    qo_begins = qo_state.get_begins(num_batches)
    qo_ends = qo_state.get_ends(num_batches)
    batch_num_qo_tiles = [mla_v12_num_qo_tiles(params, traits, seqlen) for seqlen in seqlens_qo]
    batch_qo_tile_sizes = [
        integer_divide_ceil(seqlen, tiles)
        for seqlen, tiles in zip(seqlens_qo, batch_num_qo_tiles)
    ]
    # The batch a work names: sparse works name their real batch (aiter fea695b90b); 33d168a0's
    # name the (batch, token) pair they plan.
    sparse_batches = traits.features.sparse_batch_fixup
    batch_kv_idx: Sequence[int] = (
        [c_div(c_div(batch, ori_seqlen_qo), ratio) for batch in range(num_batches)]
        if is_sparse and sparse_batches
        else range(num_batches)
    )
    num_qo_tiles = batch_num_qo_tiles[0]
    qo_tile_size = batch_qo_tile_sizes[0]
    batch_qo_begin = qo_begins[0]
    batch_qo_end = qo_ends[0]
    curr_batch_kv = batch_kv_idx[0]

    features = traits.features
    tail_done = features.kv_tail_done

    def causal_batch_tail(qo_start: int) -> int:
        """KV tokens a query tile must not see (aiter's ``batch_tail``), page_size 1 only."""
        if not is_causal and features.noncausal_untrimmed:
            return 0  # aiter computes the trim first, then drops it (45ef304fe5; before: kept)
        batch_tail = 0 if is_cp_round_robin else num_qo_tiles - 1 - curr_qo_tile_idx
        if not is_sparse and ratio != 1:
            # folded: the tile's token position within its batch, from qo_start
            batch_tail = num_qo_tiles - c_mod(c_div(qo_start, ratio), ori_seqlen_qo) - 1
        # 33d168a0 does not clamp: a negative tail lets kv_end run past the batch's KV end.
        return max(batch_tail, 0) if features.batch_tail_clamped else batch_tail

    def sparse_fixup(kv_offset: int) -> tuple[int, int]:
        """Sparse without folding: map back to the real batch, add the token's causal offset."""
        return (
            c_div(curr_batch, ori_seqlen_qo),
            kv_offset + ori_seqlen_qo - 1 - c_mod(curr_batch, ori_seqlen_qo),
        )

    for _cid in range(params.num_cu):
        remain_payload = payload
        while curr_batch < num_batches:
            num_kv_blocks = (curr_kv_seqlen + kv_granularity - 1) >> kv_granularity_log2
            remain_kv_blocks = num_kv_blocks - curr_kv_block

            # Does the rest of this (batch, tile) fit into the current cu part?
            if remain_payload >= remain_kv_blocks + overhead or cur_tail_done:
                num_splits = curr_n_split_idx + 1
                batch_idx = curr_batch_kv
                qo_start = batch_qo_begin + curr_qo_tile_idx * qo_tile_size
                qo_end = min(qo_start + qo_tile_size, batch_qo_end)
                kv_start = curr_kv_begin + curr_kv_block * kv_granularity
                if page_size == 1:
                    batch_tail = causal_batch_tail(qo_start)
                    kv_end = min(
                        kv_start + remain_kv_blocks * kv_granularity, curr_kv_end - batch_tail
                    )
                    if tail_done and (
                        0 < curr_kv_end - kv_end < tail_done_threshold or cur_tail_done
                    ):
                        kv_end = min(curr_kv_end - batch_tail, curr_kv_end)
                    kv_offset = curr_kv_end - kv_end
                    if is_sparse and ratio == 1 and sparse_batches:
                        batch_idx, kv_offset = sparse_fixup(kv_offset)
                else:
                    kv_end = min(kv_start + remain_kv_blocks * kv_granularity, curr_kv_end)
                    kv_offset = paged_kv_offset(curr_kv_end, kv_end, page_size, kv_last_page_lens, curr_batch_kv)
                if curr_n_split_idx > 0:
                    # Last piece of a split tile: record its reduce group.
                    partial_qo_loc = partial_idx
                    reduce_indptr.append(last_reduce_indptr + num_splits)
                    reduce_final_map.append(qo_start)
                    reduce_final_map.append(qo_end)
                    reduce_partial_map.extend(
                        partial_idx - (curr_n_split_idx - split_idx) * qo_tile_size
                        for split_idx in range(num_splits)
                    )
                    partial_idx += qo_tile_size
                    last_reduce_indptr += num_splits
                else:
                    partial_qo_loc = -1
                    reduce_indptr.append(last_reduce_indptr)
                    reduce_final_map.append(None)
                    reduce_final_map.append(None)
                work_info_set.extend(
                    (batch_idx, partial_qo_loc, qo_start, qo_end, kv_start, kv_end, kv_offset, 0)
                )
                tot_qo_tiles += 1
                num_works += 1
                remain_payload -= remain_kv_blocks + overhead

                # update state
                last_tile = curr_qo_tile_idx == num_qo_tiles - 1
                curr_qo_tile_idx = 0 if last_tile else curr_qo_tile_idx + 1
                if not qo_splits or curr_qo_tile_idx == 0:
                    curr_batch += 1
                    # curr_sub_head_idx = (curr_sub_head_idx + 1) % qk_batch_ratio
                    last_sub_head = curr_sub_head_idx == ratio - 1
                    curr_sub_head_idx = 0 if last_sub_head else curr_sub_head_idx + 1
                    if curr_batch < num_batches:
                        if curr_sub_head_idx == 0:
                            # A new kv batch (folded sub-heads share their batch's kv).
                            if lds_batch_info:
                                curr_kv_seqlen = lds_seqlens_kv[curr_batch]
                            else:
                                bid_ori = (
                                    c_div(c_div(curr_batch, ori_seqlen_qo), ratio)
                                    if is_sparse
                                    else curr_batch // ratio
                                )
                                curr_kv_seqlen = (
                                    seqlens_kv_indptr[bid_ori + 1] - seqlens_kv_indptr[bid_ori]
                                )
                                if is_sparse:
                                    curr_kv_seqlen = min(curr_kv_seqlen, topk)
                            curr_kv_begin = curr_kv_begin + topk if is_sparse else curr_kv_end
                            curr_kv_end = curr_kv_begin + curr_kv_seqlen
                        curr_kv_block = 0
                        curr_n_split_idx = 0
                        cur_tail_done = False
                        num_qo_tiles = batch_num_qo_tiles[curr_batch]
                        qo_tile_size = batch_qo_tile_sizes[curr_batch]
                        batch_qo_begin = qo_begins[curr_batch]
                        batch_qo_end = qo_ends[curr_batch]
                        curr_batch_kv = batch_kv_idx[curr_batch]
                else:
                    curr_kv_block = 0
                    curr_n_split_idx = 0
                    cur_tail_done = False
            else:
                if remain_payload > overhead:
                    # Fill the rest of this cu part with a piece of the tile.
                    consuming_blks = remain_payload - overhead
                    batch_idx = curr_batch_kv
                    qo_start = batch_qo_begin + curr_qo_tile_idx * qo_tile_size
                    qo_end = min(qo_start + qo_tile_size, batch_qo_end)
                    kv_start = curr_kv_begin + curr_kv_block * kv_granularity
                    if page_size == 1:
                        batch_tail = causal_batch_tail(qo_start)
                        kv_end = min(
                            kv_start + consuming_blks * kv_granularity, curr_kv_end - batch_tail
                        )
                        # A remainder shorter than the query would be left over: the tile's
                        # last piece takes it (next loop turn, regardless of payload).
                        if tail_done and curr_kv_end - kv_end < tail_done_threshold:
                            cur_tail_done = True
                        kv_offset = curr_kv_end - kv_end
                        if is_sparse and ratio == 1 and sparse_batches:
                            batch_idx, kv_offset = sparse_fixup(kv_offset)
                    else:
                        kv_end = min(kv_start + consuming_blks * kv_granularity, curr_kv_end)
                        kv_offset = paged_kv_offset(curr_kv_end, kv_end, page_size, kv_last_page_lens, curr_batch_kv)
                    if not cur_tail_done:
                        work_info_set.extend(
                            (batch_idx, partial_idx, qo_start, qo_end)
                            + (kv_start, kv_end, kv_offset, 0)
                        )
                        partial_idx += qo_tile_size
                        num_works += 1
                        curr_kv_block += consuming_blks
                        curr_n_split_idx += 1
                if not cur_tail_done:
                    break

        work_indptr.append(num_works)

    # reduce_indptr[tot_qo_tiles:] = last_reduce_indptr (index tot_qo_tiles already holds it)
    reduce_indptr.extend([last_reduce_indptr] * (params.reduce_indptr_size - tot_qo_tiles - 1))
    return out
