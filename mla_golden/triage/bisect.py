"""``mla_golden.bisect``: for each call, the first aiter commit whose planner plans it differently from GOOD's.

The search runs over the *planner line* from GOOD to BAD (:mod:`.line`):
one point per change of the planner by meaning, so commits that do not touch
the planner, or only reformat it, are never built. Every call is searched at
once: planning a call at a point is a replay (milliseconds), having the
point's planner may be a build (a minute), so each point chosen serves every
call whose range still holds it. Points a port plans (no build) are tried
first where they cut a range; then the midpoint of the widest range is built
(``jobs`` > 1: the midpoints of that many ranges, or points splitting one
range into ``jobs`` + 1 parts). A commit that does not build is skipped, as
``git bisect skip`` does; a call whose range then holds only skipped commits
names them all as candidates.

What "plans differently" means follows what changed between GOOD and BAD:
for a call whose written contents differ at BAD (diverged), the first commit
where they differ from GOOD's; for a call only resized at BAD, the first
commit where its buffer sizes differ. Every planner plans into the buffers
its own sizing helper gives, as a caller on it allocates them (the upgrade
preview's rule). Like ``git bisect``, the search assumes one change per call
between GOOD and BAD.

When GOOD is not an ancestor of BAD (a release branch), the search starts at
their merge base on BAD's first-parent line, after checking that the merge
base plans every call as GOOD does; the calls it plans otherwise changed on
GOOD's own branch, and say so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mla_golden.aiter_build.repo import AiterRepo, Commit
from mla_golden.errors import AdaptationError, AiterSourceError
from mla_golden.triage.line import State, planner_line, state_at
from mla_golden.triage.planners import OnProgress, Planners, Realized

if TYPE_CHECKING:
    from mla_golden.backends import Backend
    from mla_golden.call import Call
    from mla_golden.diff_data import Diff

EQUAL, RESIZED, DIVERGED = "equal", "resized", "diverged"


@dataclass
class _Track:
    """One call's search: the points known to plan it as GOOD (``lo``) and otherwise (``hi``)."""

    key: str
    path: str
    golden: Call
    good: Call
    #: What to look for: ``diverged`` (written contents differ) or ``resized`` (buffer sizes differ).
    kind: str
    lo: int
    hi: int
    plans: dict[int, Call] = field(default_factory=dict)
    #: Points where this call could not be planned (the planner cannot express it, or failed on it), with why.
    unknown: dict[int, str] = field(default_factory=dict)


@dataclass
class Change:
    """The calls that first plan differently at one commit (or, with skipped commits, at one of several)."""

    #: The commit that changed them; None for the calls changed on GOOD's branch before the merge base.
    state: State | None
    kind: str
    keys: list[str]
    #: The planner before the change, and after, as reports name them.
    before: str
    after: str
    #: One call's diff, before -> after (the first key's), and every call's soundness on both sides.
    diff: Diff
    soundness: dict[str, dict[str, Any]]
    #: When skipped commits leave the first change among several: all of them, oldest first (``state`` the last).
    candidates: list[State] = field(default_factory=list)
    #: The first call's plans before and after (to draw them); never in JSON.
    calls: tuple[Call, Call] | None = field(default=None, repr=False, compare=False)

    @property
    def all_sound(self) -> bool:
        return all(s.get("both_sound", True) for s in self.soundness.values())

    def to_dict(self) -> dict[str, Any]:
        from mla_golden.soundness import verdict_of

        return {
            "commit": self.state.to_dict() if self.state else None,
            "kind": self.kind,
            "keys": list(self.keys),
            "before": self.before,
            "after": self.after,
            "candidates": [s.to_dict() for s in self.candidates],
            "diff": self.diff.to_dict(),
            "soundness": {"verdict": verdict_of(list(self.soundness.items())), "all_sound": self.all_sound, "calls": self.soundness},
        }


@dataclass
class Bisection:
    """What :func:`bisect` found: per commit the calls it changed, and what it cost."""

    repo: str
    #: GOOD and BAD as given (``v0.1.16.post2``) and the commits they name.
    good_rev: str
    bad_rev: str
    good: Commit
    bad: Commit
    #: GOOD and BAD's merge base, when GOOD is not an ancestor of BAD; what it says of the calls.
    merge_base: Commit | None
    notes: list[str]
    #: The planner line searched, from the start (GOOD or the merge base) to BAD.
    line: list[State]
    changes: list[Change]
    unchanged: list[str]
    #: (key, why) of the calls GOOD or BAD cannot plan (nothing to bisect).
    not_comparable: list[tuple[str, str]]
    #: (path, problem) of the goldens that could not be read.
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    planners: list[Realized] = field(default_factory=list)

    @property
    def builds(self) -> int:
        """Trees built from scratch in this run."""
        return sum(1 for r in self.planners if r.outcome == "built")

    @property
    def skipped(self) -> list[Realized]:
        return [r for r in self.planners if r.outcome == "failed"]

    @property
    def exit_code(self) -> int:
        """0 no call changes between GOOD and BAD, 1 a changing commit found, 2 a golden could not be read."""
        from mla_golden.runs import EXIT_BAD, EXIT_DIVERGED, EXIT_OK

        if self.unreadable:
            return EXIT_BAD
        return EXIT_DIVERGED if self.changes else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "mla-golden-bisect/1",
            "repo": self.repo,
            "good": {"rev": self.good_rev, **self.good.to_dict()},
            "bad": {"rev": self.bad_rev, **self.bad.to_dict()},
            "merge_base": self.merge_base.to_dict() if self.merge_base else None,
            "notes": list(self.notes),
            "line": [s.to_dict() for s in self.line],
            "changes": [c.to_dict() for c in self.changes],
            "unchanged": list(self.unchanged),
            "not_comparable": [{"key": k, "why": w} for k, w in self.not_comparable],
            "unreadable": [{"path": p, "problem": w} for p, w in self.unreadable],
            "planners": [r.to_dict() for r in self.planners],
            "builds": self.builds,
            "skipped": [r.to_dict() for r in self.skipped],
            "exit_code": self.exit_code,
        }


def bisect(
    paths: Sequence[str | Path],
    *,
    good: str,
    bad: str,
    repo: str | Path | None = None,
    jobs: int = 1,
    max_items: int = 5,
    progress: OnProgress | None = None,
) -> Bisection:
    """For each call under ``paths`` (goldens, trees of them, a sweep's reproducers, ``.obtained`` files), the
    first commit of aiter's ``repo`` (default ``MLA_GOLDEN_AITER_REPO``) between ``good`` and ``bad`` whose
    planner plans it differently from ``good``'s; calls grouped by that commit.

    ``jobs`` builds at once; ``progress`` is called at each build's start and end; ``max_items``: divergent items
    each change's diff lists. Raises
    :class:`~mla_golden.errors.AiterSourceError` (a ``ValueError``) for an unknown revision, a repository that is
    not aiter's, or a range without planner sources, and ``ValueError`` when ``paths`` hold no golden.
    """
    from mla_golden.aiter_build.tree import repo_from_env

    goldens, unreadable = load_goldens(paths)
    reader = AiterRepo(repo_from_env(repo))
    good_commit, bad_commit = reader.commit(good), reader.commit(bad)
    if good_commit.sha != bad_commit.sha and reader.is_ancestor(bad_commit.sha, good_commit.sha):
        raise AiterSourceError(f"--bad {bad} ({bad_commit.short}) is older than --good {good} ({good_commit.short}): swap them")
    good_state = state_at(reader, good_commit.sha)
    state_at(reader, bad_commit.sha)  # BAD must hold a planner too
    planners = Planners(reader, jobs=jobs, progress=progress)
    search = _Search(planners, max_items)
    notes: list[str] = []
    merge_base: Commit | None = None
    if reader.is_ancestor(good_commit.sha, bad_commit.sha):
        start = good_state
    else:
        sha = reader.merge_base(good_commit.sha, bad_commit.sha)
        if sha is None:
            raise AiterSourceError(f"--good {good} and --bad {bad} share no history in {reader.path}")
        merge_base = reader.commit(sha)
        start = state_at(reader, sha)
        notes.append(
            f"{good} ({good_commit.short}) is not an ancestor of {bad} ({bad_commit.short}): searched from their merge base "
            f"{merge_base.short} ({merge_base.date}) along {bad}'s first-parent line"
        )
    line = [start, *planner_line(reader, start.commit.sha, bad_commit.sha)]
    result = Bisection(
        repo=str(reader.path), good_rev=good, bad_rev=bad, good=good_commit, bad=bad_commit, merge_base=merge_base, notes=notes,
        line=line, changes=[], unchanged=[], not_comparable=[], unreadable=unreadable,
    )
    (good_planner,) = planners.get([good_state], _bound(len(line)))
    if good_planner.backend is None:
        raise AiterSourceError(f"--good {good} ({good_commit.short}) cannot be planned: {good_planner.problem}")
    tracks = search.start(goldens, good_planner.backend, result)
    (bad_planner,) = planners.get([line[-1]], _bound(len(line)))
    if bad_planner.backend is None:
        raise AiterSourceError(f"--bad {bad} ({bad_commit.short}) cannot be planned: {bad_planner.problem}")
    tracks = search.at_bad(tracks, len(line) - 1, bad_planner.backend, result)
    if merge_base is not None:
        tracks = search.check_merge_base(tracks, good_state, start, result)
    search.run(tracks, line)
    result.changes += search.changes(tracks, line)
    result.planners = planners.realized
    return result


def load_goldens(paths: Sequence[str | Path]) -> tuple[list[tuple[str, str, Call]], list[tuple[str, str]]]:
    """(key, path, call) of every golden under ``paths``, and (path, problem) of those that cannot be read."""
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import load, load_placed
    from mla_golden.runs import golden_files

    files, bad = golden_files([Path(p) for p in paths])
    unreadable = [(r.path or r.key, r.message) for r in bad]
    goldens = []
    for path, under in files:
        try:
            golden = load(path) if under is None else load_placed(path, under)
        except GoldenError as error:
            unreadable.append((path, error.problem))
            continue
        goldens.append((golden.key, path, golden.call))
    if not goldens and not unreadable:
        raise ValueError(f"no goldens under {', '.join(map(str, paths))}")
    return goldens, unreadable


def _bound(points: int) -> int:
    """Builds a binary search over ``points`` points needs at most."""
    return math.ceil(math.log2(points)) if points > 1 else 0


class _Search:
    """The search over one planner line: tracks, the points tried, the plans they gave."""

    def __init__(self, planners: Planners, max_items: int) -> None:
        self.planners = planners
        self.max_items = max_items
        #: Points whose planner could not be had (the commit does not build): skipped for every call.
        self.skipped: set[int] = set()

    # ------------------------------------------------------------ the ends

    def start(self, goldens: list[tuple[str, str, Call]], good: Backend, result: Bisection) -> list[_Track]:
        """A track per call GOOD can plan; the rest are not comparable."""
        tracks = []
        for key, path, call in goldens:
            plan = plan_on(good, call)
            if isinstance(plan, str):
                result.not_comparable.append((key, f"GOOD {result.good.short} cannot plan it: {plan}"))
                continue
            tracks.append(_Track(key, path, call, plan, DIVERGED, 0, 0, {0: plan}))
        return tracks

    def check_merge_base(self, tracks: list[_Track], good: State, base: State, result: Bisection) -> list[_Track]:
        """Of the calls BAD plans otherwise, those the merge base plans as GOOD does (to search); the others
        already plan otherwise at the merge base: a change on GOOD's own branch, shown as GOOD -> merge base."""
        assert result.merge_base is not None
        if base.digest == good.digest:
            result.notes.append(f"the merge base {base.commit.short} has GOOD's planner by meaning: it plans these calls as GOOD does")
            return tracks
        (had,) = self.planners.get([base])
        if had.backend is None:
            raise AiterSourceError(f"the merge base {base.commit.short} cannot be planned: {had.problem}")
        alike, changed = [], []
        for track in tracks:
            plan = plan_on(had.backend, track.golden)
            if isinstance(plan, str):
                result.not_comparable.append((track.key, f"the merge base {base.commit.short} cannot plan it: {plan}"))
            elif kind_of(track.good, plan) == EQUAL:
                track.plans[0] = plan
                alike.append(track)
            else:
                track.plans = {0: track.good, -1: plan}
                changed.append(track)
        result.notes.append(
            f"the merge base {base.commit.short} plans {len(alike)} of the {len(alike) + len(changed)} changing call(s) as GOOD does"
            + (f"; {len(changed)} already plan otherwise there: changed on GOOD's own branch (between the merge base and GOOD)" if changed else "")
        )
        if changed:
            before, after = f"GOOD {result.good.short}", f"merge base {base.commit.short}"
            result.changes.append(_change(None, changed, before, after, 0, -1, self.max_items))
        return alike

    def at_bad(self, tracks: list[_Track], last: int, bad: Backend, result: Bisection) -> list[_Track]:
        """The tracks of the calls BAD plans otherwise than GOOD, each knowing what to look for."""
        kept = []
        for track in tracks:
            plan = plan_on(bad, track.golden)
            if isinstance(plan, str):
                result.not_comparable.append((track.key, f"BAD {result.bad.short} cannot plan it: {plan}"))
                continue
            kind = kind_of(track.good, plan)
            if kind == EQUAL:
                result.unchanged.append(track.key)
                continue
            track.kind, track.hi = kind, last
            track.plans[last] = plan
            kept.append(track)
        return kept

    # ------------------------------------------------------------ the search

    def run(self, tracks: list[_Track], line: list[State]) -> None:
        """Narrow every track's range until none holds a point left to try."""
        while True:
            open_ = [t for t in tracks if self._candidates(t)]
            if not open_:
                return
            free = self._free_point(open_, line)
            points = [free] if free is not None else self._build_points(open_)
            left = sum(_bound(len(r) + 1) for r in {tuple(self._candidates(t)) for t in open_})
            for index, had in zip(points, self.planners.get([line[i] for i in points], left)):
                self._try(index, had, tracks)

    def _candidates(self, track: _Track) -> list[int]:
        return [i for i in range(track.lo + 1, track.hi) if i not in self.skipped and i not in track.unknown]

    def _free_point(self, open_: list[_Track], line: list[State]) -> int | None:
        """A point planned without a build that cuts a range: the one nearest the middle of the widest range."""
        widest = max(open_, key=lambda t: len(self._candidates(t)))
        middle = (widest.lo + widest.hi) / 2
        free = {i for t in open_ for i in self._candidates(t) if self.planners.free(line[i])}
        return min(free, key=lambda i: (abs(i - middle), i)) if free else None

    def _build_points(self, open_: list[_Track]) -> list[int]:
        """Up to ``jobs`` points to build: the middles of the widest ranges, or one range cut in ``jobs`` + 1 parts."""
        ranges = sorted({tuple(self._candidates(t)) for t in open_}, key=lambda r: (-len(r), r))
        jobs = self.planners.jobs
        points = [r[len(r) // 2] for r in ranges[:jobs]]
        if len(points) < jobs:
            widest = ranges[0]
            parts = min(jobs + 1, len(widest) + 1)
            points += [widest[len(widest) * k // parts] for k in range(1, parts)]
        return list(dict.fromkeys(points))[:jobs]

    def _try(self, index: int, had: Realized, tracks: list[_Track]) -> None:
        """Plan every call whose range holds ``index`` at that point; a planner that failed skips the point."""
        if had.backend is None:
            self.skipped.add(index)
            return
        for track in tracks:
            if not track.lo < index < track.hi or index in track.unknown:
                continue
            plan = plan_on(had.backend, track.golden)
            if isinstance(plan, str):
                track.unknown[index] = plan
                continue
            if _changed(track, plan):
                track.hi = index
            else:
                track.lo = index
            track.plans[index] = plan
        for track in tracks:  # keep only the plans at the ends of each range
            track.plans = {i: p for i, p in track.plans.items() if i in (track.lo, track.hi)}

    # ------------------------------------------------------------ the answer

    def changes(self, tracks: list[_Track], line: list[State]) -> list[Change]:
        """One change per (first commit, kind, candidates): the calls grouped, newest commit last."""
        groups: dict[tuple[int, int, str, tuple[int, ...]], list[_Track]] = {}
        for track in tracks:
            between = tuple(i for i in range(track.lo + 1, track.hi) if i in self.skipped or i in track.unknown)
            groups.setdefault((track.hi, track.lo, track.kind, between), []).append(track)
        out = []
        for (hi, lo, _, between), members in sorted(groups.items(), key=lambda item: item[0][:3]):
            change = _change(line[hi], members, _name(line[lo]), _name(line[hi]), lo, hi, self.max_items)
            change.candidates = [line[i] for i in between] + ([line[hi]] if between else [])
            out.append(change)
        return out


def _name(state: State) -> str:
    return f"{state.commit.short}" + (f" (reference@{state.ported.name})" if state.ported else "")


def _change(state: State | None, members: list[_Track], before: str, after: str, lo: int, hi: int, max_items: int) -> Change:
    """The change the calls of ``members`` share, with one call's diff before -> after and every call's soundness."""
    from mla_golden.differ import diff

    diffs = {
        t.key: diff(t.plans[lo], t.plans[hi], expected_name=f"before: {before}", actual_name=f"at {after}", max_items=max_items)
        for t in members
    }
    soundness = {key: d.soundness.to_dict() for key, d in diffs.items() if d.soundness is not None}
    first = members[0]
    return Change(state, first.kind, [t.key for t in members], before, after, diffs[first.key], soundness, calls=(first.plans[lo], first.plans[hi]))


def plan_on(backend: Backend, call: Call) -> Call | str:
    """``call`` planned on ``backend`` into the buffers its sizing helper gives, or why it cannot be."""
    try:
        return backend.replay(call)
    except AdaptationError as error:
        return f"not comparable: {error}"
    except Exception as error:  # noqa: BLE001 - a planner of any commit can fail in any way: this call, this point
        return f"{type(error).__name__}: {error}"


def kind_of(good: Call, plan: Call) -> str:
    """How ``plan`` differs from GOOD's: equal, resized (buffer sizes only) or diverged (written contents)."""
    from mla_golden.diff_data import Cause
    from mla_golden.differ import diff

    found = diff(good, plan, max_items=1, judge=False)
    if found.same_content:
        return EQUAL
    return RESIZED if found.cause is Cause.RESIZED else DIVERGED


def _changed(track: _Track, plan: Call) -> bool:
    """Does ``plan`` show the change the track looks for (see the module's docstring)?"""
    kind = kind_of(track.good, plan)
    return kind == DIVERGED if track.kind == DIVERGED else kind != EQUAL
