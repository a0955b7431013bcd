"""mla-golden/2: compact written runs, a content digest, and mla-golden/1 files still loading."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.repo import ROOT, TESTS
from typer.testing import CliRunner

import mla_golden
from mla_golden.cli import app
from mla_golden.golden.format import FORMAT_V1, V1_NOTE
from mla_golden.golden.store import FORMAT, Golden, GoldenStore, WriteOutcome, load, load_placed, to_bytes, write

V1_FILES = sorted((TESTS / "data" / "v1").glob("*.safetensors"))


@pytest.mark.parametrize("path", V1_FILES, ids=lambda p: p.name)
def test_v1_files_load_with_a_note(path: Any) -> None:
    assert b'"format":"mla-golden/1"' in path.read_bytes()[:20000]  # really the old format
    golden = load(path)
    assert golden.format == FORMAT_V1 and golden.notes == [V1_NOTE]
    assert "no content digest" in V1_NOTE and golden.call.error is None


@pytest.mark.parametrize("path", V1_FILES, ids=lambda p: p.name)
def test_update_rewrites_v1_as_v2_with_the_same_content_and_provenance(tmp_path: Path, path: Any) -> None:
    old = load(path)
    target = tmp_path / path.name
    shutil.copy(path, target)
    fresh = mla_golden.Call(**{**old.call.__dict__, "provenance": {"backend": "now"}})
    assert write(target, Golden(old.key, fresh)) is WriteOutcome.UNCHANGED  # no update: left as it is
    assert load(target).format == FORMAT_V1
    assert write(target, Golden(old.key, fresh), update=True) is WriteOutcome.UPDATED
    new = load(target)
    assert new.format == FORMAT and new.notes == []
    assert new.call.provenance == old.call.provenance  # when and how it was recorded is kept
    assert mla_golden.diff(old.call, new.call).equal
    for name in old.call.outputs:
        assert torch.equal(old.call.outputs[name], new.call.outputs[name])
        assert torch.equal(old.call.written[name], new.call.written[name])
    assert target.stat().st_size < path.stat().st_size


def test_v2_stores_only_written_values(tmp_path: Path) -> None:
    """A buffer 100x bigger than what was written costs (almost) nothing more."""
    old = load(V1_FILES[0]).call
    big = {n: {**spec, "shape": [spec["shape"][0] * 100, *spec["shape"][1:]]} if n == "work_info_set" else spec
           for n, spec in old.buffers.items()}  # fmt: skip
    outputs = dict(old.outputs)
    written = dict(old.written)
    grown = torch.zeros(big["work_info_set"]["shape"], dtype=torch.int32)
    grown[: outputs["work_info_set"].shape[0]] = outputs["work_info_set"]
    mask = torch.zeros(grown.shape, dtype=torch.bool)
    mask[: outputs["work_info_set"].shape[0]] = written["work_info_set"]
    outputs["work_info_set"], written["work_info_set"] = grown, mask
    call = mla_golden.Call(**{**old.__dict__, "outputs": outputs, "written": written, "buffers": big})
    small, large = to_bytes(Golden("k", old)), to_bytes(Golden("k", call))
    assert len(large) - len(small) < 200  # only the buffers metadata grew
    path = tmp_path / "k.safetensors"
    path.write_bytes(large)
    back = load(path).call
    assert torch.equal(back.outputs["work_info_set"], grown) and torch.equal(back.written["work_info_set"], mask)


def test_unwritten_zero_and_written_zero_stay_apart(tmp_path: Path) -> None:
    """A written 0 and an unwritten element both read 0; the written mask tells them apart after a roundtrip."""
    old = load(V1_FILES[0]).call
    outputs, written = dict(old.outputs), dict(old.written)
    values = torch.tensor([7, 0, 0, 0, 0, 0, 0, 9, 0, 3], dtype=torch.int32)
    mask = torch.tensor([1, 1, 0, 1, 1, 1, 1, 1, 1, 0], dtype=torch.bool)
    values[~mask] = 0
    outputs["reduce_partial_map"], written["reduce_partial_map"] = values, mask
    buffers = {**old.buffers, "reduce_partial_map": {"shape": [10], "dtype": "torch.int32"}}
    call = mla_golden.Call(**{**old.__dict__, "outputs": outputs, "written": written, "buffers": buffers})
    path = tmp_path / "k.safetensors"
    path.write_bytes(to_bytes(Golden("k", call)))
    back = load(path).call
    assert torch.equal(back.outputs["reduce_partial_map"], values)
    assert torch.equal(back.written["reduce_partial_map"], mask)


def test_shipped_goldens_are_v2_and_in_their_place() -> None:
    store = GoldenStore(ROOT / "goldens")
    paths = list(store.paths())
    assert len(paths) >= 100
    for path in paths:
        assert load_placed(path, path.relative_to(store.root).as_posix()).format == FORMAT, path


def test_the_cli_names_a_v1_files_missing_digest() -> None:
    ran = CliRunner().invoke(app, ["check", str(V1_FILES[0]), "--format", "json"])
    result = json.loads(ran.stdout)["results"][0]
    assert ran.exit_code == 0 and result["status"] == "passed" and result["notes"] == [V1_NOTE]
    shown = CliRunner().invoke(app, ["show", str(V1_FILES[0])])
    assert shown.exit_code == 0 and "no content digest" in shown.output


def test_record_update_rewrites_a_shipped_v1_golden_as_v2(tmp_path: Path) -> None:
    """`mla-golden record --update` over a tree holding a v1 golden of a matrix case leaves it v2, same content."""
    source = next(p for p in V1_FILES if p.name.startswith("h16-b4"))
    old = load(source)
    target = GoldenStore(tmp_path).path_for(old.key)
    target.parent.mkdir(parents=True)
    shutil.copy(source, target)
    ran = CliRunner().invoke(app, ["record", "--backend", "reference", "--out", str(tmp_path), "--update", "--quiet",
                                   "--device", "gfx950:256"])  # fmt: skip
    assert ran.exit_code == 0, ran.output
    new = load_placed(target, target.relative_to(tmp_path).as_posix())
    assert new.format == FORMAT and new.call.provenance == old.call.provenance
    assert mla_golden.diff(old.call, new.call).equal
