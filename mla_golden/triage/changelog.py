"""``mla_golden.history``: the planner changelog of a range of aiter's history, and what each change does to goldens.

Every commit of ``A..B`` (``B``'s first-parent line after ``A``, or after
their merge base when ``A`` is not an ancestor) whose planner differs by
meaning from its parent's, with its pull request and the ported reference
version it equals, if any. Commits that do not touch the planner cost
nothing; the others a digest. With goldens, each changing commit is planned
(a port, or its tree built) and so is the planner before it, and the goldens
whose plans differ between the two are that commit's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mla_golden.aiter_build.repo import AiterRepo
from mla_golden.errors import AiterSourceError
from mla_golden.triage.line import State, planner_line, state_at
from mla_golden.triage.planners import OnProgress, Planners, Realized


@dataclass
class Entry:
    """One commit that changed the planner by meaning; with goldens, the keys of those whose plans it changed."""

    state: State
    changed: list[str] | None = None
    #: Goldens the planner before it or it cannot plan (key: why).
    unplanned: dict[str, str] = field(default_factory=dict)
    #: Why it could not be planned at all (it does not build).
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.state.to_dict(), "changed": self.changed, "unplanned": dict(self.unplanned), "problem": self.problem}


@dataclass
class Changelog:
    range: str
    repo: str
    notes: list[str]
    #: Commits on the line, and how many of them touch the planner's sources.
    commits: int
    touching: int
    entries: list[Entry]
    #: How many goldens were planned (0 without any).
    goldens: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    planners: list[Realized] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "mla-golden-history/1",
            "range": self.range,
            "repo": self.repo,
            "notes": list(self.notes),
            "commits": self.commits,
            "touching": self.touching,
            "entries": [e.to_dict() for e in self.entries],
            "goldens": self.goldens,
            "unreadable": [{"path": p, "problem": w} for p, w in self.unreadable],
            "planners": [r.to_dict() for r in self.planners],
        }


def parse_range(text: str) -> tuple[str, str]:
    """``A..B`` -> (A, B); ValueError for anything else."""
    first, sep, second = text.partition("..")
    if not sep or not first or not second or second.startswith("."):
        raise ValueError(f"range {text!r}: expected A..B (two revisions: a tag, a commit or a branch)")
    return first, second


def history(
    rev_range: str,
    *,
    repo: str | Path | None = None,
    goldens: Sequence[str | Path] = (),
    jobs: int = 1,
    progress: OnProgress | None = None,
) -> Changelog:
    """The commits of ``rev_range`` (``A..B``) that change the planner by meaning; with ``goldens``, which each changes.

    Raises ValueError for a malformed range and :class:`~mla_golden.errors.AiterSourceError` (also a ValueError)
    for an unknown revision or a repository or end without planner sources.
    """
    from mla_golden.aiter_build.tree import repo_from_env
    from mla_golden.triage.bisect import EQUAL, kind_of, load_goldens, plan_on

    start, end = parse_range(rev_range)
    reader = AiterRepo(repo_from_env(repo))
    a, b = reader.commit(start), reader.commit(end)
    notes = []
    base = a.sha
    if not reader.is_ancestor(a.sha, b.sha):
        found = reader.merge_base(a.sha, b.sha)
        if found is None:
            raise AiterSourceError(f"{start} and {end} share no history in {reader.path}")
        base = found
        notes.append(f"{start} ({a.short}) is not an ancestor of {end} ({b.short}): the line starts after their merge base {found[:10]}")
    start_state = state_at(reader, base)
    state_at(reader, b.sha)  # the end must hold a planner too
    line = planner_line(reader, base, b.sha)
    log = Changelog(rev_range, str(reader.path), notes, len(reader.first_parent_line(base, b.sha)),
                    len(reader.planner_commits(base, b.sha)), [Entry(s) for s in line])  # fmt: skip
    if not goldens:
        return log
    calls, log.unreadable = load_goldens(goldens)
    log.goldens = len(calls)
    planners = Planners(reader, jobs=jobs, progress=progress)
    states = [start_state, *line]
    had = planners.get(states, sum(1 for s in states if s.ported is None))
    previous: dict[str, Any] = {}
    for key, _path, call in calls:
        previous[key] = plan_on(had[0].backend, call) if had[0].backend is not None else "the start does not build"
    for entry, realized in zip(log.entries, had[1:]):
        if realized.backend is None:
            entry.problem = realized.problem
            continue
        entry.changed = []
        for key, _path, call in calls:
            now, before = plan_on(realized.backend, call), previous[key]
            if isinstance(before, str) or isinstance(now, str):
                entry.unplanned[key] = now if isinstance(now, str) else f"the planner before it: {before}"
            elif kind_of(before, now) != EQUAL:
                entry.changed.append(key)
            previous[key] = now
    log.planners = planners.realized
    return log
