"""Small git repositories built in a test's temporary folder: commits of given files, branches, merges."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

#: Fixed identities and dates keep every hash the same from run to run.
_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


class GitRepo:
    """A work tree under ``path`` whose commits a test writes file by file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")
        self._day = 0

    def git(self, *args: str) -> str:
        env = {**os.environ, **_ENV}
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout.strip()

    def commit(self, subject: str, files: Mapping[str, str | None]) -> str:
        """Write ``files`` (path -> text; None deletes) and commit them; the new commit's hash."""
        for rel, text in files.items():
            target = self.path / rel
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        return self._commit("commit", "-q", "--allow-empty", "-m", subject)

    def merge(self, branch: str, subject: str) -> str:
        """Merge ``branch`` into the current branch with a merge commit."""
        return self._commit("merge", "-q", "--no-ff", "-m", subject, branch)

    def _commit(self, *args: str) -> str:
        self._day += 1
        date = f"2026-01-{self._day:02d}T12:00:00+00:00" if self._day <= 28 else f"2026-02-{self._day - 28:02d}T12:00:00+00:00"
        env = {**os.environ, **_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return self.git("rev-parse", "HEAD")
