"""The bisect page: the commits that changed each group of calls, one call's diff and both sides' soundness each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mla_golden.render.html.common import Entry, _e, _page, _table, _td
from mla_golden.render.html.diff import _drawn_parts

if TYPE_CHECKING:
    from mla_golden.triage.bisect import Bisection


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
