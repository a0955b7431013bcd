"""Render a Diff for people (text, via rich) and for machines (JSON); and a check result as text."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from mla_golden.checks.results import INVARIANTS, CheckResult, Violation
from mla_golden.diff_data import Cause, Diff, FieldDiff, FieldStatus, WorkItem
from mla_golden.render.sanitize import inline
from mla_golden.schema import format_cell, span
from mla_golden.soundness import Soundness


def to_json(diff: Diff, *, indent: int | None = 2) -> str:
    return json.dumps(diff.to_dict(), indent=indent, default=str)


def _fmt(value: Any) -> str:
    return "None" if value is None else repr(value) if isinstance(value, str) else str(value)


def _field_line(fd: FieldDiff) -> str:
    if fd.status is FieldStatus.RESIZED:
        return f"buffer {fd.expected_shape} -> {fd.actual_shape}; written contents equal"
    parts = [f"{fd.count} of {fd.numel} elements differ"]
    detail = []
    if fd.value_diffs:
        detail.append(f"{fd.value_diffs} value{'s' if fd.value_diffs > 1 else ''}")
    if fd.written_only_expected:
        detail.append(f"{fd.written_only_expected} written only in expected")
    if fd.written_only_actual:
        detail.append(f"{fd.written_only_actual} written only in actual")
    if detail:
        parts.append(f"({', '.join(detail)})")
    if fd.status is FieldStatus.SHAPE:
        parts.append(f"; shape/dtype {fd.expected_dtype} {fd.expected_shape} -> {fd.actual_dtype} {fd.actual_shape}")
    if fd.first is not None:
        parts.append(
            f"; first at {fd.first.index} (flat {fd.first.flat}): {_fmt(fd.first.expected)} -> {_fmt(fd.first.actual)}"
        )
    return " ".join(parts)


GEOMETRY_ROWS = (
    ("CU parts", "cu_parts"),
    ("works", "works"),
    ("works per CU part (min/mean/max)", "works_per_cu"),
    ("kv per CU part (min/mean/max)", "kv_per_cu"),
    ("idle CU parts", "idle_cu_parts"),
    ("split works", "split_works"),
    ("reduce groups (split q tiles)", "reduce_groups"),
    ("partial tiles", "partial_tiles"),
)


def _geometry_table(console: Any, diff: Diff) -> None:
    from rich.table import Table

    expected, actual = diff.geometry.get("expected"), diff.geometry.get("actual")
    table = Table(title="schedule geometry", title_justify="left", show_edge=False)
    for header in ("", "expected", "actual"):
        table.add_column(header, justify="right")
    for label, attr in GEOMETRY_ROWS:
        e = getattr(expected, attr) if expected else None
        a = getattr(actual, attr) if actual else None
        mark = "" if e == a else " *"
        table.add_row(label, _fmt_geo(e), _fmt_geo(a) + mark)
    console.print(table)


def _fmt_geo(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "/".join(str(v) for v in value)
    return str(value)


#: Partial locations a reduce group shows before the rest are counted (a long kv splits into hundreds).
MAX_PARTIALS_SHOWN = 16


def _clipped(values: list[int]) -> str:
    if len(values) <= MAX_PARTIALS_SHOWN:
        return str(values)
    return f"{str(values[:MAX_PARTIALS_SHOWN])[:-1]}, ...] ({len(values)} partials)"


def _work_cells(item: WorkItem | None, columns: list[str]) -> list[str]:
    if item is None:
        return ["-"] + ["(not written)"] + [""] * (len(columns) - 1)
    return [_fmt(item.cu_part)] + [format_cell(c, item.columns[c]) for c in columns]


def render_text(diff: Diff, *, width: int = 120, more: str = "max_items") -> str:
    """The pinpointed report: what changed, where, and the divergent work items decoded; a cut list names ``more``,
    the setting that decodes more items where the report is read (``--max-items`` in the CLI)."""
    from rich.console import Console
    from rich.table import Table

    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False, markup=False, emoji=False, soft_wrap=True)

    def say(line: str) -> None:
        """One line of the report, whatever the goldens' strings in it hold (keys, planner names, notes)."""
        console.print(inline(line))

    verdict = "EQUAL" if diff.equal else "RESIZED" if diff.cause is Cause.RESIZED else "DIVERGED"
    say(f"{verdict} {diff.op}: {diff.expected_name} (expected) vs {diff.actual_name} (actual)")
    if diff.cause is Cause.RESIZED:  # the sizes are the news: "work_info_set buffer [a] -> [b]; written contents equal"
        say(f"  likely cause: {diff.cause_detail}; written contents equal")
    elif not diff.equal:
        alike = diff.cause in _CALLER_CAUSES and bool(diff.fields) and all(f.equal for f in diff.fields)
        say(
            f"  likely cause: {diff.cause_label}" + (f" ({diff.cause_detail})" if diff.cause_detail else "")
            + ("; outputs equal" if alike else "")
        )
    if diff.soundness is not None:
        _soundness_lines(say, diff.soundness)
    for title, changes in (("params changed", diff.params), ("device changed", diff.device), ("env changed", diff.env)):
        if changes:
            say(f"  {title}:")
            for c in changes:
                say(f"    {c.path}: {_fmt(c.expected)} -> {_fmt(c.actual)}")
    if diff.error:
        say(f"  error status changed: {_fmt(diff.error.expected)} -> {_fmt(diff.error.actual)}")
    for hazard in diff.hazards:
        say(f"  hazard: {hazard}")
    for fd in diff.inputs:
        if not fd.equal:
            say(f"  {fd.name}: {_field_line(fd)}")
    for fd in diff.fields:
        if not fd.equal:
            say(f"  {fd.name}: {_field_line(fd)}")
    if diff.geometry and not all(f.status is FieldStatus.RESIZED for f in diff.fields if not f.equal):
        _geometry_table(console, diff)
    if diff.cu_parts:
        say("  CU parts whose work range moved (work_indptr):")
        for cp in diff.cu_parts:
            sides = ("(none)" if works is None else span(works) for works in (cp.expected, cp.actual))
            say(f"    cu part {cp.cu_part}: works {' -> '.join(sides)}")
        _more(console, diff.cu_parts_differing - len(diff.cu_parts), "CU part(s) whose work range moved", "    ", more)
    if diff.work_items:
        columns = next(
            (list(w.columns) for d in diff.work_items for w in (d.expected, d.actual) if w is not None), []
        )
        table = Table(title="divergent work items (work_info_set)", title_justify="left", show_edge=False)
        for header in ["work", "side", "cu part", *columns]:
            table.add_column(header, justify="right")
        for item in diff.work_items:
            for side, w in (("expected", item.expected), ("actual", item.actual)):
                cells = _work_cells(w, columns)
                marked = [
                    f"*{v}" if col in item.changed and w is not None else v for col, v in zip(["cu"] + columns, cells)
                ]
                table.add_row(str(item.index) if side == "expected" else "", side, *marked)
        console.print(table)
        hidden = diff.work_items_differing - len(diff.work_items)
        _more(console, hidden, "divergent work item(s)", "  (* marks the columns that differ) " if hidden > 0 else "", more)
        if hidden <= 0:
            say("  (* marks the columns that differ)")
    if diff.reduce_groups:
        say("  divergent reduce groups:")
        for g in diff.reduce_groups:
            for side, rg in (("expected", g.expected), ("actual", g.actual)):
                qo = "(not written)" if rg is None or rg.qo_range is None else span(rg.qo_range)
                text = "(none)" if rg is None else f"qo {qo} <- partials {_clipped(rg.partials)}"
                say(f"    group {g.group} {side}: {text}")
        _more(console, diff.reduce_groups_differing - len(diff.reduce_groups), "divergent reduce group(s)", "    ", more)
    for note in diff.notes:
        say(f"  note: {note}")
    return out.getvalue().rstrip() + "\n"


def _soundness_lines(say: Callable[[str], None], soundness: Soundness) -> None:
    """Whether each side is a plan the kernels can run, and the numbers read first, old -> new."""
    say(f"  soundness: {soundness.headline()} ({soundness.changes()})")
    for side, judged in (("old", soundness.expected), ("new", soundness.actual)):
        for note in judged.notes:
            say(f"    {side} plan: {note}")


#: Causes that are the caller's changes: when the outputs came out the same anyway, the headline says so.
_CALLER_CAUSES = (Cause.PARAMS, Cause.DEVICE, Cause.ENV, Cause.INPUTS)


def _more(console: Any, hidden: int, what: str, indent: str, more: str) -> None:
    """Say how many items a cut list leaves out, and what shows them: a report must not look complete when it is not."""
    if hidden > 0:
        console.print(f"{indent}... and {hidden} more {what}, not shown (raise {more} to see them)", markup=False)


#: Violations the check report lists per invariant.
TEXT_PER_INVARIANT = 5


def render_check_text(result: CheckResult, *, per_invariant: int = TEXT_PER_INVARIANT) -> str:
    """A short report for people: verdict, hazards, then violations grouped by invariant."""
    lines = [f"{result.op}: {'ok' if result.ok else f'{len(result.violations)} violation(s)'}"]
    for hazard in result.hazards:
        lines.append(f"  hazard {hazard.hazard}: {hazard.message}")
    grouped: dict[str, list[Violation]] = defaultdict(list)
    for violation in result.violations:
        grouped[violation.invariant].append(violation)
    for name, items in grouped.items():
        lines.append(f"  {name} ({INVARIANTS.get(name, '')}): {len(items)}")
        for item in items[:per_invariant]:
            lines.append(f"    {item.where}: {item.message}")
        if len(items) > per_invariant:
            lines.append(f"    ... {len(items) - per_invariant} more")
    for note in result.skipped:
        lines.append(f"  skipped: {note}")
    return "\n".join(map(inline, lines))  # a golden's strings in a message stay on their line
