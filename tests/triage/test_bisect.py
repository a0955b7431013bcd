"""``mla-golden bisect`` and ``mla-golden history`` over small aiter-like repositories built here.

The toy aiter (helpers.aiter_trees) builds and runs through ``aiter-src`` like
aiter's own tree. Its history plants two planner changes at known commits,
among commits that only touch docs, comments or formatting (the same planner
by meaning), a commit that does not build, and a release branch cut before
the changes. Bisect and history must name the planted commits.

The real aiter history (the upgrade preview's calls, bisected to their pull
requests) is tested where MLA_GOLDEN_AITER_REPO names a clone of ROCm/aiter.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.aiter_trees import PLANNER_CU, planner_files, toy_call
from helpers.cli import run
from helpers.git_repos import GitRepo
from helpers.repo import ROOT

import mla_golden
from mla_golden.aiter_build.tree import CACHE_ENV
from mla_golden.golden.store import Golden, GoldenStore
from mla_golden.schema import CPP_FILE
from mla_golden.triage.bisect import Bisection
from mla_golden.triage.planners import Progress

pytestmark = pytest.mark.skipif(shutil.which("git") is None or shutil.which("g++") is None, reason="needs git and g++")

#: The toy calls: (name, kv lengths). kv <= 64 per batch is never split; more than 4 batches is "wide".
CALLS = {"short": [30, 40], "medium": [100, 50], "wide": [30] * 8, "long-wide": [200] * 6}


@dataclass
class ToyAiter:
    repo: GitRepo
    commits: dict[str, str]
    goldens: Path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for every worker (g++ builds each toy tree once; the cache locks per build)."""
    return tmp_path_factory.getbasetemp().parent / "bisect-build-cache"


@pytest.fixture(autouse=True)
def _shared_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(cache))
    monkeypatch.delenv("MLA_GOLDEN_AITER_REPO", raising=False)


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> ToyAiter:
    """main: docs, comment and reformat commits, a broken build and its fix, then the two planted changes
    (#7: works of 128 kv tokens, #9: wide calls' CU parts from the last one); v0.2 before them, and a release
    branch off v0.2 with a docs-only post1 and a post2 that cherry-picks #7."""
    root = tmp_path_factory.mktemp("toy")
    repo = GitRepo(root / "aiter")
    c = {"first": repo.commit("README only (#0)", {"README.md": "toy aiter\n"})}
    c["initial"] = repo.commit("MLA metadata planner (#1)", planner_files())
    c["docs"] = repo.commit("docs (#2)", {"README.md": "toy aiter, documented\n"})
    c["comment"] = repo.commit("comment the planner (#3)", planner_files(comment="works of KV_SPLIT tokens"))
    repo.git("tag", "v0.2")
    c["reformat"] = repo.commit("reformat (#4)", {CPP_FILE: PLANNER_CU.replace("{\n    toy_plan", "{\n\n        toy_plan")})
    c["broken"] = repo.commit("tune the header (#5)", planner_files(comment="works of KV_SPLIT tokens", broken=True))
    c["fixed"] = repo.commit("fix the build (#6)", planner_files(comment="works of KV_SPLIT tokens"))
    c["split"] = repo.commit("split kv at 128 tokens (#7)", planner_files(128, comment="works of KV_SPLIT tokens"))
    c["comment2"] = repo.commit("explain the split (#8)", planner_files(128, comment="works of 128 tokens"))
    c["reverse"] = repo.commit("wide calls from the last CU part (#9)", planner_files(128, 4, comment="works of 128 tokens"))
    repo.git("checkout", "-q", "-b", "release/v0.2", "v0.2")
    c["post1"] = repo.commit("release notes (#10)", {"NOTES.md": "v0.2.post1\n"})
    repo.git("tag", "v0.2.post1")
    c["post2"] = repo.commit("cherry-pick: split kv at 128 tokens (#7)", planner_files(128, comment="works of KV_SPLIT tokens"))
    repo.git("tag", "v0.2.post2")
    repo.git("checkout", "-q", "main")
    goldens = root / "goldens"
    os.environ[CACHE_ENV] = str(cache)  # the module fixture runs before the autouse one
    planner = mla_golden.aiter_src(c["comment"], repo=repo.path)
    store = GoldenStore(goldens)
    for name, kv in CALLS.items():
        store.write(Golden(name, toy_call(planner, kv)))
    return ToyAiter(repo, c, goldens)


def _bisect(toy: ToyAiter, good: str, bad: str = "main", **kwargs: object) -> Bisection:
    result: Bisection = mla_golden.bisect([toy.goldens], good=good, bad=bad, repo=toy.repo.path, **kwargs)
    return result


def _found(result: Bisection) -> dict[str | None, list[str]]:
    """The commit (its subject) that changed each group of calls."""
    return {(c.state.commit.subject if c.state else None): sorted(c.keys) for c in result.changes}


@pytest.mark.slow
def test_bisect_names_each_planted_commit_with_its_calls(toy: ToyAiter) -> None:
    events: list[Progress] = []
    result = _bisect(toy, "v0.2", progress=events.append)
    assert _found(result) == {
        "split kv at 128 tokens (#7)": ["long-wide", "medium"],
        "wide calls from the last CU part (#9)": ["wide"],
    }
    assert result.unchanged == ["short"] and result.exit_code == 1
    split = result.changes[0]
    assert split.state is not None and split.state.commit.sha == toy.commits["split"] and split.state.commit.pr == 7
    assert split.state.touched == ("csrc/kernels/mla/metadata/v1_2_device.cuh",)
    assert split.kind == "diverged" and split.before.startswith(toy.commits["fixed"][:10])
    assert split.diff.work_items_differing > 0  # the diff before -> at the commit shows the re-tiling
    # the line holds only changes by meaning: no docs, comment, reformat or "explain" commit
    assert [s.commit.pr for s in result.line] == [3, 5, 6, 7, 9]
    # the broken commit lies outside every range once the fix (the first planner again) was planned for free
    tried = {r.state.commit.pr: r.outcome for r in result.planners}
    assert 5 not in tried and set(tried) <= {3, 6, 7, 9}
    assert {e.what for e in events} >= {"building"} and all(isinstance(str(e), str) for e in events)


def test_the_report_text_json_and_page(toy: ToyAiter, tmp_path: Path) -> None:
    page = tmp_path / "bisect.html"
    ran = run("bisect", toy.goldens, "--good", "v0.2", "--bad", "main", "--aiter-repo", toy.repo.path, "--html", page)
    assert ran.code == 1, ran.stderr
    first = ran.stdout.splitlines()[0]
    assert first.startswith("mla-golden bisect: 3 of 4 call(s) change between v0.2 (") and "at 2 commit(s)" in first
    assert "== " + toy.commits["split"][:10] in ran.stdout and "split kv at 128 tokens (#7): 2 call(s) diverged" in ran.stdout
    assert "pull request #7; planner files touched: csrc/kernels/mla/metadata/v1_2_device.cuh" in ran.stdout
    assert "DIVERGED get_mla_metadata_v1: before: " in ran.stdout  # one call's diff, as diff shows it
    assert "bisect: " in ran.stderr  # progress on stderr
    html = page.read_text()
    assert "<title>mla-golden bisect: 3 of 4 call(s) change" in html and "split kv at 128 tokens (#7)" in html
    ran = run("bisect", toy.goldens, "--good", "v0.2", "--bad", "main", "--aiter-repo", toy.repo.path, "--format", "json", "--quiet")
    document = json.loads(ran.stdout)
    assert document["format"] == "mla-golden-bisect/1" and document["exit_code"] == 1 == ran.code
    assert [(c["commit"]["pr"], sorted(c["keys"])) for c in document["changes"]] == [(7, ["long-wide", "medium"]), (9, ["wide"])]
    change = document["changes"][0]
    assert change["commit"]["subject"] == "split kv at 128 tokens (#7)" and change["diff"]["format"] == "mla-golden-diff/1"
    assert set(change["soundness"]) == {"verdict", "all_sound", "calls"} and set(change["soundness"]["calls"]) == {"long-wide", "medium"}
    assert "bisect: " in ran.stderr  # progress even under --quiet


@pytest.mark.slow
def test_a_release_branch_is_searched_from_the_merge_base(toy: ToyAiter) -> None:
    result = _bisect(toy, "v0.2.post1")
    assert result.merge_base is not None and result.merge_base.sha == toy.commits["comment"]
    assert any("not an ancestor" in n and result.merge_base.short in n for n in result.notes)
    assert any("has GOOD's planner by meaning" in n for n in result.notes)
    assert _found(result) == {"split kv at 128 tokens (#7)": ["long-wide", "medium"], "wide calls from the last CU part (#9)": ["wide"]}


@pytest.mark.slow
def test_a_change_on_the_release_branch_is_said_with_what_differs(toy: ToyAiter) -> None:
    # post2 cherry-picked #7: against main only #9 is new, except where the merge base (no #7) plans otherwise too
    result = _bisect(toy, "v0.2.post2")
    assert _found(result) == {"wide calls from the last CU part (#9)": ["wide"], None: ["long-wide"]}
    assert sorted(result.unchanged) == ["medium", "short"]
    assert any("already plan otherwise there: changed on GOOD's own branch" in n for n in result.notes)
    # against main before #7: every call BAD plans otherwise already plans so at the merge base
    result = _bisect(toy, "v0.2.post2", toy.commits["fixed"])
    assert _found(result) == {None: ["long-wide", "medium"]}
    (change,) = result.changes
    assert change.before.startswith("GOOD ") and change.after.startswith("merge base ") and not change.diff.equal
    assert change.diff.work_items_differing > 0  # what differs: the split points


@pytest.mark.slow
def test_a_commit_that_does_not_build_is_skipped_and_named(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "aiter")
    good = repo.commit("planner (#1)", planner_files())
    broken = repo.commit("half a change (#2)", planner_files(broken=True))
    fixed = repo.commit("the other half: split at 128 (#3)", planner_files(128))
    goldens = tmp_path / "goldens"
    GoldenStore(goldens).write(Golden("medium", toy_call(mla_golden.aiter_src(good, repo=repo.path), CALLS["medium"])))
    result = mla_golden.bisect([goldens], good=good, bad=fixed, repo=repo.path)
    (change,) = result.changes
    assert change.state is not None and change.state.commit.sha == fixed
    assert [s.commit.sha for s in change.candidates] == [broken, fixed]  # git bisect: "could be any of"
    (skipped,) = result.skipped
    assert skipped.state.commit.sha == broken and "failed to build" in (skipped.problem or "")
    ran = run("bisect", goldens, "--good", good, "--bad", fixed, "--aiter-repo", repo.path, "--quiet")
    assert ran.code == 1
    assert f"skipped (like git bisect skip): {broken[:10]}" in ran.stdout
    assert f"the first change is one of these (the others did not build or cannot plan these calls): {broken[:10]}, {fixed[:10]}" in ran.stdout


def test_no_change_exits_0(toy: ToyAiter) -> None:
    result = _bisect(toy, "v0.2", toy.commits["fixed"])  # comments, a reformat and a build break fixed again
    assert result.changes == [] and result.exit_code == 0 and sorted(result.unchanged) == sorted(CALLS)
    ran = run("bisect", toy.goldens, "--good", "v0.2", "--bad", toy.commits["fixed"], "--aiter-repo", toy.repo.path)
    assert ran.code == 0 and ran.stdout.startswith("mla-golden bisect: no call changes between v0.2")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--good", "v9.9", "--bad", "main"], "has no commit 'v9.9'"),
        (["--good", "main", "--bad", "v0.2"], "is older than --good main"),
        (["--good", "HEAD~9", "--bad", "main"], "has no planner sources"),  # the README-only first commit
        (["--good", "HEAD~10", "--bad", "main"], "has no commit 'HEAD~10'"),
        (["--good", "v0.2"], "--bad REV is required"),
    ],
)
def test_bad_input_exits_2_with_a_message(toy: ToyAiter, args: list[str], message: str) -> None:
    ran = run("bisect", toy.goldens, *args, "--aiter-repo", toy.repo.path)
    assert ran.code == 2 and message in ran.stderr and "Traceback" not in ran.stderr, ran.stderr


def test_a_repository_that_is_not_aiter_exits_2(toy: ToyAiter, tmp_path: Path) -> None:
    other = GitRepo(tmp_path / "other")
    other.commit("a project", {"README.md": "x\n"})
    ran = run("bisect", toy.goldens, "--good", "HEAD", "--bad", "HEAD", "--aiter-repo", other.path)
    assert ran.code == 2 and "has no planner sources" in ran.stderr
    ran = run("bisect", toy.goldens, "--good", "a", "--bad", "b", "--aiter-repo", tmp_path / "missing")
    assert ran.code == 2 and "no such folder" in ran.stderr


@pytest.mark.slow
def test_history_lists_the_changes_by_meaning_and_what_each_does_to_goldens(toy: ToyAiter) -> None:
    log = mla_golden.history("v0.2..main", repo=toy.repo.path)
    assert [e.state.commit.pr for e in log.entries] == [5, 6, 7, 9]  # not #4 (reformat) nor #8 (a comment)
    assert log.commits == 6 and log.touching == 6
    log = mla_golden.history("v0.2..main", repo=toy.repo.path, goldens=[toy.goldens])
    by_pr = {e.state.commit.pr: e for e in log.entries}
    assert by_pr[5].problem is not None and "failed to build" in by_pr[5].problem
    assert by_pr[6].changed == [] and sorted(by_pr[7].changed or []) == ["long-wide", "medium"] and sorted(by_pr[9].changed or []) == ["long-wide", "wide"]
    ran = run("history", "v0.2..main", "--aiter-repo", toy.repo.path, "--goldens", toy.goldens)
    assert ran.code == 0 and ran.stdout.startswith("mla-golden history v0.2..main: 4 commit(s) change the planner by meaning")
    assert "split kv at 128 tokens (#7)" in ran.stdout and "changes 2 of 4 golden(s): " in ran.stdout
    ran = run("history", "v0.2..main", "--aiter-repo", toy.repo.path, "--format", "json")
    assert [e["pr"] for e in json.loads(ran.stdout)["entries"]] == [5, 6, 7, 9]
    for bad in ("v0.2", "v0.2...main", "v9..main"):
        ran = run("history", bad, "--aiter-repo", toy.repo.path)
        assert ran.code == 2 and "Traceback" not in ran.stderr, ran.stderr


# ------------------------------------------------------------- the real aiter history (gated)

AITER_REPO = os.environ.get("MLA_GOLDEN_AITER_REPO")


@pytest.mark.skipif(not AITER_REPO, reason="set MLA_GOLDEN_AITER_REPO to a git clone of ROCm/aiter (and install g++)")
def test_the_upgrade_previews_calls_bisect_to_their_pull_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert AITER_REPO is not None
    monkeypatch.setenv(CACHE_ENV, os.environ.get("MLA_GOLDEN_REAL_CACHE", str(tmp_path / "cache")))
    monkeypatch.chdir(tmp_path)
    goldens = Path("goldens-0.1.16")
    assert run("record", "--backend", "reference@v0.1.16.post2", "--out", goldens, "--quiet").code == 0
    result = mla_golden.bisect([goldens], good="v0.1.16.post2", bad="v0.1.20", repo=AITER_REPO)
    found = {c.state.commit.pr: (c.kind, len(c.keys)) for c in result.changes if c.state is not None}
    # gfx950 fp8 32 heads native at qlen 1; the bf16 64-head sizing on gfx950; gfx942 fp8 64 heads native
    assert found == {3304: ("diverged", 3), 3874: ("resized", 3), 3188: ("diverged", 3)}
    assert len(result.unchanged) == 111 and all(c.all_sound for c in result.changes)
    assert result.merge_base is not None and result.merge_base.short == "0730b33fcf"
    # the README's "Whose change was it?" shows this very run
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = readme[readme.index("$ mla-golden bisect goldens-0.1.16 --good v0.1.16.post2 --bad v0.1.20 --quiet\n") :]
    ran = run("bisect", goldens, "--good", "v0.1.16.post2", "--bad", "v0.1.20", "--quiet", "--aiter-repo", AITER_REPO)
    block = shown.split("\n", 1)[1].split("```", 1)[0]
    # the cost line says built or cached (cold or warm); the page elides the progress lines that go to stderr
    cost_apart = lambda text: [line for line in text.splitlines() if "planners tried:" not in line and line != "..."]  # noqa: E731
    assert ran.code == 1 and cost_apart(ran.stdout) == cost_apart(block)
    log = mla_golden.history("v0.1.16..v0.1.20", repo=AITER_REPO)
    assert [e.state.commit.pr for e in log.entries] == [3750, 3304, 3855, 3465, 3874, 3188, 3459, 4227, 4258, 4521, 4565, 4729]
    ported = {e.state.commit.pr: e.state.ported.name for e in log.entries if e.state.ported}
    assert ported == {4258: "aded0f84", 4729: "e4048607"}
