"""Where an aiter tree's planner sources are: a folder, or a revision of a git clone.

A folder is an aiter checkout (or a ``git archive`` of one: ``csrc/`` and
``aiter/`` side by side), or an installed aiter package (``site-packages``
with ``aiter/`` and ``aiter_meta/csrc/``, or the ``aiter`` folder itself). A
revision is extracted once (``git archive REV csrc aiter``) into the cache,
keyed by the commit it resolves to. The cache is ``MLA_GOLDEN_CACHE`` or the
user cache folder (platformdirs).
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from mla_golden.aiter_build import scratch
from mla_golden.errors import AiterSourceError
from mla_golden.schema import ATTENTION_PY, CPP_FILE

#: Overrides the cache folder (builds and extracted revisions).
CACHE_ENV = "MLA_GOLDEN_CACHE"
#: A git clone of aiter that ``aiter-src@REV`` takes revisions from.
REPO_ENV = "MLA_GOLDEN_AITER_REPO"
#: What a tree needs (relative to the csrc root's parent and the Python root).
#: A ``git archive`` has no .git: its commit may be written here.
COMMIT_MARKER = ".aiter_commit"
#: The most bytes any one file of a tree may hold (aiter's largest planner source is about 300 KB):
#: a bigger one is refused before it is read, not parsed into gigabytes.
MAX_SOURCE_BYTES = 4 << 20


@dataclass(frozen=True)
class Tree:
    """An aiter tree's sources: ``csrc_root / "csrc"`` and ``py_root / "aiter"``."""

    csrc_root: Path
    py_root: Path
    #: the full commit when known (a git checkout, a revision, a marker file)
    commit: str | None
    #: how the user named it (``PATH`` or ``REV``)
    spec: str


def cache_root() -> Path:
    """The folder builds and extracted revisions are cached in."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser() / "aiter-src"
    import platformdirs

    return Path(platformdirs.user_cache_dir("mla-golden")) / "aiter-src"


def from_path(path: str | Path) -> Tree:
    """The tree at ``path``; AiterSourceError naming what is missing."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise AiterSourceError(f"aiter tree {path}: no such folder")
    root = given.resolve()
    for csrc_root, py_root in _layouts(root):
        if (csrc_root / CPP_FILE).is_file() and (py_root / ATTENTION_PY).is_file():
            return Tree(csrc_root, py_root, _commit_of(root), str(path))
    missing = [rel for rel in (CPP_FILE, ATTENTION_PY) if not (root / rel).is_file()]
    raise AiterSourceError(
        f"{path}: not an aiter tree with the MLA metadata planners: no {' and no '.join(missing)} "
        "(give an aiter checkout, a git archive of one, or an installed aiter that ships csrc/)"
    )


def read_bytes(path: Path) -> bytes:
    """The bytes of the tree's file ``path``; AiterSourceError naming it when it is no regular file or too big."""
    try:
        found = path.stat()
        if not stat.S_ISREG(found.st_mode):  # a FIFO would block the read, a device never end
            raise AiterSourceError(f"{path}: not a regular file")
        if found.st_size > MAX_SOURCE_BYTES:
            raise AiterSourceError(f"{path}: {found.st_size} bytes, {_TOO_BIG}")
        with path.open("rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise AiterSourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > MAX_SOURCE_BYTES:  # it grew since
        raise AiterSourceError(f"{path}: {_TOO_BIG}")
    return data


_TOO_BIG = f"more than the {MAX_SOURCE_BYTES} bytes a source file of an aiter tree may hold; refused unread"


def read_text(path: Path) -> str:
    """The tree's file ``path`` as UTF-8 text (see :func:`read_bytes`); AiterSourceError naming it when it is not."""
    try:
        return read_bytes(path).decode()
    except UnicodeDecodeError as exc:
        raise AiterSourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _layouts(root: Path) -> list[tuple[Path, Path]]:
    """(csrc root, Python root) pairs a folder may be: a checkout, site-packages, the aiter package."""
    return [(root, root), (root / "aiter_meta", root), (root.parent / "aiter_meta", root.parent)]


def _commit_of(root: Path) -> str | None:
    marker = root / COMMIT_MARKER
    if marker.is_file():
        with marker.open("rb") as handle:  # a commit id: a few bytes, whatever the file holds
            return handle.read(100).decode(errors="replace").strip() or None
    if (root / ".git").exists():
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout.strip()
    return None


def repo_from_env(repo: str | Path | None) -> Path:
    """``repo``, else ``MLA_GOLDEN_AITER_REPO``; AiterSourceError when neither names one."""
    chosen = repo or os.environ.get(REPO_ENV)
    if not chosen:
        raise AiterSourceError(f"aiter-src@REV needs an aiter git clone to take REV from: pass --aiter-repo DIR (Python: repo=) or set {REPO_ENV}")
    return Path(chosen).expanduser()


def from_revision(rev: str, repo: str | Path | None = None) -> Tree:
    """Revision ``rev`` of the aiter clone ``repo`` (default ``MLA_GOLDEN_AITER_REPO``), extracted into the cache."""
    from filelock import FileLock

    clone = repo_from_env(repo)
    if not clone.is_dir():
        raise AiterSourceError(f"aiter repo {clone}: no such folder")
    _git(clone, "rev-parse", "--git-dir", what=f"aiter repo {clone}: not a git clone")
    commit = _git(clone, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    if not commit:
        raise AiterSourceError(f"{clone} has no commit {rev!r}")
    trees = cache_root() / "trees"
    dest = trees / commit
    trees.mkdir(parents=True, exist_ok=True)
    with FileLock(str(trees / f"{commit}.lock")):
        if not (dest / COMMIT_MARKER).is_file():
            scratch.sweep(trees)  # what extractions killed mid-way left
            _extract(clone, commit, rev, dest)
    tree = from_path(dest)
    return Tree(tree.csrc_root, tree.py_root, commit, rev)


def _extract(clone: Path, commit: str, rev: str, dest: Path) -> None:
    """``git archive COMMIT csrc aiter`` into ``dest``, published by a rename when complete."""
    archive = _git(clone, "archive", "--format=tar", commit, "csrc", "aiter", what=f"{rev} ({commit[:12]}) has no csrc/ or aiter/ to extract")
    work = scratch.make(dest.parent, commit)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: refuse links out of the folder
                tar.extractall(work, filter="data")
            else:
                tar.extractall(work)  # noqa: S202 - git archive of a local clone
        (work / COMMIT_MARKER).write_text(commit + "\n")
        scratch.publish(work, dest)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _git(clone: Path, *args: str, what: str | None = None) -> bytes:
    if shutil.which("git") is None:
        raise AiterSourceError("aiter-src@REV needs git on PATH to read revisions")
    proc = subprocess.run(["git", "-C", str(clone), *args], capture_output=True)
    if proc.returncode != 0:
        if what is None and args[:1] == ("rev-parse",):
            return b""
        detail = proc.stderr.decode(errors="replace").strip()[-500:]
        raise AiterSourceError(what or f"git {' '.join(args)} in {clone} failed: {detail}")
    return proc.stdout
