"""One base class catches every error mla-golden raises on purpose."""

from __future__ import annotations

import inspect

import pytest

import mla_golden
import mla_golden.errors as errors
from mla_golden.reference import AiterCheckError, BufferTooSmallError, UndefinedResultError


def test_every_error_class_derives_from_the_base_and_is_exported():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) == 22
    for cls in classes:
        assert issubclass(cls, errors.MlaGoldenError), cls
        assert getattr(mla_golden, cls.__name__) is cls


def test_old_import_places_give_the_same_classes():
    from mla_golden.backends import BackendError
    from mla_golden.call import CallNotFound
    from mla_golden.matrix import MatrixError
    from mla_golden.reference.errors import AiterCheckError as ReferenceCheck
    from mla_golden.schema import AdaptationError

    assert (BackendError, CallNotFound, MatrixError, AdaptationError) == (
        errors.BackendError, errors.CallNotFound, errors.MatrixError, errors.AdaptationError,
    )  # fmt: skip
    assert ReferenceCheck is AiterCheckError is errors.AiterCheckError
    assert BufferTooSmallError is errors.BufferTooSmallError and UndefinedResultError is errors.UndefinedResultError


def test_builtin_bases_are_kept_for_callers_that_catch_them():
    assert issubclass(errors.AiterCheckError, RuntimeError)
    assert issubclass(errors.BufferTooSmallError, ValueError)
    assert issubclass(errors.UnknownVersionError, ValueError)
    assert issubclass(errors.AiterSourceError, ValueError) and issubclass(errors.AiterSourceError, errors.BackendError)
    assert issubclass(errors.CallNotFound, LookupError)
    assert issubclass(errors.PlotExtraMissing, ImportError)
    # a failed expectation is a failed assertion to pytest
    assert issubclass(errors.GoldenMismatch, AssertionError) and issubclass(errors.InvariantsViolated, AssertionError)


def test_library_failures_are_caught_by_the_base():
    from mla_golden.backends import resolve
    from mla_golden.matrix import parse

    with pytest.raises(mla_golden.MlaGoldenError, match="unknown backend"):
        resolve("nope")
    with pytest.raises(mla_golden.MlaGoldenError):
        parse("[[decode]]\nbatch = 'x'\n")
