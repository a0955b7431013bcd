"""The checker's names: invariants() returns, assert_invariants() raises."""

from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path

import pytest

import mla_golden
from mla_golden import reference


@pytest.fixture(scope="module")
def good_call() -> mla_golden.Call:
    with reference.as_aiter(), reference.device("gfx950"):
        sys.modules.pop("helpers.vllm_builder", None)
        builder = importlib.import_module("helpers.vllm_builder").MlaMetadataBuilder(num_heads=16)
        with mla_golden.spy("aiter") as spy:
            builder.build([700, 1900, 100], [1, 1, 1])
    sys.modules.pop("helpers.vllm_builder", None)
    return spy.calls.one()


@pytest.fixture
def broken_call(good_call: mla_golden.Call) -> mla_golden.Call:
    """work_indptr claims every CU part is empty: the works are no longer covered."""
    call = copy.deepcopy(good_call)
    call.outputs["work_indptr"][call.written["work_indptr"]] = 0
    return call


def test_invariants_returns_the_result_and_never_raises(good_call: mla_golden.Call, broken_call: mla_golden.Call) -> None:
    assert mla_golden.invariants(good_call).ok
    result = mla_golden.invariants(broken_call)
    assert not result.ok and result.violations


def test_assert_invariants_raises_with_the_report(good_call: mla_golden.Call, broken_call: mla_golden.Call) -> None:
    assert mla_golden.assert_invariants(good_call).ok
    with pytest.raises(mla_golden.InvariantsViolated) as info:
        mla_golden.assert_invariants(broken_call)
    assert "violation(s)" in str(info.value) and not info.value.result.ok
    assert isinstance(info.value, AssertionError)  # a failed assertion to pytest


def test_check_is_not_a_name_of_the_package() -> None:
    """0.1.0 ships one name per meaning: the checker is invariants(), not the never-released check()."""
    assert not hasattr(mla_golden, "check") and "check" not in mla_golden.__all__


def test_the_public_functions_are_not_shadowed_by_their_modules() -> None:
    """Importing a submodule sets it on the package: no export may share its module's name."""
    import mla_golden.expectations
    import mla_golden.invariant_checks
    import mla_golden.pytest_plugin  # noqa: F401  # imports the expectations module, as a test run does

    assert mla_golden.expect is mla_golden.expectations.expect
    assert mla_golden.invariants is mla_golden.invariant_checks.invariants
    assert mla_golden.assert_invariants is mla_golden.invariant_checks.assert_invariants
    clashes = [name for name in mla_golden.__all__ if (Path(mla_golden.__file__).parent / f"{name}.py").exists()]
    assert clashes == []
