"""Session-wide test hooks: one torch thread per test process, and point at the artifacts the browser tests leave
(screenshots of the pages)."""

from __future__ import annotations

import os
import time

import pytest

# Loaded before any pytester inline run: such a run restores sys.modules afterwards, dropping what it imported
# first, so a rich imported there would be imported again later while mla_golden's cached console class still
# renders with the first copy's classes (NotRenderableError, depending on which tests share a worker).
import rich.console  # noqa: F401 - see above
import rich.table  # noqa: F401
import rich.text  # noqa: F401
import torch
from helpers.browser import ARTIFACTS

# One intra-op thread here and in every process a test starts (they inherit the variable): the suite runs one
# xdist worker per core and planner tensors are tiny, so torch's extra threads only spin against the other
# worker (on 2 cores they tripled the CPU time of recording a golden tree). The CLI's own workers do the same.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)

_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shots = sorted(p for p in ARTIFACTS.glob("*.png") if p.stat().st_mtime >= _STARTED) if ARTIFACTS.is_dir() else []
    if shots:
        terminalreporter.write_line(f"browser screenshots ({len(shots)}): {ARTIFACTS}")
