"""CPU port of aiter's MLA prefill persistent-scheduling (PS) metadata planner.

Ported (rewritten in Python, not copied) from ROCm/aiter at commit
e4048607a535ace3a2b51ded31b1c8c2d45c0879:

- ``aiter/ops/attention.py``: ``get_ps_metadata_info_v1`` (buffer sizing) and
  the ``get_ps_metadata_v1`` Python signature;
- ``csrc/kernels/mla/metadata.cu``: ``get_ps_metadata_v1`` (argument checks);
- ``csrc/kernels/mla/metadata/v1_2_host.cuh``: ``get_ps_metadata_v1_2_host``,
  ``kn_generate_ps_metadata`` and ``generate_reduce_info`` (the host planner);
- ``csrc/include/ps.h``: ``WorkInfo`` / ``FinalLoc`` layouts and ``pack_dword``;
- ``csrc/kernels/mla/metadata/v1_comm.cuh``: ``integer_divide_ceil``.

aiter plans on the host: it splits the CUs into ``gcd(num_heads_k, cu_num)``
clusters, plans the same (batch, q tile, kv range) works for every cluster and
duplicates them once per KV head of the cluster, then groups split q tiles into
reduce groups. It fills every output buffer in full (zeros past the used
entries) and never writes ``work_metadata_ptrs``.

The port keeps aiter's phase names. Because a cluster's plan does not depend on
the cluster or head index (only ``q_head_range`` does), it plans one cluster in
Python lists and replicates it with tensor ops, which is what makes the vLLM
prefill shape (64 x 8k tokens, 128 heads) fast.
"""

from __future__ import annotations

import array
import math

import torch

from mla_golden.reference import preconditions
from mla_golden.reference._cint import c_div, c_mod, integer_divide_ceil
from mla_golden.reference._device import current_device
from mla_golden.reference.errors import (
    AiterCheckError,
    BufferTooSmallError,
    UndefinedResultError,
)
from mla_golden.schema import CPP_FILE

__all__ = ["get_ps_metadata_info_v1", "get_ps_metadata_v1"]

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
#: int32 fields per work item (``kSizeWorkInfoInDw``) and per final location.
_WORK_INFO_DW = 8
_FINAL_LOC_DW = 2
#: Columns of a ``WorkInfo`` row.
_PARTIAL_O_LOC, _QO_START, _QO_END = 1, 2, 3
_Q_HEAD_RANGE = 7


def get_ps_metadata_info_v1(
    batch_size: int,
    num_head_k: int,
    max_qlen: int,
    qlen_granularity: int = 256,
) -> tuple[tuple[int | tuple[int, int], torch.dtype], ...]:
    """Shapes and dtypes of the six PS metadata buffers, as aiter sizes them.

    Same return layout as aiter: ``((shape, dtype), ...)`` for
    work_metadata_ptrs, work_indptr, work_info, reduce_indptr,
    reduce_final_map, reduce_partial_map; the CU count is the reference
    device's.
    """
    cu_num = current_device().cu_num

    num_clusters = math.gcd(num_head_k, cu_num)
    cus_per_cluster = cu_num // num_clusters

    max_qo_split_per_batch = math.ceil(max_qlen / qlen_granularity)

    qo_tile_cnt = batch_size * max_qo_split_per_batch
    max_works = (batch_size + cus_per_cluster - 1) * max_qo_split_per_batch * num_head_k
    max_partials = (
        min(batch_size + cus_per_cluster - 1, (cus_per_cluster - 1) * 2) * max_qo_split_per_batch
    )

    return (
        (2, torch.uint64),
        (cu_num + 1, torch.int32),
        ((max_works, _WORK_INFO_DW), torch.int32),
        (qo_tile_cnt + 1, torch.int32),
        ((qo_tile_cnt, _FINAL_LOC_DW), torch.int32),
        (max_partials, torch.int32),
    )


# ---------------------------------------------------------------------------
# C integer semantics: the planner is int32 C++, Python ints are unbounded and
# floor-divide; these keep results equal for negative operands too.
# ---------------------------------------------------------------------------


def _wrap_int32(value: int) -> int:
    """``value`` reduced modulo 2**32 into int32, as C++ wraps it."""
    return (value + 2**31) % 2**32 - 2**31


def _c_gcd(a: int, b: int) -> int:
    """aiter's own ``gcd`` of ``v1_2_host.cuh`` (negative for negative a)."""
    while b != 0:
        a, b = b, c_mod(a, b)
    return a


# ---------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------


def _check(condition: bool, line: int, message: str) -> None:
    """``AITER_CHECK`` of ``metadata.cu``: raise with aiter's text and line."""
    if not condition:
        raise AiterCheckError(f"get_ps_metadata_v1: {message}", f"{CPP_FILE}:{line}")


def _check_scalar(name: str, value: object) -> None:
    """The pybind ``int32_t`` conversion aiter's binding applies."""
    if not isinstance(value, int):
        raise TypeError(f"get_ps_metadata_v1: {name} must be an int, got {type(value).__name__}")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise TypeError(f"get_ps_metadata_v1: {name}={value} does not fit in int32")


def _check_input_tensor(name: str, tensor: object) -> None:
    """aiter reads inputs as 1-D int32 memory; reject what it would misread."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"get_ps_metadata_v1: {name} must be a torch.Tensor")
    if tensor.dim() != 1:
        raise ValueError(f"get_ps_metadata_v1: {name} must be 1-D, got shape {tuple(tensor.shape)}")


def _check_output_buffer(name: str, buffer: object) -> None:
    """aiter memcpy's raw int32 over the whole buffer, ignoring dtype and strides."""
    if not isinstance(buffer, torch.Tensor):
        raise TypeError(f"get_ps_metadata_v1: {name} must be a torch.Tensor")
    if buffer.dtype != torch.int32:
        raise TypeError(
            f"get_ps_metadata_v1: {name} must be torch.int32 (aiter copies raw int32 "
            f"into it), got {buffer.dtype}"
        )
    if not buffer.is_contiguous():
        raise ValueError(
            f"get_ps_metadata_v1: {name} must be contiguous (aiter writes it as flat "
            f"memory from data_ptr)"
        )


# ---------------------------------------------------------------------------
# The planner (v1_2_host.cuh)
# ---------------------------------------------------------------------------


def _query_tiles(
    seqlens_qo_indptr: list[int],
    context_lens: list[int],
    qlen_granularity: int,
    kvlen_granularity: int,
    blocks_per_unit: int,
    is_causal: bool,
) -> tuple[list[tuple[int, int, int, int, int]], int]:
    """Step 1 of ``kn_generate_ps_metadata``: q tiles in ping-pong order.

    Returns ``(batch_idx, qo_start, qo_end, num_blocks, effective_kv_length)``
    per tile (global q positions) and the total number of split units.
    """
    query_tiles: list[tuple[int, int, int, int, int]] = []
    total_units = 0
    for batch_idx in range(len(seqlens_qo_indptr) - 1):
        qo_base = seqlens_qo_indptr[batch_idx]
        qo_length = seqlens_qo_indptr[batch_idx + 1] - qo_base
        kv_length = context_lens[batch_idx]
        if qo_length <= 0:
            continue
        if qlen_granularity <= 0:
            raise UndefinedResultError(
                f"get_ps_metadata_v1: qlen_granularity={qlen_granularity} makes aiter's "
                f"query tiling loop never end"
            )
        if kvlen_granularity == 0:
            raise UndefinedResultError(
                "get_ps_metadata_v1: kvlen_granularity=0 makes aiter divide by zero"
            )
        num_tiles = integer_divide_ceil(qo_length, qlen_granularity)
        for i in range(num_tiles):
            # ping-pong between head and tail: 0, n-1, 1, n-2, ...
            idx = i // 2 if i % 2 == 0 else num_tiles - 1 - i // 2
            local_qo_start = idx * qlen_granularity
            local_qo_end = min(local_qo_start + qlen_granularity, qo_length)
            # causal: a q tile sees kv only up to its last query row
            effective_kv_length = (
                min(kv_length - qo_length + local_qo_end, kv_length) if is_causal else kv_length
            )
            num_units = integer_divide_ceil(effective_kv_length, kvlen_granularity)
            query_tiles.append(
                (
                    batch_idx,
                    local_qo_start + qo_base,
                    local_qo_end + qo_base,
                    num_units * blocks_per_unit,
                    effective_kv_length,
                )
            )
            total_units += num_units
    return query_tiles, total_units


def _plan_cluster(
    query_tiles: list[tuple[int, int, int, int, int]],
    total_units: int,
    pages_kv_indptr: list[int],
    context_lens: list[int],
    qlen_granularity: int,
    blocks_per_unit: int,
    block_size: int,
    available_tgs: int,
) -> tuple[list[int], list[int]]:
    """Step 2 of ``kn_generate_ps_metadata`` for one head of one cluster.

    Every cluster and every KV head of a cluster get these same works (aiter
    restores the tile cursor after each head but the last), so only
    ``q_head_range`` differs; it is left 0 here. Returns the flat work rows
    (8 ints each) and, per thread group, the end of its works.
    """
    average = c_div(total_units, available_tgs)
    reminder = c_mod(total_units, available_tgs)
    works: list[int] = []
    tg_work_ends: list[int] = []
    num_tiles = len(query_tiles)
    current_tile_idx = 0
    current_block_idx = 0
    partial_tile_idx = 0
    for tg_idx in range(available_tgs):
        blocks_capacity = (average + 1 if tg_idx < reminder else average) * blocks_per_unit
        while current_tile_idx < num_tiles and blocks_capacity > 0:
            batch_idx, qo_start, qo_end, num_blocks, effective_kv_length = query_tiles[
                current_tile_idx
            ]
            remaining_blocks = num_blocks - current_block_idx
            remaining_kv_len = effective_kv_length - current_block_idx * block_size
            batch_kv_begin = pages_kv_indptr[batch_idx]
            kv_start = current_block_idx + batch_kv_begin
            if remaining_kv_len <= blocks_capacity * block_size:
                # the rest of this q tile, to its causal boundary, fits
                consuming_blocks = remaining_blocks
                if current_block_idx == 0:
                    partial_o_loc = -1
                else:
                    partial_o_loc = qlen_granularity * partial_tile_idx
                    partial_tile_idx += 1
                kv_end = min(kv_start + consuming_blocks, pages_kv_indptr[batch_idx + 1])
                kv_offset = 0
                current_tile_idx += 1
                current_block_idx = 0
            else:
                # only part of the tile fits: split it, the rest goes to later TGs
                consuming_blocks = blocks_capacity
                partial_o_loc = qlen_granularity * partial_tile_idx
                partial_tile_idx += 1
                kv_end = min(kv_start + consuming_blocks, pages_kv_indptr[batch_idx + 1])
                kv_offset = context_lens[batch_idx] - (kv_end - batch_kv_begin) * block_size
                current_block_idx += consuming_blocks
            works += (
                batch_idx,
                partial_o_loc,
                qo_start,
                qo_end,
                kv_start,
                kv_end,
                kv_offset,
                0,
            )
            blocks_capacity -= consuming_blocks
        tg_work_ends.append(len(works) // _WORK_INFO_DW)
    return works, tg_work_ends


def _generate_reduce_info(
    works: list[int],
) -> tuple[list[int], list[int], list[int]]:
    """``generate_reduce_info``: one group per distinct split q range.

    Groups are ordered by ``(qo_start, qo_end)`` (aiter's ``std::map`` key)
    and their partial locations ascending and de-duplicated (``std::set``),
    so duplicated clusters and heads add nothing. Returns the group bounds
    (``reduce_indptr`` without its tail fill), the flat final map and the
    partial map.
    """
    reduce_map: dict[tuple[int, int], set[int]] = {}
    for row in range(0, len(works), _WORK_INFO_DW):
        partial_o_loc = works[row + _PARTIAL_O_LOC]
        if partial_o_loc == -1:
            continue
        final_loc = (works[row + _QO_START], works[row + _QO_END])
        reduce_map.setdefault(final_loc, set()).add(partial_o_loc)

    reduce_indptr = [0]
    reduce_final_map: list[int] = []
    reduce_partial_map: list[int] = []
    for final_loc in sorted(reduce_map):
        partial_locs = sorted(reduce_map[final_loc])
        reduce_indptr.append(reduce_indptr[-1] + len(partial_locs))
        reduce_final_map += final_loc
        reduce_partial_map += partial_locs
    return reduce_indptr, reduce_final_map, reduce_partial_map


def _write_work_info(
    work_info: torch.Tensor,
    cluster_works: list[int],
    tg_work_ends: list[int],
    num_clusters: int,
    kheads_per_cluster: int,
    qhead_granularity: int,
) -> None:
    """Fill ``work_info`` in full: all works in aiter's order, then zero rows.

    The order is cluster, thread group, KV head, work: each head gets its
    thread group's works with its own ``q_head_range``
    ``[k_head_idx * qhead_granularity, (k_head_idx + 1) * qhead_granularity)``.
    Written straight into the caller's buffer: a 10 MB temporary costs more in
    page faults than the copy itself. Values wrap to int32 like the C++ math.
    """
    flat = work_info.view(-1)
    rows_per_cluster = kheads_per_cluster * (tg_work_ends[-1] if tg_work_ends else 0)
    num_filled = num_clusters * rows_per_cluster * _WORK_INFO_DW
    flat[num_filled:].zero_()
    if not num_filled:
        return
    base = _as_tensor(cluster_works).view(-1, _WORK_INFO_DW).to(torch.int32)
    tg_ends = _as_tensor(tg_work_ends)
    tg_sizes = torch.diff(tg_ends, prepend=tg_ends.new_zeros(1))
    # one cluster: thread group t repeats its tg_sizes[t] works once per head
    rows_per_tg = tg_sizes * kheads_per_cluster
    tg_of_row = torch.repeat_interleave(torch.arange(len(tg_work_ends)), rows_per_tg)
    first_row_of_tg = torch.cumsum(rows_per_tg, 0) - rows_per_tg
    pos_in_tg = torch.arange(rows_per_cluster) - first_row_of_tg[tg_of_row]
    works_in_tg = tg_sizes[tg_of_row]
    k_head_offset = pos_in_tg // works_in_tg
    row_index = tg_ends[tg_of_row] - works_in_tg + (pos_in_tg - k_head_offset * works_in_tg)
    cluster_rows = base.index_select(0, row_index)

    # q_head_range per (cluster, head): ps.h pack_dword(k * qhg, (k + 1) * qhg)
    k_head_idx = torch.arange(num_clusters * kheads_per_cluster).view(num_clusters, -1)
    q_head_start = k_head_idx * qhead_granularity
    q_head_end = q_head_start + qhead_granularity
    q_head_range = ((q_head_end << 16) | (q_head_start & 0xFFFF)).to(torch.int32)

    works = flat[:num_filled].view(num_clusters, rows_per_cluster, _WORK_INFO_DW)
    works.copy_(cluster_rows.expand(num_clusters, -1, -1))
    works[:, :, _Q_HEAD_RANGE] = q_head_range[:, k_head_offset].to(work_info.device)


def _as_tensor(values: list[int]) -> torch.Tensor:
    """int64 tensor of a Python int list (via a buffer: 3x faster than torch.tensor)."""
    if not values:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(array.array("q", values), dtype=torch.int64)


def _write_whole(buffer: torch.Tensor, values: torch.Tensor | list[int]) -> None:
    """Copy a host result back over the whole buffer, as aiter does: values, then zeros."""
    prefix = values if isinstance(values, torch.Tensor) else _as_tensor(values)
    flat = buffer.view(-1)
    flat[: prefix.numel()].copy_(prefix.reshape(-1))
    flat[prefix.numel() :].zero_()


def get_ps_metadata_v1(
    seqlens_qo_indptr: torch.Tensor,
    pages_kv_indptr: torch.Tensor,
    context_lens: torch.Tensor,
    gqa_ratio: int,
    num_heads_k: int,
    work_metadata_ptrs: torch.Tensor,
    work_indptr: torch.Tensor,
    work_info: torch.Tensor,
    reduce_indptr: torch.Tensor,
    reduce_final_map: torch.Tensor,
    reduce_partial_map: torch.Tensor,
    qhead_granularity: int = 1,
    qlen_granularity: int = 256,
    kvlen_granularity: int = 16,
    block_size: int = 16,
    is_causal: bool = True,
) -> None:
    """Fill the PS prefill metadata buffers in place, as aiter does.

    Writes every element of work_indptr, work_info, reduce_indptr,
    reduce_final_map and reduce_partial_map (zeros past the used entries);
    leaves ``work_metadata_ptrs`` untouched, as aiter does at this commit.
    ``gqa_ratio`` is accepted and unused, as in aiter.
    """
    preconditions.require("get_ps_metadata_v1", locals())
    for name, value in (
        ("gqa_ratio", gqa_ratio),
        ("num_heads_k", num_heads_k),
        ("qhead_granularity", qhead_granularity),
        ("qlen_granularity", qlen_granularity),
        ("kvlen_granularity", kvlen_granularity),
        ("block_size", block_size),
    ):
        _check_scalar(name, value)
    for name, tensor in (
        ("seqlens_qo_indptr", seqlens_qo_indptr),
        ("pages_kv_indptr", pages_kv_indptr),
        ("context_lens", context_lens),
    ):
        _check_input_tensor(name, tensor)
    # metadata.cu get_ps_metadata_v1, in aiter's order
    _check(
        (kvlen_granularity & _wrap_int32(kvlen_granularity - 1)) == 0,
        247,
        "kvlen_granlarity Must be power of 2!",
    )
    _check(seqlens_qo_indptr.stride(0) == 1, 249, "seqlens_qo_indptr should be continuous!")
    _check(
        seqlens_qo_indptr.dtype == torch.int32,
        251,
        "seqlens_qo_indptr's element type should be int!",
    )
    _check(pages_kv_indptr.stride(0) == 1, 253, "seqlens_kv_indptr should be continuous!")
    _check(
        pages_kv_indptr.dtype == torch.int32, 255, "seqlens_kv_indptr's element type should be int!"
    )

    outputs = {
        "work_indptr": work_indptr,
        "work_info": work_info,
        "reduce_indptr": reduce_indptr,
        "reduce_final_map": reduce_final_map,
        "reduce_partial_map": reduce_partial_map,
    }
    for name, buffer in outputs.items():
        _check_output_buffer(name, buffer)
    if not isinstance(work_metadata_ptrs, torch.Tensor):
        raise TypeError("get_ps_metadata_v1: work_metadata_ptrs must be a torch.Tensor")

    # aiter copies batch+1 / batch+1 / batch int32s from the inputs unchecked
    batch_size = seqlens_qo_indptr.numel() - 1
    if batch_size < 0:
        raise UndefinedResultError(
            "get_ps_metadata_v1: seqlens_qo_indptr is empty; aiter would copy a negative "
            "number of batches"
        )
    if pages_kv_indptr.numel() < batch_size + 1 or context_lens.numel() < batch_size:
        raise UndefinedResultError(
            f"get_ps_metadata_v1: {batch_size} batches (seqlens_qo_indptr has "
            f"{batch_size + 1} entries) but pages_kv_indptr has {pages_kv_indptr.numel()} "
            f"(needs {batch_size + 1}) and context_lens {context_lens.numel()} (needs "
            f"{batch_size}); aiter would read past their ends"
        )
    if context_lens.dtype != torch.int32 or (batch_size > 0 and context_lens.stride(0) != 1):
        raise UndefinedResultError(
            f"get_ps_metadata_v1: context_lens must be contiguous int32 (got "
            f"{context_lens.dtype}, stride {context_lens.stride(0)}); aiter reads its raw "
            f"memory as int32 without checking"
        )

    qo_indptr_host: list[int] = seqlens_qo_indptr.tolist()
    kv_indptr_host: list[int] = pages_kv_indptr[: batch_size + 1].tolist()
    context_lens_host: list[int] = context_lens[:batch_size].tolist()
    cu_num = current_device().cu_num

    # 1. divide
    num_clusters = _c_gcd(num_heads_k, cu_num)
    tgs_per_cluster = c_div(cu_num, num_clusters)
    kheads_per_cluster = c_div(num_heads_k, num_clusters)
    # aiter's gcd is negative for some negative num_heads_k: then no cluster
    # runs; a negative per-cluster head count duplicates nothing
    active_clusters = max(num_clusters, 0)
    heads_run = max(kheads_per_cluster, 0)

    # 2. conquer: one cluster's plan, replicated per cluster and KV head
    cluster_works: list[int] = []
    tg_work_ends: list[int] = []
    if active_clusters:
        if block_size == 0:
            raise UndefinedResultError(
                "get_ps_metadata_v1: block_size=0 makes aiter divide by zero"
            )
        blocks_per_unit = c_div(kvlen_granularity, block_size)
        query_tiles, total_units = _query_tiles(
            qo_indptr_host,
            context_lens_host,
            qlen_granularity,
            kvlen_granularity,
            blocks_per_unit,
            bool(is_causal),
        )
        cluster_works, tg_work_ends = _plan_cluster(
            query_tiles,
            total_units,
            kv_indptr_host,
            context_lens_host,
            qlen_granularity,
            blocks_per_unit,
            block_size,
            tgs_per_cluster,
        )
    works_per_cluster = heads_run * tg_work_ends[-1] if tg_work_ends else 0
    num_works = active_clusters * works_per_cluster
    work_indptr_values = [0] + [
        cluster_id * works_per_cluster + heads_run * tg_end
        for cluster_id in range(active_clusters)
        for tg_end in tg_work_ends
    ]

    # aiter takes the work count from the *last* element of work_indptr
    actual_works = num_works if work_indptr.numel() == len(work_indptr_values) else 0
    reduce_bounds, final_map, partial_map = _generate_reduce_info(
        cluster_works if actual_works else []
    )
    num_groups = len(reduce_bounds) - 1

    needed = {
        "work_indptr": len(work_indptr_values),
        "work_info": num_works * _WORK_INFO_DW,
        "reduce_indptr": num_groups + 1 if num_groups else 0,
        "reduce_final_map": len(final_map),
        "reduce_partial_map": len(partial_map),
    }
    for name, buffer in outputs.items():
        if buffer.numel() < needed[name]:
            raise BufferTooSmallError(name, buffer.numel(), needed[name])
    for name, dw in (("work_info", _WORK_INFO_DW), ("reduce_final_map", _FINAL_LOC_DW)):
        if outputs[name].numel() % dw:
            raise UndefinedResultError(
                f"get_ps_metadata_v1: {name} has {outputs[name].numel()} elements, not a "
                f"multiple of {dw}; aiter copies back bytes past its host rows"
            )

    # aiter fills reduce_indptr past the last group with the partial count
    reduce_indptr_values = (
        reduce_bounds + [reduce_bounds[-1]] * (reduce_indptr.numel() - len(reduce_bounds))
    )[: reduce_indptr.numel()]

    # H2D: every buffer copied back in full
    _write_whole(work_indptr, work_indptr_values)
    _write_work_info(
        work_info, cluster_works, tg_work_ends, active_clusters, heads_run, qhead_granularity
    )
    _write_whole(reduce_indptr, reduce_indptr_values)
    _write_whole(reduce_final_map, final_map)
    _write_whole(reduce_partial_map, partial_map)
