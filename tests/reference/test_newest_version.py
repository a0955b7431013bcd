"""Every "newest" default follows versions.latest(): registering a version is enough to make it the default.

A fake newest version (e4048607's rules with v0.1.16.post2's head folding) is
appended to the registry (and mla_golden.reference re-imported, as a process
would import it with the entry in place); the package-level planners, the
checks, the backends and the messages must follow it without any other change.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterator

import pytest
from helpers.calls import incident
from typer.testing import CliRunner

import mla_golden
from mla_golden import reference
from mla_golden.backends import resolve as resolve_backend
from mla_golden.cli import app
from mla_golden.reference import features

registry = importlib.import_module("mla_golden.reference.versions")  # the module (the package exports versions())

FAKE = "fa4e0001"
BATCH = 4


@pytest.fixture
def fake_newest(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The registry with a newer version: e4048607 but folding heads as v0.1.16.post2 does."""
    rules = dataclasses.replace(features.E4048607, dispatch=features.V0_1_16_POST2.dispatch)
    entry = (FAKE, FAKE + "0" * 32, "2027-01-01", ("v9.9.9",), ("a fake newest version",), rules)

    def reload() -> None:
        registry.versions.cache_clear()
        registry._tag_entries.cache_clear()
        importlib.reload(reference)  # its planners are bound at import, as a new registry entry would be

    monkeypatch.setattr(registry, "_REGISTRY", (*registry._REGISTRY, entry))
    reload()
    yield FAKE
    monkeypatch.undo()
    reload()


def _largest_batch(call: mla_golden.Call) -> int:
    works = int(call.outputs["work_indptr"][-1])
    return int(call.outputs["work_info_set"][:works, 0].max())


def _from_unported_aiter(call: mla_golden.Call) -> mla_golden.Call:
    """``call`` as if a live aiter no version ports had recorded it: judged by the newest version."""
    provenance = {**call.provenance, "planner": {"backend": "aiter", "version": "9.9.99", "commit": "feedbeef" * 5}}
    return mla_golden.Call(**{**call.__dict__, "provenance": provenance})


def test_the_package_level_planners_are_the_newest_versions(fake_newest: str) -> None:
    assert reference.version.name == fake_newest
    assert reference.get_mla_metadata_v1 is reference.at(fake_newest).get_mla_metadata_v1
    assert reference.get_mla_metadata_info_v1 is reference.at(fake_newest).get_mla_metadata_info_v1
    call = incident(reference, BATCH)
    assert call.provenance["planner"]["version"] == fake_newest
    assert _largest_batch(call) >= BATCH, "the fake newest folds 32 heads into 16 x 2 batches"
    e4048607 = incident(reference.at("e4048607"), BATCH)
    assert _largest_batch(e4048607) < BATCH, "e4048607 runs them natively"


def test_without_the_fake_the_package_level_planners_are_e4048607() -> None:
    assert reference.version.name == "e4048607"
    call = incident(reference, BATCH)
    assert _largest_batch(call) < BATCH


def test_checks_judge_an_unported_aiters_golden_by_the_newest_version(fake_newest: str) -> None:
    folded = incident(reference.at("v0.1.16.post2"), BATCH)
    native = incident(reference.at("e4048607"), BATCH)
    assert mla_golden.invariants(_from_unported_aiter(folded)).ok
    result = mla_golden.invariants(_from_unported_aiter(native))
    assert not result.ok
    messages = [v.message for v in result.violations]
    assert any(f"aiter {fake_newest} runs 32 heads" in m and "qk_batch_ratio=2" in m for m in messages), messages


def test_the_same_goldens_judged_without_the_fake_follow_e4048607() -> None:
    folded = incident(reference.at("v0.1.16.post2"), BATCH)
    native = incident(reference.at("e4048607"), BATCH)
    assert mla_golden.invariants(_from_unported_aiter(native)).ok
    result = mla_golden.invariants(_from_unported_aiter(folded))
    assert any("aiter e4048607 runs 32 heads" in v.message for v in result.violations)


def test_backends_and_messages_name_the_newest(fake_newest: str) -> None:
    assert resolve_backend("reference").label == f"reference@{fake_newest}"
    listing = CliRunner().invoke(app, ["versions", "--format", "json"])
    newest = [v["name"] for v in json.loads(listing.stdout)["versions"] if v["newest"]]
    assert newest == [fake_newest]
    assert reference.at("v9.9.9").version.name == fake_newest
    assert reference.at("2027-02-01").version.name == fake_newest
