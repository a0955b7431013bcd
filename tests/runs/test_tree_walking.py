"""Walking a golden tree: odd entries are reported bad without being opened, linked folders are walked once."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.golden.store import GoldenStore

SHIPPED = ROOT / "goldens"
GOOD = SHIPPED / "prefill/dsv3-fp8-prefill/gfx950-cu256/h16-b4-t3117-115ed9cb.safetensors"
OTHER = SHIPPED / "prefill/dsv3-fp8-prefill/gfx950-cu256/h16-b1-t2048-dd66962e.safetensors"


def _place(root: Path, source: Path) -> Path:
    """Copy a shipped golden to where its key says it lives under ``root``."""
    target = root / source.relative_to(SHIPPED)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    return target


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    ran = CliRunner().invoke(app, [*args, "--format", "json"])
    return ran.exit_code, json.loads(ran.stdout)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    _place(root, GOOD)
    return root


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("command", [["check"], ["diff", "--backend", "reference"], ["list"]])
def test_a_fifo_is_reported_bad_and_never_opened(tree: Path, command: Any) -> None:
    fifo = tree / "prefill" / "x.safetensors"
    os.mkfifo(fifo)  # opening it for reading would block forever
    ran = CliRunner().invoke(app, [command[0], str(tree), *command[1:]])
    assert ran.exit_code == 2, ran.output
    assert "not a regular file (a FIFO)" in ran.output.replace("\n", "")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_show_of_a_fifo_is_an_error(tmp_path: Path) -> None:
    fifo = tmp_path / "x.safetensors"
    os.mkfifo(fifo)
    ran = CliRunner().invoke(app, ["show", str(fifo)])
    assert ran.exit_code == 2 and "not a regular file" in ran.output


def test_a_symlinked_folder_is_walked_and_its_bad_golden_reported(tree: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "trunc.safetensors").write_bytes(OTHER.read_bytes()[:300])
    (tree / "linked").symlink_to(elsewhere, target_is_directory=True)
    code, report = _json("check", str(tree))
    assert code == 2
    statuses = {Path(r["path"]).name: r["status"] for r in report["results"]}
    assert statuses["trunc.safetensors"] == "bad" and statuses[GOOD.name] == "passed"


def test_a_symlink_cycle_is_walked_once(tree: Path) -> None:
    (tree / "prefill" / "loop").symlink_to(tree, target_is_directory=True)
    (tree / "self").symlink_to(tree / "self", target_is_directory=True)  # dangles: a link to itself
    paths = list(GoldenStore(tree).paths())
    assert [p.name for p in paths].count(GOOD.name) == 1
    code, report = _json("check", str(tree))
    assert code == 0 and len(report["results"]) == 1


def test_a_dangling_link_named_like_a_golden_is_bad(tree: Path) -> None:
    (tree / "gone.safetensors").symlink_to(tree / "nowhere.safetensors")
    code, report = _json("check", str(tree))
    assert code == 2 and any(r["status"] == "bad" and r["path"].endswith("gone.safetensors") for r in report["results"])


def test_a_golden_whose_key_does_not_match_its_path_is_bad_in_a_tree(tree: Path) -> None:
    moved = tree / "prefill" / "elsewhere.safetensors"
    moved.write_bytes(OTHER.read_bytes())  # a valid golden, saved under another name
    code, report = _json("check", str(tree))
    assert code == 2
    bad = [r for r in report["results"] if r["status"] == "bad"]
    assert len(bad) == 1 and bad[0]["path"] == str(moved) and "does not match the file's path" in bad[0]["message"]


@pytest.mark.parametrize(
    "command", [["check"], ["diff", "--backend", "reference"], ["diff", "--against", "{copy}"], ["list"]],
    ids=["check", "replay", "against", "list"],
)
def test_part_of_a_tree_copied_without_its_parent_folders_is_read_and_a_golden_moved_in_it_is_bad(
    tmp_path: Path, command: list[str]
) -> None:
    part = SHIPPED / "prefill" / "dsv3-fp8-prefill"  # keys prefill/dsv3-fp8-prefill/<device>/<shape>
    copies = [tmp_path / "part", tmp_path / "copy"]
    for copy in copies:
        shutil.copytree(part, copy)
    args = [a.replace("{copy}", str(copies[1])) for a in command]
    code, report = _json(args[0], str(copies[0]), *args[1:])
    rows = report.get("results", report.get("goldens", []))
    assert code == 0 and len(rows) == len(list(part.rglob("*.safetensors"))), report
    assert not any(r.get("status") == "bad" or r.get("problem") for r in rows), rows

    moved = copies[0] / "gfx942-cu304" / GOOD.name  # a gfx950-cu256 golden in another device's folder of the part
    moved.parent.mkdir()
    shutil.copy(GOOD, moved)
    code, report = _json(args[0], str(copies[0]), *args[1:])
    bad = [r for r in report.get("results", report.get("goldens", [])) if r.get("status") == "bad" or r.get("problem")]
    assert code == 2 and [r["path"] for r in bad] == [str(moved)], bad
    assert "does not match the file's path" in (bad[0].get("message") or bad[0]["problem"])


def test_the_same_content_under_two_keys_is_reported(tree: Path) -> None:
    from mla_golden.golden.store import Golden, GoldenStore, load

    golden = load(GOOD)
    GoldenStore(tree).write(Golden("prefill/copy/of-it", golden.call))
    ran = CliRunner().invoke(app, ["check", str(tree), "--format", "json"])
    report = json.loads(ran.stdout)
    assert ran.exit_code == 0
    notes = {r["key"]: r["notes"] for r in report["results"]}
    assert any("same content as prefill/copy/of-it" in n for n in notes[golden.key])
    assert "the same content under 2 keys" in ran.stderr


KIMI = SHIPPED / "decode" / "kimi-k2-mtp"  # two device folders holding goldens of the same file names


def _leaf_with_a_stranger(tmp_path: Path, where: str) -> tuple[Path, Path]:
    """A copied part of the shipped tree, and in it, over its twin, the golden of that name of another device
    folder: in a copy of one device folder, or in a device folder of a part copied without its parents."""
    stranger = KIMI / "gfx942-cu304" / "h8-fp8-q2-b16-jitter16384-p1.safetensors"
    if where == "in a device folder":
        part = tmp_path / "leaf"
        shutil.copytree(KIMI / "gfx950-cu256", part)
        target = part / stranger.name
    else:
        part = tmp_path / "part"
        shutil.copytree(KIMI / "gfx950-cu256", part / "gfx950-cu256")
        target = part / "gfx950-cu256" / stranger.name
    shutil.copy(stranger, target)
    return part, target


@pytest.mark.parametrize("where", ["in a device folder", "in a part"])
@pytest.mark.parametrize("command", [["check"], ["diff", "--backend", "reference"], ["list"]], ids=" ".join)
def test_a_golden_of_another_folder_copied_into_a_walked_part_is_bad(tmp_path: Path, command: list[str], where: str) -> None:
    part, stranger = _leaf_with_a_stranger(tmp_path, where)
    code, report = _json(command[0], str(part), *command[1:])
    rows = report.get("results", report.get("goldens", []))
    bad = [r for r in rows if r.get("status") == "bad" or r.get("problem")]
    assert code == 2 and [r["path"] for r in bad] == [str(stranger)], bad
    why = bad[0].get("message") or bad[0]["problem"]
    if where == "in a part":  # its path under the walk names its device folder: the key alone refuses it
        assert why == "key 'decode/kimi-k2-mtp/gfx942-cu304/h8-fp8-q2-b16-jitter16384-p1' does not match the file's path (moved, copied or renamed?)"
    else:  # only its file name is under the walk: its neighbours' keys refuse it
        assert why.startswith("its key names the folder decode/kimi-k2-mtp/gfx942-cu304/, where the 3 golden(s) beside it")
        assert "name decode/kimi-k2-mtp/gfx950-cu256/" in why


def test_parts_of_a_tree_from_several_levels_copied_into_one_folder_are_read(tmp_path: Path) -> None:
    # what a user does first: cp -r goldens/decode/dsv3-tp goldens/prefill somewhere
    shutil.copytree(SHIPPED / "decode" / "dsv3-tp", tmp_path / "dsv3-tp")
    shutil.copytree(SHIPPED / "prefill", tmp_path / "prefill")
    code, report = _json("check", str(tmp_path))
    count = len(list((SHIPPED / "decode" / "dsv3-tp").rglob("*.safetensors"))) + len(list((SHIPPED / "prefill").rglob("*.safetensors")))
    assert code == 0 and len(report["results"]) == count and not [r for r in report["results"] if r["status"] == "bad"]


def test_a_folder_holding_two_trees_with_the_same_keys_is_read(tmp_path: Path) -> None:
    for name in ("goldens-a", "goldens-b"):  # two recordings side by side: every key twice, each in its own tree
        shutil.copytree(KIMI, tmp_path / name / "decode" / "kimi-k2-mtp")
    code, report = _json("check", str(tmp_path))
    assert code == 0 and len(report["results"]) == 2 * len(list(KIMI.rglob("*.safetensors")))


def test_a_tree_diff_flags_a_golden_misplaced_alike_on_both_sides(tmp_path: Path) -> None:
    sides = []
    for name in ("a", "b"):
        leaf, _ = _leaf_with_a_stranger(tmp_path / name, "in a device folder")
        sides.append(leaf)
    code, report = _json("diff", str(sides[0]), "--against", str(sides[1]))
    bad = [r for r in report["results"] if r["status"] == "bad"]
    assert code == 2 and len(bad) == 1 and "gfx942-cu304" in bad[0]["message"], report["results"]
