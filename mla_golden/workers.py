"""Worker processes that never outlive the run that started them.

A ``--jobs`` worker writes goldens; if the parent is killed (SIGKILL,
SIGTERM, Ctrl-C) a surviving worker would go on writing into a tree nobody
is watching. Each worker therefore asks the kernel to kill it when its parent
dies (``PR_SET_PDEATHSIG`` on Linux) and also watches its parent's pid from a
thread (any platform, and the case where the kernel's signal is not
delivered), exiting at once when the parent is gone.

A run that is interrupted (Ctrl-C, SIGTERM) asks its workers to stop through
one shared event: each worker ends its current golden, returns what it did and
starts no other (:func:`stop_requested`). Workers ignore SIGINT and SIGTERM
themselves: a terminal's Ctrl-C (or a service manager's SIGTERM) reaches the
whole process group, and the parent decides.

A run of one worker runs it in a thread of this process (:class:`Background`),
never in the main thread: the main thread only waits, so a signal is handled
at once even while a planner call loops, and a KeyboardInterrupt or SystemExit
raised in the worker is planner code's, never the user's.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

_PR_SET_PDEATHSIG = 1
#: How often the watchdog thread looks at its parent.
WATCH_INTERVAL_S = 0.2


def usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cap_jobs(jobs: int) -> tuple[int, str | None]:
    """``jobs`` capped at the usable CPU count, and a note when it was."""
    cpus = usable_cpus()
    if jobs <= cpus:
        return jobs, None
    return cpus, f"--jobs {jobs} capped at {cpus}: this machine runs {cpus} processes at once"


def parent_alive(parent: int) -> bool:
    """Whether ``parent`` is still this process's parent (an orphan is re-parented)."""
    return os.getppid() == parent


def die_with_parent(parent: int) -> None:
    """Worker initializer: end this process the moment ``parent`` is gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if not parent_alive(parent):  # died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while parent_alive(parent):
            time.sleep(WATCH_INTERVAL_S)
        os._exit(1)

    threading.Thread(target=watch, name="mla-golden-parent-watch", daemon=True).start()


#: Set when the run was asked to stop; in a worker process, the pool's shared event (see :func:`init_worker`).
_stop: Any = threading.Event()
def stop_requested() -> bool:
    """Whether the run was interrupted: a worker checks this before each golden and returns early."""
    return bool(_stop.is_set())


def init_worker(parent: int, stop: Any) -> None:
    """Pool initializer: die with ``parent``, stop when ``stop`` is set, leave SIGINT / SIGTERM to the parent."""
    global _stop
    _stop = stop
    for sig in (signal.SIGINT, signal.SIGTERM):  # sent to the whole group, they are the parent's to handle
        signal.signal(sig, signal.SIG_IGN)
    die_with_parent(parent)


#: Set when the user's SIGINT reached this process inside :func:`marking_interrupts`.
_sigint_came = threading.Event()


@contextlib.contextmanager
def marking_interrupts() -> Iterator[None]:
    """Within the block, SIGINT does what it did (KeyboardInterrupt, by default) but is remembered, so that code turning
    a planner's KeyboardInterrupt into that call's failure can tell the user's Ctrl-C (:func:`user_interrupted`).

    Outside the main thread (where handlers cannot be set, and no signal raises) it only yields.
    """
    _sigint_came.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        _sigint_came.set()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def user_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is the KeyboardInterrupt of the user's Ctrl-C (see :func:`marking_interrupts`), not planner code's."""
    return isinstance(exc, KeyboardInterrupt) and _sigint_came.is_set()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM set the stop event instead of raising (a pool's workers are stopped by its
    owner, :meth:`mla_golden.pool.Pool.stop`).

    A second signal raises KeyboardInterrupt (the golden in progress is then abandoned; writes stay atomic).

    Yields a list that holds the signal once one came. Outside the main
    thread (where handlers cannot be set) it only yields.
    """
    global _stop
    _stop = threading.Event()
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return

    def handler(signum: int, _frame: Any) -> None:
        if came:  # a second Ctrl-C: stop waiting for the golden in progress
            raise KeyboardInterrupt
        came.append(signum)
        _stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield came
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


T = TypeVar("T")


class Background(Generic[T]):
    """``fn()`` running in a daemon thread, in a copy of the caller's context (its device and allow_undefined()).

    The caller waits with :meth:`wait`, which a signal handler interrupts, and
    takes the outcome with :meth:`outcome`; a thread given up on (its planner
    call never returns) ends with the process.
    """

    def __init__(self, fn: Callable[[], T], name: str = "mla-golden-worker") -> None:
        self._fn = fn
        self._done = threading.Event()
        self._result: T | None = None
        self._raised: BaseException | None = None
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._run,), name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
            self._raised = exc
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether ``fn`` has finished, waiting at most ``timeout`` seconds."""
        return self._done.wait(timeout)

    def outcome(self) -> T:
        """What ``fn`` returned, or what it raised (raised here); only once :meth:`wait` said it finished.

        The thread is joined first: one still unwinding when the interpreter exits is stopped mid-way, which
        aborted the process ("terminate called without an active exception", exit 134) about one run in five.
        """
        self._thread.join()
        if self._raised is not None:
            raise self._raised
        return self._result  # type: ignore[return-value]  # T: set when fn returned
