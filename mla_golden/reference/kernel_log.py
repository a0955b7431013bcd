"""Which decode planner kernel the reference last ran, for tools that count kernel paths.

aiter's host code picks the serial or the parallel planner kernel and may fold
heads into batches (:mod:`.mla_v1_dispatch`); nothing in the outputs says
which. The decode planner notes its choice here (a context variable: one set
per call), so a sweep can say on how many points each path ran without
planning twice.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelPath:
    """The kernel that planned a decode call, and whether heads were folded into batches."""

    parallel: bool
    folded: bool

    def __str__(self) -> str:
        return f"{'parallel' if self.parallel else 'serial'}/{'folded' if self.folded else 'native'}"


_last: contextvars.ContextVar[KernelPath | None] = contextvars.ContextVar("mla_golden_reference_kernel", default=None)


def note(kernel_name: str, qk_batch_ratio: int) -> None:
    """Record the choice of the call being planned (the decode planner calls this)."""
    _last.set(KernelPath(kernel_name.endswith("parallel"), qk_batch_ratio > 1))


def last_kernel() -> KernelPath | None:
    """The path of the last decode call planned in this context; None when none was planned since :func:`forget`."""
    return _last.get()


def forget() -> None:
    """Clear the record, so a call that fails before choosing reads as None."""
    _last.set(None)
