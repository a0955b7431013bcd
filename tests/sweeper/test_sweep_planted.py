"""Six planted bugs, across decode and prefill, each found by a default sweep as one group with a minimal reproducer.

Each ``python:helpers.planted_planners:NAME`` is the reference with one small change
(tests/helpers/planted_planners.py): a long decode request, prefill buffers sized for
big batches, a full last page in a plug-in taking ``*args, **kwargs``, a
prefill tile too many on a tile-multiple length (an overflow at one size,
wrong works at another), non-causal prefill planned as causal, decode reduce
groups in reverse order (reduce_indptr first at one size, reduce_final_map at
another). Swept against the reference over the shipped space at the default
budget, each must come out as exactly one group whose reproducer shows it and
is minimal: no request can go and none can be a token shorter while the call
diverges the same way, or the report says it is not.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from helpers import planted_planners

import mla_golden
from mla_golden.sweeper.driver import DEFAULT_CASES
from mla_golden.sweeper.evaluate import DIVERGED, evaluate
from mla_golden.sweeper.planners import resolve_planner
from mla_golden.sweeper.render import render_text
from mla_golden.sweeper.space import DECODE, PREFILL, Point

#: name -> (op, the reproducer's request lengths when it is the least call showing the bug, None: not known here)
BUGS = {
    "one_bug": (DECODE, [planted_planners.LONG_REQUEST]),
    "prefill_sizing": (PREFILL, [1] * planted_planners.BIG_BATCH),
    "full_last_page": (DECODE, [16]),
    "tile_multiple": (PREFILL, [256]),
    "causal_prefill": (PREFILL, [257]),
    "reduce_order": (DECODE, None),
}


@pytest.fixture(scope="module", params=sorted(BUGS))
def planted(request: pytest.FixtureRequest) -> tuple[str, mla_golden.sweeper.Findings]:
    findings: mla_golden.sweeper.Findings = mla_golden.sweep("reference", f"python:helpers.planted_planners:{request.param}")
    return request.param, findings


def _diverges_so(point: Point, signature: tuple[str, ...], spec: str) -> bool:
    found = evaluate(point, resolve_planner("reference"), resolve_planner(spec), where_defined=False)
    return found.status == DIVERGED and (point.op, *found.signature) == signature


@pytest.mark.slow
def test_each_planted_bug_is_found_at_the_default_budget_as_one_group_with_a_minimal_reproducer(
    planted: tuple[str, mla_golden.sweeper.Findings],
) -> None:
    name, findings = planted
    op, least = BUGS[name]
    spec = f"python:helpers.planted_planners:{name}"
    assert len(findings.results) == DEFAULT_CASES and findings.verdict == "diverged"
    [group] = findings.groups
    rep = group.reproducer
    assert group.signature[0] == op and rep.confirmed, (group.signature, rep.detail)
    assert group.cases == sum(r.status == DIVERGED for r in findings.results), "every divergent case in the one group"
    point = Point.from_dict(rep.point)
    assert _diverges_so(point, group.signature, spec), "the reproducer shows the bug"
    assert rep.exhausted is None and not rep.seeded
    if least is not None:
        assert rep.point["seq_lens"] == least
    for i in range(point.batch):  # no request can go, none can be a token shorter
        lens = list(point.seq_lens)
        if point.batch > 1:
            assert not _diverges_so(dataclasses.replace(point, seq_lens=tuple(lens[:i] + lens[i + 1 :])), group.signature, spec)
        shorter = lens[:i] + [lens[i] - 1] + lens[i + 1 :]
        if lens[i] - 1 >= (point.qlen if op == DECODE else 1):
            assert not _diverges_so(dataclasses.replace(point, seq_lens=tuple(shorter)), group.signature, spec)
    # kept parameters it is not minimal along are named, and each does diverge there the same way
    for loose in rep.loose:
        axis, value = loose.split()
        simpler: dict[str, Any] = {axis: int(value)}
        assert _diverges_so(dataclasses.replace(point, **simpler), group.signature, spec), loose
    if rep.loose:
        assert f"NOT minimal along {', '.join(v.split()[0] for v in rep.loose)}" in render_text(findings)


def test_a_bug_that_overflows_at_one_size_and_plans_wrong_works_at_another_is_one_cause() -> None:
    points = [Point(PREFILL, "gfx950", 256, 16, (256, 256)), Point(PREFILL, "gfx950", 256, 16, (300, 256))]
    findings = mla_golden.sweep("reference", "python:helpers.planted_planners:tile_multiple", points)
    overflow, wrong = findings.results
    assert overflow.detail.startswith("error: none -> output buffer") and "with room for both plans" in overflow.detail
    assert wrong.detail.startswith("work_indptr"), "a plan that fits: wrong works"
    [group] = findings.groups
    assert group.cases == 2 and group.reproducer.point["seq_lens"] == [256]


@pytest.mark.slow
def test_one_cause_moving_different_reduce_buffers_first_is_one_group() -> None:
    findings = mla_golden.sweep("reference", "python:helpers.planted_planners:reduce_order", cases=200)
    firsts = {r.detail.split("[")[0] for r in findings.results if r.status == DIVERGED}
    assert firsts == {"reduce_indptr", "reduce_final_map"}, firsts
    assert [g.signature for g in findings.groups] == [(DECODE, "values", "reduce")]
