"""A run's results in the formats CI systems read: GitHub workflow commands and step summary, JUnit XML.

GitHub Actions turns a ``::error file=...,title=...::message`` line of a
job's log into an annotation, and renders the markdown a step appends to
``$GITHUB_STEP_SUMMARY`` on the run's page; every CI reads JUnit XML as test
results. One golden is one annotation, one summary row, one testcase. A golden's strings in each are
neutralised for it (``mla_golden.render.sanitize``): they cannot add a workflow command, a line, markdown or a character
XML forbids.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from mla_golden.render.sanitize import github_data, github_property, inline, markdown, markdown_code, xml_text
from mla_golden.runs import STATUS_EXIT, Result, Status

#: The element a JUnit testcase of each status holds (docs/cli.md's table): none when it passed, ``skipped`` when
#: nothing was compared, ``failure`` when the golden says no (exit 1), ``error`` when the golden or the run could
#: not be judged (exit 2).
JUNIT_ELEMENT: dict[Status, str | None] = {
    Status.WRITTEN: None,
    Status.UNCHANGED: None,
    Status.UPDATED: None,
    Status.EQUAL: None,
    Status.PASSED: None,
    Status.SKIPPED: "skipped",
    Status.NOT_COMPARABLE: "skipped",
    Status.REFUSED: "failure",
    Status.RESIZED: "failure",
    Status.DIVERGED: "failure",
    Status.VIOLATED: "failure",
    Status.ONLY_EXPECTED: "failure",
    Status.ONLY_ACTUAL: "failure",
    Status.BAD: "error",
    Status.FAILED: "error",
    Status.MISSED: "error",
}


def headline(result: Result) -> str:
    """The first thing that differs, in one line (a golden's strings in it escaped: ``sanitize.inline``): a params
    change, an error, or a field's first element."""
    return inline(_first_difference(result))


def _first_difference(result: Result) -> str:
    diff = result.diff_json
    if diff is None:
        return result.message
    for kind in ("params", "device", "env"):
        if diff[kind]:
            return f"{kind}: " + ", ".join(f"{c['path']} {c['expected']} -> {c['actual']}" for c in diff[kind])
    if diff["error"]:
        return f"error: {diff['error']['expected']} -> {diff['error']['actual']}"
    for fd in (*diff["inputs"], *diff["fields"]):
        if fd["status"] == "equal":
            continue
        if fd["status"] == "resized":
            return f"{fd['name']}: buffer {fd['expected_shape']} -> {fd['actual_shape']}; written contents equal"
        if fd["status"] == "shape" and not fd["count"]:
            return f"{fd['name']}: shape {fd['expected_shape']} -> {fd['actual_shape']}"
        first = fd["first"]
        return f"{fd['name']}{first['index']}: {first['expected']} -> {first['actual']} ({fd['count']} element(s))"
    return "; ".join(diff["hazards"]) or result.message


# ---------------------------------------------------------------- GitHub Actions


#: Annotations GitHub shows per step and level: its documented limit is 10 errors, 10 warnings and 10 notices
#: a step (50 a job); the rest are dropped without a word, so the run drops them itself and says how many.
ANNOTATIONS_PER_LEVEL = 10

#: Not-ok statuses that are no failure of the schedule (only buffer sizes changed): warnings, not errors.
WARNINGS = frozenset({Status.RESIZED})


def github_level(status: Status) -> str:
    """The workflow command annotating a golden of ``status`` that is not ok: ``warning`` or ``error``."""
    return "warning" if status in WARNINGS else "error"


def github_annotations(command: str, results: Sequence[Result], limit: int = ANNOTATIONS_PER_LEVEL) -> list[str]:
    """One ``::error`` (``::warning`` for :data:`WARNINGS`) line per golden that is not ok, on its file, titled
    with its status and key: the first ``limit`` of each level, then a ``::notice`` counting those left out."""
    lines: list[str] = []
    shown, left_out = dict.fromkeys(("error", "warning"), 0), dict.fromkeys(("error", "warning"), 0)
    for r in results:
        if r.status.ok:
            continue
        level = github_level(r.status)
        if shown[level] >= limit:
            left_out[level] += 1
            continue
        shown[level] += 1
        props = [f"title={github_property(f'mla-golden {command}: {r.status.value} {r.key}')}"]
        if r.path:
            props.insert(0, f"file={github_property(r.path)}")
        lines.append(f"::{level} {','.join(props)}::{github_data(headline(r) or r.status.value)}")
    if any(left_out.values()):
        counted = " and ".join(f"{n} {level}(s)" for level, n in left_out.items() if n)
        lines.append(
            f"::notice title={github_property(f'mla-golden {command}: annotations left out')}::"
            f"{counted} not annotated (GitHub shows {limit} a level in a step): every result is in the log's "
            "report and not-ok table, and in the step summary"
        )
    return lines


def github_group(title: str) -> str:
    """The line opening a folded section of a GitHub Actions log (``::endgroup::`` closes it)."""
    return f"::group::{github_data(title)}"


GITHUB_END_GROUP = "::endgroup::"


def github_summary(command: str, results: Sequence[Result], code: int) -> str:
    """Markdown for the step summary: the verdict, the counts by status, then every golden that is not ok."""
    counts = {status: sum(r.status is status for r in results) for status in STATUS_EXIT}
    lines = [f"### mla-golden {command}: exit {code}", "", "| status | count |", "|---|---:|"]
    lines += [f"| {status.value} | {n} |" for status, n in counts.items() if n]
    lines.append(f"| **total** | **{len(results)}** |")
    problems = [r for r in results if not r.status.ok]
    if problems:
        lines += ["", "| status | golden | first difference |", "|---|---|---|"]
        lines += [f"| {r.status.value} | {markdown_code(r.key)} | {markdown(headline(r))} |" for r in problems]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- JUnit XML


def junit_xml(command: str, results: Sequence[Result], seconds: float) -> str:
    """A JUnit XML document: a ``<testsuites>`` root holding one testsuite for the run (``seconds`` its wall time),
    one testcase per golden (its own time; :data:`JUNIT_ELEMENT` says what it holds)."""
    elements = [JUNIT_ELEMENT[r.status] for r in results]
    counts = {kind: str(elements.count(kind)) for kind in ("failure", "error", "skipped")}
    totals = {"tests": str(len(results)), "failures": counts["failure"], "errors": counts["error"]}
    root = ET.Element("testsuites", {"name": f"mla-golden {command}", **totals, "time": _seconds(seconds)})
    suite = ET.SubElement(root, "testsuite", {"name": f"mla-golden {command}", **totals, "skipped": counts["skipped"]})
    suite.set("time", _seconds(seconds))
    for r, kind in zip(results, elements):  # every string one a golden chose: attributes on one line, nothing XML forbids
        case = ET.SubElement(suite, "testcase", classname=f"mla-golden.{command}", name=inline(r.key))
        if r.path:
            case.set("file", inline(r.path))
        case.set("time", _seconds(r.seconds or 0.0))
        if kind == "skipped":
            ET.SubElement(case, "skipped", message=inline(r.message or r.status.value), type=r.status.value)
        elif kind is not None:
            element = ET.SubElement(case, kind, message=headline(r) or r.status.value, type=r.status.value)
            element.text = xml_text(r.report or r.message)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _seconds(seconds: float) -> str:
    """JUnit's ``time``: seconds, to the millisecond."""
    return f"{seconds:.3f}"
