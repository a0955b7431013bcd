"""Shrink a divergent point to a minimal call that still diverges the same way.

Whole-call moves first, because they cut the most per evaluation and a
divergence that needs many requests often needs none of their length: every
request at the shortest legal length, every request at the length of the
shortest one, then, repeatedly, half the requests dropped or all lengths halved.
Then per request: greedy delta debugging over the requests (drop halves,
quarters... single ones), then each request's length (the shortest that still
diverges, by bisection). All of it repeats until nothing shrinks: the result
is then 1-minimal (no single request can go, no single length can shrink by
bisection). The categorical parameters (heads, dtypes, device, query
length...) are kept: they are what the groups and regions report.

An evaluation budget and an optional deadline bound the work; when either
runs out first the result says so (:attr:`Shrunk.exhausted`), so a
reproducer that is not minimal is never passed off as one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from mla_golden.sweeper.space import DECODE, Point

#: Most predicate evaluations one shrink may spend (each runs both planners once).
MAX_EVALS = 400
#: Why a shrink stopped short of a minimum.
EVALS, TIME = "evals", "time"


@dataclass
class Shrunk:
    """The smallest point found, the evaluations spent, and what ran out (None: a minimum was reached)."""

    point: Point
    evals: int
    exhausted: str | None = None


class _Budget:
    """The predicate, counting evaluations, remembering answers, and saying no once the budget is spent."""

    def __init__(self, predicate: Callable[[Point], bool], limit: int, deadline: float | None) -> None:
        self.predicate, self.limit, self.deadline, self.used = predicate, limit, deadline, 0
        self.seen: dict[tuple[int, ...], bool] = {}
        self.exhausted: str | None = None

    def __call__(self, point: Point) -> bool:
        known = self.seen.get(point.seq_lens)
        if known is not None:
            return known
        if self.used >= self.limit:
            self.exhausted = self.exhausted or EVALS
        elif self.deadline is not None and time.time() >= self.deadline:
            self.exhausted = self.exhausted or TIME
        if self.exhausted:
            return False
        self.used += 1
        self.seen[point.seq_lens] = answer = self.predicate(point)
        return answer


def _shortest(point: Point) -> int:
    """The shortest legal request: a decode request holds at least its query tokens."""
    return point.qlen if point.op == DECODE else 1


def _with(point: Point, lens: list[int] | tuple[int, ...]) -> Point:
    return dataclasses.replace(point, seq_lens=tuple(lens))


def _whole_call(point: Point, diverges: _Budget) -> Point:
    """Moves on all requests at once: uniform shortest lengths, halved lengths, half the requests."""
    shortest = _shortest(point)
    for length in sorted({shortest, min(point.seq_lens)}):
        if length < max(point.seq_lens) and diverges(_with(point, [length] * point.batch)):
            point = _with(point, [length] * point.batch)
            break
    while True:  # fewer requests before shorter ones: a divergence that needs enough work keeps it in fewer, longer requests
        half, lens = point.batch // 2, point.seq_lens
        halves = (lens[:half], lens[half:]) if half else ()
        halved = [max(shortest, n // 2) for n in lens]
        moves = [*halves, *([halved] if max(lens) > shortest else [])]
        smaller = next((_with(point, m) for m in moves if diverges(_with(point, m))), None)
        if smaller is None:
            return point
        point = smaller


def _fewer_requests(point: Point, diverges: _Budget) -> Point:
    """ddmin over the requests: the fewest that still diverge."""
    lens = list(point.seq_lens)
    chunks = 2
    while len(lens) > 1:
        size = -(-len(lens) // chunks)
        for start in range(0, len(lens), size):
            rest = lens[:start] + lens[start + size :]
            if rest and diverges(_with(point, rest)):
                lens, chunks = rest, max(chunks - 1, 2)
                break
        else:
            if chunks >= len(lens):
                break
            chunks = min(chunks * 2, len(lens))
    return _with(point, lens)


def _shorter_requests(point: Point, diverges: _Budget) -> Point:
    """Each request as short as it can be while the point still diverges (bisection)."""
    shortest = _shortest(point)
    lens = list(point.seq_lens)
    for i, length in enumerate(lens):

        def at(n: int, i: int = i) -> bool:
            return diverges(_with(point, lens[:i] + [n] + lens[i + 1 :]))

        if length <= shortest:
            continue
        if at(shortest):
            lens[i] = shortest
            continue
        failing, passing = shortest, length
        while passing - failing > 1:
            middle = (failing + passing) // 2
            if at(middle):
                passing = middle
            else:
                failing = middle
        lens[i] = passing
    return _with(point, lens)


def shrink(
    point: Point, diverges: Callable[[Point], bool], max_evals: int | None = None, deadline: float | None = None
) -> Shrunk:
    """The smallest point found that still satisfies ``diverges`` (``max_evals``: default :data:`MAX_EVALS`;
    ``deadline``: a ``time.time()``)."""
    budget = _Budget(diverges, MAX_EVALS if max_evals is None else max_evals, deadline)
    budget.seen[point.seq_lens] = True
    while True:
        smaller = _shorter_requests(_fewer_requests(_whole_call(point, budget), budget), budget)
        if smaller == point or budget.exhausted:
            return Shrunk(smaller, budget.used, budget.exhausted)
        point = smaller
