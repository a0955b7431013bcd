"""Fanning a run out: a worker function over chunks of items, in processes (or a thread of this one), stoppable.

Work fans out over processes, not threads: the planners read ``os.environ``,
which a process shares.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mla_golden.runs.results import Result
from mla_golden.workers import stop_requested

#: Called with how many items just finished (a progress bar's advance).
Advance = Callable[[int], None]


def run_items(
    worker: Callable[..., list[Result]], items: list[Any], args: tuple[Any, ...], jobs: int, advance: Advance | None = None
) -> list[Result]:
    """``worker(chunk, *args)`` over ``items`` in ``jobs`` processes (one: a thread of this one); results in the order
    of ``items``.

    SIGINT or SIGTERM stops the run: each worker ends the golden it is on
    (stragglers are killed, or given up on, within :data:`STOP_GRACE_S`), then
    :class:`~mla_golden.errors.Interrupted` carries the results so far.
    """
    from mla_golden.errors import Interrupted
    from mla_golden.workers import stop_on_signals

    if not items:
        return []
    chunk = max(1, min(16, len(items) // (4 * max(jobs, 1)) or 1))
    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    results: list[list[Result]] = [[] for _ in chunks]
    if jobs <= 1:
        with stop_on_signals() as came:
            _run_here(worker, chunks, args, results, came, advance)
    else:
        import multiprocessing

        # spawn: a forked child would inherit torch's thread pools half-initialised.
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        with stop_on_signals(stop) as came:
            _run_pool(context, stop, came, worker, chunks, args, jobs, results, advance)
    done = [r for part in results for r in part]
    if came:
        raise Interrupted(came[0], done)
    return done


#: After a stop, how long workers get to finish the golden they are on before they are killed.
STOP_GRACE_S = 0.5


def _run_here(
    worker: Callable[..., list[Result]], chunks: list[list[Any]], args: tuple[Any, ...], results: list[list[Result]],
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
    context: Any, stop: Any, came: list[int], worker: Callable[..., list[Result]], chunks: list[list[Any]],
    args: tuple[Any, ...], jobs: int, results: list[list[Result]], advance: Advance | None,
) -> None:  # fmt: skip
    """Fill ``results`` from a process pool until done or until a signal lands in ``came``."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from mla_golden.workers import init_worker

    # Workers end when this process does, however it ends: none writes after the run is gone.
    pool = ProcessPoolExecutor(jobs, context, initializer=init_worker, initargs=(os.getpid(), stop))
    futures = {pool.submit(worker, part, *args): i for i, part in enumerate(chunks)}
    pending = set(futures)
    try:
        while pending and not came:
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for future in finished:
                results[futures[future]] = future.result()
                if advance is not None:
                    advance(len(chunks[futures[future]]))
        if came:
            for future in pending:
                future.cancel()
            finished, _late = wait([f for f in pending if not f.cancelled()], timeout=STOP_GRACE_S)
            for future in finished:
                if future.exception() is None:
                    results[futures[future]] = future.result()
            for process in list(getattr(pool, "_processes", {}).values()):  # stragglers: nothing written later
                process.kill()
    finally:
        pool.shutdown(wait=not came, cancel_futures=True)
