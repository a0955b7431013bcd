"""A bisection and a planner changelog as text for people (their JSON is ``to_dict``; the bisect page is in ``html``)."""

from __future__ import annotations

from collections import Counter

from mla_golden.triage.bisect import Bisection, Change
from mla_golden.triage.changelog import Changelog
from mla_golden.triage.line import State

#: Keys a group lists before "and N more".
KEYS_SHOWN = 8


def _named(rev: str, short: str) -> str:
    """``v0.1.20 (fc2e5d57fb)``, or the hash alone when that is what was given."""
    return short if short.startswith(rev) or rev.startswith(short) else f"{rev} ({short})"


def _commit_line(state: State) -> str:
    c = state.commit
    return f"{c.short} {c.date} {c.subject}"


def headline(result: Bisection) -> str:
    """The answer in one line: how many calls change, at how many commits, and whether the new plans are sound."""
    changed = sum(len(c.keys) for c in result.changes)
    total = changed + len(result.unchanged) + len(result.not_comparable)
    span = f"between {_named(result.good_rev, result.good.short)} and {_named(result.bad_rev, result.bad.short)}"
    if not result.changes:
        return f"no call changes {span}: {len(result.unchanged)} of {total} plan alike"
    commits = len({c.state.commit.sha if c.state else None for c in result.changes})
    unsound = [c for c in result.changes if not c.all_sound]
    sound = "all sound on both sides" if not unsound else f"{sum(1 for c in unsound for _ in c.keys)} call(s) at {len(unsound)} commit(s) unsound"
    return f"{changed} of {total} call(s) change {span}, at {commits} commit(s); {sound}"


def render_bisection(result: Bisection, *, quiet: bool = False) -> str:
    """The text report: the answer, then one block per commit (its calls, its files, one call's diff)."""
    from mla_golden.render.report import render_text

    lines = [f"mla-golden bisect: {headline(result)}"]
    lines += [f"  note: {note}" for note in result.notes]
    lines.append(f"  {cost(result)}")
    for change in result.changes:
        lines.append("")
        lines += _change_lines(change)
        if not quiet:
            lines.append(f"   the first call's diff, before -> at {change.after}:")
            lines += ["    " + line for line in render_text(change.diff, more="--max-items").rstrip().splitlines()]
    if result.unchanged:
        lines += ["", f"unchanged: {len(result.unchanged)} call(s) plan alike on GOOD and BAD"]
    for key, why in result.not_comparable:
        lines.append(f"not comparable: {key}: {why}")
    for path, problem in result.unreadable:
        lines.append(f"bad golden: {path}: {problem}")
    for skipped in result.skipped:
        lines.append(f"skipped (like git bisect skip): {_commit_line(skipped.state)}: {skipped.problem}")
    verdict = {0: "no call changes", 1: "changing commit(s) found", 2: "bad input"}[result.exit_code]
    lines += ["", f"exit {result.exit_code} ({verdict})"]
    return "\n".join(lines) + "\n"


def cost(result: Bisection) -> str:
    """What the search cost: the line's planner changes, and how each planner tried was had."""
    outcomes = Counter(r.outcome for r in result.planners)
    said = ", ".join(f"{n} {what}" for what, n in sorted(outcomes.items()))
    return f"{len(result.line) - 1} planner change(s) by meaning on the line searched; planners tried: {said or 'none'}"


def _change_lines(change: Change) -> list[str]:
    count = f"{len(change.keys)} call(s) {change.kind}"
    if change.state is None:
        head = f"== changed on GOOD's own branch, before the merge base: {count}"
    else:
        head = f"== {_commit_line(change.state)}: {count}"
    lines = [head]
    if change.state is not None:
        pr = f"pull request #{change.state.commit.pr}; " if change.state.commit.pr else ""
        lines.append(f"   {pr}planner files touched: {', '.join(change.state.touched) or '(none: a merge)'}")
    if len(change.candidates) > 1:
        lines.append(
            "   the first change is one of these (the others did not build or cannot plan these calls): "
            + ", ".join(s.commit.short for s in change.candidates)
        )
    from mla_golden.soundness import verdict_of

    lines.append(f"   planner before: {change.before}; after: {change.after}; soundness: {verdict_of(list(change.soundness.items()))}")
    shown = change.keys[:KEYS_SHOWN]
    more = f" and {len(change.keys) - len(shown)} more" if len(change.keys) > len(shown) else ""
    lines.append(f"   calls: {', '.join(shown)}{more}")
    return lines


def render_changelog(log: Changelog) -> str:
    """One line per commit that changed the planner by meaning, with the goldens it changes when asked."""
    lines = [f"mla-golden history {log.range}: {len(log.entries)} commit(s) change the planner by meaning "
             f"({log.commits} commit(s) on the line, {log.touching} touch its sources)"]  # fmt: skip
    lines += [f"  note: {note}" for note in log.notes]
    for entry in log.entries:
        state = entry.state
        port = f"  = reference@{state.ported.name}" if state.ported else ""
        lines.append(f"{_commit_line(state)}{port}")
        lines.append(f"    touched: {', '.join(state.touched) or '(none: a merge)'}")
        if entry.changed is not None:
            keys = entry.changed[:KEYS_SHOWN]
            more = f" and {len(entry.changed) - len(keys)} more" if len(entry.changed) > len(keys) else ""
            lines.append(f"    changes {len(entry.changed)} of {log.goldens} golden(s)" + (f": {', '.join(keys)}{more}" if keys else ""))
        if entry.problem:
            lines.append(f"    not planned: {entry.problem}")
    return "\n".join(lines) + "\n"
