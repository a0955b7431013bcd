"""Fanning a run out: a worker function over chunks of items, in the process pool (or a thread of this one), stoppable.

The processes are :class:`mla_golden.pool.Pool`'s, the one pool every
``--jobs`` fan-out uses; this adds the chunks, the results in item order and
the stop a signal asks for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mla_golden.pool import STOP_GRACE_S, Pool
from mla_golden.runs.results import Result
from mla_golden.workers import stop_requested

#: Called with how many items just finished (a progress bar's advance).
Advance = Callable[[int], None]


def run_items(
    worker: Callable[..., list[Result]], items: list[Any], args: tuple[Any, ...], jobs: int, advance: Advance | None = None
) -> list[Result]:
    """``worker(chunk, *args)`` over ``items`` in ``jobs`` processes (at most one per CPU; one job: a thread of this
    one); results in the order of ``items``.

    SIGINT or SIGTERM stops the run: each worker ends the golden it is on
    (stragglers are killed, or given up on, within :data:`STOP_GRACE_S`), then
    :class:`~mla_golden.errors.Interrupted` carries the results so far.
    """
    from mla_golden.errors import Interrupted
    from mla_golden.workers import stop_on_signals

    if not items:
        return []
    results: dict[int, list[Result]] = {}
    with stop_on_signals() as came:
        if jobs <= 1:
            _run_here(worker, _chunks(items, 1), args, results, came, advance)
        else:
            with Pool[int](jobs) as pool:
                _run_pool(pool, worker, _chunks(items, pool.workers), args, results, came, advance)
    done = [r for i in sorted(results) for r in results[i]]
    if came:
        raise Interrupted(came[0], done)
    return done


def _chunks(items: list[Any], workers: int) -> list[list[Any]]:
    """``items`` in chunks of at most 16, about four per worker: few round trips, and no worker left idle at the end."""
    size = max(1, min(16, len(items) // (4 * workers) or 1))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _run_here(
    worker: Callable[..., list[Result]], chunks: list[list[Any]], args: tuple[Any, ...], results: dict[int, list[Result]],
    came: list[int], advance: Advance | None,
) -> None:  # fmt: skip
    """Fill ``results`` in a thread of this process (:class:`~mla_golden.workers.Background`) until done or until a
    signal lands in ``came``: the golden in progress then gets :data:`STOP_GRACE_S` to finish, as a worker process
    does, and a planner call that never returns is left to end with the process (nothing is written after)."""
    from mla_golden.workers import Background

    def work() -> None:
        for i, part in enumerate(chunks):
            if stop_requested():
                return
            results[i] = worker(part, *args)
            if advance is not None and not stop_requested():
                advance(len(part))

    running = Background(work)
    while not running.wait(0.1):
        if came:
            if not running.wait(STOP_GRACE_S):
                return
            break
    running.outcome()


def _run_pool(
    pool: Pool[int], worker: Callable[..., list[Result]], chunks: list[list[Any]], args: tuple[Any, ...],
    results: dict[int, list[Result]], came: list[int], advance: Advance | None,
) -> None:  # fmt: skip
    """Fill ``results`` from the pool until done or until a signal lands in ``came``, then stop it."""
    for i, part in enumerate(chunks):
        pool.submit(i, worker, part, *args)
    while pool.busy and not came:
        finished = pool.next_done(timeout=0.1)
        if finished is not None:
            i, results[i] = finished
            if advance is not None:
                advance(len(chunks[i]))
    if came:
        results.update(pool.stop())
