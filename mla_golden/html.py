"""Reports as one self-contained HTML file (inline CSS and SVG, no script, no network).

Pages lead with the answer: a tree's divergences grouped by cause, then each
divergent call's verdict in words (cause, fields and first indices, the
divergent work items and reduce groups decoded), then where it changed: the
divergent CU parts enlarged with a few neighbours, expected beside actual at
one scale, every divergent work outlined and labelled. The full schedules
follow, collapsed. A diff page names what it compared and says the notes
every call shares once; within a size budget its pictures go to diverged
calls before resize-only ones, and what is left out names the command that
draws it, so a page over a whole tree stays small. ``show`` and
``check`` pages draw one schedule the same way.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

from mla_golden import differ
from mla_golden.call import Call
from mla_golden.checks import INVARIANTS, CheckResult
from mla_golden.differ import Cause, Diff, FieldDiff, WorkItemDiff
from mla_golden.geometry import ReduceGroup, geometry, moved_parts
from mla_golden.report import GEOMETRY_ROWS, render_text
from mla_golden.sanitize import html_text
from mla_golden.schema import format_cell, schema_for
from mla_golden.soundness import Soundness
from mla_golden.svg import SIDE_WIDTH, draw
from mla_golden.views import Marks, diff_marks, focus, parts_of, schedule

if TYPE_CHECKING:
    from mla_golden.triage.bisect import Bisection

T = TypeVar("T")

#: Rows of each list in a verdict (work items, moved CU parts, reduce groups, violations) before the rest fold away.
VERDICT_ROWS = 4
#: Rows a verdict's list holds at most (folded) on a page drawing one call; past that (and past the run's
#: ``--max-items`` on a page of several) it names the command that lists them all.
LIST_ROWS = 400
#: Calls linked from one group of the summary before the rest are folded away.
GROUP_LINKS = 6
#: Characters a diff page spends at most on drawing: every call's verdict and text first, then the enlarged pictures,
#: then the (collapsed) full schedules, each in turn diverged calls before resize-only ones; what does not fit says so.
PAGE_BUDGET = 1_800_000

_CSS = f"""
body{{font:13px/1.45 system-ui,sans-serif;margin:16px;color:#222;max-width:{2 * SIDE_WIDTH + 60}px}}
h1{{font-size:18px;margin:0 0 4px}} h2{{font-size:15px;margin:0 0 6px}} h3{{font-size:13px;margin:10px 0 4px}}
section.call{{border-top:2px solid #ccc;padding-top:10px;margin-top:18px}}
.legend{{color:#555;font-size:12px;margin:0 0 8px}} .legend span{{margin-right:14px;white-space:nowrap}}
.facts{{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}} .facts>div:first-child{{max-width:820px}}
.verdict .headline{{font-size:14px;margin:0 0 4px}}
.verdict ul{{margin:2px 0 6px 18px;padding:0}}
table{{border-collapse:collapse;font-size:12px;margin:2px 0 6px}}
td,th{{padding:1px 7px;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap}}
th{{font-weight:600;background:#f4f4f4;text-align:left}} td.l{{text-align:left}} td.links{{white-space:normal}}
td.changed{{background:#ffd6d6;font-weight:600}}
.equal{{color:#2a7a2a}} .diverged{{color:#b00020;font-weight:600}} .bad{{color:#8a5a00}}
.resized{{color:#5a3d99;font-weight:600}} .violated{{color:#b00020;font-weight:600}} .not-comparable{{color:#555555}} .none{{color:#666666}}
.pair{{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}}
figure.side{{margin:0;flex:0 0 auto}}
details{{margin:8px 0}} summary{{cursor:pointer;color:#1a4f9c}}
pre{{background:#f6f6f6;padding:8px;overflow:auto;font-size:11px}} .filters a{{scroll-margin-top:16px}}
.facts>div{{min-width:0;max-width:100%}} table{{display:block;max-width:100%;overflow-x:auto}}
td.l{{white-space:normal;overflow-wrap:break-word}} p,li{{overflow-wrap:break-word}} h2{{overflow-wrap:anywhere}}
"""


def _legend(marked: str) -> str:
    return (
        '<p class="legend"><span>one row per CU part</span><span>width = kv length (one scale per picture)</span>'
        "<span>colour = batch</span><span>dark left edge = split work</span>"
        f'<span style="color:#e00000">red outline = {marked}</span><span>hover a work for its fields</span></p>'
    )


@dataclass
class Entry:
    """One call on a diff page: the run's status for it and, when drawn, what was compared."""

    name: str
    #: 'equal', 'diverged', or what kept it from being compared ('bad', 'only-expected', ...).
    status: str
    message: str = ""
    diff: Diff | None = None
    expected: Call | None = None
    actual: Call | None = None
    #: The cause group it is listed under (default: :func:`cause_group` of ``diff``), for calls not drawn.
    group: str | None = None
    #: Both sides judged (``Soundness.to_dict``), for calls not drawn too; default: ``diff``'s.
    soundness: dict[str, Any] | None = None
    #: The command that diffs this call alone (``mla-golden diff FILE --backend SPEC``, no output options): the page
    #: offers it, with ``--html`` or ``--max-items``, wherever it leaves something out.
    command: tuple[str, ...] = ()

    def judged(self) -> dict[str, Any] | None:
        if self.soundness is not None:
            return self.soundness
        return self.diff.soundness.to_dict() if self.diff is not None and self.diff.soundness is not None else None


@dataclass
class CheckEntry:
    """One golden on a check page: the run's status for it and, when drawn, its call and what the check found."""

    name: str
    #: 'passed', 'violated', or what kept it from being checked ('bad', 'failed').
    status: str
    message: str = ""
    call: Call | None = None
    result: CheckResult | None = None
    #: The command that checks this golden alone (``mla-golden check FILE``); the page offers it with ``--html``.
    command: tuple[str, ...] = ()


@dataclass
class _Group:
    """A row of a page's summary: a cause (or invariant) and the calls under it."""

    label: str
    members: list[int]
    #: Calls that were not compared (or checked) rather than found different.
    unusable: bool = False


# ---------------------------------------------------------------- small pieces


def _e(value: object) -> str:
    return html_text(value)


def _page(title: str, lead: Iterable[str], body: Iterable[str], marked: str) -> str:
    """The verdict in the title and first (``lead``), then the legend of the pictures, then ``body``."""
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>{''.join(lead)}{_legend(marked)}{''.join(body)}</body></html>"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cells) + "</tr>" for cells in rows)
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def _td(value: object, cls: str = "") -> str:
    return f'<td class="{cls}">{_e(value)}</td>' if cls else f"<td>{_e(value)}</td>"


def _pair(pictures: dict[str, str]) -> str:
    return '<div class="pair">' + "".join(
        f'<figure class="side" data-side="{side}">{svg}</figure>' for side, svg in pictures.items()
    ) + "</div>"  # fmt: skip


def _span(parts: list[int]) -> str:
    """'CU parts 3-7, 40-44' from a sorted list."""
    runs: list[list[int]] = []
    for p in parts:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# ---------------------------------------------------------------- the verdict of one diff


def _field_rows(fields: Iterable[FieldDiff]) -> list[list[str]]:
    rows = []
    for fd in fields:
        if fd.equal:
            continue
        first = fd.first
        where = f"{first.index} (flat {first.flat})" if first else "-"
        change = f"{first.expected} -> {first.actual}" if first else f"{fd.expected_shape} -> {fd.actual_shape}"
        rows.append([_td(fd.name, "l"), _td(f"{fd.count} of {fd.numel}"), _td(fd.status), _td(where, "l"), _td(change, "l")])
    return rows


def _work_rows(items: Iterable[WorkItemDiff]) -> list[list[str]]:
    rows = []
    for item in items:
        for side, w in (("expected", item.expected), ("actual", item.actual)):
            head = [_td(item.index if side == "expected" else ""), _td(side, "l")]
            if w is None:
                rows.append(head + [_td("-"), _td("(not written)", "l")])
                continue
            cells = [_td(w.cu_part if w.cu_part is not None else "-")]
            cells += [_td(format_cell(c, v), "changed" if c in item.changed else "") for c, v in w.columns.items()]
            rows.append(head + cells)
    return rows


def _works_table(items: list[WorkItemDiff]) -> str:
    columns = next((list(w.columns) for d in items for w in (d.expected, d.actual) if w is not None), [])
    return _table(["work", "side", "cu part", *columns], _work_rows(items), "works")


def _status_class(status: str) -> str:
    """The CSS class (so the colour) of a status: each its own, the ones that kept a call from being compared amber."""
    if status in ("equal", "passed"):
        return "equal"
    return status if status in ("diverged", "resized", "violated", "not-comparable") else "bad"


def _verdict(
    diff: Diff, lists: Diff, anchor: str, hoisted: frozenset[str], pictures: bool, command: tuple[str, ...], resized: bool = False
) -> str:
    """The answer in words: cause, what changed where, the divergent works and reduce groups decoded.

    ``lists``: the same diff holding more of each list (up to :data:`LIST_ROWS`) than ``diff`` kept.
    """
    itemised = diff.params or diff.device or diff.env  # listed below: the detail would repeat them
    headline = (
        (f'<p class="headline"><span class="resized">RESIZED</span> cause: <b>{_e(diff.cause_label)}</b>' if resized
         else f'<p class="headline"><span class="diverged">DIVERGED</span> likely cause: <b>{_e(diff.cause_label)}</b>')
        + (f" ({_e(diff.cause_detail)})" if diff.cause_detail and not itemised else "")
        + (f' <a class="jump" href="#{anchor}-where">pictures</a>' if pictures else "")
        + "</p>"
        + (_soundness_line(diff.soundness) if diff.soundness is not None else "")
    )
    left = []
    changes = [
        f"<li>{kind} {_e(c.path)}: {_e(c.expected)} -&gt; {_e(c.actual)}</li>"
        for kind, items in (("param", diff.params), ("device", diff.device), ("env", diff.env))
        for c in items
    ]
    if diff.error:
        changes.append(f"<li>error: {_e(diff.error.expected)} -&gt; {_e(diff.error.actual)}</li>")
    changes += [f'<li class="bad">hazard: {_e(h)}</li>' for h in diff.hazards]
    if changes:
        left.append(f"<ul>{''.join(changes)}</ul>")
    fields = _field_rows([*diff.inputs, *diff.fields])
    if fields:
        left.append(_table(["field", "elements differ", "how", "first at", "expected -> actual"], fields, "fields"))
    if diff.cu_parts:
        rows = [[_td(c.cu_part), _td(c.expected, "l"), _td(c.actual, "l")] for c in lists.cu_parts]
        title = f"CU parts whose work range moved ({diff.cu_parts_differing} in all)"
        left.append(_listed(title, rows, diff.cu_parts_differing, command, lambda r: _table(["cu part", "works expected", "actual"], r, "moved")))
    if diff.work_items:
        title = f"Divergent work items ({diff.work_items_differing} in all; changed cells red)"
        left.append(_listed(title, lists.work_items, diff.work_items_differing, command, _works_table))
    if diff.reduce_groups:
        rows = [[_td(g.group), _td(_group_text(g.expected), "l"), _td(_group_text(g.actual), "l")] for g in lists.reduce_groups]
        title = f"Divergent reduce groups ({diff.reduce_groups_differing} in all)"
        left.append(_listed(title, rows, diff.reduce_groups_differing, command, lambda r: _table(["group", "expected", "actual"], r, "reduce")))
    right = []
    e_geo, a_geo = diff.geometry.get("expected"), diff.geometry.get("actual")
    if e_geo is not None and a_geo is not None:
        rows = [
            [_td(label, "l"), _td(_geo(getattr(e_geo, attr))), _td(_geo(getattr(a_geo, attr)), "changed")]
            for label, attr in GEOMETRY_ROWS
            if getattr(e_geo, attr) != getattr(a_geo, attr)
        ]
        right.append(
            "<h3>Schedule geometry</h3>"
            + (_table(["", "expected", "actual"], rows, "geometry") if rows else "<p>the same on both sides</p>")
        )
    notes = [n for n in diff.notes if n not in hoisted]  # the page's notes (every call's) are said once, at the top
    if notes:
        right.append("<h3>Notes</h3><ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return f'<div class="verdict">{headline}<div class="facts"><div>{"".join(left)}</div><div>{"".join(right)}</div></div></div>'


def _soundness_line(soundness: Soundness) -> str:
    """One line under the headline: does each side pass check, and the numbers read first, old -> new; each side's
    whole judgement folded below it."""
    sides = (("expected", soundness.expected), ("actual", soundness.actual))
    rows = [
        [_td(name, "l"), _td(side.verdict(), "l " + ("equal" if side.sound else "bad" if side.sound is False else "")),
         _td(side.works), _td(side.split_requests), _td(side.reduce_groups),
         _td(f"{side.kv_max} / {side.kv_mean:g} ({side.balance:g}x)"), _td(side.kernel or "-", "l")]
        for name, side in sides
    ]  # fmt: skip
    notes = "".join(f"<li>{name}: {_e(note)}</li>" for name, side in sides for note in side.notes)
    headers = ["", "check", "works", "split requests", "reduce groups", "kv per CU part max / mean", "kernel path"]
    cls = "equal" if soundness.both_sound else "bad"
    return (
        f'<details class="soundness"><summary>soundness: <span class="{cls}">{_e(soundness.headline())}</span> '
        f"({_e(soundness.changes())})</summary>{_table(headers, rows, 'soundness')}"
        + (f"<ul>{notes}</ul>" if notes else "")
        + "</details>"
    )


def _group_text(group: ReduceGroup | None) -> str:
    if group is None:
        return "(none)"
    qo = "(not written)" if group.qo_range is None else f"[{group.qo_range[0]}, {group.qo_range[1]})"
    return f"qo {qo} <- partials {_ranges(group.partials)}"


def _ranges(values: Sequence[int]) -> str:
    """``[0..250, 300]``: runs of consecutive values as ranges, in their order."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return "[" + ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs) + "]"


def _listed(title: str, rows: list[T], total: int, command: tuple[str, ...], table: Callable[[list[T]], str]) -> str:
    """A titled table of its first VERDICT_ROWS rows, the rest folded beneath it; where ``total`` is more than the
    page holds, the command that lists them all."""
    out = f"<h3>{_e(title)}</h3>" + table(rows[:VERDICT_ROWS])
    if len(rows) > VERDICT_ROWS:
        out += f"<details><summary>{len(rows) - VERDICT_ROWS} more</summary>{table(rows[VERDICT_ROWS:])}</details>"
    if total > len(rows):
        out += (f"<p class='left-out'>The other {total - len(rows)} are not on this page; "
                f"{_command(command, '--max-items', str(total))} lists all {total} in its text report.</p>")  # fmt: skip
    return out


def _geo(value: object) -> str:
    return "/".join(str(v) for v in value) if isinstance(value, tuple) else str(value)


# ---------------------------------------------------------------- pictures


def _where(
    sides: dict[str, Call], marks: Marks, marked_parts: set[int], what: str, heading: str, anchor: str
) -> tuple[str, str]:
    """The marked CU parts enlarged with their neighbours (under ``heading``): as said beside the full schedule,
    and as said without it. Both empty when nothing is marked (the verdict then links nowhere)."""
    total = max((len(schedule(c)) for c in sides.values()), default=0)
    rows, left_out = focus(marked_parts, total)
    if not rows and not (marks or marked_parts):
        return "", ""
    if rows:
        head = f'<div class="where" id="{anchor}-where"><h3>{heading}: CU part(s) {_span(sorted(marked_parts & set(rows)))} of {total}, enlarged with neighbours'
        tail = f"</h3>{_pair(draw(sides, marks, rows, enlarged=True))}</div>"
        if not left_out:
            return head + tail, head + tail
        return (
            f"{head}; {left_out} more marked CU part(s) in the full schedule below{tail}",
            f"{head}; {left_out} more marked CU part(s), in the full schedule (left out here: see below){tail}",
        )
    said = f'<div class="where" id="{anchor}-where"><p>No {what} lies in a CU part\'s work range; '
    return said + "the full schedule below draws every work.</p></div>", said + "the full schedule is left out: see below.</p></div>"


def _full(sides: dict[str, Call], marks: Marks) -> str:
    """Every CU part of each side, collapsed."""
    total = max((len(schedule(c)) for c in sides.values()), default=0)
    return f'<details class="full"><summary>Full schedule: {total} CU parts</summary>{_pair(draw(sides, marks))}</details>'


def _command(command: tuple[str, ...], *options: str) -> str:
    """``command`` with ``options`` as a shell command to copy, or a hint where the page was not told one."""
    if command:
        return f"<code class='command'>{_e(shlex.join([*command, *options]))}</code>"
    return f"<code>mla-golden diff</code> of this golden alone with <code>{_e(shlex.join(options))}</code>"


def _draw_command(name: str, command: tuple[str, ...]) -> str:
    """The command that draws a call alone, into a page named after it."""
    return _command(command, "--html", f"{PurePosixPath(name).name}.html")


def _left_out(what: str, why: str, name: str, command: tuple[str, ...]) -> str:
    return f"<p class='left-out'>{what} left out: {why}. Draw it: {_draw_command(name, command)}</p>"


@dataclass
class _Drawn:
    """A drawn call's section in pieces, each rendered once, so the page can choose which pictures it keeps."""

    anchor: str
    name: str
    head: str
    #: The enlarged pictures as said beside the full schedule, and as said without it ("" for none).
    where: tuple[str, str]
    full: str
    tail: str
    cu_parts: int

    def assemble(self, command: tuple[str, ...], pictures: bool, full: bool, why: str) -> str:
        """The section with its pictures (``pictures``) and full schedule (``full``); what is left out says ``why``."""
        out = [self.head]
        if pictures:
            out.append(self.where[0] if full else self.where[1])
        elif self.where[0]:
            out.append(f'<div class="where" id="{self.anchor}-where">'
                       + _left_out("Pictures", "the page stopped drawing at its size limit", self.name, command) + "</div>")  # fmt: skip
        if full:
            out.append(self.full)
        else:
            out.append(_left_out(f"Full schedule ({self.cu_parts} CU parts)", why, self.name, command))
        out.append(self.tail)
        return "".join(out)


def _drawn_parts(entry: Entry, anchor: str, hoisted: frozenset[str], alone: bool = False) -> _Drawn:
    """A drawn call's section in pieces. ``alone``: the page draws only this call, so its lists hold up to
    :data:`LIST_ROWS` rows, not only the run's first ``--max-items``."""
    assert entry.diff is not None and entry.expected is not None and entry.actual is not None
    sides = {"expected": entry.expected, "actual": entry.actual}
    marks = diff_marks(entry.expected, entry.actual)
    moved = moved_parts(entry.expected, entry.actual)
    marked_parts = set(moved)
    for call in sides.values():
        marked_parts |= parts_of(schedule(call), marks)
    where = _where(sides, marks, marked_parts, "divergent work", "Where it changed", anchor)
    diff = entry.diff
    kept = (len(diff.cu_parts), len(diff.work_items), len(diff.reduce_groups))
    counts = (diff.cu_parts_differing, diff.work_items_differing, diff.reduce_groups_differing)
    if alone and any(n > k for n, k in zip(counts, kept, strict=True)):  # the run kept the first --max-items
        lists = differ.diff(entry.expected, entry.actual, max_items=min(max(counts), LIST_ROWS), judge=False)
    else:
        lists = diff
    shown = "resized" if _resize_only(entry) else entry.status
    head = f'<section class="call" id="{anchor}" data-status="{_e(shown)}"><h2>{_e(entry.name)}</h2>' + _verdict(
        diff, lists, anchor, hoisted, bool(where[0]), entry.command, resized=_resize_only(entry)
    )
    text = render_text(entry.diff, more="--max-items")  # the page is the CLI's: its option shows more
    tail = f"<details class='text'><summary>Plain-text report</summary><pre>{_e(text)}</pre></details>"
    tail += (f"<p class='alone'>This call alone: {_draw_command(entry.name, entry.command)}</p>" if entry.command else "") + "</section>"
    total = max((len(schedule(c)) for c in sides.values()), default=0)
    return _Drawn(anchor, entry.name, head, where, _full(sides, marks), tail, total)


def _plain_sections(entries: list[Entry], indices: list[int]) -> dict[int, str]:
    """Sections of calls not drawn, by the first index of each: calls that share a status and a message (twelve
    not-comparable for one reason) are one section naming them all, each name the target of its summary link."""
    alike: dict[tuple[str, str, bool], list[int]] = {}
    for i in indices:
        alike.setdefault((entries[i].status, entries[i].message, bool(entries[i].command)), []).append(i)
    out = {}
    for (status, message, own), members in alike.items():
        if own or len(members) == 1:  # a call with its own command keeps its own section
            out.update({i: _plain_section(entries[i], f"e{i}") for i in members})
            continue
        names = "".join(f'<li id="e{i}">{_e(entries[i].name)}</li>' for i in members)
        out[members[0]] = (
            f'<section class="call alike" id="alike-{members[0]}" data-status="{_e(status)}"><h2>{len(members)} calls {_e(status)}</h2>'
            f'<p class="{_status_class(status)}">{_e(status)}: {_e(message)}</p><ul class="names">{names}</ul></section>'
        )
    return out


def _plain_section(entry: Entry, anchor: str) -> str:
    """A call with nothing drawn: its status and why (and the command that draws it, where there is one)."""
    alone = f" Draw it: {_draw_command(entry.name, entry.command)}" if entry.command else ""
    return (
        f'<section class="call" id="{anchor}" data-status="{_e(entry.status)}"><h2>{_e(entry.name)}</h2>'
        f'<p class="{_status_class(entry.status)}">{_e(entry.status)}: {_e(entry.message)}{alone}</p></section>'
    )


# ---------------------------------------------------------------- grouping


def cause_group(diff: dict[str, Any]) -> str:
    """The group a divergence is listed under: what changed (which params), or what the planner did (and how).

    Takes the JSON form (``Diff.to_dict()``), which a run's results carry for
    every divergent call, drawn or not.
    """
    cause = Cause(diff["cause"])
    if cause in (Cause.PARAMS, Cause.DEVICE, Cause.ENV):
        kind = {Cause.PARAMS: "params", Cause.DEVICE: "device", Cause.ENV: "env"}[cause]
        return f"{cause.value}: " + ", ".join(sorted({c["path"] for c in diff[kind]}))
    if cause.is_planner:  # planner behaviour change OLD -> NEW, split by what it changed
        kind = {Cause.PLANNER_ERROR: "error", Cause.PLANNER_GEOMETRY: "geometry", Cause.PLANNER_VALUES: "values only"}[cause]
        return f"{diff['cause_label']}: {kind}"
    return {Cause.GEOMETRY: "geometry", Cause.VALUES: "values only"}.get(cause, cause.value)


#: Summary order: what the caller changed first, then what the planner did.
_GROUP_ORDER = (
    "params changed", "device changed", "env changed", "inputs changed", "planner behaviour change",
    "error status changed", "capture hazard", "geometry", "values only",
)  # fmt: skip


def _rank(label: str) -> int:
    return next((i for i, prefix in enumerate(_GROUP_ORDER) if label.startswith(prefix)), len(_GROUP_ORDER))


def _diff_groups(entries: list[Entry]) -> tuple[list[_Group], list[int]]:
    """Entry indices by cause group (in summary order, the unusable last), and the equal ones."""
    found: dict[tuple[bool, str], list[int]] = {}
    equal: list[int] = []
    for i, entry in enumerate(entries):
        if entry.status == "equal":
            equal.append(i)
        elif entry.group is not None:
            found.setdefault((False, entry.group), []).append(i)
        elif entry.diff is not None and not entry.diff.equal:
            found.setdefault((False, cause_group(entry.diff.to_dict())), []).append(i)
        else:
            found.setdefault((True, entry.status), []).append(i)
    order = sorted(found, key=lambda key: (key[0], _rank(key[1]), key[1]))
    return [_Group(label, found[(unusable, label)], unusable) for unusable, label in order], equal


def _counts(entries: Sequence[Entry | CheckEntry], good: int, words: tuple[str, str, str]) -> list[tuple[str, int]]:
    """(status, calls) in the run's own words, as the CLI counts them: the flagged first, then the good, then the
    ones that could not be compared (or checked)."""
    _, bad_word, good_word = words
    by_status = Counter(e.status for e in entries if e.status not in ("equal", "passed")).most_common()
    flagged = [(status, n) for status, n in by_status if status in ("diverged", "resized", "violated")]
    unusable = [(status, n) for status, n in by_status if (status, n) not in flagged]
    return (flagged or [(bad_word, 0)]) + [(good_word, good)] + unusable


def _page_verdict(entries: Sequence[Entry | CheckEntry], words: tuple[str, str, str]) -> str:
    """The page's verdict for its title: ``6 diverged, 3 resized`` (what is wrong), else every status counted
    (``108 equal, 12 not-comparable``)."""
    counts = _counts(entries, sum(e.status in ("equal", "passed") for e in entries), words)
    wrong = [(status, n) for status, n in counts if n and status not in (words[2], "not-comparable")]
    return ", ".join(f"{n} {status}" for status, n in wrong or [c for c in counts if c[1]] or counts[-1:])


#: What each exit status means, as the CLI words it.
_EXIT = {0: "ok", 1: "divergence", 2: "bad input"}


def _said(counts: list[tuple[str, int]]) -> str:
    """``6 diverged, 3 resized, 111 equal``, each status in its colour (none counted: not an alarm)."""
    return ", ".join(f'<span class="{_status_class(status) if n else "none"}">{n} {_e(status)}</span>' for status, n in counts)


def _filters(statuses: Sequence[str]) -> str:
    """Links that show only the calls of one status, in CSS alone (``:target``; no script): each link is its own
    target, so following it keeps the bar in view; "all" shows every call again. Nothing for a single status."""
    counts = Counter(statuses)
    if len(counts) < 2:
        return ""
    ids = {status: "only-" + "".join(c if c.isalnum() else "-" for c in status) for status in counts}
    css = "".join(
        f"body:has(#{ids[status]}:target) section.call:not([data-status='{_e(status)}']){{display:none}}"
        f"#{ids[status]}:target{{font-weight:bold;text-decoration:none}}"
        for status in counts
    )
    links = " · ".join(
        f'<a id="{ids[status]}" href="#{ids[status]}" class="{_status_class(status)}">{n} {_e(status)}</a>' for status, n in counts.most_common()
    )
    return f'<style>{css}</style><p class="filters">show only: {links} · <a id="only-all" href="#only-all">all {sum(counts.values())}</a></p>'


def _summary(
    entries: Sequence[Entry | CheckEntry], groups: list[_Group], good: list[int], words: tuple[str, str, str], exit_status: int | None
) -> str:
    """Counts and the exit status; for more than one call, one row per group linking to its calls, and the good
    (equal, passed) calls folded into a count."""
    column, _, good_word = words
    judged = [(i, e.name, doc) for i, e in enumerate(entries) if isinstance(e, Entry) and (doc := e.judged()) is not None]
    sound, unsound = "", [(i, name, doc) for i, name, doc in judged if not doc.get("both_sound", True)]
    if judged:
        from mla_golden.soundness import verdict_of

        verdict = verdict_of([(name, doc) for _, name, doc in judged])
        sound = f' (<span class="{"bad" if unsound else "equal"}">{_e(verdict)}</span>)'
    said = f"exit {exit_status} ({_EXIT.get(exit_status, 'interrupted')})" if exit_status is not None else ""
    out = [
        f'<div class="summary"><p><b>{len(entries)} call(s)</b>: {_said(_counts(entries, len(good), words))}{sound}'
        + (f'; <span class="exit {"equal" if exit_status == 0 else _status_class(words[1])}">{said}</span>' if said else "")
        + "</p>"
    ]
    if len(unsound) > 1:  # the counts name the first: each one, linked
        items = "".join(f'<li><a href="#e{i}">{_e(name)}</a>: {_e(doc.get("headline"))}</li>' for i, name, doc in unsound)
        out.append(f'<details class="unsound"><summary>{len(unsound)} unsound call(s)</summary><ul>{items}</ul></details>')
    if len(entries) == 1:
        return "".join(out) + "</div>"
    rows = []
    for group in groups:
        anchors = [f'<a href="#e{i}">{_e(entries[i].name)}</a>' for i in group.members]
        links = ", ".join(anchors[:GROUP_LINKS])
        if len(anchors) > GROUP_LINKS:
            links += (
                f"<details><summary>and {len(anchors) - GROUP_LINKS} more</summary>{', '.join(anchors[GROUP_LINKS:])}</details>"
            )
        statuses = {entries[i].status for i in group.members}
        cls = _status_class(statuses.pop()) if len(statuses) == 1 else "diverged"
        rows.append([f'<td class="l {cls}">{_e(group.label)}</td>', _td(len(group.members)), f'<td class="l links">{links}</td>'])
    if rows:
        out.append(_table([column, "calls", "which"], rows, "groups"))
    if good:
        names = "".join(f"<li>{_e(entries[i].name)}</li>" for i in good)
        out.append(f'<details class="equal-calls"><summary>{len(good)} {good_word} call(s)</summary><ul>{names}</ul></details>')
    out.append("</div>")
    return "".join(out)


# ---------------------------------------------------------------- pages


def _call_facts(calls: Iterable[Call], planners: Iterable[str] = ()) -> list[str]:
    """``devices ..., heads ..., dtypes ..., planners ...`` over ``calls``: what a page compared or shows."""
    facts: dict[str, set[str]] = {"devices": set(), "heads": set(), "dtypes": set(), "planners": set(planners)}
    for call in calls:
        facts["devices"].add(f"{call.device.get('arch')}:{call.device.get('cu_num')}")
        heads = call.params.get("num_heads_per_head_k", call.params.get("num_heads_k"))
        facts["heads"].add(str(heads))
        dtypes = {str(call.params[k]).removeprefix("torch.") for k in ("dtype_q_nope", "dtype_kv_nope") if call.params.get(k)}
        facts["dtypes"].add("/".join(sorted(dtypes)) or "-")
    return [f"{name} {', '.join(sorted(values))}" for name, values in facts.items() if values]


def _drawn_facts(entries: Sequence[Entry]) -> str:
    """``; drawn calls: devices ..., heads ..., dtypes ..., planners OLD -> NEW`` over the calls the page draws."""
    calls = [call for entry in entries for call in (entry.expected, entry.actual) if call is not None]
    planners = [str(entry.diff.planner) for entry in entries if entry.diff is not None and entry.diff.planner is not None]
    said = _call_facts(calls, planners)
    return "; drawn calls: " + "; ".join(said) if said else ""


def _recorded_by(call: Call) -> str:
    from mla_golden.planner_id import planner_label

    return planner_label(call.provenance)


def _resize_only(entry: Entry) -> bool:
    return entry.status == "resized" or (entry.diff is not None and entry.diff.cause is Cause.RESIZED)


def render_diff_page(
    entries: Iterable[Entry], title: str = "mla-golden diff", compared: str = "", exit_status: int | None = None
) -> str:
    """The verdict (in the title too) and the run's ``exit_status``, divergences grouped by cause (for more than
    one call), then each divergent call, group by group; calls not compared for one same reason, once.

    ``compared`` names what was compared (trees, backend); notes every drawn call shares are said
    once under it. Within :data:`PAGE_BUDGET`, pictures go to the calls that matter most, diverged
    before resize-only: the enlarged pictures first, then the full schedules (one drawn call always
    keeps its own). What is left out says so, with the entry's command that draws it.
    """
    entries = list(entries)
    groups, equal = _diff_groups(entries)
    drawn = [e.diff for e in entries if e.diff is not None and e.expected is not None]
    shared = frozenset.intersection(*(frozenset(d.notes) for d in drawn)) if len(drawn) > 1 else frozenset()
    words = ("cause", "diverged", "equal")
    lead = [_summary(entries, groups, equal, words, exit_status)]
    lead.append(_filters(["resized" if _resize_only(entries[i]) else entries[i].status for g in groups for i in g.members]))
    if compared:
        lead.append(f'<p class="compared">compared: {_e(compared)}{_e(_drawn_facts(entries))}</p>')
    body = []
    if shared:
        body.append("<div class='notes'><b>Notes (every call)</b><ul>" + "".join(f"<li>{_e(n)}</li>" for n in sorted(shared)) + "</ul></div>")
    order = [i for group in groups for i in group.members]
    drawable = [i for i in order if entries[i].diff is not None and entries[i].expected is not None and entries[i].actual is not None]
    parts = {i: _drawn_parts(entries[i], f"e{i}", shared, alone=len(drawable) == 1) for i in drawable}
    plain = _plain_sections(entries, [i for i in order if i not in parts])
    size = sum(map(len, [*lead, *body, *plain.values()])) + sum(len(p.head) + len(p.tail) for p in parts.values())
    ranked = sorted(parts, key=lambda i: _resize_only(entries[i]))  # stable: diverged first, in page order
    pictures = set()
    for i in ranked:
        if size + len(parts[i].where[0]) <= PAGE_BUDGET:
            pictures.add(i)
            size += len(parts[i].where[0])
    full, missed = set(), False
    for i in ranked:  # a resize-only call keeps its full schedule only where every diverged one kept its own
        fits = size + len(parts[i].full) <= PAGE_BUDGET and not (missed and _resize_only(entries[i]))
        if fits or len(parts) == 1:
            full.add(i)
            size += len(parts[i].full)
        missed |= not fits
    why = f"the page stays within {PAGE_BUDGET / 1e6:g} MB, its pictures going to diverged calls before resize-only ones"
    for i in order:
        if i in parts:
            body.append(parts[i].assemble(entries[i].command, i in pictures, i in full, why))
        elif i in plain:
            body.append(plain[i])
    if len(entries) == 1 and equal:
        body.append('<p class="equal">EQUAL: nothing differs.</p>')
    return _page(f"{title}: {_page_verdict(entries, words)}", lead, body, "divergent work")


def _clipped(values: list[Any], limit: int = 16) -> str:
    """An input's values as ``show`` prints them: the first ``limit``, then how many in all."""
    return str(values) if len(values) <= limit else f"{values[:limit]} ... ({len(values)} values)"


def _show_facts(call: Call) -> str:
    """What the text ``show`` prints before the schedule: who recorded it, params, device, env, capture notes,
    inputs and buffers, one table."""
    prov = call.provenance
    rows = [[_td("recorded", "l"), _td("by", "l"), _td(f"{_recorded_by(call)} at {prov.get('created')}, torch {prov.get('torch')}", "l")]]
    rows += [[_td(kind, "l"), _td(key, "l"), _td(value, "l")]
             for kind, items in (("param", call.params), ("device", call.device), ("env", call.env)) for key, value in items.items()]  # fmt: skip
    rows += [[_td("note", "l"), _td("capture", "l"), _td(note, "l")] for note in prov.get("capture", {}).get("notes", [])]
    rows += [[_td("input", "l"), _td(name, "l"), _td(_clipped(t.reshape(-1).tolist()), "l")] for name, t in call.inputs.items()]
    if call.error is None:
        for name, spec in call.buffers.items():
            written = int(call.written[name].sum()) if call.written and name in call.written else 0
            rows.append([_td("buffer", "l"), _td(name, "l"), _td(f"{spec.get('dtype')} {spec.get('shape')}, {written} element(s) written", "l")])
    return f"<h3>Params, device, env, inputs and buffers</h3>{_table(['', 'name', 'value'], rows, 'call')}"


def _show_works(call: Call, cu: int | None, work: int | None) -> str:
    """The work items by CU part (those of ``cu`` / ``work`` only, when given) and the split reduce groups, as the
    text ``show`` lists them; folded, open when narrowed to a few."""
    from mla_golden.geometry import describe_schedule

    columns = schema_for(call.op).work_columns
    described = describe_schedule(call, cu=cu, work=work)
    rows = []
    for part in described["cu_parts"]:
        for i, item in enumerate(part["items"]):
            cells = [_td(format_cell(c, item["columns"][c])) for c in columns] if item["columns"] else [_td("(not written)", "l")]
            rows.append([_td(part["cu_part"] if i == 0 else ""), _td(item["work"]), *cells])
        if not part["items"] and (cu is not None or work is not None):
            rows.append([_td(part["cu_part"]), _td("-"), _td("(no work)", "l")])
    narrowed = cu is not None or work is not None
    out = (f'<details class="works"{" open" if narrowed else ""}><summary>Work items by CU part ({len(rows)})</summary>'
           f"{_table(['cu part', 'work', *columns], rows, 'works')}</details>")  # fmt: skip
    groups = described["reduce_groups"]
    if groups:
        items = "".join(
            f"<li>group {g['group']}: {_e(_group_text(ReduceGroup(g['qo_range'], g['partials'])))}</li>" for g in groups
        )
        out += f'<details class="reduce"><summary>Reduce groups of split tiles ({len(groups)})</summary><ul>{items}</ul></details>'
    return out


def render_show_page(name: str, call: Call, *, cu: int | None = None, work: int | None = None) -> str:
    """One golden: what the text ``show`` prints (params, inputs, work items), the chosen CU part or work enlarged
    and outlined, then every CU part."""
    geo = geometry(call)
    shown = "; ".join(_call_facts([call], [f"recorded by {_recorded_by(call)}"]))
    lead = [
        f'<p class="compared">shown: {_e(name)}; {_e(shown)}</p>',
        f"<p><b>{_e(call.op)}</b> on {_e(call.device.get('arch'))} with {_e(call.device.get('cu_num'))} CUs: "
        f"{geo.works} works over {geo.cu_parts} CU parts ({geo.idle_cu_parts} idle), {geo.split_works} split, "
        f"{geo.reduce_groups} reduce group(s), {geo.partial_tiles} partial tile(s)</p>",
    ]
    if call.error is not None:
        lead.append(f'<p class="bad">The planner raised: {_e(call.error)}</p>')
        return _page(f"mla-golden show {name}", lead, [_show_facts(call)], "selected work")
    per_cu = schedule(call)
    marks: Marks = {work: ["selected"]} if work is not None else {}
    if cu is not None and cu < len(per_cu):  # --cu N: every work of that CU part is the selection
        marks.update({w.index: [f"CU part {cu}"] for w in per_cu[cu]})
    chosen = parts_of(per_cu, marks) | ({cu} if cu is not None else set())
    body = []
    if chosen:
        rows, _ = focus(chosen, len(per_cu))
        idle = f" (CU part {cu} holds no work)" if cu is not None and cu < len(per_cu) and not per_cu[cu] else ""
        body.append(
            f'<div class="where"><h3>CU part(s) {_span(sorted(chosen))}, enlarged with neighbours{idle}</h3>'
            f"{_pair(draw({'golden': call}, marks, rows, enlarged=True))}</div>"
        )
    works = _show_works(call, cu, work)
    narrowed = cu is not None or work is not None  # the few chosen work items next to their picture
    body += [works] if narrowed else []
    body.append(_show_facts(call))
    body.append(
        f'<details class="full" open><summary>Full schedule: {len(per_cu)} CU parts</summary>'
        f"{_pair(draw({'golden': call}, marks))}</details>"
    )
    body += [] if narrowed else [works]
    return _page(f"mla-golden show {name}", lead, body, "selected work")


# ---------------------------------------------------------------- check


def check_marks(result: CheckResult) -> Marks:
    """Each work that breaks an invariant, and what it breaks."""
    marks: Marks = {}
    for v in result.violations:
        for work in v.works:
            marks.setdefault(work, []).append(f"{v.invariant}: {v.message}")
    return marks


def _check_verdict(result: CheckResult) -> str:
    by_invariant: dict[str, list[int]] = {}
    for i, v in enumerate(result.violations):
        by_invariant.setdefault(v.invariant, []).append(i)
    out = [
        f'<p class="headline"><span class="diverged">VIOLATED</span> {len(result.violations)} violation(s) of '
        f"{len(by_invariant)} invariant(s): <b>{_e(', '.join(by_invariant))}</b></p><ul>"
    ]
    for name, members in by_invariant.items():
        items = [f"<li>{_e(result.violations[i].where)}: {_e(result.violations[i].message)}</li>" for i in members]
        shown, rest = "".join(items[:VERDICT_ROWS]), "".join(items[VERDICT_ROWS:])
        more = f"<details><summary>{len(items) - VERDICT_ROWS} more</summary><ul>{rest}</ul></details>" if rest else ""
        out.append(f"<li><b>{_e(name)}</b> ({_e(INVARIANTS.get(name, ''))}): {len(members)}<ul>{shown}</ul>{more}</li>")
    out.append("</ul>")
    out += [f'<p class="bad">hazard {_e(h.hazard)}: {_e(h.message)}</p>' for h in result.hazards]
    out += [f"<p>not checked: {_e(note)}</p>" for note in result.skipped]
    return f'<div class="verdict">{"".join(out)}</div>'


def _check_section(entry: CheckEntry, anchor: str) -> str:
    out = [f'<section class="call" id="{anchor}" data-status="{_e(entry.status)}"><h2>{_e(entry.name)}</h2>']
    if entry.result is None:
        out.append(f'<p class="bad">{_e(entry.status)}: {_e(entry.message)}</p></section>')
        return "".join(out)
    out.append(_check_verdict(entry.result))
    alone = f"<p class='alone'>This golden alone: {_draw_command(entry.name, entry.command)}</p>" if entry.command else ""
    if entry.call is None:
        out.append(f"<p>{_e(entry.message)}</p>{alone}</section>")
        return "".join(out)
    marks = check_marks(entry.result)
    marked = parts_of(schedule(entry.call), marks)
    out.append(_where({"golden": entry.call}, marks, marked, "flagged work", "Where it breaks", anchor)[0])
    out.append(_full({"golden": entry.call}, marks))
    out.append(f"{alone}</section>")
    return "".join(out)


def render_check_page(
    entries: Iterable[CheckEntry], title: str = "mla-golden check", checked: str = "", exit_status: int | None = None
) -> str:
    """Goldens that break an invariant, grouped by invariant; each one's violations, then its flagged works drawn.

    ``checked`` names what was checked (the golden folders); the drawn goldens' devices, heads, dtypes and
    recording planners follow it.
    """
    entries = list(entries)
    found: dict[tuple[bool, str], list[int]] = {}
    passed: list[int] = []
    for i, entry in enumerate(entries):
        if entry.status == "passed":
            passed.append(i)
        elif entry.result is not None and not entry.result.ok:
            for name in dict.fromkeys(v.invariant for v in entry.result.violations):
                found.setdefault((False, name), []).append(i)
        else:
            found.setdefault((True, entry.status), []).append(i)
    groups = [_Group(label, found[(unusable, label)], unusable) for unusable, label in sorted(found)]
    drawn_calls = [entry.call for entry in entries if entry.call is not None]
    facts = _call_facts(drawn_calls, [f"recorded by {_recorded_by(c)}" for c in drawn_calls])
    head = f"checked: {checked}" if checked else ""
    if facts:
        head += ("; " if head else "") + "drawn goldens: " + "; ".join(facts)
    words = ("invariant", "violated", "passed")
    shown = list(dict.fromkeys(i for g in groups for i in g.members))
    lead = [_summary(entries, groups, passed, words, exit_status), _filters([entries[i].status for i in shown])]
    lead += [f'<p class="compared">{_e(head)}</p>'] if head else []
    body = [_check_section(entries[i], f"e{i}") for i in shown]
    if len(entries) == 1 and passed:
        body.append('<p class="equal">PASSED: every invariant holds.</p>')
    return _page(f"{title}: {_page_verdict(entries, words)}", lead, body, "work that breaks an invariant")


def render_bisect_page(result: Bisection) -> str:
    """A bisection: the answer first, then per commit its calls, its files, soundness and one call's diff drawn."""
    from mla_golden.soundness import verdict_of
    from mla_golden.triage.render import cost, headline

    lead = [f'<p class="compared">{_e(cost(result))}</p>']
    body = []
    if result.notes:
        body.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in result.notes) + "</ul>")
    rows = []
    for i, change in enumerate(result.changes):
        commit = change.state.commit if change.state else None
        where = f"{commit.short} {commit.date} {commit.subject}" if commit else "GOOD's own branch, before the merge base"
        cls = "equal" if change.all_sound else "bad"
        rows.append([f'<td class="l"><a href="#c{i}">{_e(where)}</a></td>', _td(change.kind), _td(len(change.keys)),
                     f'<td class="l {cls}">{_e(verdict_of(list(change.soundness.items())))}</td>'])  # fmt: skip
    if rows:
        lead.append(_table(["commit", "change", "calls", "soundness"], rows, "groups"))
    for i, change in enumerate(result.changes):
        commit = change.state.commit if change.state else None
        out = [f'<section class="commit" id="c{i}"><h2>{_e(f"{commit.short} {commit.subject}" if commit else "before the merge base")}</h2>']
        if change.state is not None and commit is not None:
            out.append(
                f"<p>{_e(commit.date)}; {_e(f'pull request #{commit.pr}; ' if commit.pr else '')}planner files touched: "
                f"{_e(', '.join(change.state.touched) or '(none: a merge)')}</p>"
            )
        if len(change.candidates) > 1:
            out.append(f"<p class='bad'>the first change is one of: {_e(', '.join(s.commit.short for s in change.candidates))} (skipped commits)</p>")
        out.append(f"<p>{len(change.keys)} call(s) {_e(change.kind)}: {_e(', '.join(change.keys))}</p>")
        if change.calls is not None:
            drawn = _drawn_parts(Entry(change.keys[0], change.kind, "", change.diff, *change.calls), f"c{i}-diff", frozenset())
            out.append(drawn.assemble((), pictures=True, full=False, why="the bisect page draws each commit's changed parts"))
        out.append("</section>")
        body.append("".join(out))
    return _page(f"mla-golden bisect: {headline(result)}", lead, body, "divergent work")
