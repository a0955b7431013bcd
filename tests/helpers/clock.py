"""A clock that moves only when a test moves it: time budgets decided by the work done, not by the machine's load."""

from __future__ import annotations


class FakeClock:
    """Stands in for the ``time`` module where a budget is read (``time()`` and ``monotonic()``)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
