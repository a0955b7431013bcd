"""A sweep that could not look is never a pass: cases skipped or undefined are counted, and past a share it is INCONCLUSIVE."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers import planted_planners
from typer.testing import CliRunner

import mla_golden
from mla_golden.cli import app
from mla_golden.runs import EXIT_INCONCLUSIVE
from mla_golden.sweeper.driver import INCONCLUSIVE_SHARE, TOP_REASONS, not_compared
from mla_golden.sweeper.evaluate import BOTH, EQUAL, EQUAL_WHERE_DEFINED, SKIPPED, UNDEFINED, Side, compare, evaluate
from mla_golden.sweeper.planners import resolve_planner
from mla_golden.sweeper.render import render_text
from mla_golden.sweeper.space import DECODE, Point
from mla_golden.sweeper.work import CaseResult

PAGED_SPACE = """\
format = "mla-golden-space/1"
devices = ["gfx942:304"]

[[decode]]
name = "paged"
heads = 16
dtype = "fp8"
batch = "1..8"
context = "jitter:64..4000"
page_size = [{pages}]
"""
#: Head folding with 16-token pages: aiter reads kv_last_page_lens past its end, some kv_offsets are undefined.
FOLDED = Point(DECODE, "gfx942", 304, 64, (3000, 40), qlen=2, q_dtype="bf16", kv_dtype="bf16", page_size=16)


def _sweep(tmp_path: Path, pages: str) -> tuple[int, dict[str, object], str]:
    space = tmp_path / "space.toml"
    space.write_text(PAGED_SPACE.format(pages=pages), encoding="utf-8")
    args = ["sweep", "--a", "reference", "--b", "python:helpers.planted_planners:unpaged", "--space", str(space), "--cases", "60"]
    text = CliRunner().invoke(app, args)
    document = CliRunner().invoke(app, [*args, "--format", "json"])
    return document.exit_code, json.loads(document.stdout), text.stdout


def test_a_sweep_that_could_compare_only_a_minority_is_inconclusive_with_its_own_exit_status(tmp_path: Path) -> None:
    code, document, text = _sweep(tmp_path, "1, 16, 64")
    skipped = document["counts"]["skipped"]  # type: ignore[index]
    assert code == EXIT_INCONCLUSIVE == 3 == document["exit_code"] and document["verdict"] == "inconclusive" and document["diverged"] is False
    assert skipped > 60 * INCONCLUSIVE_SHARE and document["counts"] == {"equal": 60 - skipped, "skipped": skipped}
    headline, reasons, top = text.splitlines()[:3]
    assert headline.startswith(f"INCONCLUSIVE: {skipped} of 60 skipped; A reference")
    assert reasons.startswith(f"more than 10% of the cases were not compared: the {60 - skipped} compared cannot stand")
    missing = document["not_compared"]
    assert missing["total"] == missing["skipped"] == skipped and missing["inconclusive"] is True  # type: ignore[index]
    reasons = missing["reasons"]  # type: ignore[index]
    assert sum(r["cases"] for r in reasons) == skipped and {r["verdict"] for r in reasons} == {SKIPPED}
    first = reasons[0]
    assert top == f"  skipped {first['cases']}: {first['reason']}" and "unpaged: this signature has no " in top
    quiet = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "python:helpers.planted_planners:unpaged", "--space",
                                     str(tmp_path / "space.toml"), "--cases", "60", "--quiet"]).stdout.splitlines()  # fmt: skip
    full = text.splitlines()
    assert quiet[0].split(" in ")[0] == full[0].split(" in ")[0]  # the same verdict, up to its times
    assert quiet[1:-1] == full[1 : 2 + len(reasons[:TOP_REASONS])], "quiet: the verdict and why (no region diverges)"
    assert quiet[-1] == full[-1] == "exit 3 (inconclusive)"
    clean, document, text = _sweep(tmp_path, "1")
    assert clean == 0 and document["verdict"] == "equal" and text.startswith("no divergence: ")


def _results(statuses: Sequence[tuple[str, str | None]]) -> list[CaseResult]:
    return [CaseResult(i, {}, status, kind, f"reason {kind}") for i, (status, kind) in enumerate(statuses)]


@pytest.mark.parametrize(("uncompared", "inconclusive"), [(10, False), (11, True)])
def test_more_than_the_share_not_compared_is_inconclusive(uncompared: int, inconclusive: bool) -> None:
    mix = [(SKIPPED, None)] * (uncompared - 6) + [(UNDEFINED, BOTH)] * 3 + [(UNDEFINED, "A")] * 2 + [(UNDEFINED, "B")]
    found = not_compared(_results(mix + [(EQUAL, None)] * (100 - uncompared)))
    assert found.total == uncompared and found.inconclusive is inconclusive
    assert found.undefined == {"A": 2, "B": 1, BOTH: 3} and found.skipped == uncompared - 6
    assert found.phrase() == (
        f"{uncompared} of 100 not compared ({uncompared - 6} skipped, 3 undefined on both sides, 2 undefined on A only, "
        "1 undefined on B only)"
    )


def test_undefined_on_both_sides_is_undefined_whatever_each_side_says() -> None:
    same = compare(Side("aiter reads x past its end", True), Side("aiter reads x past its end", True))
    worded = compare(Side("aiter reads x past its end", True), Side("kv_last_page_lens read past the end", True))
    assert (same.status, same.kind) == (worded.status, worded.kind) == (UNDEFINED, BOTH)
    assert worded.detail == "A: aiter reads x past its end; B: kv_last_page_lens read past the end"
    one = compare(Side("raised", False), Side("aiter reads x past its end", True))
    assert (one.status, one.kind, one.detail) == (UNDEFINED, "B", "aiter reads x past its end")


def test_undefined_on_both_sides_is_compared_where_defined() -> None:
    reference = resolve_planner("reference")
    verdict = evaluate(FOLDED, reference, reference)
    assert (verdict.status, verdict.detail) == (EQUAL, EQUAL_WHERE_DEFINED)
    # The planted bug moves a defined element of this call (a request of LONG_REQUEST tokens or more): not equal,
    # and with nothing defined to stand for the rest, not compared.
    assert max(FOLDED.seq_lens) >= planted_planners.LONG_REQUEST
    bug = evaluate(FOLDED, reference, resolve_planner("python:helpers.planted_planners:one_bug"))
    assert (bug.status, bug.kind) == (UNDEFINED, BOTH)
    findings = mla_golden.sweep("reference", "reference", [FOLDED] * 3)
    assert findings.not_compared.where_defined == 3 and findings.verdict == "equal"
    assert "compared where defined: 3 case(s) undefined on both sides, equal wherever defined" in render_text(findings)


def test_a_sweep_that_ran_no_case_is_inconclusive_never_equal() -> None:
    """A time budget spent before the first case (workers slow to start, a budget of a millisecond) compared nothing:
    that is no pass."""
    nothing = not_compared([])
    assert nothing.inconclusive and nothing.phrase() == "no case ran"
