"""Errors the reference planners raise where aiter would abort or misbehave.

Defined in :mod:`mla_golden.errors` (under :class:`~mla_golden.errors.MlaGoldenError`);
re-exported here, where the planners raise them.
"""

from __future__ import annotations

from mla_golden.errors import (
    AiterCheckError,
    BufferTooSmallError,
    PreconditionError,
    UndefinedResultError,
    UnknownVersionError,
)

__all__ = ["AiterCheckError", "BufferTooSmallError", "PreconditionError", "UndefinedResultError", "UnknownVersionError"]
