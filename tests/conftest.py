"""Session-wide test hooks: point at the artifacts the browser tests leave (screenshots of the pages)."""

from __future__ import annotations

import time

import pytest
from browser import ARTIFACTS

_STARTED = time.time()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shots = sorted(p for p in ARTIFACTS.glob("*.png") if p.stat().st_mtime >= _STARTED) if ARTIFACTS.is_dir() else []
    if shots:
        terminalreporter.write_line(f"browser screenshots ({len(shots)}): {ARTIFACTS}")
