"""What every page shares: the stylesheet, the page frame, small tables, the verdict counts and filters."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

from mla_golden.call import Call
from mla_golden.checks import CheckResult
from mla_golden.diff_data import Cause, Diff
from mla_golden.geometry import ReduceGroup
from mla_golden.render.sanitize import html_text
from mla_golden.render.svg import SIDE_WIDTH
from mla_golden.schema import span

T = TypeVar("T")


#: Rows of each list in a verdict (work items, moved CU parts, reduce groups, violations) before the rest fold away.
VERDICT_ROWS = 4


#: Rows a verdict's list holds at most (folded) on a page drawing one call; past that (and past the run's
#: ``--max-items`` on a page of several) it names the command that lists them all.
LIST_ROWS = 400


#: Calls linked from one group of the summary before the rest are folded away.
GROUP_LINKS = 6

#: Characters a page spends at most on drawing: every section's verdict and text first, then the enlarged pictures,
#: then the (collapsed) full schedules, each in turn to the calls that matter most; what does not fit says so.
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


def _status_class(status: str) -> str:
    """The CSS class (so the colour) of a status: each its own, the ones that kept a call from being compared amber."""
    if status in ("equal", "passed"):
        return "equal"
    return status if status in ("diverged", "resized", "violated", "not-comparable") else "bad"

def _legend(marked: str) -> str:
    return (
        '<p class="legend"><span>one row per CU part</span><span>width = kv length (one scale per picture)</span>'
        "<span>colour = batch</span><span>dark left edge = split work</span>"
        f'<span style="color:#e00000">red outline = {marked}</span><span>hover a work for its fields</span></p>'
    )


@dataclass
class _Group:
    """A row of a page's summary: a cause (or invariant) and the calls under it."""

    label: str
    members: list[int]
    #: Calls that were not compared (or checked) rather than found different.
    unusable: bool = False


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


def _group_text(group: ReduceGroup | None) -> str:
    if group is None:
        return "(none)"
    qo = "(not written)" if group.qo_range is None else span(group.qo_range)
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


def _spend(parts: dict[int, _Drawn], ranked: list[int], size: int, budget: int, later: Callable[[int], bool]) -> tuple[set[int], set[int]]:
    """Which of ``parts`` keep their pictures and which their full schedule, spending ``budget`` characters (``size``
    spent on the rest of the page) in ``ranked`` order: every section's words, then the enlarged pictures, then the
    full schedules. A ``later`` part keeps its full schedule only where every part before it kept its own; a page
    of one drawn part always keeps it."""
    size += sum(len(p.head) + len(p.tail) for p in parts.values())
    pictures = set()
    for i in ranked:
        if size + len(parts[i].where[0]) <= budget:
            pictures.add(i)
            size += len(parts[i].where[0])
    full, missed = set(), False
    for i in ranked:
        fits = size + len(parts[i].full) <= budget and not (missed and later(i))
        if fits or len(parts) == 1:
            full.add(i)
            size += len(parts[i].full)
        missed |= not fits
    return pictures, full


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
    entries: Sequence[Entry | CheckEntry], groups: list[_Group], good: list[int], words: tuple[str, str, str], exit_status: int | None,
    exit_word: str,
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
    said = f"exit {exit_status} ({exit_word})" if exit_status is not None else ""
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
