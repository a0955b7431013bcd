"""Planner calls several tests make the same way."""

from __future__ import annotations

from typing import Any

import torch

import mla_golden
from mla_golden.reference.dtypes import FP8_BY_ARCH

FP8 = FP8_BY_ARCH["gfx950"]


def spied_decode(
    planner: Any, batch: int, heads: int, dtype: torch.dtype, kv_step: int, *, sizing_batch: int | None = None,
    helper_split: int = -1, call_split: int = -1, extra_rows: int = 0,
) -> tuple[mla_golden.Call, list[torch.Tensor]]:
    """A gfx950/256 single-token decode of ``batch`` requests of ``kv_step`` x i kv tokens, spied on ``planner``
    (a reference version module). Its buffers are sized by ``planner``'s helper for ``sizing_batch`` (default
    ``batch``) requests with ``helper_split`` as its split cap, plus ``extra_rows`` work_info_set rows; the
    planner is called with ``call_split``. The call and the buffers it planned into."""
    # split caps only when given: some versions' helper and planner take none
    helper_cap = {} if helper_split == -1 else {"max_split_per_batch": helper_split}
    call_cap = {} if call_split == -1 else {"max_split_per_batch": call_split}
    with planner.device("gfx950", cu_num=256):
        shapes = planner.get_mla_metadata_info_v1(batch if sizing_batch is None else sizing_batch, 1, heads, dtype, dtype, False, **helper_cap)
        buffers = [torch.empty(shape, dtype=dtype_) for shape, dtype_ in shapes]
        buffers[2] = torch.empty((buffers[2].shape[0] + extra_rows, 8), dtype=torch.int32)
        work_metadata_ptrs, work_indptr, work_info_set, *reduce = buffers
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), torch.arange(batch + 1, dtype=torch.int32) * kv_step,
                torch.ones(batch, dtype=torch.int32), heads, 1, True,
                work_metadata_ptrs, work_info_set, work_indptr, *reduce,
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=dtype, dtype_kv=dtype, **call_cap,
            )  # fmt: skip
    return spy.calls.one(), buffers


def incident(planner: Any, batch: int = 4) -> tuple[mla_golden.Call, list[torch.Tensor]]:
    """gfx950, fp8 q and kv, 32 heads, single-token decode, spied on ``planner`` (a reference version module):
    v0.1.16.post2's dispatch folds it to 16 x 2, e4048607's does not. The call and the buffers it planned into."""
    return spied_decode(planner, batch, 32, FP8, 700)
