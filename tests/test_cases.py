"""The case vocabulary: its words mean what aiter and vLLM mean, and the matrix and the sweep make one call of one shape."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from mla_golden import cases, reference
from mla_golden.backends import resolve as resolve_backend
from mla_golden.errors import MatrixError
from mla_golden.matrix import capture, parse
from mla_golden.reference import dtypes
from mla_golden.sweeper.evaluate import template
from mla_golden.sweeper.planners import resolve_planner
from mla_golden.sweeper.space import DECODE, PREFILL, Point


@pytest.mark.parametrize("device", cases.default_devices())
def test_default_devices_are_the_full_parts_the_reference_plans_for(device: Any) -> None:
    arch, cu = cases.parse_device(device)
    with reference.device(arch) as planned:
        assert planned.cu_num == cu
        assert cases.torch_dtype("fp8", arch) == dtypes.fp8, "fp8 is the arch's, as aiter's dtypes module has it"


def test_unknown_archs_and_malformed_devices_are_refused() -> None:
    with pytest.raises(MatrixError, match="unknown arch 'gfx999'"):
        cases.parse_device("gfx999:10")
    assert "ARCH:CU" in (cases.device_problem("gfx942") or "")
    assert cases.device_problem("gfx950:256") is None


def test_jitter_stays_between_an_eighth_of_the_top_and_the_top() -> None:
    drawn: list[tuple[int, int]] = []

    def top(lo: int, hi: int) -> int:
        drawn.append((lo, hi))
        return hi

    lens = cases.lengths("jitter", 800, 5, 1, top)
    assert drawn == [(100, 800)] * 5 and lens == (800,) * 5
    assert cases.lengths("jitter", 800, 2, 300, lambda lo, hi: lo) == (300, 300), "never below the query length"
    assert cases.lengths("uniform", 800, 3, 1, lambda lo, hi: 0) == (800, 800, 800)


MATRIX = """\
format = "mla-golden-matrix/1"
devices = ["gfx942:304"]

[[decode]]
name = "one"
heads = 8
dtype = "fp8"
qlen = 2
batch = 3
context = "uniform:300"
page_size = 16

[[prefill]]
name = "one"
heads = 16
seq_lens = [[600, 7, 300]]
"""


def test_a_matrix_case_and_a_sweep_point_of_one_shape_make_the_same_call() -> None:
    decode, prefill = parse(MATRIX)
    recorded = {case.op: call for case, call in capture([decode, prefill], resolve_backend("reference"))}
    points = {
        DECODE: Point(DECODE, "gfx942", 304, cases.kernel_heads(8), decode.seq_lens, qlen=2, q_dtype="fp8", kv_dtype="fp8",
                      page_size=16, max_split_per_batch=decode.max_split_per_batch),
        PREFILL: Point(PREFILL, "gfx942", 304, 16, prefill.seq_lens),
    }  # fmt: skip
    for op, point in points.items():
        swept, _ = template(point, resolve_planner("reference"))
        made = recorded[op]
        assert not isinstance(made, Exception), made
        assert swept.inputs.keys() == made.inputs.keys()
        for name, tensor in swept.inputs.items():
            assert torch.equal(tensor, made.inputs[name]), (op, name)
        common = swept.params.keys() & made.params.keys()
        assert {k: swept.params[k] for k in common} == {k: made.params[k] for k in common}, op
        assert common >= {"page_size", "kv_granularity", "dtype_q_nope"} if op == DECODE else common >= {"qlen_granularity"}
