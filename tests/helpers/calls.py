"""Planner calls several tests make the same way."""

from __future__ import annotations

from typing import Any

import torch

import mla_golden

FP8 = torch.float8_e4m3fn


def incident(planner: Any, batch: int = 4) -> tuple[mla_golden.Call, list[torch.Tensor]]:
    """gfx950, fp8 q and kv, 32 heads, single-token decode, spied on ``planner`` (a reference version module):
    v0.1.16.post2's dispatch folds it to 16 x 2, e4048607's does not. The call and the buffers it planned into."""
    with planner.device("gfx950", cu_num=256):
        shapes = planner.get_mla_metadata_info_v1(batch, 1, 32, FP8, FP8, False)
        buffers = [torch.empty(shape, dtype=dtype) for shape, dtype in shapes]
        work_metadata_ptrs, work_indptr, work_info_set, *reduce = buffers
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), torch.arange(batch + 1, dtype=torch.int32) * 700,
                torch.ones(batch, dtype=torch.int32), 32, 1, True,
                work_metadata_ptrs, work_info_set, work_indptr, *reduce,
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=FP8, dtype_kv=FP8,
            )  # fmt: skip
    return spy.calls.one(), buffers
