"""``mla_golden.sweep(a, b, space, ...)``: where in a space do two planners disagree?

The driver generates points (enumerated or seeded samples), ships them in
chunks sized to a couple of seconds of work, and takes the verdicts back as
they finish. The workers judge, shrink, and write each divergent case's
minimal call as a pair of goldens, ``OUT/a/<key>`` and ``OUT/b/<key>``, so
``mla-golden diff OUT/b --against OUT/a`` shows it; the driver only merges:
it journals the verdicts and keeps each group's smallest case, and at the end
reads that one call per group back from its goldens (or captures it, without
``out``), confirmed by the differ and checked on both sides. A rerun with the
same ``out`` resumes from the journal.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mla_golden.call import Call
from mla_golden.differ import diff
from mla_golden.errors import PLANNER_EXITS, GoldenError, PlannerExited, SweepError
from mla_golden.golden.store import load
from mla_golden.runs.results import EXIT_BAD, EXIT_DIVERGED, EXIT_INCONCLUSIVE, EXIT_OK
from mla_golden.sweeper import executors
from mla_golden.sweeper.evaluate import BOTH, DIVERGED, EQUAL, EQUAL_WHERE_DEFINED, FAILED, SKIPPED, UNDEFINED, capture
from mla_golden.sweeper.groups import CLASSES, SIDES, Group, Reproducer, explain, judge_sides, signature, size
from mla_golden.sweeper.journal import Journal
from mla_golden.sweeper.planners import PlannerSpec, parse_planner_spec
from mla_golden.sweeper.regions import Summary, judged, labelled, summarise
from mla_golden.sweeper.space import Point, Space, load_space
from mla_golden.sweeper.work import CaseResult, planner, write_pair
from mla_golden.workers import marking_interrupts, user_interrupted

#: Budget when neither a case count nor a time is given.
DEFAULT_CASES = 500
#: Seconds of work a chunk should hold, the least it holds near the end, and the most points it may hold.
CHUNK_SECONDS = 2.0
MIN_CHUNK_SECONDS = 0.05
MAX_CHUNK = 256
#: Chunks kept in flight per worker (one running, one queued).
IN_FLIGHT = 2
#: A sweep that could not compare more than this share of its cases (skipped, or undefined on a side)
#: is inconclusive, not a pass: ``mla-golden sweep`` exits EXIT_INCONCLUSIVE.
INCONCLUSIVE_SHARE = 0.10
#: Reasons a report lists for the cases not compared, most frequent first.
TOP_REASONS = 3


@dataclass(frozen=True)
class NotCompared:
    """The cases a sweep could not compare: skipped (a side cannot make the call) or undefined on a side."""

    cases: int
    skipped: int
    #: Undefined on A only, on B only, on both sides.
    undefined: dict[str, int]
    #: Cases undefined on both sides and compared where defined (equal there, undefined at the same elements).
    where_defined: int
    #: (verdict, reason, cases), the ten most frequent, most frequent first; a reason's numbers read N, so that
    #: cases undefined for one cause at other sizes count as one reason.
    reasons: list[tuple[str, str, int]]

    @property
    def total(self) -> int:
        return self.skipped + sum(self.undefined.values())

    @property
    def inconclusive(self) -> bool:
        """More than :data:`INCONCLUSIVE_SHARE` of the cases went uncompared, or none ran (a time budget spent before
        the first): no verdict can say "equal"."""
        return self.total > INCONCLUSIVE_SHARE * self.cases or self.cases == 0

    def phrase(self) -> str:
        """``140 of 200 skipped``, or ``60 of 200 not compared (40 skipped, 20 undefined on both sides)``, or ``no case
        ran``."""
        if self.cases == 0:
            return "no case ran"
        parts = [f"{self.skipped} skipped"] if self.skipped else []
        for side, where in ((BOTH, "both sides"), ("A", "A only"), ("B", "B only")):
            if self.undefined.get(side):
                parts.append(f"{self.undefined[side]} undefined on {where}")
        if len(parts) == 1:
            return f"{self.total} of {self.cases} {parts[0].split(' ', 1)[1]}"
        return f"{self.total} of {self.cases} not compared ({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total, "share": round(self.total / self.cases, 4) if self.cases else 0.0,
            "skipped": self.skipped, "undefined": self.undefined, "inconclusive": self.inconclusive,
            "compared_where_defined": self.where_defined,
            "reasons": [{"verdict": v, "reason": r, "cases": n} for v, r, n in self.reasons],
        }  # fmt: skip


#: A number in a reason (``qk_batch_ratio=4``, ``of 162 works``), not one inside a name (``@33d168a0``, ``gfx942``).
_NUMBER = re.compile(r"(?<![\w.@-])-?\d+(?!\w)")


def _reason(detail: str, most: int = 140) -> str:
    """A verdict's detail as a reason: its numbers as N, cut where details of one cause part (what is undefined where)."""
    reason = _NUMBER.sub("N", detail)
    return reason if len(reason) <= most else reason[: most - 4] + " ..."


def not_compared(results: Sequence[CaseResult]) -> NotCompared:
    """What :class:`NotCompared` says of these verdicts (an undefined verdict of an older journal names no side: both)."""
    skipped = sum(r.status == SKIPPED for r in results)
    undefined = Counter(r.kind or BOTH for r in results if r.status == UNDEFINED)
    reasons = Counter((r.status, _reason(r.detail)) for r in results if r.status in (SKIPPED, UNDEFINED))
    top = [(status, reason, n) for (status, reason), n in reasons.most_common(10)]
    where_defined = sum(r.status == EQUAL and r.detail == EQUAL_WHERE_DEFINED for r in results)
    return NotCompared(len(results), skipped, dict(sorted(undefined.items())), where_defined, top)


@dataclass
class Findings:
    """What a sweep found: every verdict, the groups of divergences by cause (one reproducer each), and the regions."""

    a: str
    b: str
    labels: tuple[str, str]
    space: str
    seed: int
    results: list[CaseResult]
    groups: list[Group]
    summary: Summary
    elapsed_s: float
    out: Path | None = None
    #: Why the sweep stopped: "space" (all enumerated), "cases" or "time".
    stopped_by: str = "cases"
    resumed: int = 0
    #: Seconds spent starting the executor (worker processes import torch; Ray starts its instance).
    startup_s: float = 0.0

    @property
    def reproducers(self) -> list[Reproducer]:
        """One per group, in the groups' order."""
        return [g.reproducer for g in self.groups]

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(r.status for r in self.results))

    @property
    def diverged(self) -> bool:
        return any(r.status == DIVERGED for r in self.results)

    @property
    def not_compared(self) -> NotCompared:
        return not_compared(self.results)

    @property
    def verdict(self) -> str:
        """"diverged", "inconclusive" (none found, but too many cases not compared to call it a pass) or "equal"."""
        if self.diverged:
            return "diverged"
        return "inconclusive" if self.not_compared.inconclusive else "equal"

    @property
    def failed(self) -> bool:
        """Some case could not be judged (planner code raised SystemExit, say): the sweep exits 2."""
        return any(r.status == FAILED for r in self.results)

    @property
    def exit_code(self) -> int:
        """2 where a case failed, else 1 diverged, :data:`EXIT_INCONCLUSIVE` inconclusive, 0 equal."""
        if self.failed:
            return EXIT_BAD
        return {"diverged": EXIT_DIVERGED, "inconclusive": EXIT_INCONCLUSIVE}.get(self.verdict, EXIT_OK)

    @property
    def planner_s(self) -> float:
        return sum(r.planner_s for r in self.results)

    @property
    def kernel_paths(self) -> dict[str, dict[str, int]]:
        """Side ("A", "B") -> decode kernel path ("serial/native"...) -> cases that ran it, where the side says."""
        counts: dict[str, Counter[str]] = {"A": Counter(), "B": Counter()}
        for result in self.results:
            for side, path in zip(("A", "B"), result.paths or ()):
                if path is not None:
                    counts[side][path] += 1
        return {side: dict(sorted(c.items())) for side, c in counts.items()}

    @property
    def soundness(self) -> str:
        """The groups' reproducers judged, in a few words: ``all sound on both sides``, or how many groups have a
        side that breaks an invariant, the first of them named (empty when no group was captured)."""
        judged = [g for g in self.groups if g.soundness is not None]
        broken = [g for g in judged if g.soundness is not None and not g.soundness.both_sound]
        if not broken:
            return ("all sound on both sides" if len(judged) > 1 else "sound on both sides") if judged else ""
        first = broken[0]
        assert first.soundness is not None
        more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
        where = f"[{first.cls}] {', '.join(first.fields) or first.kind}"
        return f"{len(broken)} of {len(judged)} group(s) unsound: {where}: {first.soundness.headline(SIDES)}{more}"

    @property
    def shrink_exhausted(self) -> dict[str, int]:
        """Divergent cases whose shrink stopped short of a minimum, by what ran out (evals, time)."""
        return dict(Counter(r.shrink_exhausted for r in self.results if r.shrink_exhausted))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, schema ``mla-golden-sweep/1`` (docs/cli.md)."""
        return {
            "format": "mla-golden-sweep/1", "a": self.a, "b": self.b, "runs": list(self.labels),
            "space": self.space, "seed": self.seed, "out": str(self.out) if self.out else None,
            "cases": len(self.results), "counts": self.counts, "diverged": self.diverged, "verdict": self.verdict,
            "exit_code": self.exit_code,
            "soundness": self.soundness,
            "not_compared": self.not_compared.to_dict(),
            "stopped_by": self.stopped_by, "resumed": self.resumed, "elapsed_s": round(self.elapsed_s, 3), "startup_s": round(self.startup_s, 3),
            "planner_s": round(self.planner_s, 3), "kernel_paths": self.kernel_paths, "shrink_exhausted": self.shrink_exhausted, **self.summary.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
            "reproducers": [r.to_dict() for r in self.reproducers],
            "divergent_cases": [{"index": r.index, "detail": r.detail, "kind": r.kind, "point": r.point,
                                 "minimal": r.minimal, "shrink_exhausted": r.shrink_exhausted, "seeded": r.seeded,
                                 "not_minimal_along": r.loose or []}
                                for r in self.results if r.status == DIVERGED],
            "failed_cases": [{"index": r.index, "detail": r.detail, "point": r.point} for r in self.results if r.status == FAILED],
        }  # fmt: skip


#: progress(done, total or None, diverged so far)
Progress = Callable[[int, int | None, int], None]


def _chunks(points: Iterator[tuple[int, Point]], size: Callable[[], int]) -> Iterator[executors.Chunk]:
    while True:
        chunk = [(i, p.to_dict()) for i, p in itertools.islice(points, size())]
        if not chunk:
            return
        yield chunk


def _reproducer(result: CaseResult, a: PlannerSpec, b: PlannerSpec, out: Path | None) -> Reproducer:
    """A group's reproducer: its minimal call on both planners, confirmed and judged by the differ.

    The diff is the whole one: its cause classes the group, its judgement of
    both sides is the group's soundness, and its samples are what the HTML
    page shows; on a minimal call it costs little beyond that judgement.
    """
    point = Point.from_dict(result.minimal or result.point)
    written = list(result.written or (write_pair(point, a, b, out) if out is not None else ()))
    call_a, call_b = _calls(point, a, b, written)
    found = diff(call_a, call_b, expected_name=f"A {a}", actual_name=f"B {b}")
    confirmed = found.error is not None or any(not f.equal for f in found.fields)
    detail = result.minimal_detail or result.detail
    return Reproducer(
        key=point.key, point=point.to_dict(), kind=result.kind, detail=detail, confirmed=confirmed,
        exhausted=result.shrink_exhausted, loose=list(result.loose or ()), seeded=result.seeded, diff=found,
        calls=(call_a, call_b), written=written,
    )  # fmt: skip


def _calls(point: Point, a: PlannerSpec, b: PlannerSpec, written: list[str]) -> tuple[Call, Call]:
    """The reproducer's call on each planner: read back from its goldens (OUT/a/<key>, OUT/b/<key>: the worker's,
    :func:`mla_golden.sweeper.work.write_pair`, or written here for a case of an older journal), which hold
    what capturing it again would; captured here when there are none (no ``out``) or they are not on this
    machine (a Ray worker's disk)."""
    if len(written) == 2 and all(os.path.isfile(path) for path in written):
        with contextlib.suppress(GoldenError):  # a file changed since: captured again, as without one
            first, second = (load(path).call for path in written)
            return first, second
    return capture(point, planner(a)), capture(point, planner(b))


def _captured(result: CaseResult, a: PlannerSpec, b: PlannerSpec, out: Path | None) -> Reproducer:
    """:func:`_reproducer`; planner code raising SystemExit or KeyboardInterrupt there is a SweepError, not the end."""
    try:
        return _reproducer(result, a, b, out)
    except PLANNER_EXITS as exc:
        if user_interrupted(exc):
            raise
        raise SweepError(f"capturing the reproducer {Point.from_dict(result.minimal or result.point).key}: {PlannerExited.of(exc)}") from None


def sweep(
    a: str,
    b: str,
    space: Space | Sequence[Point] | Path | str | None = None,
    *,
    cases: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    out: Path | str | None = None,
    jobs: int = 1,
    ray: str | None = None,
    shrink: bool = True,
    progress: Progress | None = None,
    aiter_repo: Path | str | None = None,
) -> Findings:
    """Sweep ``space`` (a file, a :class:`Space`, a list of points; default: the shipped space) on ``a`` and ``b``.

    ``a`` / ``b``: planner specs (``reference@aded0f84``, ``reference+AITER_MLA_META_USE_PARALLEL=0``,
    ``aiter``...; see :mod:`mla_golden.sweeper.planners`). Budget: ``cases`` points or ``seconds`` of
    sweeping (default :data:`DEFAULT_CASES` points); a small space is enumerated whole. ``out``
    receives the reproducer goldens and the journal a rerun resumes from. ``jobs`` local worker
    processes, or ``ray`` (an address, or "local") for a Ray cluster. ``aiter_repo``: the aiter clone
    ``aiter-src@REV`` and ``reference@COMMIT`` read (default MLA_GOLDEN_AITER_REPO); workers get the
    planners it resolved without it. Local workers are spawned and
    import the calling script again: with ``jobs`` > 1 a script calls this under
    ``if __name__ == "__main__":``.
    """
    started = time.monotonic()
    specs = parse_planner_spec(a), parse_planner_spec(b)  # SpecError names the bad one before anything starts
    if isinstance(space, (list, tuple)):
        space = Space.of(space)
    elif not isinstance(space, Space):
        space = load_space(space)  # type: ignore[arg-type]  # what is left: a path or None
    if cases is not None and cases < 1:
        raise SweepError(f"cases: expected a positive number, got {cases}")
    if seconds is not None and seconds <= 0:
        raise SweepError(f"seconds: expected a positive number, got {seconds}")
    if cases is None and seconds is None:
        cases = max(DEFAULT_CASES, len(space.explicit))
    out_path = Path(out) if out is not None else None
    repo = None if aiter_repo is None else str(aiter_repo)
    planners = planner(specs[0], repo), planner(specs[1], repo)
    # what the workers resolve: the same planners, with no clone to read
    wa, wb = (p.portable for p in planners)
    journal = Journal(out_path, {"a": a, "b": b, "space": space.digest, "seed": seed}) if out_path else None
    run = _Run(space, cases, seconds, seed, journal, progress)
    opened = time.monotonic()
    with marking_interrupts(), executors.make(wa, wb, shrink, jobs, ray) as executor:
        startup = time.monotonic() - opened
        run.started = time.monotonic()  # a time budget is the sweep's own: it starts once the workers are up
        if seconds is not None:  # shrinking stops with the budget too (workers compare against wall-clock time)
            executor.deadline = time.time() + seconds
        executor.out = str(out_path) if out_path is not None else None  # workers write the reproducers
        executor.sweep = uuid.uuid4().hex
        run.drive(executor)
    run.results.sort(key=lambda r: r.index)
    return Findings(
        a=a, b=b, labels=(planners[0].label, planners[1].label), space=space.source, seed=seed, results=run.results,
        groups=run.groups(wa, wb, out_path), summary=summarise(run.results, run.parsed),
        elapsed_s=time.monotonic() - started, out=out_path, stopped_by=run.stopped_by, resumed=run.resumed,
        startup_s=startup,
    )  # fmt: skip


@dataclass
class _Tally:
    """The divergent cases of one signature so far, and the distinct minimal calls they shrank to."""

    cases: int = 0
    minimal_calls: set[str] = field(default_factory=set)


class _Run:
    """One sweep in progress: the points left to send, what has been judged (journalled and reported as it comes),
    and how big the next chunk is."""

    def __init__(
        self, space: Space, cases: int | None, seconds: float | None, seed: int, journal: Journal | None,
        progress: Progress | None,
    ) -> None:  # fmt: skip
        self.seconds = seconds
        #: When the time budget started (set again once the executor's workers are up).
        self.started = time.monotonic()
        self.journal, self.progress = journal, progress
        done = journal.resume() if journal else []
        self.results = list(done)
        self.resumed = len(done)
        #: per divergence signature: the smallest divergent case yet, and its tally
        self.smallest: dict[tuple[str, ...], CaseResult] = {}
        self.tallies: dict[tuple[str, ...], _Tally] = {}
        #: filled while the workers run: the summary's inputs
        self.parsed: dict[int, tuple[Point, dict[str, str]]] = {}
        self.merge(done)
        finished = {r.index for r in done}
        enumerated = space.size() <= (cases if cases is not None else 10_000)
        self.total = min(space.size(), cases) if enumerated and cases else cases
        self.stopped_by = "space" if enumerated else ("cases" if cases is not None else "time")
        points: Iterator[tuple[int, Point]] = ((i, p) for i, p in enumerate(space.points(seed, cases)) if i not in finished)
        self.points = itertools.islice(points, max(0, cases - len(finished))) if cases is not None else points
        self.per_case = 0.05  # seconds; updated from finished chunks
        self.left = self.total - len(finished) if self.total is not None else None  # points not yet sent
        self.workers = 1

    def merge(self, batch: list[CaseResult]) -> None:
        for result in judged(batch):
            self.parsed[result.index] = labelled(result)
            if result.status == DIVERGED:
                self.collect(result)

    def collect(self, result: CaseResult) -> None:
        """Count ``result`` in its signature's tally and keep it when it is the signature's smallest yet (merging only)."""
        key = signature(result)
        best = self.smallest.get(key)
        if best is None or _rank(result) < _rank(best):
            self.smallest[key] = result
        tally = self.tallies.setdefault(key, _Tally())
        tally.cases += 1
        tally.minimal_calls.add(Point.from_dict(result.minimal or result.point).key)

    def drive(self, executor: executors.Executor) -> None:
        """Keep IN_FLIGHT chunks per worker going; :meth:`take` each as it finishes."""
        self.workers = executor.workers
        self.report()
        chunks = _chunks(self.points, self.chunk_size)
        in_flight = 0
        while True:
            while in_flight < IN_FLIGHT * executor.workers:
                chunk = next(chunks, None)
                if chunk is None:
                    break
                executor.submit(chunk)
                in_flight += 1
            if in_flight == 0:
                return
            self.take(executor.next_done())
            in_flight -= 1

    def take(self, batch: list[CaseResult]) -> None:
        """A finished chunk: merged, kept, journalled, reported, and its cost per case remembered for the next chunk's size."""
        self.merge(batch)
        self.results.extend(batch)
        self.per_case = max(sum(r.seconds for r in batch) / len(batch), 1e-4)
        if self.journal:
            self.journal.append(batch)
        self.report()

    def report(self) -> None:
        """Tell ``progress`` (if given) the cases done, the total (None: a time budget) and the divergent ones."""
        if self.progress:
            self.progress(len(self.results), self.total, sum(r.status == DIVERGED for r in self.results))

    def chunk_size(self) -> int:
        """About CHUNK_SECONDS of work, but small enough near the end that no worker idles long."""
        if self.seconds is not None and time.monotonic() - self.started >= self.seconds:
            return 0
        size = max(1, min(MAX_CHUNK, int(CHUNK_SECONDS / max(self.per_case, 1e-4))))
        if self.left is not None:
            # but no smaller than MIN_CHUNK_SECONDS of work: below that the round trip costs more than the wait
            floor = int(MIN_CHUNK_SECONDS / max(self.per_case, 1e-4))
            size = max(1, min(size, max(floor, -(-self.left // (2 * IN_FLIGHT * self.workers)))))
            self.left -= size
        return size

    def groups(self, a: PlannerSpec, b: PlannerSpec, out: Path | None) -> list[Group]:
        """One group per divergence signature, its reproducer captured and judged, explained by a rule, in report order."""
        found = []
        for key, best in self.smallest.items():
            tally = self.tallies[key]
            with marking_interrupts():
                group = Group(signature=key, reproducer=_captured(best, a, b, out), cases=tally.cases, minimal_calls=tally.minimal_calls)
            group.soundness = judge_sides(group.reproducer)
            group.reproducer.cases = group.cases
            found.append(group)
        explain(found, self.results, self.parsed)
        found.sort(key=lambda g: (CLASSES.index(g.cls), -g.cases, g.signature))
        return found


def _rank(result: CaseResult) -> tuple[int, int, bool, bool, str]:
    """Smaller first: fewer requests, fewer KV tokens, a call shrunk (not tried at another case's lengths), a shrink
    that reached its minimum; then by key, so the reproducer does not depend on the order workers finish in."""
    point = result.minimal or result.point
    return (*size(point), result.seeded, result.shrink_exhausted is not None, Point.from_dict(point).key)
