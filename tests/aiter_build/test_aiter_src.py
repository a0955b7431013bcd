"""The aiter-src backend: aiter's own planner built from a source tree (mla_golden.aiter_src).

The first group needs no aiter tree: backend specs, the errors for a missing
folder, a tree without the planner sources, a missing compiler, a build
error, and one build shared by two processes racing for it (the last two need
g++). The second group builds aiter itself and runs only where
``MLA_GOLDEN_AITER_REPO`` names a git clone (or mirror) of ROCm/aiter: the
shipped goldens replay equal on ``aiter-src@e4048607`` through the CLI, and
conformance records of e4048607 and v0.1.16.post2 pass through the built trees
as they pass through the reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from helpers.aiter_trees import entry_point, fake_compiler, tree_at
from helpers.conformance import VersionCase, check_case, version_cases
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden import AiterSourceError, BackendError, aiter_src
from mla_golden.aiter_build import build, harness, scratch
from mla_golden.aiter_build.module import source_digest
from mla_golden.aiter_build.tree import CACHE_ENV, REPO_ENV, from_path, from_revision
from mla_golden.backends import parse_spec, resolve
from mla_golden.cli import app
from mla_golden.errors import AiterCheckError, BufferTooSmallError
from mla_golden.golden.store import load
from mla_golden.reference import versions
from mla_golden.schema import ATTENTION_PY, CPP_FILE

HAS_GXX = shutil.which("g++") is not None
needs_gxx = pytest.mark.skipif(not HAS_GXX, reason="g++ is not installed")


# ---------------------------------------------------------------- no aiter tree needed


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("aiter-src:/opt/aiter", ("aiter-src", "/opt/aiter")),
        ("aiter-src:rel/with:colon", ("aiter-src", "rel/with:colon")),
        ("aiter-src@v0.1.19", ("aiter-src", "@v0.1.19")),
        ("aiter-src@e4048607", ("aiter-src", "@e4048607")),
        ("reference@aded0f84", ("reference", "aded0f84")),
        ("auto", ("auto", None)),
    ],
)
def test_specs_name_a_folder_or_a_revision(spec: str, parsed: tuple[str, str | None]) -> None:
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["aiter-src", "aiter-src:", "aiter-src@", "aiter-srcx:/a"])
def test_a_spec_without_a_tree_is_refused(spec: str) -> None:
    with pytest.raises(BackendError, match="aiter-src"):
        parse_spec(spec)


def test_a_missing_folder_is_a_value_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(AiterSourceError, match="no such folder") as info:
        resolve(f"aiter-src:{tmp_path / 'nowhere'}")
    assert isinstance(info.value, ValueError) and isinstance(info.value, BackendError)


def test_a_tree_without_the_planner_sources_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "aiter" / "ops").mkdir(parents=True)
    (tmp_path / "aiter" / "ops" / "attention.py").write_text("")
    with pytest.raises(AiterSourceError, match=r"no csrc/kernels/mla/metadata\.cu") as info:
        aiter_src(tmp_path)
    assert "attention.py" not in str(info.value)


def test_a_revision_needs_a_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPO_ENV, raising=False)
    with pytest.raises(AiterSourceError, match=f"--aiter-repo DIR.*{REPO_ENV}"):
        resolve("aiter-src@e4048607")


def test_a_revision_the_repo_lacks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(AiterSourceError, match="has no commit 'v9.9.9'"):
        resolve("aiter-src@v9.9.9", aiter_repo=str(tmp_path))


def _fake_tree(root: Path, body: str = "") -> Path:
    """The smallest tree the build accepts: one entry point, an empty attention.py."""
    return tree_at(root, {CPP_FILE: entry_point(body), ATTENTION_PY: ""})


def test_an_installed_aiter_is_found_from_site_packages_or_its_package(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    cu = site / "aiter_meta" / "csrc" / "kernels" / "mla" / "metadata.cu"
    cu.parent.mkdir(parents=True)
    cu.write_text("")
    (site / "aiter" / "ops").mkdir(parents=True)
    (site / "aiter" / "ops" / "attention.py").write_text("")
    for given in (site, site / "aiter"):
        found = from_path(given)
        assert (found.csrc_root, found.py_root) == (site / "aiter_meta", site)


def test_a_revision_is_extracted_once_into_the_cache_by_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = _fake_tree(tmp_path / "repo")
    (repo / "README").write_text("not extracted\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(REPO_ENV, str(repo))
    first = from_revision("v1")
    assert first.commit == commit and first.csrc_root.name == commit
    assert (first.csrc_root / "csrc" / "kernels" / "mla" / "metadata.cu").is_file()
    assert not (first.csrc_root / "README").exists(), "only csrc/ and aiter/ are extracted"
    stamp = (first.csrc_root / ".aiter_commit").stat().st_mtime_ns
    again = from_revision(commit[:10])
    assert again.csrc_root == first.csrc_root and (first.csrc_root / ".aiter_commit").stat().st_mtime_ns == stamp
    assert from_path(first.csrc_root).commit == commit, "a worker given the folder knows the commit"
    assert not [p for p in first.csrc_root.parent.iterdir() if p.name.endswith(".tmp")]


def _sparse(path: Path, size: int) -> None:
    """``path`` made ``size`` bytes long without writing them (a hole)."""
    with path.open("r+b") as handle:
        handle.truncate(size)


BROKEN_TREES = {
    "a syntax error in attention.py": ("aiter/ops/attention.py", lambda p: p.write_text("def get_mla_metadata_v1(:\n"), r", line 1: "),
    "a 153 MB attention.py": ("aiter/ops/attention.py", lambda p: _sparse(p, 153 << 20), r": 160432128 bytes, more than"),
    "a metadata.cu that is not UTF-8": ("csrc/kernels/mla/metadata.cu", lambda p: p.write_bytes(b"\xff\xfe"), "not UTF-8 text"),
    "a launch with no end": (
        "csrc/kernels/mla/metadata.cu",
        lambda p: p.write_text(p.read_text() + "void f() { k<<<1, 1(); }\n"),
        "'<<<' at offset [0-9]+ has no '>>>'",
    ),
    "a planner source that is a FIFO": ("csrc/kernels/mla/metadata/v1_comm.cuh", os.mkfifo, "not a regular file"),
}


@pytest.mark.slow
@pytest.mark.parametrize("broken", list(BROKEN_TREES), ids=lambda b: b.replace(" ", "-"))
def test_a_broken_or_huge_tree_is_exit_2_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    tree = _fake_tree(tmp_path / "aiter")
    (tree / "csrc" / "kernels" / "mla" / "metadata").mkdir()
    relative, breaks, expected = BROKEN_TREES[broken]
    breaks(tree / relative)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(fake_compiler(tmp_path)))
    result = CliRunner().invoke(app, ["diff", str(ROOT / "goldens"), "--backend", f"aiter-src:{tree}"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert re.search(re.escape(str(tree / relative)) + ".*" + expected, " ".join(result.output.split())), result.output


def _dead_pid() -> int:
    """The pid of a process that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_left_over_temp_folders_go_and_live_ones_stay(tmp_path: Path) -> None:
    host = socket.gethostname()

    def temp(name: str, owner: str | None, age_s: float = 0.0) -> Path:
        folder = tmp_path / f"{name}.x1y2.tmp"
        folder.mkdir()
        if owner is not None:
            (folder / scratch.OWNER).write_text(owner)
        stamp = time.time() - age_s
        os.utime(folder, (stamp, stamp))
        return folder

    dead = temp("dead-owner", f"{host} {_dead_pid()}")
    old = temp("old-live-owner", f"{host} {os.getpid()}", age_s=scratch.STALE_AFTER_S + 60)
    old_unowned = temp("old-unowned", None, age_s=scratch.STALE_AFTER_S + 60)
    live = temp("live-owner", f"{host} {os.getpid()}")
    young_unowned = temp("being-made", None)
    elsewhere = temp("other-host", f"not-{host} {_dead_pid()}")
    published = tmp_path / "0123456789abcdef"
    published.mkdir()
    assert sorted(scratch.sweep(tmp_path)) == sorted([dead, old, old_unowned])
    assert sorted(p for p in tmp_path.iterdir()) == sorted([live, young_unowned, elsewhere, published])


def test_a_build_killed_mid_way_leaves_a_temp_folder_the_next_build_removes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _fake_tree(tmp_path / "aiter")
    cache = tmp_path / "cache"
    started = tmp_path / "started"
    stuck = tmp_path / "stuck-cxx"
    stuck.write_text(f"#!/bin/sh\ntouch {started}\nexec sleep 600\n")
    stuck.chmod(0o755)
    script = f"from pathlib import Path; from mla_golden.aiter_build.build import build; build(Path({str(tree)!r}), Path({str(cache)!r}))"
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "CXX": str(stuck)}, start_new_session=True)
    try:
        while not started.exists():
            assert proc.poll() is None, "the build ended before its compiler started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the build and its compiler, mid-way
        proc.wait()
    left = [p for p in cache.iterdir() if p.name.endswith(".tmp")]
    assert len(left) == 1
    monkeypatch.setenv("CXX", str(fake_compiler(tmp_path)))
    built = build.build(tree, cache)
    assert built.binary.is_file()
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")], "the killed build's folder was removed"
    assert not (built.binary.parent / scratch.OWNER).exists()


@pytest.mark.slow
def test_threads_asking_for_one_tree_at_once_get_one_module_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from mla_golden.aiter_build import at_path

    tree = _fake_tree(tmp_path / "aiter")
    log = tmp_path / "cxx.log"
    fake = fake_compiler(tmp_path)
    counting = tmp_path / "counting-cxx"
    counting.write_text(f"#!/bin/sh\necho run >> {log}\nexec {fake} \"$@\"\n")
    counting.chmod(0o755)
    monkeypatch.setenv("CXX", str(counting))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with ThreadPoolExecutor(4) as pool:
        modules = list(pool.map(lambda _: at_path(tree), range(4)))
    try:
        assert all(m is modules[0] for m in modules)
        assert log.read_text().count("run") == 1
    finally:
        modules[0].python_process.close()


def test_an_extraction_removes_what_a_killed_one_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = _fake_tree(tmp_path / "repo")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    trees = tmp_path / "cache" / "aiter-src" / "trees"
    trees.mkdir(parents=True)
    left = trees / f"{'0' * 40}.abcd.tmp"
    (left / "csrc").mkdir(parents=True)
    (left / scratch.OWNER).write_text(f"{socket.gethostname()} {_dead_pid()}")
    extracted = from_revision("HEAD", repo)
    assert not left.exists()
    assert sorted(p.name for p in trees.iterdir() if not p.name.endswith(".lock")) == [extracted.commit]
    assert not (extracted.csrc_root / scratch.OWNER).exists()


def test_a_missing_compiler_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _fake_tree(tmp_path / "aiter")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(AiterSourceError, match=r"no C\+\+ compiler: .g\+\+. is not on PATH"):
        aiter_src(tree)


def test_the_cli_says_what_is_missing_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _fake_tree(tmp_path / "aiter")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("CXX", raising=False)
    goldens = ROOT / "goldens"
    result = CliRunner().invoke(app, ["diff", str(goldens), "--backend", f"aiter-src:{tree}"])
    assert result.exit_code == 2, result.output
    assert "no C++ compiler" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["record", "--out", str(tmp_path / "g"), "--backend", f"aiter-src:{tmp_path / 'none'}"])
    assert result.exit_code == 2 and "no such folder" in result.output, result.output


@pytest.mark.slow
@needs_gxx
def test_a_build_error_carries_the_compiler_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = _fake_tree(tmp_path / "aiter", body="    this_is_not_cxx;")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(AiterSourceError, match="g\\+\\+ failed to build the planner(.|\n)*this_is_not_cxx"):
        aiter_src(tree)
    assert not list((tmp_path / "cache").rglob("harness")), "a failed build published nothing"


@pytest.mark.slow
@needs_gxx
def test_two_processes_build_a_tree_once(tmp_path: Path) -> None:
    tree = _fake_tree(tmp_path / "aiter")
    wrapper, log = _counting_compiler(tmp_path)
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from mla_golden.aiter_build.build import build
        print(build(Path({str(tree)!r}) , Path({str(tmp_path / 'cache')!r})).binary)
        """
    )
    env = {**os.environ, "CXX": str(wrapper)}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate()[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1] and Path(outs[0]).is_file()
    assert log.read_text().count("run") == 1
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]


def _counting_compiler(tmp_path: Path) -> tuple[Path, Path]:
    """A g++ wrapper that logs each run: (the wrapper, its log)."""
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "cxx"
    wrapper.write_text(f"#!/bin/sh\necho run >> {log}\nexec {shutil.which('g++')} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, log


def _naive_digest(files: dict[str, Path]) -> str:
    """Each file's name and bytes hashed back to back, with no separator or length."""
    h = hashlib.sha256()
    for name, path in files.items():
        h.update(name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@pytest.mark.slow
@needs_gxx
def test_two_trees_whose_files_run_together_alike_get_two_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta = "csrc/kernels/mla/metadata"
    one, two = _fake_tree(tmp_path / "one"), _fake_tree(tmp_path / "two")
    (one / meta).mkdir()
    (one / meta / "z.cuh").write_text(f"{meta}/zz.cuh#error not included\n")
    (two / meta).mkdir()
    (two / meta / "z.cuh").write_text("")
    (two / meta / "zz.cuh").write_text("#error not included\n")
    naive = {_naive_digest({str(p.relative_to(root)): p for p in sorted(root.rglob("*.cu*"))}) for root in (one, two)}
    assert len(naive) == 1, "the pair collides when path and bytes are hashed back to back"
    wrapper, log = _counting_compiler(tmp_path)
    monkeypatch.setenv("CXX", str(wrapper))
    built = [build.build(root, tmp_path / "cache") for root in (one, two)]
    assert built[0].binary != built[1].binary and all(b.binary.is_file() and b.compiled for b in built)
    assert log.read_text().count("run") == 2
    assert not build.build(one, tmp_path / "cache").compiled, "the second build of a tree is the cached one"


def test_two_trees_whose_planner_sources_run_together_alike_get_two_names(tmp_path: Path) -> None:
    meta = "csrc/kernels/mla/metadata"
    one, two = _fake_tree(tmp_path / "one"), _fake_tree(tmp_path / "two")
    (one / meta).mkdir()
    (one / meta / "z.cuh").write_text("zz.cuhint x;")
    (two / meta).mkdir()
    (two / meta / "z.cuh").write_text("")
    (two / meta / "zz.cuh").write_text("int x;")
    assert len({_naive_digest({p.name: p for p in sorted((root / meta).glob("*.cuh"))}) for root in (one, two)}) == 1
    assert source_digest(from_path(one)) != source_digest(from_path(two))


def test_an_input_the_harness_cannot_pass_faithfully_is_refused() -> None:
    import torch

    from mla_golden.aiter_build.encode import encode

    param = build.CppParam("seqlens_qo_indptr", "tensor")
    assert encode(param, "seqlens_qo_indptr", torch.tensor([0, 2], dtype=torch.int32)) == "tensor seqlens_qo_indptr i32 in 1 2 2 0 2"
    with pytest.raises(AiterSourceError, match="seqlens_qo_indptr: .*contiguous int32 inputs only, got a torch.int64"):
        encode(param, "seqlens_qo_indptr", torch.tensor([0, 2], dtype=torch.int64))
    with pytest.raises(AiterSourceError, match="non-contiguous torch.int32"):
        encode(param, "seqlens_qo_indptr", torch.arange(6, dtype=torch.int32)[::2])


def test_signature_kinds_cover_the_harness() -> None:
    params = build.parse_signature("void get_ps_metadata_v1(const aiter_tensor_t& t, int32_t n, bool c) {}", "get_ps_metadata_v1")
    assert [p.kind for p in params] == ["tensor", "int", "bool"]


# ---------------------------------------------------------------- with an aiter clone

AITER_REPO = os.environ.get(REPO_ENV)
needs_aiter = pytest.mark.skipif(
    not (AITER_REPO and HAS_GXX),
    reason=f"set {REPO_ENV} to a git clone of ROCm/aiter (and install g++) to build aiter's own planner",
)
#: The newest ported commit; its records and the shipped goldens are its own.
NEWEST = "e4048607"
#: Records per version in the sample: every SAMPLE_EVERY-th one plus every failure-shaped one.
SAMPLE_EVERY = 12


def _sample(version: str) -> list[VersionCase]:
    """A sample of ``version``'s records; the newest's own files only (its cross-version sides repeat them)."""
    cases = [c for c in version_cases() if c.version == version and not (version == NEWEST and c.source.startswith("cross_version"))]
    special = [
        c
        for c in cases
        if c.expected["result"] == "error"
        or c.expected.get("indeterminate_record")
        or any(o.get("indeterminate") or o.get("written_beyond_end") for o in c.expected.get("outputs", {}).values())
    ]
    chosen = {c.id: c for c in cases[::SAMPLE_EVERY] + special[::3]}
    return list(chosen.values())


@needs_aiter
def test_shipped_goldens_replay_equal_on_the_newest_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REPO_ENV)
    args = ["diff", str(ROOT / "goldens"), "--backend", f"aiter-src@{NEWEST}", "--aiter-repo", str(AITER_REPO), "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '"status": "equal"' in result.output and "diverged" not in result.output
    backend = json.loads(result.stdout)["backend"]
    assert backend["name"] == "aiter-src" and backend["version"]["commit"].startswith(NEWEST)


@needs_aiter
@pytest.mark.parametrize("case", _sample(NEWEST) if AITER_REPO else [], ids=lambda c: c.id)
def test_newest_records_pass_through_the_tree(case: VersionCase) -> None:
    check_case(aiter_src(NEWEST), case)


#: Every ported version but the newest (checked above), each by its own commit.
OLDER = [v for v in versions() if v.name != NEWEST]


@needs_aiter
@pytest.mark.parametrize(
    "commit, case",
    [pytest.param(v.commit, c, id=f"{v.name}-{c.id}") for v in OLDER for c in _sample(v.name)] if AITER_REPO else [],
)
def test_every_older_versions_records_pass_through_its_tree(commit: str, case: VersionCase) -> None:
    check_case(aiter_src(commit), case)


@needs_aiter
def test_a_recording_names_the_tree_and_replays_on_it(tmp_path: Path) -> None:
    out = tmp_path / "goldens"
    result = CliRunner().invoke(app, ["record", "--backend", f"aiter-src@{NEWEST}", "--out", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    files = sorted(out.rglob("*.safetensors"))
    assert files
    planner = load(files[0]).call.provenance["planner"]
    assert planner["backend"] == "aiter-src" and planner["commit"].startswith(NEWEST)
    result = CliRunner().invoke(app, ["diff", str(out), "--backend", "reference"])
    assert result.exit_code == 0, result.output  # the reference version of that commit replays them equal


@needs_aiter
def test_a_write_past_a_buffer_end_touches_nothing() -> None:
    import torch

    module = aiter_src(NEWEST)
    assert module.BufferTooSmallError is BufferTooSmallError and module.AiterCheckError is AiterCheckError
    qo = torch.tensor([0, 1], dtype=torch.int32)
    kv = torch.tensor([0, 64], dtype=torch.int32)
    last = torch.ones(1, dtype=torch.int32)
    with module.device("gfx942", 304):
        info = module.get_mla_metadata_info_v1(1, 1, 16, None, None, is_sparse=False)
        bufs = [torch.zeros((s,) if isinstance(s, int) else s, dtype=d) for s, d in info]
        small = torch.zeros(1, dtype=torch.int32)
        with pytest.raises(BufferTooSmallError) as too_small:
            module.get_mla_metadata_v1(qo, kv, last, 16, 1, True, bufs[0], bufs[2], small, bufs[3], bufs[4], bufs[5])
        assert too_small.value.buffer == "work_indptr" and int(small[0]) == 0


@needs_aiter
def test_a_harness_that_died_is_restarted() -> None:
    case = _sample(NEWEST)[0]
    module = aiter_src(NEWEST)
    check_case(module, case)
    process = harness.process_for(module.harness_binary)
    first = process.pid()
    os.kill(first, 9)
    check_case(module, case)
    assert process.pid() != first


@needs_aiter
def test_the_readme_snippet_plans_as_the_port(capsys: pytest.CaptureFixture[str]) -> None:
    from helpers.readme_blocks import block

    namespace: dict[str, object] = {}
    exec(compile(block('mla_golden.aiter_src("v0.1.19"'), "README.md", "exec"), namespace)
    works = int(namespace["indptr"][-1])  # type: ignore[index]
    assert works > 0 and torch.equal(namespace["info"][:works], namespace["ported_info"][:works])  # type: ignore[index]
    assert capsys.readouterr().out.rstrip().endswith("True")
