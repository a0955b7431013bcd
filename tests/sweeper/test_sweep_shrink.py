"""Shrinking: the fewest requests and the shortest lengths that still diverge the same way."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.clock import FakeClock

from mla_golden.sweeper import shrink as shrink_module
from mla_golden.sweeper.evaluate import DIVERGED, KIND_SHAPE, evaluate
from mla_golden.sweeper.planners import resolve_planner
from mla_golden.sweeper.shrink import EVALS, TIME, shrink
from mla_golden.sweeper.space import DECODE, PREFILL, Point


def _point(lens: tuple[int, ...], qlen: int = 1) -> Point:
    return Point(DECODE, "gfx942", 304, 16, lens, qlen=qlen, q_dtype="fp8", kv_dtype="fp8")


def test_shrinks_to_the_requests_and_lengths_that_matter() -> None:
    # Diverges while some request has at least 700 tokens and another at least 40.
    def diverges(p: Point) -> bool:
        lens = sorted(p.seq_lens, reverse=True)
        return len(lens) >= 2 and lens[0] >= 700 and lens[1] >= 40

    start = _point((5, 9000, 3, 120, 8, 77, 2000, 1, 64, 33))
    shrunk = shrink(start, diverges)
    assert sorted(shrunk.point.seq_lens) == [40, 700], shrunk.point.seq_lens
    assert 0 < shrunk.evals < 200 and shrunk.exhausted is None


def test_lengths_never_go_below_the_query_length() -> None:
    assert shrink(_point((500, 600), qlen=3), lambda p: True).point.seq_lens == (3,)
    prefill = Point(PREFILL, "gfx950", 256, 16, (900, 17))
    assert shrink(prefill, lambda p: True).point.seq_lens == (1,)


def test_the_evaluation_budget_bounds_the_work() -> None:
    calls = []

    def diverges(p: Point) -> bool:
        calls.append(p)
        return sum(p.seq_lens) % 7 == 0 or p.batch > 3

    shrunk = shrink(_point(tuple(range(100, 164))), diverges, max_evals=25)
    assert shrunk.evals == len(calls) <= 25
    assert shrunk.exhausted is None and shrunk.point.seq_lens == (1,) * 4, "4 requests of 1 token: the minimum"
    calls.clear()
    cut = shrink(_point(tuple(range(100, 164))), diverges, max_evals=3)
    assert cut.evals == len(calls) == 3
    assert cut.exhausted == EVALS and cut.point.batch > 4, "a shrink cut short says so"


def test_a_real_divergence_shrinks_to_one_shortest_request() -> None:
    # Planning for 80 CUs instead of 304 changes work_indptr's shape whatever the batch.
    a, b = resolve_planner("reference"), resolve_planner("reference:gfx942:80")
    start = _point((4000, 17, 9000, 250))
    assert evaluate(start, a, b).kind == KIND_SHAPE

    def same(p: Point) -> bool:
        found = evaluate(p, a, b)
        return found.status == DIVERGED and found.kind == KIND_SHAPE

    minimal = shrink(start, same).point
    assert minimal.seq_lens == (1,)
    assert evaluate(minimal, a, b).detail == "work_indptr shape [305] -> [81]; written contents differ"


def _is_one_minimal(point: Point, diverges: Any) -> bool:
    """No single request can go and no single length can drop by one while it still diverges."""
    lens = list(point.seq_lens)
    for i in range(len(lens)):
        fewer = lens[:i] + lens[i + 1 :]
        if fewer and diverges(_point(tuple(fewer), point.qlen)):
            return False
        if lens[i] > point.qlen and diverges(_point(tuple(lens[:i] + [lens[i] - 1] + lens[i + 1 :]), point.qlen)):
            return False
    return True


def test_a_divergence_that_needs_many_requests_of_any_length_shrinks_to_them_at_the_shortest() -> None:
    # A divergence that needs 8 requests: 34 long ones diverge, and so do 8 of 2 tokens: what matters is the count.
    def diverges(p: Point) -> bool:
        return p.batch >= 8

    start = _point(tuple(40_000 + 997 * i for i in range(34)), qlen=2)
    shrunk = shrink(start, diverges)
    assert shrunk.point.seq_lens == (2,) * 8 and shrunk.exhausted is None
    assert shrunk.evals < 60, "whole-call moves take the lengths down in a few steps"


def test_whole_call_moves_reach_a_minimum_where_per_request_moves_alone_run_out() -> None:
    # Diverges when the requests hold at least 300k tokens together and at least 6 requests are at 1000+.
    def diverges(p: Point) -> bool:
        return sum(p.seq_lens) >= 300_000 and sum(n >= 1000 for n in p.seq_lens) >= 6

    start = _point(tuple(90_000 + 13 * i for i in range(256)))
    shrunk = shrink(start, diverges)
    assert shrunk.exhausted is None
    assert _is_one_minimal(shrunk.point, diverges)
    assert sum(shrunk.point.seq_lens) < 310_000 and shrunk.point.batch <= 10


def test_a_deadline_stops_shrinking_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(shrink_module, "time", clock)

    def needs_many(p: Point) -> bool:  # each evaluation takes 10 ms of the budget
        clock.advance(0.01)
        return p.batch >= 5 and min(p.seq_lens) >= 3

    start = _point(tuple(range(1000, 1064)))
    shrunk = shrink(start, needs_many, deadline=clock.time() + 0.05)
    assert shrunk.exhausted == TIME and shrunk.evals == 5
    assert needs_many(shrunk.point), "what it gives back still diverges"
    assert shrink(start, needs_many, deadline=clock.time() - 1).evals == 0


def test_a_divergence_on_a_tile_multiple_shrinks_to_the_tile_not_where_bisection_lands() -> None:
    # A bug on KV lengths that are multiples of 16: bisection alone shrinks it to 288, while 16 shows it too.
    def diverges(p: Point) -> bool:
        return all(n % 16 == 0 for n in p.seq_lens)

    for start in (4608, 6992):  # whole-call moves and bisection alone stop at 6992 itself
        shrunk = shrink(_point((start,)), diverges)
        assert shrunk.point.seq_lens == (16,) and shrunk.exhausted is None
    # at least 272 tokens, a multiple of 16: bisection alone stops at 2224 from 4592; a lattice length and steps
    # of a tile down reach the least
    for start in (4592, 6992, 300 * 16):
        least = shrink(_point((start,)), lambda p: p.seq_lens[0] >= 272 and p.seq_lens[0] % 16 == 0)
        assert least.point.seq_lens == (272,) and least.exhausted is None, start


def test_a_kept_parameter_whose_simplest_value_diverges_too_is_named() -> None:
    shrunk = shrink(_point((3000, 40), qlen=3), lambda p: max(p.seq_lens) >= 100)
    assert shrunk.point.seq_lens == (100,) and shrunk.loose == ("qlen 1",), "any query length diverges: not minimal along it"
    tight = shrink(_point((3000, 40), qlen=3), lambda p: max(p.seq_lens) >= 100 and p.qlen == 3)
    assert tight.point.seq_lens == (100,) and tight.loose == ()
