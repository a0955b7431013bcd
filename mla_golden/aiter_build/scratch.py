"""The temp folders builds and extractions work in, and sweeping away those a killed process left.

A build (or a revision's extraction) works in ``<name>.XXXX.tmp`` beside the
folder it publishes, and renames it into place when done; a process killed
mid-way leaves its temp folder behind for good. Each one therefore names its
owner (host and pid) in a file, and the next build or extraction removes the
temp folders whose owner on this host is gone, and any older than
:data:`STALE_AFTER_S` whatever they say (a pid reused, another host).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

SUFFIX = ".tmp"
#: Inside each temp folder: "HOST PID" of the process working in it.
OWNER = ".mla-golden-owner"
#: A temp folder this old is left over, whoever it names (a build takes minutes).
STALE_AFTER_S = 24 * 3600.0


def make(parent: Path, name: str) -> Path:
    """A fresh temp folder ``parent/<name>.XXXX.tmp`` naming this process as its owner."""
    work = Path(tempfile.mkdtemp(prefix=f"{name}.", suffix=SUFFIX, dir=parent))
    (work / OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n")
    return work


def publish(work: Path, dest: Path) -> None:
    """Put the finished ``work`` in place as ``dest`` (replacing a stale, half-published one), its owner file gone."""
    (work / OWNER).unlink(missing_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(work, dest)


def sweep(parent: Path) -> list[Path]:
    """Remove the left-over temp folders directly in ``parent``; the ones removed."""
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:  # not there yet
        return []
    for entry in entries:
        if entry.name.endswith(SUFFIX) and entry.is_dir() and not entry.is_symlink() and _left_over(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _left_over(work: Path) -> bool:
    """Whether no process works in ``work`` any more: its owner here is gone, or it is too old to be a live one."""
    try:
        age = time.time() - work.stat().st_mtime
    except OSError:  # removed meanwhile
        return False
    if age > STALE_AFTER_S:
        return True
    try:
        host, _, pid = (work / OWNER).read_text()[:300].strip().partition(" ")
    except OSError:  # no owner file yet: one being made; only its age tells
        return False
    return host == socket.gethostname() and pid.isdigit() and not _alive(int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
