"""Which processes a test's subprocess started, read from /proc (Linux only)."""

from __future__ import annotations

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
