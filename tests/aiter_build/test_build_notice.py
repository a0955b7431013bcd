"""A cold aiter-src build says, once and on stderr, that it takes minutes: from Python, and from the CLI under
--quiet (which drops chatter, not the one line that explains a multi-minute wait). No aiter tree: a tree of one
entry point and a "compiler" that only writes the binary, as in test_aiter_src.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.aiter_trees import entry_point, fake_compiler, tree_at
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.aiter_build import build
from mla_golden.aiter_build.tree import CACHE_ENV
from mla_golden.cli import app
from mla_golden.schema import ATTENTION_PY, CPP_FILE

NOTICE = "mla-golden: building aiter's planner of "
GOLDEN = ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx950-cu256" / "h128-bf16-q1-b1-jitter8192-p1.safetensors"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The smallest tree the build accepts, with a compiler that costs nothing and a cache of its own."""
    root = tree_at(tmp_path / "aiter", {CPP_FILE: entry_point(), ATTENTION_PY: ""})
    monkeypatch.setenv("CXX", str(fake_compiler(tmp_path)))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return root


def test_a_cold_build_says_so_on_stderr_once_and_a_cached_one_says_nothing(tree: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    cold = build.build(tree, tmp_path / "builds")
    out, err = capsys.readouterr()
    assert cold.compiled and out == ""
    assert err.splitlines() == [f"{NOTICE}{tree.resolve()} for the host: a few minutes, once (later uses find it in the cache)"]
    assert not build.build(tree, tmp_path / "builds").compiled
    assert capsys.readouterr() == ("", "")


def test_a_caller_that_reports_its_builds_itself_can_keep_it_quiet(tree: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    assert build.build(tree, tmp_path / "builds", quiet=True).compiled  # bisect and history: "building <commit> ..."
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow  # the diff goes on past the build (4-5 s here)
@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_the_cli_says_it_before_the_build_quiet_or_not_and_never_on_stdout(tree: Path, quiet: list[str]) -> None:
    result = CliRunner().invoke(app, ["diff", str(GOLDEN), "--backend", f"aiter-src:{tree}", *quiet])
    said = [line for line in result.stderr.splitlines() if line.startswith(NOTICE)]
    assert said == [f"{NOTICE}{tree.resolve()} for the host: a few minutes, once (later uses find it in the cache)"], result.stderr
    assert NOTICE not in result.stdout
