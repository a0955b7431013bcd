"""Buffer sizing of aiter's MLA decode planner: ``get_mla_metadata_info_v1`` per version.

Ports ``get_mla_decode_fwd_occupancy``, ``get_mla_decode_fwd_max_splits`` and
``get_mla_metadata_info_v1`` of ``aiter/ops/attention.py`` (aiter commit
e4048607a535ace3a2b51ded31b1c8c2d45c0879), written from the source, and the
older helpers where a version's :class:`~mla_golden.reference.features.Sizing`
says so (each cites its commit). The device is
:func:`~mla_golden.reference._device.current_device`.
"""

from __future__ import annotations

import math
import os

import torch

from mla_golden.reference._device import current_device
from mla_golden.reference.features import PlannerFeatures

FP8_DTYPES = (torch.float8_e4m3fnuz, torch.float8_e4m3fn)
BufferInfo = tuple[tuple[int | tuple[int, int], torch.dtype], ...]


def _is_experimental_enabled() -> bool:
    """aiter's Python-side reading of ``AITER_ENABLE_EXPERIMENTAL`` (non-numeric = off)."""
    try:
        return int(os.environ.get("AITER_ENABLE_EXPERIMENTAL", "0")) != 0
    except ValueError:
        return False


def get_mla_decode_fwd_occupancy(
    num_head_qo: int, max_seqlen_qo: int, q_dtype: torch.dtype | None, kv_dtype: torch.dtype | None
) -> int:
    """Occupancy of the decode kernel aiter dispatches: 2 for the HK m16x4 kernel, else 1."""
    is_hk_m16x4 = (
        current_device().arch == "gfx950"
        and q_dtype in FP8_DTYPES
        and kv_dtype in FP8_DTYPES
        and num_head_qo * max_seqlen_qo == 64
        and _is_experimental_enabled()
    )
    return 2 if is_hk_m16x4 else 1


def get_mla_decode_fwd_max_splits(
    num_head_qo: int, max_seqlen_qo: int, q_dtype: torch.dtype | None, kv_dtype: torch.dtype | None
) -> int:
    """Upper bound of splits per query tile: ``cu_num * occupancy``."""
    occupancy = get_mla_decode_fwd_occupancy(num_head_qo, max_seqlen_qo, q_dtype, kv_dtype)
    return current_device().cu_num * occupancy


def mla_metadata_info_v1(
    features: PlannerFeatures,
    batch_size: int,
    max_seqlen_qo: int,
    num_head_qo: int,
    q_dtype: torch.dtype | None,
    kv_dtype: torch.dtype | None,
    is_sparse: bool,
    fast_mode: bool = True,
    num_kv_splits: int = 32,
    intra_batch_mode: bool = False,
    max_split_per_batch: int = -1,
) -> BufferInfo:
    """``get_mla_metadata_info_v1`` of the version with ``features``."""
    if num_head_qo % 8 != 0:
        raise AssertionError(f"num_head_qo must be a multiple of 8, got {num_head_qo}")
    arch = current_device().arch
    q_fp8 = q_dtype in FP8_DTYPES
    kv_fp8 = kv_dtype in FP8_DTYPES
    q_bf16 = q_dtype == torch.bfloat16
    kv_bf16 = kv_dtype == torch.bfloat16
    max_splits = get_mla_decode_fwd_max_splits(num_head_qo, max_seqlen_qo, q_dtype, kv_dtype)

    effective_seqlen_qo = 1 if is_sparse else max_seqlen_qo
    packed_qo_len = effective_seqlen_qo * num_head_qo
    max_qo_tiles_per_batch = math.ceil(packed_qo_len / 16)

    if (
        arch == "gfx950"
        and q_bf16
        and kv_bf16
        and packed_qo_len >= 64
        and num_head_qo <= 64
        and (packed_qo_len < 128 or num_head_qo == 48)
    ) or (arch == "gfx950" and q_fp8 and kv_fp8 and num_head_qo == 32 and effective_seqlen_qo == 3):
        # 64 packed rows per tile; one tile per token once heads fill half a tile.
        if num_head_qo * 2 > 64:
            max_qo_tiles_per_batch = effective_seqlen_qo
        else:
            max_qo_tiles_per_batch = math.ceil(packed_qo_len / 64)
    elif (
        num_head_qo == 16
        or (arch == "gfx942" and num_head_qo == 128 and kv_fp8 and q_fp8)
        or (
            arch == "gfx942"
            and num_head_qo in (16, 32, 64)
            and num_head_qo * effective_seqlen_qo == 128
            and kv_fp8
            and q_fp8
            and _is_experimental_enabled()
        )
        or (
            arch == "gfx950"
            and kv_fp8
            and q_fp8
            and (
                (num_head_qo == 32 and effective_seqlen_qo == 4)
                or num_head_qo == 64
                or num_head_qo == 128
            )
        )
        or (
            arch in ("gfx942", "gfx950")
            and num_head_qo == 64
            and q_fp8
            and kv_fp8
            and effective_seqlen_qo == 1
        )
    ):
        max_qo_tiles_per_batch = math.ceil(packed_qo_len / 128)
    elif (
        arch == "gfx950"
        and (packed_qo_len >= 128 or num_head_qo > 64)
        and kv_bf16
        and q_bf16
        and num_head_qo != 48
    ):
        if num_head_qo * 2 > 128:
            max_qo_tiles_per_batch = effective_seqlen_qo
        else:
            max_qo_tiles_per_batch = math.ceil(packed_qo_len / 128)

    batch_size = batch_size * max_seqlen_qo if is_sparse else batch_size
    tile_cnt = batch_size * max_qo_tiles_per_batch

    if fast_mode:
        max_work = (batch_size + max_splits - 1) * max_qo_tiles_per_batch
        max_split_tiles = (
            min(batch_size + max_splits - 1, (max_splits - 1) * 2) * max_qo_tiles_per_batch
        )
    else:
        max_work = tile_cnt * max_splits
        max_split_tiles = tile_cnt * max_splits

    # The split cap is global (shared by all tiles): one partial per tile plus the cap.
    if max_split_per_batch > 0:
        per_tile_cap = min(max_splits, max_split_per_batch * batch_size)
        max_split_tiles = max(max_split_tiles, tile_cnt + per_tile_cap)

    if not intra_batch_mode:
        return (
            (2, torch.uint64),
            (max_splits + 1, torch.int32),
            ((max_work, 8), torch.int32),
            (tile_cnt + 1, torch.int32),
            ((tile_cnt, 2), torch.int32),
            (max_split_tiles, torch.int32),
        )
    return (
        (2, torch.uint64),
        (max_splits + 1, torch.int32),
        ((tile_cnt * num_kv_splits, 8), torch.int32),
        (tile_cnt + 1, torch.int32),
        ((tile_cnt, 2), torch.int32),
        (tile_cnt * num_kv_splits, torch.int32),
    )
