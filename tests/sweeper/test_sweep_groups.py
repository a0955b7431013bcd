"""Findings grouped by cause: planted bugs in a plug-in copy of the planner, one group and one minimal reproducer each."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers import planted_planners

import mla_golden
from mla_golden.sweeper.groups import SIZING, VALUES
from mla_golden.sweeper.render import render_html, render_text
from mla_golden.sweeper.rules import Condition, learn
from mla_golden.sweeper.space import DECODE, PREFILL, Point


@pytest.fixture(scope="module")
def two_bugs() -> mla_golden.sweeper.Findings:
    findings: mla_golden.sweeper.Findings = mla_golden.sweep("reference", "python:helpers.planted_planners:two_bugs", cases=150)
    return findings


@pytest.mark.slow
def test_each_planted_bug_is_one_group_with_a_minimal_reproducer(two_bugs: mla_golden.sweeper.Findings) -> None:
    by_op = {g.reproducer.point["op"]: g for g in two_bugs.groups}
    assert len(two_bugs.groups) == 2 and set(by_op) == {DECODE, PREFILL}, [g.signature for g in two_bugs.groups]
    decode, prefill = by_op[DECODE], by_op[PREFILL]
    # The decode bug fires from LONG_REQUEST tokens on: the minimum is one request of exactly that many.
    assert decode.reproducer.point["seq_lens"] == [planted_planners.LONG_REQUEST]
    # The prefill sizing bug fires from BIG_BATCH requests on: the minimum is that many requests of one token.
    assert prefill.reproducer.point["seq_lens"] == [1] * planted_planners.BIG_BATCH
    assert all(g.reproducer.exhausted is None and g.reproducer.confirmed for g in two_bugs.groups)
    divergent = [r for r in two_bugs.results if r.status == "diverged"]
    assert decode.cases + prefill.cases == len(divergent), "every divergent case is counted in one group"
    assert decode.cases == sum(r.point["op"] == DECODE for r in divergent)


def test_groups_say_their_cause_with_check_on_both_sides_and_a_short_rule(two_bugs: mla_golden.sweeper.Findings) -> None:
    by_op = {g.reproducer.point["op"]: g for g in two_bugs.groups}
    decode, prefill = by_op[DECODE], by_op[PREFILL]
    assert decode.cls == VALUES and prefill.cls == SIZING, "the sizing-only change is a class of its own"
    assert decode.checks["A"] == [] and decode.checks["B"], "the reference passes check; the bug breaks an invariant"
    assert "B violates" in decode.cause() and "check passes on both sides" in prefill.cause()
    # Soundness: each side judged, with the numbers read first, in text, JSON and the page; the headline leads with it.
    assert decode.soundness is not None and prefill.soundness is not None
    assert decode.soundness.expected.sound is True and decode.soundness.actual.sound is False
    assert prefill.soundness.both_sound
    assert decode.judged().startswith("A sound, B unsound: ") and "works " in decode.judged()
    assert two_bugs.soundness.startswith("1 of 2 group(s) unsound: [values] ") and "the B plan breaks" in two_bugs.soundness
    assert prefill.rule is not None and Condition("batch", ">=", str(planted_planners.BIG_BATCH)) in prefill.rule.conditions
    assert prefill.rule.precision == prefill.rule.coverage == 1.0
    assert decode.rule is not None and decode.rule.coverage == 1.0 and len(decode.rule.conditions) <= 3
    document = json.loads(json.dumps(two_bugs.to_dict()))
    assert [g["class"] for g in document["groups"]] == [VALUES, SIZING], "behaviour changes before sizing"
    assert len(document["reproducers"]) == 2
    assert [g["soundness"]["actual"]["sound"] for g in document["groups"]] == [False, True]
    assert document["soundness"] == two_bugs.soundness
    text, page = render_text(two_bugs), render_html(two_bugs)
    assert text.splitlines()[0].startswith(f"DIVERGED (2 group(s), {two_bugs.soundness}): ")
    assert f"    soundness: {decode.judged()}" in text.splitlines()
    assert page.count("<b>soundness</b>: ") == 2
    assert text.index("causes (2 group(s)") < text.index("regions:"), "the causes lead"
    assert page.index("<h2>Causes (2)</h2>") < page.index("<details class='group'") < page.index("Regions and per-parameter")
    assert "reproducers drawn 2 of 2" in page and page.count("<svg") == 4, "each group's pair drawn"
    for i in range(2):
        assert f"href='#rep-{i}'" in page and f"id='rep-{i}'" in page


def _points(n: int, seed: int) -> list[Point]:
    rng = random.Random(seed)
    return [
        Point(DECODE, *rng.choice([("gfx942", 304), ("gfx950", 256)]), rng.choice([16, 32, 64, 128]),
              tuple(rng.randint(1, 9000) for _ in range(rng.randint(1, 40))), qlen=rng.randint(1, 4),
              page_size=rng.choice([1, 16, 64]))
        for _ in range(n)
    ]  # fmt: skip


def test_the_rule_learner_finds_the_conjunction_that_explains_a_group_and_no_incidental_term() -> None:
    points = _points(400, seed=1)
    positive = [p.heads == 32 and p.arch == "gfx950" and p.batch >= 8 for p in points]
    rule = learn(points, positive)
    assert set(rule.conditions) == {Condition("heads", "==", "32"), Condition("device", "==", "gfx950:256"),
                                    Condition("batch", ">=", "8")}  # fmt: skip
    assert rule.precision == rule.coverage == 1.0 and rule.hits == sum(positive)
    single = learn(points, [p.page_size == 64 for p in points])
    assert single.conditions == (Condition("page_size", "==", "64"),), "one condition explains it: no more are added"
    noisy = learn(points, [p.heads == 128 and i % 10 != 0 for i, p in enumerate(points)])
    assert noisy.conditions == (Condition("heads", "==", "128"),) and 0.85 < noisy.precision < 1.0 and noisy.coverage == 1.0


def test_the_cli_sweeps_a_plug_in_planner_and_says_so(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mla_golden.cli import app

    page = tmp_path / "sweep.html"
    args = ["sweep", "--a", "reference", "--b", "python:helpers.planted_planners:one_bug", "--cases", "40", "--format", "json",
            "--html", str(page)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["b"] == "python:helpers.planted_planners:one_bug" and document["runs"][1] == "plug-in planner helpers.planted_planners:one_bug"
    assert [g["signature"][:2] for g in document["groups"]] == [[DECODE, "values"]]
    assert "python:helpers.planted_planners:one_bug" in page.read_text(encoding="utf-8")
    bad = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "python:helpers.planted_planners:incomplete"])
    assert bad.exit_code == 2 and "incomplete has no" in bad.output
