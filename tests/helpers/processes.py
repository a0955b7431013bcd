"""Which processes a test's subprocess started, read from /proc (Linux only)."""

from __future__ import annotations

import os
import select
from collections.abc import Iterable
from pathlib import Path


def children(pid: int, workers_only: bool = False) -> list[int]:
    """Live processes whose parent is ``pid``; ``workers_only``: multiprocessing's spawned workers only (not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes() if workers_only else b""
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and (not workers_only or b"spawn_main" in cmdline):
            found.append(int(entry.name))
    return found


def wait_gone(pids: Iterable[int]) -> None:
    """Return once every process of ``pids`` has exited (a zombie has): waited on as an event, through a pidfd
    that becomes readable at exit, not against a clock a loaded machine would miss. A process that never exits,
    the bug the callers test for, keeps the test waiting."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone
            continue
        try:
            select.select([fd], [], [])
        finally:
            os.close(fd)
