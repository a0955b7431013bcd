"""The library's error types."""

from __future__ import annotations

from pathlib import Path


class GoldenError(Exception):
    """A golden file that cannot be used, or a golden that cannot be written.

    Always names the file and what is wrong with it.
    """

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem
