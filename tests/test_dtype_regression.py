"""The dtype regression, replayed: a builder that stops passing dtype_q/dtype_kv must be caught.

The reference planner stands in for aiter; its layout depends on the dtypes
(128 heads run natively with fp8 on gfx942, folded into 16-head batches with
bf16), just like aiter's.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import mla_golden
from mla_golden import reference

SEQ_LENS = [700, 1900, 100, 3000]


@pytest.fixture
def builder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The vLLM-shaped builder module, imported inside the stand-in on gfx942."""
    with reference.as_aiter(), reference.device("gfx942", 304):
        monkeypatch.delitem(sys.modules, "helpers.vllm_builder", raising=False)
        yield importlib.import_module("helpers.vllm_builder")
    sys.modules.pop("helpers.vllm_builder", None)


def _build(builder: Any, *, pass_dtypes: bool = True) -> None:
    """One decode step of SEQ_LENS for DeepSeek-V3 at TP 1 (128 heads, fp8 cache); ``pass_dtypes=False`` is the
    regression: the sizing helper's and the planner's calls lost their dtypes."""
    made = builder.MlaMetadataBuilder(num_heads=128, max_num_reqs=len(SEQ_LENS), pass_dtypes=pass_dtypes, size_with_dtypes=pass_dtypes)
    made.build(SEQ_LENS, [1] * len(SEQ_LENS))


def _first_divergent_row(expected: mla_golden.Call, actual: mla_golden.Call) -> int:
    """Independently of the differ: the first work_info_set row written or valued differently."""
    rows = min(expected.outputs["work_info_set"].shape[0], actual.outputs["work_info_set"].shape[0])
    for row in range(rows):
        we, wa = expected.written["work_info_set"][row], actual.written["work_info_set"][row]
        ve, va = expected.outputs["work_info_set"][row], actual.outputs["work_info_set"][row]
        if not torch.equal(we, wa) or not torch.equal(ve[we], va[wa]):
            return row
    raise AssertionError("no divergent row")


def test_dropped_dtypes_fail_naming_the_params_and_the_first_divergent_work_item(builder: Any, tmp_path: Path) -> None:
    with mla_golden.spy() as spy:
        _build(builder)
    good = spy.calls.one("get_mla_metadata_v1")
    assert good.provenance["backend"] == "reference"
    mla_golden.assert_matches_golden(good, tmp_path, name="deepseek-v3-tp1-decode", update=True)
    mla_golden.assert_matches_golden(good, tmp_path, name="deepseek-v3-tp1-decode")  # a rerun passes

    with mla_golden.spy() as spy:
        _build(builder, pass_dtypes=False)
    bad = spy.calls.one("get_mla_metadata_v1")
    with pytest.raises(mla_golden.GoldenMismatch) as info:
        mla_golden.assert_matches_golden(bad, tmp_path, name="deepseek-v3-tp1-decode")
    message = str(info.value)
    for param in ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope"):
        assert f"{param}: 'torch.float8_e4m3fnuz' -> None" in message
    row = _first_divergent_row(good, bad)
    assert re.search(rf"work_info_set: \d+ of \d+ elements differ.*first at \[{row}, ", message)
    assert "divergent work items" in message
    assert re.search(rf"^\s*{row} │\s+expected", message, re.MULTILINE)


def test_without_a_name_the_missing_golden_points_at_the_same_inputs(builder: Any, tmp_path: Path) -> None:
    with mla_golden.spy() as spy:
        _build(builder)
    mla_golden.assert_matches_golden(spy.calls.one(), tmp_path, update=True)
    with mla_golden.spy() as spy:
        _build(builder, pass_dtypes=False)
    with pytest.raises(mla_golden.GoldenMismatch) as info:
        mla_golden.assert_matches_golden(spy.calls.one(), tmp_path)
    message = str(info.value)
    assert "no golden for key" in message and "same op and input tensors" in message
    assert "dtype_kv_nope: 'torch.float8_e4m3fnuz' -> None" in message
