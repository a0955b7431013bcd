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
from mla_golden.reference.features import PlannerFeatures, Sizing

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
    """``get_mla_metadata_info_v1`` of the version with ``features``.

    33d168a0's helper takes no ``max_split_per_batch`` (its signature never
    passes one here).
    """
    sizing = features.sizing
    if sizing is Sizing.CK:
        # 33d168a0: the CU count alone, tiles of 128 rows for 16 heads or fp8 128 heads, else 16.
        if num_head_qo % 16 != 0:
            raise AssertionError(f"num_head_qo must be a multiple of 16, got {num_head_qo}")
        max_splits = current_device().cu_num
        effective_seqlen_qo = max_seqlen_qo
    else:
        if num_head_qo % 8 != 0:
            raise AssertionError(f"num_head_qo must be a multiple of 8, got {num_head_qo}")
        max_splits = get_mla_decode_fwd_max_splits(num_head_qo, max_seqlen_qo, q_dtype, kv_dtype)
        effective_seqlen_qo = 1 if is_sparse else max_seqlen_qo
    max_qo_tiles_per_batch = _max_qo_tiles_per_batch(
        sizing, num_head_qo, effective_seqlen_qo, q_dtype, kv_dtype
    )

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

    if max_split_per_batch > 0:
        per_tile_cap = min(max_splits, max_split_per_batch * batch_size)
        if sizing is Sizing.V0_1_16:
            # v0.1.16.post2: as if every tile could take the whole cap.
            max_split_tiles = max(max_split_tiles, tile_cnt * per_tile_cap)
        else:
            # The split cap is global (shared by all tiles): one partial per tile plus the cap.
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


def _max_qo_tiles_per_batch(
    sizing: Sizing,
    num_head_qo: int,
    seqlen_qo: int,
    q_dtype: torch.dtype | None,
    kv_dtype: torch.dtype | None,
) -> int:
    """Query tiles the helper allows per batch: packed rows over 16, 64 or 128 rows per tile."""
    arch = current_device().arch
    q_fp8 = q_dtype in FP8_DTYPES
    kv_fp8 = kv_dtype in FP8_DTYPES
    packed_qo_len = seqlen_qo * num_head_qo
    if sizing is Sizing.CK:
        native = num_head_qo == 16 or (num_head_qo == 128 and q_fp8 and kv_fp8)
        return math.ceil(packed_qo_len / (128 if native else 16))

    q_bf16 = q_dtype == torch.bfloat16
    kv_bf16 = kv_dtype == torch.bfloat16
    rows_64 = sizing is not Sizing.V0_1_16 and (
        arch == "gfx950"
        and q_bf16
        and kv_bf16
        and packed_qo_len >= 64
        and num_head_qo <= 64
        and (packed_qo_len < 128 or num_head_qo == 48)
    )
    if sizing is Sizing.E4048607:
        # aiter ca1c24a9dd: gfx950 fp8 32 heads at qlen 3 run natively with 64-row tiles.
        rows_64 = rows_64 or (
            arch == "gfx950" and q_fp8 and kv_fp8 and num_head_qo == 32 and seqlen_qo == 3
        )
    if rows_64:
        # 64 packed rows per tile; one tile per token once heads fill half a tile.
        return seqlen_qo if num_head_qo * 2 > 64 else math.ceil(packed_qo_len / 64)
    rows_128 = (
        num_head_qo == 16
        or (arch == "gfx942" and num_head_qo == 128 and kv_fp8 and q_fp8)
        or (
            arch == "gfx942"
            and num_head_qo in (16, 32, 64)
            and num_head_qo * seqlen_qo == 128
            and kv_fp8
            and q_fp8
            and _is_experimental_enabled()
        )
        or (
            arch == "gfx950"
            and kv_fp8
            and q_fp8
            and ((num_head_qo == 32 and seqlen_qo == 4) or num_head_qo in (64, 128))
        )
    )
    if sizing is not Sizing.V0_1_16:
        # aded0f84 on: fp8 64 heads at qlen 1 too.
        rows_128 = rows_128 or (
            arch in ("gfx942", "gfx950") and num_head_qo == 64 and q_fp8 and kv_fp8 and seqlen_qo == 1
        )
    if rows_128:
        return math.ceil(packed_qo_len / 128)
    if (
        arch == "gfx950"
        and (packed_qo_len >= 128 or num_head_qo > 64)
        and kv_bf16
        and q_bf16
        and num_head_qo != 48
    ):
        return seqlen_qo if num_head_qo * 2 > 128 else math.ceil(packed_qo_len / 128)
    return math.ceil(packed_qo_len / 16)
