"""Shrink a divergent point to a minimal call that still diverges the same way.

Whole-call moves first, because they cut the most per evaluation and a
divergence that needs many requests often needs none of their length: every
request at the shortest legal length, every request at the length of the
shortest one, then, repeatedly, half the requests dropped or all lengths halved.
Then per request: greedy delta debugging over the requests (drop halves,
quarters... single ones), then each request's length: the shortest legal one,
else the smallest length on aiter's lattice (the page size, tiles of 16, 64,
128, 256 and their multiples, powers of two) that diverges, then bisection
below it. Bisection takes a divergence to hold at every longer length; one
that needs a multiple of 16 does not, so before a result is called minimal
each request is also tried one token, a page and a tile shorter and at every
lattice length below it. All of it repeats until nothing shrinks: the result
is then minimal in that sense (no single request can go, no length can drop
by one step). The categorical parameters (heads, dtypes, device, query
length...) are kept: they are what the groups and regions report; the
simplest query length, page size and head count are each tried once, and
those that diverge the same way are named (:attr:`Shrunk.loose`): the
reproducer is not minimal along them.

An evaluation budget and an optional deadline bound the work; when either
runs out first the result says so (:attr:`Shrunk.exhausted`), so a
reproducer that is not minimal is never passed off as one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from mla_golden.sweeper.axes import TILES
from mla_golden.sweeper.space import DECODE, PREFILL, Point

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
    #: Kept parameters whose simplest value diverges the same way too ("qlen 1", "page_size 1", "heads 16"):
    #: the call is minimal in its requests and lengths, not along these.
    loose: tuple[str, ...] = ()


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




def _steps(point: Point) -> set[int]:
    """The tiles and pages a length of ``point`` is counted in: :data:`TILES`, the decode page size, prefill's
    query and KV tiles and KV block."""
    own = (point.qlen_granularity, point.kvlen_granularity, point.block_size) if point.op == PREFILL else (point.page_size,)
    return {*TILES, *(step for step in own if step > 1)}


def lattice(point: Point, below: int) -> list[int]:
    """The lengths under ``below`` a planner cares about, ascending: the page size (prefill: its tiles and KV
    block), :data:`TILES` and a few of their multiples, and the powers of two from 16."""
    steps = _steps(point)
    values = {step * m for step in steps for m in (1, 2, 3, 4)} | {16 << j for j in range(24)}
    return sorted(v for v in values if _shortest(point) < v < below)


def _shorter_requests(point: Point, diverges: _Budget) -> Point:
    """Each request as short as it can be while the point still diverges: the shortest legal length, else the
    smallest :func:`lattice` length that diverges, then bisection below it."""
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
        for value in lattice(point, length):
            if at(value):
                passing = value
                break
            failing = value
        while passing - failing > 1:
            middle = (failing + passing) // 2
            if at(middle):
                passing = middle
            else:
                failing = middle
        lens[i] = passing
    return _with(point, lens)


def _one_step_shorter(point: Point, diverges: _Budget) -> Point | None:
    """A call one step smaller that still diverges: a request one token, a page or a tile shorter, or at a
    lattice length (what bisection, which takes a divergence to hold for every longer length, can step over);
    None when there is none, and then no single request can go either."""
    shortest = _shortest(point)
    lens = list(point.seq_lens)
    steps = sorted({1, *_steps(point)})
    for i, length in enumerate(lens):
        for value in [*lattice(point, length), *(length - step for step in steps)]:
            if shortest <= value < length and diverges(_with(point, lens[:i] + [value] + lens[i + 1 :])):
                return _with(point, lens[:i] + [value] + lens[i + 1 :])
    return None


def shrink(
    point: Point, diverges: Callable[[Point], bool], max_evals: int | None = None, deadline: float | None = None
) -> Shrunk:
    """The smallest point found that still satisfies ``diverges`` (``max_evals``: default :data:`MAX_EVALS`;
    ``deadline``: a ``time.time()``), and the kept parameters along which a smaller value diverges too."""
    budget = _Budget(diverges, MAX_EVALS if max_evals is None else max_evals, deadline)
    budget.seen[point.seq_lens] = True
    while True:
        smaller = _shorter_requests(_fewer_requests(_whole_call(point, budget), budget), budget)
        if smaller == point and not budget.exhausted:
            smaller = _one_step_shorter(point, budget) or point
        if smaller == point or budget.exhausted:
            loose = () if budget.exhausted else _loose(smaller, diverges, budget)
            return Shrunk(smaller, budget.used, budget.exhausted, loose)
        point = smaller


def _loose(point: Point, diverges: Callable[[Point], bool], budget: _Budget) -> tuple[str, ...]:
    """The kept parameters (query length, page size, heads) along which the simplest value diverges the same way
    too: the reproducer is not minimal along them (one evaluation each; ``budget`` counts them)."""
    simpler = []
    if point.op == DECODE and point.qlen > 1:
        simpler.append(("qlen", 1, dataclasses.replace(point, qlen=1)))
    if point.op == DECODE and point.page_size > 1:
        simpler.append(("page_size", 1, dataclasses.replace(point, page_size=1)))
    if point.heads > 16:
        simpler.append(("heads", 16, dataclasses.replace(point, heads=16)))
    found = []
    for axis, value, candidate in simpler:
        if budget.used < budget.limit:
            budget.used += 1
            if diverges(candidate):
                found.append(f"{axis} {value}")
    return tuple(found)
