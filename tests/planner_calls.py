"""Reference planner calls built the way a caller builds them (helper-sized buffers, or buffers of its own)."""

from __future__ import annotations

import torch
from conformance import ps_outputs

import mla_golden
from mla_golden import reference
from mla_golden.reference.dtypes import FP8_BY_ARCH

FP8 = FP8_BY_ARCH["gfx942"]
OUTPUTS = ("work_metadata_ptrs", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")


def decode_call(kv_lens: list[int], heads: int = 16, *, flat_work_info: bool = False, topk: int = -1) -> mla_golden.Call:
    """A decode call of one-token requests with ``kv_lens`` kv tokens (gfx942/304, fp8).

    ``flat_work_info``: work_info_set allocated 1-D (8 x #work elements), which aiter plans into alike.
    ``topk``: a sparse call, each request attending to its ``topk`` selected kv tokens.
    """
    batch = len(kv_lens)
    with reference.device("gfx942", 304):
        shapes = reference.get_mla_metadata_info_v1(batch, 1, heads, FP8, FP8, topk >= 0)
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}
        if flat_work_info:
            bufs["work_info_set"] = torch.empty(bufs["work_info_set"].numel(), dtype=torch.int32)
        kv = torch.zeros(batch + 1, dtype=torch.int32)
        kv[1:] = torch.cumsum(torch.tensor(kv_lens, dtype=torch.int32), 0)
        with mla_golden.spy(reference) as spy:
            reference.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), kv, torch.ones(batch, dtype=torch.int32), heads, 1, True,
                bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"],
                bufs["reduce_indptr"], bufs["reduce_final_map"], bufs["reduce_partial_map"],
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=FP8, dtype_kv=FP8, topk=topk,
            )  # fmt: skip
    return spy.calls.one()


def many_requests(batch: int) -> mla_golden.Call:
    """A decode call over ``batch`` one-token requests of 100..149 kv tokens."""
    return decode_call([100 + i % 50 for i in range(batch)])


def prefill_call(seq_lens: list[int], *, exact: bool = False) -> mla_golden.Call:
    """A vLLM-style prefill call (gfx950/256, 16 heads); ``exact``: buffers sized to the plan, not by the helper."""
    with reference.device("gfx950", 256):
        qo = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
        qo[1:] = torch.cumsum(torch.tensor(seq_lens), 0)
        shapes = reference.get_ps_metadata_info_v1(len(seq_lens), 16, max(seq_lens), 256)
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}

        def plan(b: dict[str, torch.Tensor]) -> None:
            reference.get_ps_metadata_v1(
                qo, qo, torch.tensor(seq_lens, dtype=torch.int32), 1, 16, *ps_outputs(b[n] for n in OUTPUTS),
                qlen_granularity=256, kvlen_granularity=128, block_size=1,
            )  # fmt: skip

        if exact:
            plan(bufs)
            works = int(bufs["work_indptr"][-1])
            reduce = bufs["reduce_indptr"].tolist()
            groups = max(g for g in range(len(reduce)) if g == 0 or reduce[g] != reduce[g - 1])
            exact_shapes = {"work_info_set": (works, 8), "reduce_indptr": (groups + 1,), "reduce_final_map": (groups, 2),
                            "reduce_partial_map": (reduce[-1],)}  # fmt: skip
            bufs = {n: torch.empty(exact_shapes.get(n, shape), dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}
        with mla_golden.spy(reference) as spy:
            plan(bufs)
    return spy.calls.one()
