"""Shrinking: the fewest requests and the shortest lengths that still diverge the same way."""

from __future__ import annotations

from mla_golden.sweeper.evaluate import DIVERGED, KIND_SHAPE, evaluate
from mla_golden.sweeper.planners import resolve
from mla_golden.sweeper.shrink import shrink
from mla_golden.sweeper.space import DECODE, PREFILL, Point


def _point(lens: tuple[int, ...], qlen: int = 1) -> Point:
    return Point(DECODE, "gfx942", 304, 16, lens, qlen=qlen, q_dtype="fp8", kv_dtype="fp8")


def test_shrinks_to_the_requests_and_lengths_that_matter() -> None:
    # Diverges while some request has at least 700 tokens and another at least 40.
    def diverges(p: Point) -> bool:
        lens = sorted(p.seq_lens, reverse=True)
        return len(lens) >= 2 and lens[0] >= 700 and lens[1] >= 40

    start = _point((5, 9000, 3, 120, 8, 77, 2000, 1, 64, 33))
    minimal, evals = shrink(start, diverges)
    assert sorted(minimal.seq_lens) == [40, 700], minimal.seq_lens
    assert 0 < evals < 200


def test_lengths_never_go_below_the_query_length() -> None:
    minimal, _ = shrink(_point((500, 600), qlen=3), lambda p: True)
    assert minimal.seq_lens == (3,)
    prefill = Point(PREFILL, "gfx950", 256, 16, (900, 17))
    assert shrink(prefill, lambda p: True)[0].seq_lens == (1,)


def test_the_evaluation_budget_bounds_the_work() -> None:
    calls = []

    def diverges(p: Point) -> bool:
        calls.append(p)
        return sum(p.seq_lens) % 7 == 0 or p.batch > 3

    _, evals = shrink(_point(tuple(range(100, 164))), diverges, max_evals=25)
    assert evals == len(calls) <= 25


def test_a_real_divergence_shrinks_to_one_shortest_request() -> None:
    # Planning for 80 CUs instead of 304 changes work_indptr's shape whatever the batch.
    a, b = resolve("reference"), resolve("reference:gfx942:80")
    start = _point((4000, 17, 9000, 250))
    assert evaluate(start, a, b).kind == KIND_SHAPE

    def same(p: Point) -> bool:
        found = evaluate(p, a, b)
        return found.status == DIVERGED and found.kind == KIND_SHAPE

    minimal, _ = shrink(start, same)
    assert minimal.seq_lens == (1,)
    assert evaluate(minimal, a, b).detail == "work_indptr shape [305] -> [81]"
