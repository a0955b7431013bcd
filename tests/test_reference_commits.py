"""``reference@COMMIT`` for any aiter commit whose planner means a port's, read from an aiter clone; else the nearest port.

On small repositories built here, whose commits stand in for ported versions
(the ported digests and versions patched to name them), and, where
``MLA_GOLDEN_AITER_REPO`` names a clone of ROCm/aiter, on aiter itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from helpers.git_repos import GitRepo
from typer.testing import CliRunner

from mla_golden import reference
from mla_golden.aiter_build.repo import AiterRepo
from mla_golden.backends import BackendError, resolve
from mla_golden.cli import app
from mla_golden.reference import planner_digest
from mla_golden.schema import ATTENTION_PY, CPP_FILE

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

HEADER = "csrc/kernels/mla/metadata/v1_2_device.cuh"
PY = "def get_mla_metadata_v1(x):\n    return x\n\ndef get_mla_metadata_info_v1(b):\n    return b * 2\n"


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[GitRepo, dict[str, str]]:
    """A port's commit, a later commit that only reformats it, and one that changes a header and a helper; the
    two newest ported versions stand for the first commit and for an older one of the same history."""
    repo = GitRepo(tmp_path / "aiter")
    files = {CPP_FILE: "int plan(int i) { return i * 2; }\n", HEADER: "#pragma once\nint tiles = 4;\n", ATTENTION_PY: PY}
    older_files = {CPP_FILE: "int plan(int i) { return i; }\n", HEADER: "#pragma once\nint tiles = 2;\n"}
    shas = {"older": repo.commit("older port (#1)", {**files, **older_files})}
    shas["port"] = repo.commit("the port (#2)", files)
    shas["reformatted"] = repo.commit("reformat (#3)", {CPP_FILE: "// plans\nint plan(int i)\n{\n  return i * 2;\n}\n"})
    shas["changed"] = repo.commit("retile (#4)", {HEADER: "#pragma once\nint tiles = 8;\n", ATTENTION_PY: PY.replace("b * 2", "b * 3")})
    *_, older, newest = reference.versions()
    stand_ins = (dataclasses.replace(older, commit=shas["older"]), dataclasses.replace(newest, commit=shas["port"]))
    clone = AiterRepo(repo.path)
    digests = {clone.digest(v.commit): v.commit for v in stand_ins}
    clone.close()
    monkeypatch.setattr(planner_digest, "_ported_digests", lambda: digests)
    monkeypatch.setattr(planner_digest, "versions", lambda: stand_ins)
    monkeypatch.setattr(reference, "versions", lambda: stand_ins)
    return repo, shas


def test_a_commit_whose_planner_means_a_ports_resolves_to_it(history: tuple[GitRepo, dict[str, str]]) -> None:
    repo, shas = history
    newest = reference.versions()[-1]
    backend = resolve(f"reference@{shas['reformatted'][:10]}", aiter_repo=str(repo.path))
    assert backend.version is not None and backend.version.name == newest.name and backend.pinned
    assert backend.asked == shas["reformatted"] and backend.spec == f"reference@{newest.name}", "workers need no clone"
    assert f"aiter {shas['reformatted'][:10]} (2026-01-03) plans as it" in backend.reason


def test_a_commit_no_port_means_names_the_nearest_port_and_what_differs(history: tuple[GitRepo, dict[str, str]]) -> None:
    repo, shas = history
    with pytest.raises(BackendError) as caught:
        resolve(f"reference@{shas['changed'][:10]}", aiter_repo=str(repo.path))
    message = str(caught.value)
    older, newest = reference.versions()
    # the newest stand-in differs in the header and one helper; the older one in the planner's .cu too
    assert f"aiter {shas['changed'][:10]} (2026-01-04) is not ported" in message
    assert f"the nearest port is {newest.name} ({newest.date}), whose planner differs in {ATTENTION_PY}:get_mla_metadata_info_v1, {HEADER}" in message


def test_without_a_clone_or_in_a_clone_without_it_a_commit_is_unknown(
    history: tuple[GitRepo, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, shas = history
    monkeypatch.delenv("MLA_GOLDEN_AITER_REPO", raising=False)
    with pytest.raises(BackendError, match="unknown aiter planner version .* given its clone: --aiter-repo DIR"):
        resolve(f"reference@{shas['reformatted'][:10]}")
    with pytest.raises(BackendError, match=f"nor is it a commit of the aiter clone {repo.path}"):
        resolve("reference@deadbeef00", aiter_repo=str(repo.path))
    monkeypatch.setenv("MLA_GOLDEN_AITER_REPO", str(repo.path))
    assert resolve(f"reference@{shas['reformatted'][:10]}").asked == shas["reformatted"], "the env names the clone too"


def test_the_sweep_takes_the_clone_and_its_workers_the_port(history: tuple[GitRepo, dict[str, str]], tmp_path: Path) -> None:
    repo, shas = history
    newest = reference.versions()[-1]
    points = tmp_path / "space.toml"
    points.write_text('[[prefill]]\nname = "p"\ndevices = ["gfx950:256"]\nheads = 16\nseq_lens = [[300, 40]]\n', encoding="utf-8")
    args = ["sweep", "--a", f"reference@{shas['reformatted'][:10]}", "--b", f"reference@{newest.name}",
            "--space", str(points), "--format", "json", "--aiter-repo", str(repo.path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["runs"][0] == f"reference {newest.name}, as aiter {shas['reformatted'][:10]} plans"
    refused = CliRunner().invoke(app, [*args[:2], f"reference@{shas['changed'][:10]}", *args[3:]])
    assert refused.exit_code == 2 and "is not ported" in refused.output and "the nearest port is" in refused.output
    # the same spec without the clone, in the same process: the port itself, not what the clone resolved it to
    port = f"reference@{newest.name}"  # the spec the clone's commit was resolved to, for the workers
    alone = CliRunner().invoke(
        app, ["sweep", "--a", port, "--b", port, "--space", str(points), "--format", "json"], env={"MLA_GOLDEN_AITER_REPO": None}
    )
    assert alone.exit_code == 0, alone.output
    assert json.loads(alone.stdout)["runs"][1] == f"reference {newest.name}", "a planner resolved in a clone is not reused without it"


AITER_REPO = os.environ.get("MLA_GOLDEN_AITER_REPO")


@pytest.mark.skipif(not AITER_REPO, reason="set MLA_GOLDEN_AITER_REPO to a git clone of ROCm/aiter")
def test_aiters_own_commits_resolve_by_meaning() -> None:
    backend = resolve("reference@1e8c33fd62", aiter_repo=AITER_REPO)
    assert backend.version is not None and backend.version.name == "e4048607", "1e8c33fd62 is exactly e4048607's planner"
    with pytest.raises(BackendError, match=r"aiter 45ef304fe5 \(2026-08-10\) is not ported: .*the nearest port is aded0f84"):
        resolve("reference@45ef304fe5", aiter_repo=AITER_REPO)
