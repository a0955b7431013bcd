"""Writing files whole or not at all: goldens, HTML reports, PNG pictures.

A temp file beside the target, fsynced, then renamed (or linked) into place:
readers see the old file or the new one, never a part. Temp files are created
with mode 0o666, so the user's umask applies as for any file they write (no
0600 as ``mkstemp`` gives, and no umask flip, which would race other threads).
Their names carry host and pid, so a later run can tell a dead writer's
leftovers from a live one's (:meth:`mla_golden.golden.store.GoldenStore.stale_temps`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
from pathlib import Path

TEMP_SUFFIX = ".tmp"
#: This machine's name as it appears in temp file names.
HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"
_TRIES = 100


def fsync_dir(directory: Path) -> None:
    """Make a rename or link in ``directory`` durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def temp_name(path: Path) -> Path:
    """A fresh temp file name beside ``path``: ``.<name>.<host>.<pid>.<random>.tmp``."""
    return path.parent / f".{path.name}.{HOST}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"


def write_temp(path: Path, data: bytes) -> Path:
    """Write ``data`` to a new temp file beside ``path`` and fsync it; returns the temp file (OSError as raised)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_TRIES):
        tmp = temp_name(path)
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(f"no free temp file name beside {path}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path | str, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) atomically, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = write_temp(path, data.encode("utf-8") if isinstance(data, str) else data)
    try:
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
