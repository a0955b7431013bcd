"""The seed incident, on the aiter users ran then: v0.1.16.post2 (the dtype-dropping builder of README.md).

A vLLM builder on gfx950 with fp8 KV and 32 heads per rank stopped passing
``dtype_q`` / ``dtype_kv``. At v0.1.16.post2, 32 fp8 heads run natively only
at query length 2 or 4, so single-token decode folds them into 16 x 2
(batches doubled); without dtypes the call counts as "q and kv both non-fp8
on gfx950" and runs natively. Same inputs, different ``work_info_set``: the
diff names the dtypes and the divergent work items.

At e4048607 gfx950 fp8 runs 32 heads natively at every query length, so the
same pair plans identically there: dropping the dtypes is only a params diff,
and the reference frozen at e4048607 could not show the incident. (A bf16 q
with fp8 kv still folds at e4048607, as it did at v0.1.16.post2.)
"""

from __future__ import annotations

import torch
from helpers.calls import decode_call

import mla_golden
from mla_golden.reference import at
from mla_golden.reference.dtypes import FP8_BY_ARCH

GFX950 = ("gfx950", 256)
HEADS = 32
KV_LENS = [137 + 97 * (i % 13) + 31 * i for i in range(32)]
DTYPE_PARAMS = ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope")


def _good_and_bad(version: str) -> tuple[mla_golden.Call, mla_golden.Call]:
    """vLLM's decode build on gfx950 with fp8 q and kv (one token per sequence), then with its dtypes dropped."""
    module = at(version)
    good = decode_call(KV_LENS, HEADS, planner=module, device=GFX950)
    bad = decode_call(KV_LENS, HEADS, planner=module, device=GFX950, pass_dtypes=False)
    return good, bad


def _batches(call: mla_golden.Call) -> list[int]:
    """batch_idx of every work the call wrote."""
    rows = call.outputs["work_info_set"][call.written["work_info_set"].all(dim=1)]
    batches: list[int] = rows[:, 0].tolist()
    return batches


def test_dropped_dtypes_change_work_info_set_at_v0_1_16_post2() -> None:
    good, bad = _good_and_bad("v0.1.16.post2")
    # with fp8: folded to 16 heads x 2, so folded batch indices reach 2 * 32 - 1
    assert max(_batches(good)) == 2 * len(KV_LENS) - 1
    # without dtypes: native 32 heads, one batch index per sequence
    assert max(_batches(bad)) == len(KV_LENS) - 1

    result = mla_golden.diff(good, bad)
    changed = {change.path: (change.expected, change.actual) for change in result.params}
    for name in DTYPE_PARAMS:
        assert changed[name] == ("torch.float8_e4m3fn", None)
    fields = {field.name: field for field in result.fields}
    assert not fields["work_info_set"].equal
    assert result.work_items, "the diff decodes the divergent work items"
    first = result.work_items[0]
    assert first.expected != first.actual


def test_the_same_pair_plans_alike_at_e4048607() -> None:
    good, bad = _good_and_bad("e4048607")
    assert max(_batches(good)) == max(_batches(bad)) == len(KV_LENS) - 1  # native both times
    result = mla_golden.diff(good, bad)
    assert {change.path for change in result.params} == set(DTYPE_PARAMS)
    assert all(field.equal for field in result.fields), "only a params diff"
    assert not result.work_items


def test_bf16_q_with_fp8_kv_folds_at_both_versions() -> None:
    for version in ("v0.1.16.post2", "e4048607"):
        call = decode_call(KV_LENS, HEADS, planner=at(version), device=GFX950, dtype=torch.bfloat16, kv_dtype=FP8_BY_ARCH["gfx950"])
        assert max(_batches(call)) == 2 * len(KV_LENS) - 1, version
