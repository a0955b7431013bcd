"""A sweep space's axes: integer ranges, choices and request-length rules, each enumerated or sampled, seeded."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mla_golden import cases

#: Tile sizes aiter's planners count lengths in (decode kv_granularity and query tiles, prefill kvlen / qlen tiles).
TILES = (16, 64, 128, 256)


#: The share of jittered lengths drawn on a tile's edge (a multiple of one of :data:`TILES`, or one past it):
#: bugs of planners that count in tiles sit there, and a uniform draw almost never lands on one.
EDGE_SHARE = 1 / 8


def sample_lengths(mode: str, top: int, count: int, low: int, rng: random.Random) -> tuple[int, ...]:
    """:func:`mla_golden.cases.lengths`, jitter drawn from ``rng``'s floats (cheaper per point than ``randint``),
    :data:`EDGE_SHARE` of them on a tile's edge."""
    draw = rng.random

    def between(lo: int, hi: int) -> int:
        if draw() < EDGE_SHARE:
            tile = TILES[int(draw() * len(TILES))]
            first, last = -(-lo // tile), hi // tile
            if first <= last:
                edge = tile * (first + int(draw() * (last - first + 1))) + (draw() < 0.5)
                if lo <= edge <= hi:
                    return edge
        return lo + int(draw() * (hi - lo + 1))

    return cases.lengths(mode, top, count, low, between)


@dataclass(frozen=True)
class IntRange:
    """Integers LO..HI; sampled log-uniformly (shapes span orders of magnitude)."""

    low: int
    high: int

    def __len__(self) -> int:
        return self.high - self.low + 1

    def values(self) -> Iterator[int]:
        return iter(range(self.low, self.high + 1))

    def sample(self, rng: random.Random) -> int:
        if self.low == self.high:
            return self.low
        value = math.exp(rng.uniform(math.log(max(self.low, 1)), math.log(self.high + 1)))
        return min(self.high, max(self.low, int(value)))


@dataclass(frozen=True)
class Choices:
    """A list of values, each as likely."""

    items: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.items)

    def values(self) -> Iterator[Any]:
        return iter(self.items)

    def sample(self, rng: random.Random) -> Any:
        return self.items[rng.randrange(len(self.items))]


@dataclass(frozen=True)
class Context:
    """How long each request's KV is: ``uniform`` (all equal to top) or ``jitter`` (seeded spread up to top)."""

    mode: str
    top: Axis

    def __str__(self) -> str:
        top = self.top
        return f"{self.mode}:{top.low}..{top.high}" if isinstance(top, IntRange) else f"{self.mode}:{top.items[0]}"


Axis = IntRange | Choices
