"""An aiter git clone read as its planner's history: commits, first-parent lines, a planner digest per commit.

Everything is read with git from the object store (a bare mirror is fine; no
work tree, no checkout). A commit's planner digest
(:mod:`mla_golden.reference.planner_digest`) is computed from the blobs of
its planner sources; each blob is read and normalised once, so digesting a
long history costs one ``git ls-tree`` per commit that touches the planner.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mla_golden.aiter_build.build import INCLUDE_DIR
from mla_golden.errors import AiterSourceError
from mla_golden.reference.planner_digest import digest_of, normalise_cpp, planner_functions
from mla_golden.schema import ATTENTION_PY, CPP_DIR, CPP_FILE

#: The repository paths whose contents make the planner (what ``git log -- PATHS`` follows).
PLANNER_PATHS = (CPP_FILE, CPP_DIR, ATTENTION_PY)
#: A squash-merged pull request's subject ends ``(#1234)``; a merge commit's reads ``Merge pull request #1234``.
_PR = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)")
#: Fields of ``git log --format``: hash, parents, committer date, subject, NUL-separated.
_FORMAT = "%H%x00%P%x00%cs%x00%s"


@dataclass(frozen=True)
class Commit:
    """One commit, as a report names it."""

    sha: str
    parents: tuple[str, ...]
    #: committer date, YYYY-MM-DD
    date: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:10]

    @property
    def pr(self) -> int | None:
        """The pull request the subject names, if any."""
        match = _PR.search(self.subject)
        return int(match.group(1) or match.group(2)) if match else None

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.sha, "date": self.date, "subject": self.subject, "pr": self.pr}


class AiterRepo:
    """A git clone of aiter (``path``): AiterSourceError naming what is wrong when it is none."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        if shutil.which("git") is None:
            raise AiterSourceError("reading aiter's history needs git on PATH")
        if not self.path.is_dir():
            raise AiterSourceError(f"aiter repo {self.path}: no such folder")
        if self._run("rev-parse", "--git-dir", check=False) is None:
            raise AiterSourceError(f"aiter repo {self.path}: not a git repository")
        self._lock = threading.Lock()
        self._blobs: dict[str, str] = {}
        self._cpp: dict[str, str] = {}
        self._functions: dict[str, dict[str, str] | str] = {}
        self._listings: dict[str, dict[str, str]] = {}
        self._digests: dict[tuple[tuple[str, str], ...], str] = {}
        self._commits: dict[str, Commit] = {}

    # ------------------------------------------------------------ git

    def _run(self, *args: str, check: bool = True) -> str | None:
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True)
        if proc.returncode != 0:
            if not check:
                return None
            detail = proc.stderr.decode(errors="replace").strip()[-300:]
            raise AiterSourceError(f"git {' '.join(args)} in {self.path} failed: {detail}")
        return proc.stdout.decode(errors="surrogateescape")

    @cached_property
    def _cat(self) -> subprocess.Popen[bytes]:
        """One ``git cat-file --batch`` for every blob this reader needs."""
        return subprocess.Popen(
            ["git", "-C", str(self.path), "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def _blob(self, oid: str) -> str:
        if oid not in self._blobs:
            cat = self._cat
            assert cat.stdin is not None and cat.stdout is not None
            cat.stdin.write(oid.encode() + b"\n")
            cat.stdin.flush()
            header = cat.stdout.readline().split()
            if len(header) != 3:
                raise AiterSourceError(f"{self.path}: git cannot read blob {oid}")
            data = cat.stdout.read(int(header[2]))
            cat.stdout.read(1)  # the newline after each object
            self._blobs[oid] = data.decode("utf-8", errors="surrogateescape")
        return self._blobs[oid]

    def close(self) -> None:
        """End the blob reader (also at exit)."""
        cat = self.__dict__.pop("_cat", None)
        if cat is not None:
            assert cat.stdin is not None
            cat.stdin.close()
            cat.wait()

    # ------------------------------------------------------------ commits

    def commit_sha(self, rev: str) -> str:
        """The full commit ``rev`` names; AiterSourceError when the repo has none."""
        if rev.startswith("-"):
            raise AiterSourceError(f"{self.path} has no commit {rev!r}")
        found = self._run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if not found or not found.strip():
            raise AiterSourceError(f"{self.path} has no commit {rev!r}")
        return found.strip()

    def commit(self, rev: str) -> Commit:
        sha = rev if rev in self._commits else self.commit_sha(rev)
        if sha not in self._commits:
            out = self._run("log", "-1", f"--format={_FORMAT}", sha) or ""
            self._commits[sha] = _parse_commit(out.rstrip("\n"))
        return self._commits[sha]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = subprocess.run(["git", "-C", str(self.path), "merge-base", "--is-ancestor", ancestor, descendant])
        return proc.returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        found = self._run("merge-base", a, b, check=False)
        return found.strip() if found and found.strip() else None

    def first_parent_line(self, base: str, tip: str) -> list[Commit]:
        """The commits after ``base`` up to ``tip`` along ``tip``'s first parents, oldest first."""
        out = self._run("log", "--first-parent", "--reverse", f"--format={_FORMAT}", f"{base}..{tip}") or ""
        commits = [_parse_commit(line) for line in out.splitlines() if line]
        self._commits.update((c.sha, c) for c in commits)
        return commits

    def planner_commits(self, base: str, tip: str) -> set[str]:
        """Of :meth:`first_parent_line`, the commits whose planner sources differ from their first parent's."""
        out = self._run("log", "--first-parent", "--format=%H", f"{base}..{tip}", "--", *PLANNER_PATHS) or ""
        return set(out.split())

    def touched(self, sha: str) -> tuple[str, ...]:
        """The planner source files ``sha`` changed against its first parent (all of them for a root commit)."""
        parents = self.commit(sha).parents
        if parents:
            out = self._run("diff", "--name-only", parents[0], sha, "--", *PLANNER_PATHS) or ""
        else:
            out = self._run("ls-tree", "-r", "--name-only", sha, "--", *PLANNER_PATHS) or ""
        return tuple(out.split())

    # ------------------------------------------------------------ planner digests

    def digest(self, rev: str) -> str:
        """The planner digest of ``rev`` by meaning, over the planner sources it has (see :meth:`has_planner`).

        An ``attention.py`` that does not parse digests as its own bytes: a
        planner of its own (that no build can use).
        """
        blobs = self._planner_blobs(rev)
        with self._lock:
            key = tuple(sorted(blobs.items()))
            if key not in self._digests:
                self._digests[key] = self._digest(blobs)
            return self._digests[key]

    def planner_pieces(self, rev: str) -> dict[str, str]:
        """What :meth:`digest` of ``rev`` is made of, piece by piece: each C++ planner source normalised (by its
        path) and each planner function of attention.py (``aiter/ops/attention.py:NAME``): what tells two
        commits' planners apart by meaning."""
        blobs = self._planner_blobs(rev)
        with self._lock:
            pieces = {path: self._normalised(oid) for path, oid in blobs.items() if path != ATTENTION_PY}
            functions = self._planner_functions(blobs[ATTENTION_PY]) if ATTENTION_PY in blobs else {}
        if isinstance(functions, str):
            pieces[ATTENTION_PY] = f"unparsed {functions}"
        else:
            pieces.update((f"{ATTENTION_PY}:{name}", dump) for name, dump in functions.items())
        return pieces

    def has_planner(self, rev: str) -> bool:
        """Does ``rev`` hold the planner sources a build needs (metadata.cu and attention.py)?"""
        blobs = self._planner_blobs(rev)
        return CPP_FILE in blobs and ATTENTION_PY in blobs

    def build_key(self, rev: str) -> tuple[tuple[str, str], ...]:
        """What a host build of ``rev`` compiles, as (path, blob id) pairs: the C++ planner and ``csrc/include``'s
        headers. Two commits with one key share one build (their Python may still differ)."""
        sha = self.commit_sha(rev)
        listing = self._run("ls-tree", sha, "--", f"{INCLUDE_DIR}/") or ""
        headers = {}
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            kind, oid = meta.split()[1:3]
            if kind == "blob" and path.endswith(".h"):
                headers[path] = oid
        cpp = {path: oid for path, oid in self._planner_blobs(sha).items() if path != ATTENTION_PY}
        return tuple(sorted({**cpp, **headers}.items()))

    def _planner_blobs(self, rev: str) -> dict[str, str]:
        """Repository path -> blob id of each planner source at ``rev``."""
        sha = rev if rev in self._listings else self.commit_sha(rev)
        if sha not in self._listings:
            listing = self._run("ls-tree", "-r", sha, "--", *PLANNER_PATHS) or ""
            blobs = {}
            for line in listing.splitlines():
                meta, _, path = line.partition("\t")
                kind, oid = meta.split()[1:3]
                if kind == "blob":
                    blobs[path] = oid
            self._listings[sha] = blobs
        return self._listings[sha]

    def _digest(self, blobs: dict[str, str]) -> str:
        cpp = {path: self._normalised(oid) for path, oid in blobs.items() if path != ATTENTION_PY}
        functions = self._planner_functions(blobs[ATTENTION_PY]) if ATTENTION_PY in blobs else {}
        if isinstance(functions, str):
            return f"unparsed-{functions}"
        return digest_of(cpp, functions)

    def _normalised(self, oid: str) -> str:
        if oid not in self._cpp:
            self._cpp[oid] = normalise_cpp(self._blob(oid))
        return self._cpp[oid]

    def _planner_functions(self, oid: str) -> dict[str, str] | str:
        """The planner's functions of an attention.py blob, or the blob id when it is not valid Python."""
        if oid not in self._functions:
            try:
                self._functions[oid] = planner_functions(self._blob(oid))
            except SyntaxError:
                self._functions[oid] = oid
        return self._functions[oid]

    def __enter__(self) -> AiterRepo:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


def _parse_commit(line: str) -> Commit:
    sha, parents, date, subject = line.split("\x00", 3)
    return Commit(sha, tuple(parents.split()), date, subject)
