"""Errors the reference planners raise where aiter would abort or misbehave."""

from __future__ import annotations


class AiterCheckError(RuntimeError):
    """An input aiter rejects with a failed ``AITER_CHECK``.

    aiter prints ``[AITER] <source> <message>`` and aborts the process; the
    reference raises instead, carrying aiter's message verbatim.
    """

    def __init__(self, message: str, source: str) -> None:
        super().__init__(f"[AITER] {source} {message}")
        self.message = message
        self.source = source


class BufferTooSmallError(ValueError):
    """A caller's output buffer is smaller than what the planner must write.

    aiter would silently write past the end (cf. aiter issue 5559); the
    reference refuses and touches nothing.
    """

    def __init__(self, buffer: str, numel: int, needed: int) -> None:
        super().__init__(
            f"output buffer {buffer!r} holds {numel} elements but the planner "
            f"must write {needed}; size it larger"
        )
        self.buffer = buffer
        self.numel = numel
        self.needed = needed


class UndefinedResultError(RuntimeError):
    """aiter's result for these inputs is not defined by the inputs.

    It reads memory past the end of an input tensor or LDS before writing it,
    so any value it returns would be made up.
    """
