"""The check page: each golden's invariants, the violated ones first, their schedules marked."""

from __future__ import annotations

from collections.abc import Iterable

from mla_golden.checks import INVARIANTS, CheckResult
from mla_golden.render.html.common import (
    PAGE_BUDGET,
    VERDICT_ROWS,
    CheckEntry,
    _draw_command,
    _Drawn,
    _e,
    _filters,
    _Group,
    _page,
    _page_verdict,
    _spend,
    _summary,
)
from mla_golden.render.html.diff import _call_facts, _full, _recorded_by, _where
from mla_golden.render.views import Marks, parts_of, schedule


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


def _check_head(entry: CheckEntry, anchor: str) -> str:
    """A section's opening: the golden's name and its verdict (or why it was not checked)."""
    out = f'<section class="call" id="{anchor}" data-status="{_e(entry.status)}"><h2>{_e(entry.name)}</h2>'
    if entry.result is None:
        return out + f'<p class="bad">{_e(entry.status)}: {_e(entry.message)}</p>'
    return out + _check_verdict(entry.result)


def _alone(entry: CheckEntry) -> str:
    return f"<p class='alone'>This golden alone: {_draw_command(entry.name, entry.command)}</p>" if entry.command else ""


def _check_parts(entry: CheckEntry, anchor: str) -> _Drawn:
    """A drawn golden's section in pieces: its flagged works enlarged, its full schedule, the command for it alone."""
    assert entry.call is not None and entry.result is not None
    marks = check_marks(entry.result)
    marked = parts_of(schedule(entry.call), marks)
    where = _where({"golden": entry.call}, marks, marked, "flagged work", "Where it breaks", anchor)
    tail = f"{_alone(entry)}</section>"
    return _Drawn(anchor, entry.name, _check_head(entry, anchor), where, _full({"golden": entry.call}, marks), tail, len(schedule(entry.call)))


def _undrawn_section(entry: CheckEntry, anchor: str, why: str) -> str:
    """A golden with nothing drawn: its verdict, why nothing is drawn, and the command that draws it."""
    said = f"<p>{_e(why)}</p>" if why and entry.result is not None else ""
    return f"{_check_head(entry, anchor)}{said}{_alone(entry)}</section>"


def render_check_page(
    entries: Iterable[CheckEntry], title: str = "mla-golden check", checked: str = "", exit_status: int | None = None, most: int = 50,
    exit_word: str = "",
) -> str:
    """Goldens that break an invariant, grouped by invariant; each one's violations, then its flagged works drawn.

    ``exit_status`` and ``exit_word`` (how the command words it, ``runs.exit_words``) end the summary line.
    ``checked`` names what was checked (the golden folders); the drawn goldens' devices, heads, dtypes and
    recording planners follow it. The first ``most`` goldens with a call, in page order (violated first), are
    drawn within :data:`PAGE_BUDGET`: the enlarged pictures first, then the full schedules; what is left out
    names the command that draws the golden alone.
    """
    entries = list(entries)
    groups, passed = _check_groups(entries)
    shown = list(dict.fromkeys(i for g in groups for i in g.members))
    drawable = [i for i in shown if entries[i].call is not None and entries[i].result is not None]
    parts = {i: _check_parts(entries[i], f"e{i}") for i in drawable[:most]}
    drawn_calls = [call for i in parts if (call := entries[i].call) is not None]
    facts = _call_facts(drawn_calls, [f"recorded by {_recorded_by(c)}" for c in drawn_calls])
    head = f"checked: {checked}" if checked else ""
    if facts:
        head += ("; " if head else "") + "drawn goldens: " + "; ".join(facts)
    words = ("invariant", "violated", "passed")
    lead = [_summary(entries, groups, passed, words, exit_status, exit_word), _filters([entries[i].status for i in shown])]
    lead += [f'<p class="compared">{_e(head)}</p>'] if head else []
    not_drawn = f"Not drawn: the page draws {most} goldens at most, violated ones first."
    plain = {i: _undrawn_section(entries[i], f"e{i}", not_drawn if i in drawable else entries[i].message) for i in shown if i not in parts}
    pictures, full = _spend(parts, list(parts), sum(map(len, [*lead, *plain.values()])), PAGE_BUDGET, lambda i: False)
    why = f"the page stays within {PAGE_BUDGET / 1e6:g} MB, its pictures going to the goldens listed first"
    body = [parts[i].assemble(entries[i].command, i in pictures, i in full, why) if i in parts else plain[i] for i in shown]
    if len(entries) == 1 and passed:
        body.append('<p class="equal">PASSED: every invariant holds.</p>')
    return _page(f"{title}: {_page_verdict(entries, words)}", lead, body, "work that breaks an invariant")


def _check_groups(entries: list[CheckEntry]) -> tuple[list[_Group], list[int]]:
    """Entry indices by violated invariant (in name order), then by what kept a golden from being checked; and the
    passed ones."""
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
    return [_Group(label, found[(unusable, label)], unusable) for unusable, label in sorted(found)], passed
