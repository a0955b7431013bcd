"""An aiter git clone read as its planner's history (mla_golden.aiter_build.repo), on small repositories built here.

The digest of a commit must be the digest of its checked-out planner sources
(``planner_digest.tree_digest``), commits that only touch comments keep their
parent's, and the first-parent line, the planner-touching commits, the files
touched and the pull request numbers come out as git has them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.git_repos import GitRepo

from mla_golden.aiter_build.repo import AiterRepo, Commit
from mla_golden.errors import AiterSourceError
from mla_golden.reference.planner_digest import tree_digest
from mla_golden.schema import ATTENTION_PY, CPP_FILE

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

CPP = "int plan(int i) { return i * 2; }\n"
HEADER = "csrc/kernels/mla/metadata/v1_2_host.cuh"
PY = "def get_mla_metadata_v1(x):\n    return x\n"


def _history(tmp_path: Path) -> tuple[GitRepo, dict[str, str]]:
    """base -> unrelated -> comment-only -> planner change -> (release branch) -> merge of a side branch."""
    repo = GitRepo(tmp_path / "aiter")
    shas = {"base": repo.commit("initial (#1)", {CPP_FILE: CPP, ATTENTION_PY: PY, "README.md": "aiter\n"})}
    shas["unrelated"] = repo.commit("docs only (#2)", {"README.md": "aiter, again\n"})
    shas["comment"] = repo.commit("comment the planner (#3)", {CPP_FILE: "// doubles\n" + CPP})
    shas["change"] = repo.commit("quadruple (#4)", {CPP_FILE: CPP.replace("* 2", "* 4"), HEADER: "#pragma once\n"})
    repo.git("checkout", "-q", "-b", "side")
    shas["side"] = repo.commit("side work", {HEADER: "#pragma once\nint x;\n"})
    repo.git("checkout", "-q", "main")
    shas["main-after"] = repo.commit("tune (#5)", {"README.md": "tuned\n"})
    shas["merge"] = repo.merge("side", "Merge pull request #6 from someone/side")
    return repo, shas


def _checked_out_digest(repo: GitRepo, sha: str, where: Path) -> str:
    archive = subprocess.run(["git", "-C", str(repo.path), "archive", sha], capture_output=True, check=True).stdout
    where.mkdir()
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return tree_digest(where)


def test_a_commits_digest_is_that_of_its_checked_out_tree(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    reader = AiterRepo(repo.path)
    for name, sha in shas.items():
        assert reader.digest(sha) == _checked_out_digest(repo, sha, tmp_path / name), name


def test_comments_and_unrelated_files_keep_the_digest_a_code_change_moves_it(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    reader = AiterRepo(repo.path)
    assert reader.digest(shas["base"]) == reader.digest(shas["unrelated"]) == reader.digest(shas["comment"])
    assert reader.digest(shas["change"]) != reader.digest(shas["comment"])
    assert reader.digest(shas["merge"]) != reader.digest(shas["main-after"])  # the side branch changed the header


def test_the_first_parent_line_and_the_planner_commits_on_it(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    reader = AiterRepo(repo.path)
    line = reader.first_parent_line(shas["base"], shas["merge"])
    assert [c.sha for c in line] == [shas[n] for n in ("unrelated", "comment", "change", "main-after", "merge")]
    assert line[-1].parents == (shas["main-after"], shas["side"])
    assert reader.planner_commits(shas["base"], shas["merge"]) == {shas["comment"], shas["change"], shas["merge"]}
    assert reader.touched(shas["change"]) == tuple(sorted([CPP_FILE, HEADER]))
    assert reader.touched(shas["merge"]) == (HEADER,)  # against the first parent
    assert reader.touched(shas["base"]) == tuple(sorted([ATTENTION_PY, CPP_FILE]))  # a root commit: all it has


def test_commits_name_their_pull_request_and_date(tmp_path: Path) -> None:
    repo, shas = _history(tmp_path)
    reader = AiterRepo(repo.path)
    assert reader.commit(shas["change"]).pr == 4
    assert reader.commit(shas["merge"]).pr == 6
    assert reader.commit(shas["side"]).pr is None
    change = reader.commit("main~2")
    assert change == Commit(shas["change"], (shas["comment"],), "2026-01-04", "quadruple (#4)")
    assert reader.is_ancestor(shas["base"], shas["merge"]) and not reader.is_ancestor(shas["side"], shas["main-after"])
    assert reader.merge_base(shas["side"], shas["main-after"]) == shas["change"]


def test_what_has_no_planner_and_what_does_not_parse(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "aiter")
    bare = repo.commit("no planner yet", {"README.md": "x\n"})
    broken = repo.commit("planner, broken Python", {CPP_FILE: CPP, ATTENTION_PY: "def get_mla_metadata_v1(:\n"})
    reader = AiterRepo(repo.path)
    assert not reader.has_planner(bare) and reader.has_planner(broken)
    assert reader.digest(broken).startswith("unparsed-")  # a planner of its own, not an error


def test_bad_repositories_and_revisions_are_named(tmp_path: Path) -> None:
    with pytest.raises(AiterSourceError, match="no such folder"):
        AiterRepo(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(AiterSourceError, match="not a git repository"):
        AiterRepo(tmp_path / "plain")
    repo, _ = _history(tmp_path)
    reader = AiterRepo(repo.path)
    for rev in ("v9.9", "--all", "deadbeef"):
        with pytest.raises(AiterSourceError, match=f"has no commit {rev!r}"):
            reader.commit_sha(rev)
