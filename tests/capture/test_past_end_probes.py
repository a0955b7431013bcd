"""Reads past an input's end are found whatever the planner does with what it reads there.

The reference runs a kernel that reads past an input's end once per garbage
pattern and calls every output element that changes undefined. A planner that
takes what it reads modulo a page or tile size (a power of two), or keeps only
its sign, or steps through it, must not see the same value in every run.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from mla_golden.reference.mla_v1_comm import MlaV12Outputs
from mla_golden.reference.mla_v1_past_end import PATTERNS, run_planner


def _reading(use: Callable[[int], int]) -> Any:
    """A dispatch whose kernel stores ``use`` of kv_last_page_lens one and two elements past its end."""

    def kernel(params: Any, traits: Any, qo: list[int], kv: list[int], last: list[int]) -> MlaV12Outputs:
        return MlaV12Outputs(work_indptr=[0, use(last[len(last)]), use(last[len(last) + 1]), kv[-1]])

    return SimpleNamespace(kernel=kernel, params=SimpleNamespace(qk_batch_ratio=1, page_size=64), traits=None)


@pytest.mark.parametrize(
    "use",
    [lambda v: v % 64, lambda v: v % 16, lambda v: v & 1, lambda v: int(v > 0), lambda v: v // 7, lambda v: (v % 256) // 64],
    ids=["mod page", "mod tile", "parity", "sign", "div 7", "tile of page"],
)
def test_a_past_end_read_is_undefined_however_the_planner_reduces_it(use: Callable[[int], int]) -> None:
    inputs = {"seqlens_qo_indptr": [0, 1], "seqlens_kv_indptr": [0, 5], "kv_last_page_lens": [3]}
    _, indeterminate, message = run_planner(_reading(use), inputs, 1)
    assert indeterminate == {"work_indptr": [1, 2]}, "both elements read past the end, and no other"
    assert "aiter reads kv_last_page_lens past its end" in message


def test_the_patterns_are_not_all_multiples_of_a_power_of_two_and_differ_in_step() -> None:
    for k in range(4):
        values = [pattern(k) for pattern in PATTERNS]
        assert any(v % 2 for v in values) and len({v % 64 for v in values}) == len(PATTERNS)
    steps = {tuple(pattern(k + 1) - pattern(k) for k in range(3)) for pattern in PATTERNS}
    assert len(steps) == len(PATTERNS), "more than one pattern, not one step from different bases"
