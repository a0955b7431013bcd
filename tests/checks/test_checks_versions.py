"""check judges a golden by the aiter version that recorded it (head folding differs between versions)."""

from __future__ import annotations

from helpers.calls import incident

import mla_golden
from mla_golden import reference


def test_an_old_versions_folded_plan_passes_when_judged_by_that_version() -> None:
    call = incident(reference.at("v0.1.16.post2"))
    assert call.provenance["planner"]["version"] == reference.at("v0.1.16.post2").version.name
    assert mla_golden.invariants(call).ok, mla_golden.render_text(mla_golden.invariants(call))


def test_the_same_plan_judged_by_the_newest_version_is_a_folding_violation() -> None:
    call = incident(reference.at("v0.1.16.post2"))
    as_newest = {**call.provenance, "planner": {**call.provenance["planner"], "version": "e4048607", "commit": None}}
    result = mla_golden.invariants(mla_golden.Call(**{**call.__dict__, "provenance": as_newest}))
    assert not result.ok
    assert any("qk_batch_ratio" in v.message for v in result.violations)
    assert mla_golden.invariants(incident(reference.at("e4048607"))).ok
