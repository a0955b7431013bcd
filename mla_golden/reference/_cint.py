"""C integer arithmetic as aiter's planners compute it, shared by the decode and prefill ports.

Python's ``//`` and ``%`` floor; C truncates toward zero. Division by zero is
undefined behaviour in C; aiter reaches it only on inputs its checks let
through, so the ports raise :class:`UndefinedResultError` there.
"""

from __future__ import annotations

from mla_golden.reference.errors import UndefinedResultError


def c_div(a: int, b: int) -> int:
    """C's ``a / b`` on ints (truncates toward zero)."""
    if a >= 0 and b > 0:  # the usual case, where C and Python agree: first, the planners divide per work
        return a // b
    if b == 0:
        raise UndefinedResultError(
            "aiter's metadata planner divides by zero for these inputs "
            "(e.g. max_split_per_batch=0, uni_seqlen_qo=0 with head folding, or a sparse call "
            "whose first batch has no query tokens)"
        )
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def c_mod(a: int, b: int) -> int:
    """C's ``a % b`` (takes the sign of the dividend)."""
    if a >= 0 and b > 0:  # where C and Python agree
        return a % b
    return a - b * c_div(a, b)


def integer_divide_ceil(x: int, y: int) -> int:
    """``integer_divide_ceil`` of aiter's ``v1_comm.cuh``: ``(x + y - 1) / y`` in C.

    The planners call it per batch and split: the usual case is inlined (no second call).
    """
    numerator = x + y - 1
    if numerator >= 0 and y > 0:  # where C and Python agree
        return numerator // y
    return c_div(numerator, y)
