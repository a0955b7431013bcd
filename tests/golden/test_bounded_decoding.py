"""One wild index in a golden costs no more than the file: check names it, show refuses it, diff and pictures stay bounded."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from helpers.budget import lines_run
from helpers.repo import ROOT
from typer.testing import CliRunner

import mla_golden
from mla_golden.cli import app
from mla_golden.geometry import bounded_indptr, geometry, indptr_problem, works_by_cu
from mla_golden.golden.store import Golden, GoldenStore, load
from mla_golden.render.html import Entry, render_diff_page

SHIPPED = ROOT / "goldens"
PREFILL = SHIPPED / "prefill/dsv3-fp8-prefill/gfx950-cu256/h16-b4-t3117-115ed9cb.safetensors"
DECODE = SHIPPED / "decode/kimi-k2-mtp/gfx950-cu256/h64-fp8-q2-b16-jitter16384-p1.safetensors"
#: Generous: the bounded work on a wild golden is about that on the sane one; a walk over a wild value is 1000x.
LINES_FACTOR = 3


def _wild(source: Path, name: str, index: int, value: int) -> mla_golden.Call:
    call = load(source).call
    outputs = dict(call.outputs)
    edited = outputs[name].clone()
    edited.reshape(-1)[index] = value
    outputs[name] = edited
    return mla_golden.Call(**{**call.__dict__, "outputs": outputs})


CASES = [
    (PREFILL, "work_indptr", 5, 436_207_638),
    (PREFILL, "work_indptr", 5, -436_207_638),
    (PREFILL, "reduce_indptr", 3, 436_207_638),
    (DECODE, "work_indptr", 7, 2**31 - 1),
    (DECODE, "work_indptr", 100, 0),  # decreasing
]


def _check_show_diff_draw(path: Path, original: mla_golden.Call) -> None:
    """What a user runs on a golden: check it, show it, diff it against the original and draw that diff."""
    call = load(path).call
    mla_golden.invariants(call)
    CliRunner().invoke(app, ["show", str(path)])
    found = mla_golden.diff(original, call)
    render_diff_page([Entry("wild", "diverged", diff=found, expected=original, actual=call)])
    geometry(call)


@functools.cache
def _sane_lines(source: Path, what: str) -> int:
    """Lines the same work runs on the shipped (sane) golden: the yardstick. For check, the work-by-work walk a
    golden with a violation takes (a sane one is proved clean in a few whole-tensor passes instead)."""
    if what == "check":
        from unittest import mock

        from mla_golden.checks import decode, prefill

        with mock.patch.object(decode, "clean_plan", lambda *args: None), mock.patch.object(prefill, "clean_plan", lambda *args: False):
            return lines_run(lambda: mla_golden.invariants(load(source).call))
    return lines_run(lambda: _check_show_diff_draw(source, load(source).call))


@pytest.mark.parametrize("source, name, index, value", CASES, ids=lambda v: str(v)[-24:])
def test_a_wild_index_is_a_violation_for_check_and_an_error_for_show(tmp_path: Path, source: Any, name: Any, index: Any, value: Any) -> None:
    call = _wild(source, name, index, value)
    assert indptr_problem(call, name) is not None
    path = tmp_path / "wild.safetensors"
    path.write_bytes(mla_golden.golden.store.to_bytes(Golden("wild", call)))  # a planner bug is a valid golden
    result = mla_golden.invariants(load(path).call)
    assert not result.ok and any(name in v.where or name in v.invariant for v in result.violations)
    ran = CliRunner().invoke(app, ["show", str(path)])
    assert ran.exit_code == 2 and str(path) in ran.output and name in ran.output, ran.output
    assert "Traceback" not in ran.output
    original = load(source).call
    assert not mla_golden.diff(original, call).equal
    # The bound, by counts: the wild golden costs what the sane one does (a walk over the wild value: millions of lines).
    wild = lines_run(lambda: _check_show_diff_draw(path, original))
    assert wild <= LINES_FACTOR * _sane_lines(source, "show"), wild


def test_bounded_indptr_equals_a_sane_one_and_never_overlaps() -> None:
    call = load(PREFILL).call
    assert indptr_problem(call, "work_indptr") is None
    assert bounded_indptr(call, "work_indptr") == call.outputs["work_indptr"].tolist()
    wild = _wild(PREFILL, "work_indptr", 3, 10**9)
    bounded = bounded_indptr(wild, "work_indptr")
    rows = call.outputs["work_info_set"].shape[0]
    assert all(0 <= a <= b <= rows for a, b in zip(bounded, bounded[1:]))
    assert sum(len(w) for w in works_by_cu(wild)) <= rows  # each row walked at most once


def test_show_of_a_sane_golden_still_works() -> None:
    ran = CliRunner().invoke(app, ["show", str(PREFILL), "--cu", "3"])
    assert ran.exit_code == 0 and "work items by CU part" in ran.output


def test_store_paths_are_in_goldens() -> None:
    assert PREFILL in set(GoldenStore(SHIPPED).paths()) and DECODE in set(GoldenStore(SHIPPED).paths())


def _edited(source: Path, *, inputs: dict[str, Any] | None = None, params: dict[str, Any] | None = None) -> mla_golden.Call:
    call = load(source).call
    new_inputs = dict(call.inputs)
    for name, (index, value) in (inputs or {}).items():
        new_inputs[name] = new_inputs[name].clone()
        new_inputs[name][index] = value
    return mla_golden.Call(**{**call.__dict__, "inputs": new_inputs, "params": {**call.params, **(params or {})}})


@pytest.mark.parametrize(
    "source, inputs, params",
    [(PREFILL, {"seqlens_qo_indptr": (-1, 2**30)}, None), (PREFILL, None, {"num_heads_k": 2**30}),
     (PREFILL, {"context_lens": (-1, 2**30)}, None), (DECODE, {"seqlens_qo_indptr": (-1, 2**30)}, None),
     (DECODE, {"seqlens_kv_indptr": (-1, 2**30)}, None), (DECODE, None, {"num_heads_per_head_k": 2**30}),
     (DECODE, None, {"uni_seqlen_qo": 2**30})],
    ids=["ps-qo", "ps-heads", "ps-ctx", "mla-qo", "mla-kv", "mla-heads", "mla-uni"],
)  # fmt: skip
def test_wild_inputs_or_params_cost_check_nothing(source: Any, inputs: Any, params: Any) -> None:
    """Lengths and head counts drive the checker's loops: a wild one is a violation found at once, not a long walk."""
    call = _edited(source, inputs=inputs, params=params)
    assert not mla_golden.invariants(call).ok
    wild = lines_run(lambda: mla_golden.invariants(call))
    assert wild <= LINES_FACTOR * _sane_lines(source, "check"), wild
