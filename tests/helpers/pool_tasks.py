"""Tasks for a worker pool in tests: importable by name, as a spawned worker must find them."""

from __future__ import annotations

import os
from pathlib import Path


def echo(value: int) -> int:
    return value


def exit_when(flag: str) -> None:
    """End this worker process with exit status 3 once ``flag`` exists (the test says when)."""
    while not Path(flag).exists():
        pass
    os._exit(3)
