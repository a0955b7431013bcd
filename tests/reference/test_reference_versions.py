"""Naming and shape of the versioned reference: ``mla_golden.reference.at(version)``.

Whether each version plans as aiter did is the conformance tests' job
(test_reference_versions_conformance.py); here: which names resolve to which
version, and that each version has that aiter commit's Python signatures.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.conformance import MLA_BUFFER_NAMES, canary_buffers

import mla_golden.reference as reference
from mla_golden.reference import AiterCheckError, UnknownVersionError, at, versions
from mla_golden.schema import OUTPUTS

version_registry = importlib.import_module("mla_golden.reference.versions")  # the module (the package exports the function versions())

#: Parameters of get_mla_metadata_v1 by version (aiter/ops/attention.py at each commit).
OLD_PARAMS = (
    "seqlens_qo_indptr", "seqlens_kv_indptr", "num_heads_per_head_k", "num_heads_k", "is_causal",
    "work_metadata_ptrs", "work_info_set", "work_indptr", "reduce_indptr", "reduce_final_map",
    "reduce_partial_map", "kv_granularity", "max_seqlen_qo", "uni_seqlen_qo", "fast_mode", "topk",
    "max_split_per_batch", "intra_batch_mode", "dtype_q", "dtype_kv",
)  # fmt: skip
PAGED_PARAMS = (
    *OLD_PARAMS[:2], "kv_last_page_lens", *OLD_PARAMS[2:11], "page_size", *OLD_PARAMS[11:],
)  # fmt: skip
NEW_PARAMS = (
    *PAGED_PARAMS[:-2], "is_cp_round_robin", "mla_version",
    "dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope", "dtype_q", "dtype_kv",
)  # fmt: skip


def test_versions_oldest_first_with_full_commits() -> None:
    listed = versions()
    assert [v.name for v in listed] == ["33d168a0", "62028796", "72eedddd", "aded0f84", "e4048607"]
    assert [v.date for v in listed] == sorted(v.date for v in listed)
    for v in listed:
        assert len(v.commit) == 40 and v.commit.startswith(v.name)
        assert v.changes, f"{v.name} says what changed"
    assert reference.version == listed[-1]


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("33d168a", "33d168a0"),
        ("33D168A06297930B66E83CC0D90981BC26BB79C3", "33d168a0"),
        ("620287969c", "62028796"),
        ("v0.1.16.post2", "62028796"),
        ("v0.1.20", "e4048607"),
        ("v0.1.20.post1", "e4048607"),
        ("aded0f84", "aded0f84"),
        ("v0.1.17-longctx", "aded0f84"),
        ("v0.1.18", "aded0f84"),
        ("v0.1.19", "aded0f84"),
        ("v0.1.16.post4", "72eedddd"),
        ("v0.1.16.post6", "72eedddd"),
        ("2026-02-02", "33d168a0"),  # a date picks the newest version or release tag at or before it
        ("2026-06-13", "62028796"),  # v0.1.16 carries v0.1.16.post2's planner
        ("2026-07-14", "62028796"),
        ("2026-07-18", "72eedddd"),  # v0.1.16.post5 (07-17) carries v0.1.16.post4's planner
        ("2026-07-28", "aded0f84"),  # v0.1.19 carries aded0f84's planner (tag map by meaning)
        ("2026-08-04", "aded0f84"),  # v0.1.19.post1
        ("2026-08-05", "aded0f84"),
        ("2026-08-18", "e4048607"),  # v0.1.20
        ("2026-08-22", "e4048607"),
        ("2027-01-01", "e4048607"),
        (" e4048607 ", "e4048607"),
    ],
)
def test_version_resolves(spec: str, name: str) -> None:
    module = at(spec)
    assert module.version.name == name
    assert at(name) is module, "one object per version"


@pytest.mark.parametrize("spec", ["v9.9.9", "deadbeef", "33d168", "2026-01-01", "", "latest-ish"])
def test_unknown_version_lists_the_known_ones(spec: str) -> None:
    with pytest.raises(UnknownVersionError) as info:
        at(spec)
    assert isinstance(info.value, ValueError)
    for v in versions():
        assert v.name in str(info.value)
    assert "v0.1.16.post2" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "params", "has_mla_version"),
    [
        ("33d168a0", OLD_PARAMS, False),
        ("v0.1.16.post2", PAGED_PARAMS, False),
        ("v0.1.16.post4", PAGED_PARAMS, False),
        ("aded0f84", NEW_PARAMS, True),
        ("e4048607", NEW_PARAMS, True),
    ],
)
def test_each_version_has_its_aiter_signature(spec: str, params: tuple[Any, ...], has_mla_version: bool) -> None:
    module = at(spec)
    assert tuple(inspect.signature(module.get_mla_metadata_v1).parameters) == params
    sizing = tuple(inspect.signature(module.get_mla_metadata_info_v1).parameters)
    assert ("max_split_per_batch" in sizing) == (spec != "33d168a0")
    assert hasattr(module, "MlaVersion") == has_mla_version
    assert module.get_mla_metadata_v1.__name__ == "get_mla_metadata_v1"
    assert module.get_mla_metadata_v1.__module__.startswith("mla_golden.reference")


def test_newest_version_is_the_package_itself() -> None:
    newest = at("e4048607")
    assert newest.get_mla_metadata_v1 is reference.get_mla_metadata_v1
    assert newest.get_mla_metadata_info_v1 is reference.get_mla_metadata_info_v1
    assert newest.get_ps_metadata_v1 is reference.get_ps_metadata_v1


def test_shared_context_is_the_same_for_every_version() -> None:
    for v in versions():
        module = at(v.name)
        assert module.device is reference.device
        assert module.allow_undefined is reference.allow_undefined
        assert module.AiterCheckError is reference.AiterCheckError


@pytest.fixture
def tags_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A stand-in for mla_golden/reference/aiter_tags.json (tools/aiter_oracle's tag map)."""
    path = tmp_path / "aiter_tags.json"

    def reload() -> None:
        version_registry._tag_entries.cache_clear()
        version_registry.versions.cache_clear()

    monkeypatch.setattr(version_registry, "TAGS_FILE", path)
    reload()
    yield path
    monkeypatch.undo()
    reload()


def _entry(tag: str, commit: str, same_planner_as: str | None) -> dict[str, Any]:
    return {"tag": tag, "commit": commit, "date": "2026-08-04", "planner_digest": "0" * 64, "same_planner_as": same_planner_as}


def test_release_tags_come_from_the_tag_map(tags_file: Path) -> None:
    tags_file.write_text(json.dumps([
        _entry("v0.1.19.post1", "8a9b4145f8" + "0" * 30, "aded0f84"),
        _entry("v0.1.16.post3", "0c0261ba90" + "0" * 30, "620287969c"),
        _entry("v0.1.16.post2", "620287969c9ce18cd2033ebbdfd13107800f7f3f", "620287969c"),
        _entry("v0.1.19", "3135022616" + "0" * 30, None),  # a planner no version ports
    ]))  # fmt: skip
    assert at("v0.1.19.post1").version.name == "aded0f84"
    assert at("8a9b4145f8").version.name == "aded0f84", "a release commit carrying a ported planner"
    assert at("v0.1.16.post3").version.name == "62028796"
    assert at("v0.1.16.post2").version.tags == ("v0.1.16.post2", "v0.1.16.post3")
    assert "v0.1.19.post1" in at("aded0f84").version.tags
    with pytest.raises(UnknownVersionError, match="v0.1.19'"):
        at("v0.1.19")


def test_a_date_resolves_through_the_release_tags_of_the_tag_map(tags_file: Path) -> None:
    tags_file.write_text(json.dumps([
        {**_entry("v0.1.19", "3135022616" + "0" * 30, "aded0f84"), "date": "2026-07-28"},
        {**_entry("v0.1.17", "32214c295e" + "0" * 30, None), "date": "2026-07-08"},
    ]))  # fmt: skip
    assert at("2026-07-27").version.name == "72eedddd", "before the tag: the newest ported commit (v0.1.16.post4, 07-15)"
    assert at("2026-07-28").version.name == "aded0f84", "the tag's day: its planner"
    assert at("2026-08-04").version.name == "aded0f84"


def _call(version: str, heads: int = 16, **overrides: object) -> tuple[list[Any], dict[str, Any]]:
    """A small valid decode call in ``version``'s signature (2 batches, bf16), canary buffers."""
    module = at(version)
    params = inspect.signature(module.get_mla_metadata_v1).parameters
    inputs = {
        "seqlens_qo_indptr": torch.tensor([0, 1, 2], dtype=torch.int32),
        "seqlens_kv_indptr": torch.tensor([0, 100, 300], dtype=torch.int32),
        "kv_last_page_lens": torch.tensor([1, 1], dtype=torch.int32),
    }
    inputs.update({k: v for k, v in overrides.items() if k in inputs})  # type: ignore[misc]
    info = reference.get_mla_metadata_info_v1(2, 1, heads, torch.bfloat16, torch.bfloat16, False)
    buffers = canary_buffers(OUTPUTS, list(info))
    args: list[object] = [tensor for name, tensor in inputs.items() if name in params]
    args += [heads, 1, True, *(buffers[name] for name in MLA_BUFFER_NAMES)]
    kwargs = {"max_seqlen_qo": 1, "uni_seqlen_qo": 1, "dtype_q": torch.bfloat16, "dtype_kv": torch.bfloat16}
    kwargs.update({k: v for k, v in overrides.items() if k not in inputs})
    return args, kwargs


#: (version, overrides, aiter source line, message): each version's checks where its sources have them.
CHECKS = [
    ("33d168a0", {"kv_granularity": 24}, "metadata.cu:64", "get_mla_metadata_v1: kv_granularity Must be power of 2!"),
    ("33d168a0", {"seqlens_kv_indptr": torch.tensor([0, 100, 300])}, "metadata.cu:72",
     "get_mla_metadata_v1: seqlens_kv_indptr's element type should be int!"),
    ("v0.1.16.post2", {"page_size": 3}, "metadata.cu:68", "get_mla_metadata_v1: page_size Must be power of 2!"),
    ("v0.1.16.post2", {"kv_last_page_lens": torch.ones(2, dtype=torch.int16)}, "metadata.cu:80",
     "get_mla_metadata_v1: kv_last_page_lens's element type should be int!"),
    ("aded0f84", {"seqlens_qo_indptr": torch.arange(6, dtype=torch.int32)[::2]}, "metadata.cu:74",
     "get_mla_metadata_v1: seqlens_qo_indptr should be continuous!"),
]  # fmt: skip
HEAD_CHECK = (
    "get_mla_metadata_v1_2_device: only supports #heads in [16, 64, 128], or (#head, uni_seqlen_qo) = "
    "(16*N, 1) where N is in [2, 8), or (#head, max_seqlen_qo) = (8, 4) where q and kv are fp8, or q and "
    "kv are bf16 on gfx950"
)


@pytest.mark.parametrize(("version", "overrides", "source", "message"), CHECKS)
def test_argument_checks_cite_their_version_source(version: str, overrides: dict[str, Any], source: str, message: str) -> None:
    args, kwargs = _call(version, **overrides)
    with pytest.raises(AiterCheckError) as info:
        at(version).get_mla_metadata_v1(*args, **kwargs)
    assert (info.value.source, info.value.message) == (f"csrc/kernels/mla/{source}", message)


@pytest.mark.parametrize(
    ("version", "line", "message"),
    [
        ("33d168a0", 407, "get_mla_metadata_v1_2_device: only supports #heads in [16, 128], or "
                          "(#head, uni_seqlen_qo) = (16*N, 1) where N is in [2, 8)."),
        ("v0.1.16.post2", 527, HEAD_CHECK),
        ("aded0f84", 883, HEAD_CHECK),
        ("e4048607", 872, HEAD_CHECK),
    ],
)  # fmt: skip
def test_head_count_check_per_version(version: str, line: int, message: str) -> None:
    """8 heads cannot fold to 16 and no version runs them natively on gfx942 at query length 1."""
    args, kwargs = _call(version, heads=8)
    with pytest.raises(AiterCheckError) as info:
        at(version).get_mla_metadata_v1(*args, **kwargs)
    assert info.value.source == f"csrc/kernels/mla/metadata/v1_2_device.cuh:{line}"
    assert info.value.message == message


def test_old_sizing_helper_wants_multiples_of_16_heads() -> None:
    """33d168a0's helper asserts num_head_qo % 16 == 0 (8 heads could not be sized then)."""
    with pytest.raises(AssertionError):
        at("33d168a0").get_mla_metadata_info_v1(2, 1, 8, None, None, False)
    assert at("v0.1.16.post2").get_mla_metadata_info_v1(2, 1, 8, None, None, False)
