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
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

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


@contextlib.contextmanager
def stop_on_signals(shared: Any = None) -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM set the stop event (``shared`` too) instead of raising.

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
        if shared is not None:
            shared.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield came
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
