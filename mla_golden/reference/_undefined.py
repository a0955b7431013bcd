"""Opt-in to aiter results that its inputs do not define.

For some inputs aiter's MLA decode planner reads memory it never wrote (an
input tensor past its end, or LDS before storing to it), so some or all of its
outputs are garbage. By default the reference refuses such calls with
:class:`~mla_golden.reference.errors.UndefinedResultError`. Inside
:func:`allow_undefined` it returns instead:

* elements that depend on memory read past the end of an input tensor receive
  :data:`UNDEFINED_PLACEHOLDER`; every other element gets aiter's (determinate)
  value, and the written set is exactly aiter's;
* when the whole plan is undefined (LDS read before written, a division by
  zero), no element is defined, not even which ones aiter stores to, so only
  ``work_metadata_ptrs`` (which does not depend on it) is written and every
  other buffer keeps the caller's contents.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Final

#: Stored where aiter's value is undefined: INT32_MIN, which no planner field takes.
UNDEFINED_PLACEHOLDER: Final = -(2**31)

_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mla_golden_reference_allow_undefined", default=False
)


def undefined_allowed() -> bool:
    """Whether the current context opted in to undefined results."""
    return _allowed.get()


@contextlib.contextmanager
def allow_undefined() -> Iterator[None]:
    """Inside the block, undefined results are returned (see module doc), not raised."""
    token = _allowed.set(True)
    try:
        yield
    finally:
        _allowed.reset(token)
