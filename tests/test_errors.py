"""One base class catches every error mla-golden raises on purpose."""

from __future__ import annotations

import inspect

import pytest

import mla_golden
import mla_golden.errors as errors
from mla_golden.reference import AiterCheckError, BufferTooSmallError, UndefinedResultError


def test_every_error_class_derives_from_the_base_and_is_exported() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert len(classes) == 26  # WorkerDied is the newest
    for cls in classes:
        assert issubclass(cls, errors.MlaGoldenError), cls
        assert getattr(mla_golden, cls.__name__) is cls


def test_old_import_places_give_the_same_classes() -> None:
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


def test_builtin_bases_are_kept_for_callers_that_catch_them() -> None:
    assert issubclass(errors.AiterCheckError, RuntimeError)
    assert issubclass(errors.BufferTooSmallError, ValueError)
    assert issubclass(errors.UnknownVersionError, ValueError)
    assert issubclass(errors.AiterSourceError, ValueError) and issubclass(errors.AiterSourceError, errors.BackendError)
    assert issubclass(errors.CallNotFound, LookupError)
    assert issubclass(errors.NotAGoldenError, errors.GoldenError), "loading raises one error type"
    assert issubclass(errors.PlotExtraMissing, ImportError)
    # a failed expectation is a failed assertion to pytest
    assert issubclass(errors.GoldenMismatch, AssertionError) and issubclass(errors.InvariantsViolated, AssertionError)


def test_library_failures_are_caught_by_the_base() -> None:
    from mla_golden.backends import resolve
    from mla_golden.matrix import parse

    with pytest.raises(mla_golden.MlaGoldenError, match="unknown backend"):
        resolve("nope")
    with pytest.raises(mla_golden.MlaGoldenError):
        parse("[[decode]]\nbatch = 'x'\n")


def _sample_arguments(cls: type[BaseException]) -> list[object]:
    """An argument per parameter of ``cls.__init__`` (a message when it takes ``*args``)."""
    from mla_golden.checks.results import CheckResult

    samples: dict[str, object] = {"path": "/tmp/g.safetensors", "numel": 3, "needed": 7, "result": CheckResult("op"), "signum": 2, "results": []}
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return ["what went wrong"]
    return [samples.get(p.name, f"the {p.name}") for p in parameters]


def test_every_error_class_survives_pickling_as_a_process_pool_sends_it() -> None:
    """A worker's exception reaches the parent through pickle; one that does not hangs or breaks the pool."""
    import pickle

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    for cls in classes:
        assert issubclass(cls, errors.MlaGoldenError), cls
        exc = cls(*_sample_arguments(cls))
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is cls
        assert str(back) == str(exc), cls
        assert {k: str(v) for k, v in vars(back).items()} == {k: str(v) for k, v in vars(exc).items()}, cls
