"""Which planner produced a call: what provenance records, and how it is read back and matched to a reference version."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from mla_golden import reference
from mla_golden.context import provenance
from mla_golden.planner_id import RecordedPlanner, recorded_planner, reference_version


def _live_aiter_function(monkeypatch: pytest.MonkeyPatch, version: str | None, commit: str | None) -> Any:
    module: Any = types.ModuleType("aiter")
    module.__version__ = version
    module.__commit__ = commit
    monkeypatch.setitem(sys.modules, "aiter", module)

    def get_mla_metadata_v1(*args: Any, **kwargs: Any) -> None:  # a stand-in: only its module matters here
        return None

    get_mla_metadata_v1.__module__ = "aiter"
    return get_mla_metadata_v1


def test_a_live_aiter_call_names_aiters_version_and_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    fn = _live_aiter_function(monkeypatch, "0.1.19.post2", "a63ede724b153564f3ed3fc538055fd15178c77d")
    prov = provenance(fn, ["seqlens_qo_indptr"])
    assert prov["aiter"] == {"version": "0.1.19.post2", "commit": "a63ede724b153564f3ed3fc538055fd15178c77d"}
    assert prov["planner"] == {
        "backend": "aiter", "name": "aiter 0.1.19.post2 (a63ede724b15)", "version": "0.1.19.post2",
        "commit": "a63ede724b153564f3ed3fc538055fd15178c77d",
    }  # fmt: skip
    assert "reference_of" not in prov


@pytest.mark.parametrize(
    ("version", "name"),
    [("aded0f84", "aded0f84"), ("v0.1.16.post2", "62028796"), ("33d168a0", "33d168a0"), (None, "e4048607")],
)
def test_each_reference_version_names_itself(version: str | None, name: str) -> None:
    planners = reference if version is None else reference.at(version)
    prov = provenance(planners.get_mla_metadata_v1, [])
    ported = reference.at(name).version
    assert prov["planner"] == {"backend": "reference", "name": f"reference@{name}", "version": name, "commit": ported.commit}
    assert prov["reference_of"] == f"aiter {ported.commit[:12]}"


@pytest.mark.parametrize(
    ("prov", "label", "version"),
    [
        ({"backend": "reference", "reference_of": "aiter e4048607a535"}, "reference@e4048607", "e4048607"),
        ({"backend": "reference", "reference_of": "aiter 0123456789ab"}, "reference@01234567", None),
        ({"backend": "reference"}, "reference", None),
        ({"backend": "aiter", "aiter": {"version": "0.1.20", "commit": None}}, "aiter 0.1.20", "e4048607"),
        # a release commit whose planner is a ported version's (the oracle's tag map: v0.1.19.post2 carries aded0f84's)
        ({"backend": "aiter", "aiter": {"version": None, "commit": "a63ede724b15"}}, "aiter unknown version (a63ede724b15)", "aded0f84"),
        ({"backend": "aiter", "aiter": {"version": "0.1.99", "commit": None}}, "aiter 0.1.99", None),
        ({"backend": "standins"}, "standins", None),
    ],
)  # fmt: skip
def test_provenance_without_a_planner_entry_reads_back(prov: Any, label: str, version: str | None) -> None:
    planner = recorded_planner(prov)
    assert planner.label == label
    found = reference_version(planner)
    assert (found.name if found else None) == version


def test_the_planner_entry_wins_over_the_older_keys() -> None:
    prov = {"backend": "reference", "reference_of": "aiter e4048607a535",
            "planner": {"backend": "reference", "version": "aded0f84", "commit": "aded0f84013b"}}  # fmt: skip
    assert recorded_planner(prov) == RecordedPlanner("reference", "aded0f84", "aded0f84013b")
    assert reference_version(recorded_planner(prov)) is reference.at("aded0f84").version
