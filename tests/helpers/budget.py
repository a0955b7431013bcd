"""Bounds on work by counts, not by the clock: a loaded CI box must never turn a bounded call into a failure.

:func:`lines_run` counts the Python lines a block executes (``sys.settrace``):
a walk over a wild length or index runs millions of lines where the bounded
work runs thousands, whatever else the machine is doing. Past ``cap`` lines
the block is stopped with :class:`OverBudget` (a ``BaseException``, so the
code under test cannot swallow it in an ``except Exception``), so a runaway
loop fails the test instead of hanging it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any


class OverBudget(BaseException):
    """The block ran more lines than its cap."""


def lines_run(block: Callable[[], object], cap: int = 20_000_000) -> int:
    """Python lines ``block()`` executes (its callees' included); :class:`OverBudget` past ``cap``."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        nonlocal count
        if event == "line":
            count += 1
            if count > cap:
                raise OverBudget(f"more than {cap} Python lines")
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
        return local

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        block()
    finally:
        sys.settrace(previous)
    return count
