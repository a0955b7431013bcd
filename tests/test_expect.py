"""mla_golden.expect: the golden diff survives a planner that raises inside the builder.

The dropped-dtype scenario: on gfx942 with 64 heads, a builder that sizes its
buffers for fp8 but drops the dtypes from the planner call gets a folded plan
that outgrows them; the reference raises BufferTooSmallError inside build().
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.repo import TESTS

import mla_golden
from mla_golden import reference
from mla_golden.reference import BufferTooSmallError

DECODES = ([3000] * 8, [1] * 8)  # eight long decodes: enough for the dtype-less plan to outgrow the buffers


@pytest.fixture
def vllm_builder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with reference.as_aiter(), reference.device("gfx942"):
        monkeypatch.delitem(sys.modules, "helpers.vllm_builder", raising=False)
        yield importlib.import_module("helpers.vllm_builder")


@pytest.fixture
def goldens(vllm_builder: Any, tmp_path: Path) -> Path:
    with mla_golden.expect("aiter", tmp_path, name="step", update=True) as spy:
        vllm_builder.MlaMetadataBuilder(num_heads=64).build(*DECODES)
    assert len(spy.calls) == 1 and spy.calls.one().error is None
    return tmp_path


def test_a_raising_planner_is_re_raised_with_the_golden_diff_naming_the_dtypes_as_its_cause(vllm_builder: Any, goldens: Path) -> None:
    builder = vllm_builder.MlaMetadataBuilder(num_heads=64, pass_dtypes=False)
    with pytest.raises(BufferTooSmallError) as info:
        with mla_golden.expect("aiter", goldens, name="step"):
            builder.build(*DECODES)
    report = info.value.__cause__
    assert isinstance(report, mla_golden.GoldenMismatch)
    text = str(report)
    for param in ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope"):
        assert f"{param}: 'torch.float8_e4m3fnuz' -> None" in text
    assert f"error status changed: None -> {str(info.value)!r}".replace("'", '"') in text.replace("'", '"')
    assert "note: output buffers not compared: the actual call raised" in text
    # the traceback shows the report, then the planner's error
    shown = "".join(traceback.format_exception(info.value))
    assert shown.index("dtype_kv_nope") < shown.index("The above exception was the direct cause") < shown.index("BufferTooSmallError: output buffer")


def test_a_mismatch_without_an_exception_raises_the_report(vllm_builder: Any, goldens: Path) -> None:
    with pytest.raises(mla_golden.GoldenMismatch) as info:
        with mla_golden.expect("aiter", goldens, name="step"):
            vllm_builder.MlaMetadataBuilder(num_heads=64, pass_dtypes=False).build([3000] * 4, [1] * 4)
    assert "params changed" in str(info.value) and "work_info_set" in str(info.value)  # the fields are reported too


def test_an_error_the_golden_recorded_too_passes_through_unchanged(vllm_builder: Any, tmp_path: Path) -> None:
    def bad_build() -> None:
        vllm_builder.MlaMetadataBuilder(num_heads=64, pass_dtypes=False).build(*DECODES)

    with pytest.raises(BufferTooSmallError):
        with mla_golden.expect("aiter", tmp_path, name="step", update=True):
            bad_build()
    with pytest.raises(BufferTooSmallError) as info:
        with mla_golden.expect("aiter", tmp_path, name="step"):
            bad_build()
    assert info.value.__cause__ is None


def test_a_block_that_raised_before_its_planner_call_names_the_golden_left_unchecked(vllm_builder: Any, goldens: Path) -> None:
    class BuilderBug(Exception):
        pass

    with pytest.raises(BuilderBug) as info:
        with mla_golden.expect("aiter", goldens, name="step"):
            raise BuilderBug("before any planner call")
    assert "expects call 0 of the block, which made only 0 call(s)" in str(info.value.__cause__)


def test_an_existing_cause_stays_in_the_chain(vllm_builder: Any, goldens: Path) -> None:
    builder = vllm_builder.MlaMetadataBuilder(num_heads=64, pass_dtypes=False)
    with pytest.raises(RuntimeError) as info:
        with mla_golden.expect("aiter", goldens, name="step"):
            try:
                builder.build(*DECODES)
            except BufferTooSmallError as exc:
                raise RuntimeError("metadata build failed") from exc
    report = info.value.__cause__
    assert isinstance(report, mla_golden.GoldenMismatch) and isinstance(report.__cause__, BufferTooSmallError)


def test_a_corrupt_golden_does_not_stop_the_next_call_from_being_compared(vllm_builder: Any, tmp_path: Path) -> None:
    with mla_golden.expect("aiter", tmp_path, name="step", update=True):
        vllm_builder.MlaMetadataBuilder(num_heads=16).build([700, 1900, 300], [1, 1, 300])
    (tmp_path / "step.safetensors").write_bytes(b"not a golden")
    with pytest.raises(mla_golden.GoldenMismatch) as info:
        with mla_golden.expect("aiter", tmp_path, name="step"):
            vllm_builder.MlaMetadataBuilder(num_heads=16).build([700, 1900, 30], [1, 1, 30])
    text = str(info.value)
    assert "call 0 of the block (get_mla_metadata_v1)" in text and "step.safetensors" in text
    assert "call 1 of the block: DIVERGED get_ps_metadata_v1" in text


def test_without_a_name_a_missing_golden_points_at_the_one_with_the_same_inputs(vllm_builder: Any, tmp_path: Path) -> None:
    with mla_golden.expect("aiter", tmp_path, update=True):
        vllm_builder.MlaMetadataBuilder(num_heads=64).build(*DECODES)
    with pytest.raises(BufferTooSmallError) as info:
        with mla_golden.expect("aiter", tmp_path):
            vllm_builder.MlaMetadataBuilder(num_heads=64, pass_dtypes=False).build(*DECODES)
    text = str(info.value.__cause__)
    assert "no golden for key" in text and "dtype_kv_nope: 'torch.float8_e4m3fnuz' -> None" in text


def test_the_fixture_form_reports_the_dtypes_for_a_raising_planner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.syspathinsert(str(TESTS))
    pytester.makepyfile(
        test_vllm=textwrap.dedent(
            """
            import importlib, os, sys
            from mla_golden import reference

            def test_step(mla_golden):
                with reference.as_aiter(), reference.device("gfx942"):
                    sys.modules.pop("helpers.vllm_builder", None)
                    builder = importlib.import_module("helpers.vllm_builder").MlaMetadataBuilder(
                        num_heads=64, pass_dtypes=os.environ.get("DROP") is None)
                    with mla_golden.expect(name="step"):
                        builder.build([3000] * 8, [1] * 8)
            """
        )
    )
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    assert (pytester.path / "goldens" / "test_vllm.py" / "test_step" / "step.safetensors").is_file()
    pytester.runpytest().assert_outcomes(passed=1)
    monkeypatch.setenv("DROP", "1")
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*GoldenMismatch*",
            "*dtype_kv_nope: 'torch.float8_e4m3fnuz' -> None*",
            "*error status changed: None -> *reduce_indptr*",
            "*The above exception was the direct cause of the following exception*",
            "*BufferTooSmallError*",
        ]
    )
    assert (pytester.path / "goldens" / "test_vllm.py" / "test_step" / "step.obtained.safetensors").is_file()
