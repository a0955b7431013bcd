"""check's work grows linearly with the batch size (counted, never timed: timings live in benchmarks/)."""

from __future__ import annotations

import torch

import mla_golden
from mla_golden import reference
from mla_golden.reference import layout

FP8 = torch.float8_e4m3fnuz
OUTPUTS = ("work_metadata_ptrs", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")


def decode_call(batch: int, heads: int = 16) -> mla_golden.Call:
    """A reference decode call over ``batch`` one-token requests of 100..149 kv tokens (gfx942/304, fp8)."""
    with reference.device("gfx942", 304):
        shapes = reference.get_mla_metadata_info_v1(batch, 1, heads, FP8, FP8, False)
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}
        kv = torch.zeros(batch + 1, dtype=torch.int32)
        kv[1:] = torch.cumsum(torch.tensor([100 + i % 50 for i in range(batch)], dtype=torch.int32), 0)
        with mla_golden.spy(reference) as spy:
            reference.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), kv, torch.ones(batch, dtype=torch.int32), heads, 1, True,
                bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"],
                bufs["reduce_indptr"], bufs["reduce_final_map"], bufs["reduce_partial_map"],
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=FP8, dtype_kv=FP8,
            )  # fmt: skip
    return spy.calls.one()


def test_check_copies_each_input_a_bounded_number_of_times_whatever_the_batch_size(monkeypatch):
    """The layout wraps its inputs to read them as aiter does; wrapping once per batch made check quadratic."""
    copied = [0]

    class Counting(layout._NoneAfterEnd):
        def __init__(self, values: list[int]) -> None:
            super().__init__(values)
            copied[0] += len(values)

    monkeypatch.setattr(layout, "_NoneAfterEnd", Counting)
    batch = 3000
    result = mla_golden.invariants(decode_call(batch))
    assert result.ok, result.violations
    assert 0 < copied[0] <= 4 * (batch + 1), f"{copied[0]} input elements copied for {batch} requests"
