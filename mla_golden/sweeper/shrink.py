"""Shrink a divergent point to a minimal call that still diverges the same way.

Greedy delta debugging over what makes a call big: first the requests
(ddmin: drop halves, then quarters... then single requests), then each
request's length (the shortest that still diverges, by bisection from the
shortest legal length). Both repeat until nothing shrinks. The categorical
parameters (heads, dtypes, device, query length...) are kept: they are what
the region summary reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mla_golden.sweeper.space import DECODE, Point

#: Most predicate evaluations one shrink may spend (each runs both planners once).
MAX_EVALS = 400


class _Budget:
    """The predicate, counting evaluations and remembering answers."""

    def __init__(self, predicate: Callable[[Point], bool], limit: int) -> None:
        self.predicate, self.limit, self.used = predicate, limit, 0
        self.seen: dict[tuple[int, ...], bool] = {}

    def __call__(self, point: Point) -> bool:
        known = self.seen.get(point.seq_lens)
        if known is not None:
            return known
        if self.used >= self.limit:
            return False
        self.used += 1
        self.seen[point.seq_lens] = answer = self.predicate(point)
        return answer


def _fewer_requests(point: Point, diverges: _Budget) -> Point:
    """ddmin over the requests: the fewest that still diverge."""
    lens = list(point.seq_lens)
    chunks = 2
    while len(lens) > 1:
        size = -(-len(lens) // chunks)
        for start in range(0, len(lens), size):
            rest = lens[:start] + lens[start + size :]
            if rest and diverges(dataclasses.replace(point, seq_lens=tuple(rest))):
                lens, chunks = rest, max(chunks - 1, 2)
                break
        else:
            if chunks >= len(lens):
                break
            chunks = min(chunks * 2, len(lens))
    return dataclasses.replace(point, seq_lens=tuple(lens))


def _shorter_requests(point: Point, diverges: _Budget) -> Point:
    """Each request as short as it can be while the point still diverges (bisection)."""
    shortest = point.qlen if point.op == DECODE else 1
    lens = list(point.seq_lens)
    for i, length in enumerate(lens):

        def at(n: int, i: int = i) -> bool:
            return diverges(dataclasses.replace(point, seq_lens=tuple(lens[:i] + [n] + lens[i + 1 :])))

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
    return dataclasses.replace(point, seq_lens=tuple(lens))


def shrink(point: Point, diverges: Callable[[Point], bool], max_evals: int = MAX_EVALS) -> tuple[Point, int]:
    """The smallest point found that still satisfies ``diverges``, and the evaluations spent."""
    budget = _Budget(diverges, max_evals)
    budget.seen[point.seq_lens] = True
    while True:
        smaller = _shorter_requests(_fewer_requests(point, budget), budget)
        if smaller == point:
            return point, budget.used
        point = smaller
