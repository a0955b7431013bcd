"""Bad input to the CLI as users meet it: exit 2 with one wording, before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import run
from helpers.repo import TESTS

from mla_golden.golden.store import GoldenStore, load

SHIPPED = TESTS.parent / "goldens"


def test_an_unknown_arch_in_device_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    ran = run("record", "--backend", "reference", "--device", "gfx999:10", "--out", tmp_path / "out")
    assert ran.code == 2 and "unknown arch 'gfx999' (known: gfx942, gfx950)" in ran.output
    assert not (tmp_path / "out").exists()
    matrix = tmp_path / "matrix.toml"
    matrix.write_text('format = "mla-golden-matrix/1"\ndevices = ["gfx1100:48"]\n\n[[decode]]\nname = "x"\nheads = 16\n')
    ran = run("record", "--backend", "reference", "--matrix", matrix, "--out", tmp_path / "out")
    assert ran.code == 2 and "unknown arch 'gfx1100'" in ran.output and str(matrix) in ran.output


def _record(tmp_path: Path, *args: str, script: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    cmd = [sys.executable, "-m", "mla_golden.cli", "record", "--out", str(tmp_path / "out"), "--format", "json", *args]
    return subprocess.run([*cmd, "--", sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_a_command_that_captures_no_call_is_exit_2_unless_allowed(tmp_path: Path) -> None:
    recorded = _record(tmp_path, script="print('no planner here')")
    assert recorded.returncode == 2, recorded.stderr
    assert "made no aiter planner calls" in recorded.stderr and "--allow-empty" in recorded.stderr
    assert json.loads(recorded.stdout)["summary"] == {"bad": 1}
    allowed = _record(tmp_path, "--allow-empty", script="print('no planner here')")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["summary"] == {}
    ran = run("record", "--allow-empty", "--out", tmp_path / "matrix-out")
    assert ran.code == 2 and "--allow-empty applies to recording a command" in ran.output
    assert not (tmp_path / "matrix-out").exists()


AS_AITER = """
import sys
from mla_golden import reference
for seq_lens in ([[700, 90]], [[700, 90], [300, 20]]):  # two stand-ins, one after the other
    with reference.as_aiter():
        sys.modules.pop("helpers.vllm_builder", None)
        from helpers import vllm_builder
        for lens in seq_lens:
            vllm_builder.MlaMetadataBuilder(num_heads=16).build(lens, [1] * len(lens))
"""


@pytest.mark.slow
def test_calls_made_through_as_aiter_are_recorded_once_each(tmp_path: Path) -> None:
    recorded = _record(tmp_path, script=AS_AITER)
    assert recorded.returncode == 0, recorded.stderr
    assert "3 planner call(s) captured, 2 distinct" in recorded.stderr  # the first stand-in's spy left with it
    assert json.loads(recorded.stdout)["summary"] == {"written": 2}
    goldens = [load(p) for p in GoldenStore(tmp_path / "out").paths()]
    assert {g.call.provenance["backend"] for g in goldens} == {"reference"}
    assert sorted(g.call.inputs["seqlens_kv_indptr"].tolist() for g in goldens) == [[0, 300, 320], [0, 700, 790]]


_PATH_COMMANDS = [["list"], ["show"], ["check"], ["diff", "--backend", "reference"], ["diff", SHIPPED, "--against"]]


@pytest.mark.parametrize("command", _PATH_COMMANDS, ids=lambda c: " ".join(map(str, c)))
@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_a_missing_or_empty_path_is_exit_2_with_one_wording_in_every_command(tmp_path: Path, command: Any, kind: str) -> None:
    path = tmp_path / "goldens"
    if kind == "empty":
        (path / "sub").mkdir(parents=True)
    ran = run(*command, path)
    problem = {"missing": "no such file or folder (goldens are *.safetensors files)", "empty": "a folder holding no goldens (*.safetensors files)"}[kind]
    option = "--against " if command[-1] == "--against" else ""
    assert ran.code == 2 and f"error: {option}{path}: {problem}" in ran.output.replace("\n", ""), ran.output
    assert "backend:" not in ran.output  # the paths are refused before any work, the backend's choice included
