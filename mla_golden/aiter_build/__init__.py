"""``mla_golden.aiter_src(PATH_OR_REV)``: any aiter tree's own planners, built for the host.

aiter's planner C++ (``csrc/kernels/mla/metadata*``) is compiled with g++
against a small emulation of the GPU (``emu/``), once per source digest into
the user cache; calls run in one persistent harness process per build. The
result is a module shaped like ``reference.at(VERSION)``: the planners and
sizing helpers with that tree's signatures, ``device(...)``,
``allow_undefined()`` and the same error classes.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from mla_golden.aiter_build.module import AiterSource
from mla_golden.aiter_build.tree import Tree, from_path, from_revision

__all__ = ["AiterSource", "aiter_src", "at_path", "at_revision"]

#: What looks like a revision rather than a folder: a commit prefix, or a tag/branch with no slash.
_REVISION = re.compile(r"[0-9a-fA-F]{7,40}|v\d[\w.+-]*")


def aiter_src(path_or_rev: str | Path, repo: str | Path | None = None) -> AiterSource:
    """The planners of an aiter tree: a folder (checkout, ``git archive``, installed aiter with csrc/),
    or a revision of the git clone ``repo`` (default ``MLA_GOLDEN_AITER_REPO``).

    With ``repo`` the argument is always a revision; without it, a revision
    when it is no folder and looks like one (a commit prefix or a ``v...``
    tag): ``aiter_src("v0.1.19")``, ``aiter_src("main", repo=...)``.

    The first call on a tree builds it (seconds to a minute); the same tree gives the same module.
    Raises :class:`~mla_golden.errors.AiterSourceError` (a ``BackendError`` and a ``ValueError``)
    naming what is missing: the folder or revision, the planner sources, g++, or the build.
    """
    text = str(path_or_rev)
    if repo is None and (isinstance(path_or_rev, Path) or Path(text).expanduser().is_dir() or not _REVISION.fullmatch(text)):
        return at_path(text)
    return at_revision(text, repo)


def at_path(path: str | Path) -> AiterSource:
    """The planners of the aiter tree in folder ``path``."""
    return _load(from_path(path))


def at_revision(rev: str, repo: str | Path | None = None) -> AiterSource:
    """The planners of revision ``rev`` of the clone ``repo`` (default ``MLA_GOLDEN_AITER_REPO``)."""
    return _load(from_revision(rev, repo))


def _load(source: Tree) -> AiterSource:
    """The module of ``source``, made once per process even when threads ask for it at once (other trees in parallel)."""
    with _locks_lock:
        lock = _locks.setdefault(source, threading.Lock())
    with lock:
        if source not in _modules:
            from mla_golden.aiter_build.module import load_source

            _modules[source] = load_source(source)
        return _modules[source]


_modules: dict[Tree, AiterSource] = {}
_locks: dict[Tree, threading.Lock] = {}
_locks_lock = threading.Lock()
