"""The unit of work an executor ships: a chunk of points, judged (and shrunk) where it runs.

Plain data in and out (planner specs the driver parsed once, frozen dataclasses
that pickle; point dicts), so a chunk travels to a worker process or a Ray node
as easily as it runs in-process.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mla_golden.errors import PLANNER_EXITS, MlaGoldenError, PlannerExited, SweepError
from mla_golden.golden.store import Golden, GoldenStore, WriteOutcome
from mla_golden.reference import DEFAULT_DEVICE
from mla_golden.sweeper import shrink as shrinking
from mla_golden.sweeper.evaluate import DIVERGED, FAILED, KIND_ERROR, KIND_SHAPE, KIND_VALUES, Verdict, capture, evaluate
from mla_golden.sweeper.planners import Planner, PlannerSpec, resolve_planner
from mla_golden.sweeper.shrink import shrink
from mla_golden.sweeper.space import DECODE, PREFILL, Point
from mla_golden.workers import user_interrupted

#: Planners resolved in this process, by spec (as written: a spec and its notation parse to each other) and the aiter
#: clone it was read with (a spec resolves otherwise in another clone, or in none).
_planners: dict[tuple[str, str | None], Planner] = {}


@dataclass
class CaseResult:
    """The verdict on one point, with its minimal reproducer when it diverged."""

    index: int
    point: dict[str, Any]
    status: str
    kind: str | None = None
    detail: str = ""
    #: Planner time of the verdict (both sides), and the case's whole time in the worker (shrinking included).
    planner_s: float = 0.0
    seconds: float = 0.0
    #: The same two as CPU seconds of the worker (what a loaded machine does not inflate).
    planner_cpu_s: float = 0.0
    cpu_s: float = 0.0
    minimal: dict[str, Any] | None = None
    minimal_detail: str = ""
    shrink_evals: int = 0
    #: What ran out before shrinking reached a minimum ("evals", "time"); None: ``minimal`` is one.
    shrink_exhausted: str | None = None
    #: Kept parameters along which ``minimal`` is not minimal: their simplest value diverges the same way too
    #: ("qlen 1", "page_size 1", "heads 16"; ``Shrunk.loose``).
    loose: list[str] | None = None
    #: The divergence's signature (``Verdict.signature``), of its minimal call once shrunk: what groups tell causes by.
    signature: list[str | None] | None = None
    #: The decode kernel path each side ran (``Verdict.paths``; None where unknown).
    paths: list[str | None] | None = None
    #: The reproducer goldens this worker wrote (OUT/a/<key>, OUT/b/<key>), when the sweep has an ``out``.
    written: list[str] | None = None
    #: ``minimal`` is the lengths of a call this worker already shrank to for this cause, tried at once (one
    #: evaluation) instead of shrinking the case again: small, but not shown minimal for this case.
    seeded: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def planner(spec: PlannerSpec, aiter_repo: str | None = None) -> Planner:
    """The resolved planner for ``spec``, once per process (``aiter_repo``: the aiter clone a revision is read
    from); its :attr:`Planner.portable` spec gives the same planner after it."""
    from mla_golden.aiter_build.tree import REPO_ENV

    clone = aiter_repo or os.environ.get(REPO_ENV) or None
    found = _planners.get((str(spec), clone))
    if found is None:
        found = _planners[str(spec), clone] = resolve_planner(spec, aiter_repo)
        _planners.setdefault((str(found.portable), clone), Planner(found.portable, found.backend))
    return found


_warm: set[tuple[PlannerSpec, PlannerSpec]] = set()


def warm(a: PlannerSpec, b: PlannerSpec) -> None:
    """Resolve both planners and run one tiny call of each op, so the first chunk is not slower."""
    if (a, b) in _warm:
        return
    import torch

    torch.set_num_threads(1)  # planner tensors are tiny; intra-op threads only fight the other workers
    pa, pb = planner(a), planner(b)
    for op in (DECODE, PREFILL):
        try:
            evaluate(Point(op, DEFAULT_DEVICE.arch, DEFAULT_DEVICE.cu_num, 16, (64,)), pa, pb)
        except BaseException as exc:
            _unless_ours(exc)  # a planner that fails here fails the points that reach it, each as its own result
    _warm.add((a, b))


def _unless_ours(exc: BaseException) -> None:
    """Raise ``exc`` again unless it is a case's own failure: mla-golden's errors (a bad --out), the user's Ctrl-C and
    exits other than planner code's stop the sweep; anything else planner code raised fails that case only."""
    if isinstance(exc, MlaGoldenError) or user_interrupted(exc) or not isinstance(exc, (Exception, *PLANNER_EXITS)):
        raise exc


#: Reproducer pairs this process wrote: (out, a, b, key) -> their paths. Shrinking leads many cases to one
#: minimal call; it is captured and written once per worker, not once per case.
_written: dict[tuple[str, PlannerSpec, PlannerSpec, str], list[str]] = {}


def write_pair(point: Point, a: PlannerSpec, b: PlannerSpec, out: Path) -> list[str]:
    """Capture ``point`` on both planners and write it as OUT/a/<key> and OUT/b/<key>; the paths.

    Runs where the case was judged (a worker), so the driver only merges. Two
    workers writing one key write the same call: the store keeps one file.
    """
    memo = (str(out), a, b, point.key)
    done = _written.get(memo)
    if done is not None and all(os.path.exists(path) for path in done):
        return list(done)
    written = []
    for side, spec in (("a", a), ("b", b)):
        store = GoldenStore(out / side)
        if store.write(Golden(point.key, capture(point, planner(spec)))) is WriteOutcome.REFUSED:
            raise SweepError(f"{store.path_for(point.key)}: a different golden is already there; use another --out")
        written.append(str(store.path_for(point.key)))
    _written[memo] = written
    return list(written)


def run_chunk(
    a: PlannerSpec, b: PlannerSpec, items: list[tuple[int, dict[str, Any]]], shrink_divergent: bool = True, deadline: float | None = None,
    out: str | None = None, sweep: str | None = None,
) -> list[CaseResult]:
    """Judge each (index, point) on planners ``a`` and ``b``; shrink what diverges, until ``deadline`` (a ``time.time()``),
    and write its reproducer goldens under ``out``. ``sweep`` names the sweep the chunk is of: what it learns of
    causes serves that sweep's later chunks only."""
    warm(a, b)
    if (sweep, a, b) not in _causes:
        _causes.clear()
    results = []
    for index, data in items:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            result = _judge(a, b, index, data, shrink_divergent, deadline, out, _causes.setdefault((sweep, a, b), {}))
        except BaseException as exc:
            _unless_ours(exc)
            why = str(PlannerExited.of(exc)) if isinstance(exc, PLANNER_EXITS) else f"{type(exc).__name__}: {exc}"
            result = CaseResult(index, data, FAILED, detail=why)
        result.seconds, result.cpu_s = time.perf_counter() - start, time.thread_time() - cpu
        results.append(result)
    return results


@dataclass(frozen=True)
class _Cause:
    """A cause a worker has shrunk a case of: the signature of the minimal call, the call, where it is loose."""

    signature: tuple[str | None, ...]
    minimal: Point
    loose: tuple[str, ...]


#: What this process learnt of the causes of the sweep it works for: (op, signature of a case) -> the cause it
#: shrank to. Shrinking ends at a few calls per cause; a common cause's later cases are tried there first
#: instead of each being shrunk again.
_causes: dict[tuple[str | None, PlannerSpec, PlannerSpec], dict[tuple[str | None, ...], _Cause]] = {}


def _reproduce(
    point: Point, verdict: Verdict, result: CaseResult, pa: Planner, pb: Planner,
    causes: dict[tuple[str | None, ...], _Cause], deadline: float | None,
) -> None:  # fmt: skip
    """Fill ``result``'s minimal call: the lengths of a call a case of the same cause shrank to, when this case
    diverges there the same way (one evaluation), else the case shrunk (:func:`same_cause`)."""
    key = (point.op, *verdict.signature)
    known = causes.get(key)
    if known is not None:
        candidate = _at_lengths(point, known.minimal)
        found = evaluate(candidate, pa, pb, where_defined=False) if _within(candidate, point) else None
        if found is not None and found.status == DIVERGED and found.signature == known.signature:
            result.minimal, result.minimal_detail, result.shrink_evals = candidate.to_dict(), found.detail, 1
            result.signature, result.seeded = list(known.signature), candidate != known.minimal
            result.loose = list(known.loose) or None if candidate == known.minimal else None
            return
    # a case of a known cause that does not diverge at its minimal call's lengths is shrunk on an eighth of the budget
    limit = None if known is None else shrinking.MAX_EVALS // 8
    shrunk = shrink(point, same_cause(verdict.signature, pa, pb), max_evals=limit, deadline=deadline)
    final = evaluate(shrunk.point, pa, pb)
    result.minimal, result.shrink_evals, result.shrink_exhausted = shrunk.point.to_dict(), shrunk.evals, shrunk.exhausted
    result.minimal_detail, result.loose = final.detail, list(shrunk.loose) or None
    if final.status == DIVERGED:
        result.signature = list(final.signature)
        if shrunk.exhausted is None:
            causes[key] = causes[(point.op, *final.signature)] = _Cause(final.signature, shrunk.point, shrunk.loose)


def same_cause(signature: tuple[str | None, ...], pa: Planner, pb: Planner) -> Callable[[Point], bool]:
    """Does a smaller call still diverge as a case of ``signature`` does: with its signature, or, for an error,
    as a plan (a cause that raises at one size, when a buffer overflows, plans wrong values at a smaller one)?"""

    def diverges(candidate: Point) -> bool:
        found = evaluate(candidate, pa, pb, where_defined=False)
        if found.status != DIVERGED:
            return False
        return found.signature == signature or (signature[0] == KIND_ERROR and found.kind in (KIND_SHAPE, KIND_VALUES))

    return diverges


def _within(smaller: Point, point: Point) -> bool:
    """Is ``smaller`` a call the shrinker could reach from ``point`` (no more requests, none longer)?"""
    return smaller.batch <= point.batch and max(smaller.seq_lens) <= max(point.seq_lens)


def _at_lengths(point: Point, seen: Point) -> Point:
    """``point`` with the request lengths of ``seen`` (each at least a decode query long)."""
    shortest = point.qlen if point.op == DECODE else 1
    return dataclasses.replace(point, seq_lens=tuple(max(n, shortest) for n in seen.seq_lens))


def _judge(
    a: PlannerSpec, b: PlannerSpec, index: int, data: dict[str, Any], shrink_divergent: bool, deadline: float | None, out: str | None,
    causes: dict[tuple[str | None, ...], _Cause],
) -> CaseResult:
    """One point's verdict on planners ``a`` and ``b``, shrunk (or seeded from a known cause) and written when it
    diverges."""
    pa, pb = planner(a), planner(b)
    point = Point.from_dict(data)
    verdict = evaluate(point, pa, pb)
    result = CaseResult(index, data, verdict.status, verdict.kind, verdict.detail, verdict.planner_s)
    result.planner_cpu_s = verdict.planner_cpu_s
    if any(verdict.paths):
        result.paths = list(verdict.paths)
    if verdict.status == DIVERGED:
        result.signature = list(verdict.signature)
    if verdict.status == DIVERGED and shrink_divergent:
        _reproduce(point, verdict, result, pa, pb, causes, deadline)
    if verdict.status == DIVERGED and out is not None:
        result.written = write_pair(Point.from_dict(result.minimal or data), a, b, Path(out))
    return result


def run_shipped(
    a: PlannerSpec, b: PlannerSpec, items: list[tuple[int, dict[str, Any]]], shrink_divergent: bool = True, deadline: float | None = None,
    out: str | None = None, sweep: str | None = None,
) -> list[CaseResult]:
    """:func:`run_chunk` for another process: the points stay out of the results (the sender has them)."""
    results = run_chunk(a, b, items, shrink_divergent, deadline, out, sweep)
    for result in results:
        result.point = {}
    return results


def with_points(results: list[CaseResult], items: list[tuple[int, dict[str, Any]]]) -> list[CaseResult]:
    """Put back the points :func:`run_shipped` left out."""
    points = dict(items)
    for result in results:
        result.point = points[result.index]
    return results
