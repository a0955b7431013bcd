"""check judges a golden by the aiter version that recorded it (head folding differs between versions)."""

from __future__ import annotations

import torch

import mla_golden
from mla_golden import reference

FP8 = torch.float8_e4m3fn  # gfx950's fp8


def _incident_call(version: str) -> mla_golden.Call:
    """gfx950, fp8 q and kv, 32 heads, single-token decode: v0.1.16.post2 folds it to 16 x 2, e4048607 does not."""
    planner = reference.at(version)
    batch = 4
    with reference.device("gfx950", cu_num=256):
        shapes = planner.get_mla_metadata_info_v1(batch, 1, 32, FP8, FP8, False)
        buffers = [torch.empty(shape, dtype=dtype) for shape, dtype in shapes]
        work_metadata_ptrs, work_indptr, work_info_set, *reduce = buffers
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), torch.arange(batch + 1, dtype=torch.int32) * 700,
                torch.ones(batch, dtype=torch.int32), 32, 1, True,
                work_metadata_ptrs, work_info_set, work_indptr, *reduce,
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=FP8, dtype_kv=FP8,
            )  # fmt: skip
    return spy.calls.one()


def test_an_old_versions_folded_plan_passes_when_judged_by_that_version() -> None:
    call = _incident_call("v0.1.16.post2")
    assert call.provenance["planner"]["version"] == reference.at("v0.1.16.post2").version.name
    assert mla_golden.invariants(call).ok, mla_golden.render_text(mla_golden.invariants(call))


def test_the_same_plan_judged_by_the_newest_version_is_a_folding_violation() -> None:
    call = _incident_call("v0.1.16.post2")
    as_newest = {**call.provenance, "planner": {**call.provenance["planner"], "version": "e4048607", "commit": None}}
    result = mla_golden.invariants(mla_golden.Call(**{**call.__dict__, "provenance": as_newest}))
    assert not result.ok
    assert any("qk_batch_ratio" in v.message for v in result.violations)
    assert mla_golden.invariants(_incident_call("e4048607")).ok
