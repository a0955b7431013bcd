"""The check page: each golden's invariants, the violated ones first, their schedules marked."""

from __future__ import annotations

from collections.abc import Iterable

from mla_golden.checks import INVARIANTS, CheckResult
from mla_golden.render.html.common import (
    VERDICT_ROWS,
    CheckEntry,
    _draw_command,
    _e,
    _filters,
    _Group,
    _page,
    _page_verdict,
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
