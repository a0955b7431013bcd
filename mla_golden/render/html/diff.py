"""The diff page: a tree's divergences grouped by cause, each call's verdict in words, where it changed drawn."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mla_golden import differ
from mla_golden.call import Call
from mla_golden.diff_data import Cause, Diff, FieldDiff, WorkItemDiff
from mla_golden.geometry import moved_parts
from mla_golden.render.html.common import (
    LIST_ROWS,
    PAGE_BUDGET,
    Entry,
    _diff_groups,
    _draw_command,
    _Drawn,
    _e,
    _filters,
    _geo,
    _group_text,
    _listed,
    _page,
    _page_verdict,
    _pair,
    _span,
    _spend,
    _status_class,
    _summary,
    _table,
    _td,
)
from mla_golden.render.report import GEOMETRY_ROWS, render_text
from mla_golden.render.svg import draw
from mla_golden.render.views import Marks, diff_marks, focus, parts_of, schedule
from mla_golden.schema import format_cell
from mla_golden.soundness import Soundness


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
    entries: Iterable[Entry], title: str = "mla-golden diff", compared: str = "", exit_status: int | None = None,
    exit_word: str = "",
) -> str:
    """The verdict (in the title too) and the run's ``exit_status`` (worded ``exit_word``), divergences grouped by cause (for more than
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
    lead = [_summary(entries, groups, equal, words, exit_status, exit_word)]
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
    size = sum(map(len, [*lead, *body, *plain.values()]))
    ranked = sorted(parts, key=lambda i: _resize_only(entries[i]))  # stable: diverged first, in page order
    pictures, full = _spend(parts, ranked, size, PAGE_BUDGET, lambda i: _resize_only(entries[i]))
    why = f"the page stays within {PAGE_BUDGET / 1e6:g} MB, its pictures going to diverged calls before resize-only ones"
    for i in order:
        if i in parts:
            body.append(parts[i].assemble(entries[i].command, i in pictures, i in full, why))
        elif i in plain:
            body.append(plain[i])
    if len(entries) == 1 and equal:
        body.append('<p class="equal">EQUAL: nothing differs.</p>')
    return _page(f"{title}: {_page_verdict(entries, words)}", lead, body, "divergent work")
