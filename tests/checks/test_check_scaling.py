"""check's work grows linearly with the batch size (counted, never timed: timings live in benchmarks/)."""

from __future__ import annotations

import pytest
from helpers.calls import many_requests

import mla_golden
from mla_golden.checks import decode
from mla_golden.reference import layout


def test_check_copies_each_input_a_bounded_number_of_times_whatever_the_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout wraps its inputs to read them as aiter does; wrapping once per batch made check quadratic."""
    copied = [0]

    class Counting(layout._NoneAfterEnd):
        def __init__(self, values: list[int]) -> None:
            super().__init__(values)
            copied[0] += len(values)

    monkeypatch.setattr(layout, "_NoneAfterEnd", Counting)
    monkeypatch.setattr(decode, "clean_plan", lambda *args: None)  # the walk: the whole-tensor pass copies no list
    monkeypatch.setattr(decode, "region", lambda *args: None)
    batch = 3000
    result = mla_golden.invariants(many_requests(batch))
    assert result.ok, result.violations
    assert 0 < copied[0] <= 4 * (batch + 1), f"{copied[0]} input elements copied for {batch} requests"
