"""Where chunks run: in this process, in local worker processes, or on a Ray cluster.

Every executor takes chunks (lists of (index, point dict)) with ``submit`` and
hands back finished ones, in completion order, with ``next_done``; the driver
keeps a few chunks in flight per worker. Local workers are the process pool
record, diff and check use too (:mod:`mla_golden.pool`): spawned, and dying
with the process that started them.
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from collections import deque
from typing import Any

from mla_golden.errors import ExecutorError
from mla_golden.pool import Pool
from mla_golden.sweeper.planners import PlannerSpec
from mla_golden.sweeper.work import CaseResult, run_chunk, run_shipped, warm, with_points

Chunk = list[tuple[int, dict[str, Any]]]


class Executor(ABC):
    """Runs chunks of one sweep (planner specs ``a`` and ``b``, parsed: they travel to the workers as they are)."""

    workers: int = 1

    def __init__(self, a: PlannerSpec, b: PlannerSpec, shrink: bool) -> None:
        self.a, self.b, self.shrink = a, b, shrink
        #: When shrinking must stop (a ``time.time()``; None: no time budget).
        self.deadline: float | None = None
        #: Where workers write the reproducer goldens (None: nowhere).
        self.out: str | None = None
        #: Names the sweep (what workers learn of its causes serves it only).
        self.sweep: str | None = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def submit(self, chunk: Chunk) -> None: ...

    @abstractmethod
    def next_done(self) -> list[CaseResult]:
        """The results of a chunk that finished (blocks until one has)."""

    @abstractmethod
    def close(self) -> None:
        """Stop the workers; chunks still running are abandoned."""


class InlineExecutor(Executor):
    """This process (``--jobs 1``): no start-up cost, nothing to ship."""

    def __init__(self, a: PlannerSpec, b: PlannerSpec, shrink: bool) -> None:
        super().__init__(a, b, shrink)
        warm(a, b)
        self._pending: deque[Chunk] = deque()

    def submit(self, chunk: Chunk) -> None:
        self._pending.append(chunk)

    def next_done(self) -> list[CaseResult]:
        return run_chunk(self.a, self.b, self._pending.popleft(), self.shrink, self.deadline, self.out, self.sweep)

    def close(self) -> None:
        self._pending.clear()


class LocalExecutor(Executor):
    """``--jobs N`` worker processes on this machine: :class:`mla_golden.pool.Pool`'s (at most one per CPU), each
    started and warmed (torch imported, the planners resolved and run once) before the sweep's clock runs."""

    def __init__(self, a: PlannerSpec, b: PlannerSpec, shrink: bool, jobs: int) -> None:
        super().__init__(a, b, shrink)
        self._pool: Pool[Chunk] = Pool(jobs, warm, (a, b))
        self.workers = self._pool.workers

    def submit(self, chunk: Chunk) -> None:
        self._pool.submit(chunk, run_shipped, self.a, self.b, chunk, self.shrink, self.deadline, self.out, self.sweep)

    def next_done(self) -> list[CaseResult]:
        finished = self._pool.next_done()
        assert finished is not None  # no timeout: it waits for one
        chunk, results = finished
        return with_points(results, chunk)

    def close(self) -> None:
        self._pool.close()


class _Warm:
    """A Ray actor holding warmed planners: started (torch imported, planners resolved and run once) before the
    sweep's clock, then handed chunks as a local worker is, the next one queued behind the running one."""

    def __init__(self, a: PlannerSpec, b: PlannerSpec) -> None:
        warm(a, b)

    def ready(self) -> int:
        return os.getpid()

    def run(
        self, a: PlannerSpec, b: PlannerSpec, chunk: Chunk, shrink: bool, deadline: float | None, out: str | None, sweep: str | None
    ) -> list[CaseResult]:
        return run_shipped(a, b, chunk, shrink, deadline, out, sweep)


#: Seconds Ray workers get to start and warm up.
READY_S = 120.0


class RayExecutor(Executor):
    """``--ray [ADDRESS]``: the same chunks on warm Ray actors, one per CPU; ``local`` starts a Ray instance here.

    An already initialised Ray (``ray.init`` in the caller) is used as it is.
    """

    def __init__(self, a: PlannerSpec, b: PlannerSpec, shrink: bool, address: str | None) -> None:
        super().__init__(a, b, shrink)
        try:
            import ray
        except ImportError as exc:
            raise ExecutorError("--ray needs Ray (mla-golden's ray extra): pip install ray") from exc
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            try:
                if address in (None, "", "local"):
                    ray.init(include_dashboard=False, log_to_driver=False)
                else:
                    ray.init(address=address, log_to_driver=False)
            except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError...
                raise ExecutorError(f"cannot start or reach Ray at {address or 'local'}: {exc}") from exc
        self._actors: list[Any] = []
        try:
            self._start_actors(a, b)
        except Exception as exc:  # a warm-up that raised, a Ray error: nothing is left running
            self.close()
            raise exc if isinstance(exc, ExecutorError) else ExecutorError(f"cannot start Ray workers: {exc}") from exc
        #: Chunks each actor holds (running or queued in its mailbox), and the actor and chunk of each result.
        self._load = [0] * self.workers
        self._refs: dict[Any, tuple[int, Chunk]] = {}

    def _start_actors(self, a: PlannerSpec, b: PlannerSpec) -> None:
        """One warm actor per CPU free now (CPUs other work holds would leave an actor waiting forever); those
        ready within READY_S run the sweep. A worker that dies is restarted and its chunks run again."""
        ray = self._ray
        wanted = max(1, int(ray.available_resources().get("CPU", 0)))
        actor = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)(_Warm)
        started = [actor.remote(a, b) for _ in range(wanted)]
        self._actors = started  # what close() kills should start-up fail from here on
        pings = {handle.ready.remote(): handle for handle in started}
        ready, _ = ray.wait(list(pings), num_returns=len(pings), timeout=READY_S)
        ray.get(ready)  # a warm-up that raised raises here
        self._actors = [pings[ref] for ref in ready]
        for ref in set(pings) - set(ready):  # not placed in time: not left waiting for a CPU
            with contextlib.suppress(Exception):
                ray.kill(pings[ref])
        if not self._actors:
            raise ExecutorError(f"Ray placed none of {wanted} workers within {READY_S:.0f} s (are the cluster's CPUs held?)")
        self.workers = len(self._actors)

    def submit(self, chunk: Chunk) -> None:
        # to the least loaded actor: its mailbox holds the next chunk, so it starts it without a round trip
        which = min(range(self.workers), key=self._load.__getitem__)
        self._load[which] += 1
        ref = self._actors[which].run.remote(self.a, self.b, chunk, self.shrink, self.deadline, self.out, self.sweep)
        self._refs[ref] = (which, chunk)

    def next_done(self) -> list[CaseResult]:
        done, _ = self._ray.wait(list(self._refs), num_returns=1)
        which, chunk = self._refs.pop(done[0])
        self._load[which] -= 1
        return with_points(self._ray.get(done[0]), chunk)

    def close(self) -> None:
        for actor in self._actors:
            with contextlib.suppress(Exception):
                self._ray.kill(actor)
        self._actors = []
        if self._owned:
            self._ray.shutdown()


def make(a: PlannerSpec, b: PlannerSpec, shrink: bool, jobs: int = 1, ray: str | None = None) -> Executor:
    """The executor for ``--jobs`` / ``--ray``."""
    if ray is not None:
        return RayExecutor(a, b, shrink, ray)
    if jobs <= 1:
        return InlineExecutor(a, b, shrink)
    return LocalExecutor(a, b, shrink, jobs)
