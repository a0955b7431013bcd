"""The one pool of ``--jobs`` worker processes: record, diff and check (``runs.run_items``) and sweep (its local
executor) all fan out through it.

Processes, not threads: the planners read ``os.environ``, which a process
shares. Spawned, not forked: a forked child would inherit torch's thread pools
half-initialised. Each worker dies with this process and leaves SIGINT and
SIGTERM to it (:func:`~mla_golden.workers.init_worker`); the pool holds at most
one per usable CPU, every one started (and set up) before the first task, and a
pool given up on kills its workers, so none writes after the run is gone.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

from mla_golden.errors import WorkerDied
from mla_golden.workers import init_worker, usable_cpus

#: After a stop, how long workers get to finish the item they are on before they are killed.
STOP_GRACE_S = 0.5
#: Seconds a worker may take to start and run its setup (import torch, warm the planners).
START_S = 600.0

T = TypeVar("T")

_started: Any = None


def _init(parent: int, stop: Any, started: Any, setup: Callable[..., object] | None, setup_args: tuple[Any, ...]) -> None:
    """Pool initializer: a worker that dies with ``parent`` and stops when ``stop`` is set, then ``setup(*setup_args)``."""
    global _started
    init_worker(parent, stop)
    _started = started
    if setup is not None:
        setup(*setup_args)


def _ready() -> int:
    """Held until every worker runs one: so each has started and run its setup before the first task."""
    _started.wait(timeout=START_S)
    return os.getpid()


class Pool(Generic[T]):
    """``jobs`` spawned worker processes, at most one per usable CPU (:attr:`workers`); each runs ``setup(*setup_args)``
    once, before any task. Tasks go in with :meth:`submit`, each under a tag (T) the caller knows it by, and come
    back with :meth:`next_done` in the order they finish."""

    def __init__(self, jobs: int, setup: Callable[..., object] | None = None, setup_args: tuple[Any, ...] = ()) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.workers = max(1, min(jobs, usable_cpus()))
        #: Set to have every worker end the item it is on and start no other (``workers.stop_requested``).
        self.stopping = context.Event()
        self._tags: dict[Future[Any], T] = {}
        self._pool = ProcessPoolExecutor(
            self.workers, context, initializer=_init,
            initargs=(os.getpid(), self.stopping, context.Barrier(self.workers), setup, setup_args),
        )  # fmt: skip
        #: Every worker: what ended one that died is read from these (the executor forgets them).
        self._processes: list[Any] = []
        try:
            started = []
            for _ in range(self.workers):
                started.append(self._submit(_ready))  # each submit starts a worker
                self._processes = list((getattr(self._pool, "_processes", None) or {}).values())
            for future in started:
                self._result(future)
        except BaseException:  # a setup that raised or a worker that died, a Ctrl-C while the workers start: none is left running
            self._kill()
            self._pool.shutdown(wait=True, cancel_futures=True)
            raise

    def __enter__(self) -> Pool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def busy(self) -> bool:
        """Whether a task submitted has not been taken back yet."""
        return bool(self._tags)

    def submit(self, tag: T, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in a worker (``fn`` and its arguments pickled: a module's function, plain data);
        :class:`WorkerDied` where a worker has died since (the executor takes no more tasks)."""
        self._tags[self._submit(fn, *args)] = tag

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        try:
            return self._pool.submit(fn, *args)
        except BrokenProcessPool:
            raise self._died() from None

    def next_done(self, timeout: float | None = None) -> tuple[T, Any] | None:
        """A finished task's tag and what it returned (what it raised is raised here), waiting at most ``timeout``
        seconds for one; None when none finished by then."""
        done, _ = wait(self._tags, timeout=timeout, return_when=FIRST_COMPLETED)
        if not done:
            return None
        future = done.pop()
        return self._tags.pop(future), self._result(future)

    def _result(self, future: Future[Any]) -> Any:
        """``future.result()``; :class:`WorkerDied`, saying how, where a worker process ended under it."""
        try:
            return future.result()
        except BrokenProcessPool:
            raise self._died() from None

    def _died(self) -> WorkerDied:
        return WorkerDied(f"a --jobs worker process died ({self._how_it_ended()}): planner code that ends its process "
                          "or crashes it (or a kill from outside) cannot be one call's failure, so the run stopped "
                          "there and reports nothing")  # fmt: skip

    def stop(self, grace: float = STOP_GRACE_S) -> list[tuple[T, Any]]:
        """Stop the tasks: each worker is asked to end its item (:attr:`stopping`), queued tasks are dropped, those
        still running after ``grace`` seconds are killed. The tags and values of the tasks that finished meanwhile
        (those that raised are left out)."""
        self.stopping.set()
        for future in self._tags:
            future.cancel()
        finished, _ = wait([f for f in self._tags if not f.cancelled()], timeout=grace)
        taken = [(self._tags[f], f.result()) for f in self._tags if f in finished and f.exception() is None]
        self._kill()
        self._tags.clear()
        return taken

    def close(self) -> None:
        """Shut the pool down. Workers with a task still out are killed (given up on: none writes after); idle ones
        end on their own. Waited for, killed or not: the executor's manager thread must be gone before the
        interpreter's exit hook wakes it, or that hook writes to the pipe the thread closed (a traceback at exit)."""
        if self._tags:
            self._kill()
            self._tags.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _how_it_ended(self) -> str:
        """How the worker that died ended: ``exit status 3``, ``killed by signal SIGSEGV``. The others end on their
        own once the executor gives up (exit 0, or SIGTERM where one was idle in a wait), which is told only when it
        is all there is. The executor sees a death before the process is reaped: polled for :data:`STOP_GRACE_S` at
        most, never waiting on a worker still busy."""
        deadline = time.monotonic() + STOP_GRACE_S
        while True:
            codes = [process.exitcode for process in self._processes]  # (each read polls the process)
            ended = {_ended(code) for code in codes if code is not None}
            cause = ended - {_ended(0), _ended(-signal.SIGTERM)}
            if cause or None not in codes or time.monotonic() >= deadline:
                return ", ".join(sorted(cause or ended)) or "how is unknown"
            time.sleep(0.01)

    def _kill(self) -> None:
        for process in list((getattr(self._pool, "_processes", None) or {}).values()):
            process.kill()


def _ended(code: int) -> str:
    """A process's exit code in words: ``exit status 3``, ``killed by signal SIGSEGV``."""
    if code >= 0:
        return f"exit status {code}"
    return f"killed by signal {signal.Signals(-code).name if -code in signal.valid_signals() else -code}"
