"""The mla-golden CLI through typer's runner and a real subprocess: exit codes, JSON, refusals, pinpointing."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import small_tree
from helpers.cli import cli, cli_json, run
from helpers.matrices import SMALL_MATRIX as MATRIX
from helpers.repo import ROOT, TESTS
from helpers.small_tree import KEY_16, KEY_128, rewrite
from typer.testing import CliRunner

from mla_golden.checks import check
from mla_golden.cli import app
from mla_golden.golden.store import Golden, GoldenStore, load, write

#: The small matrix's tree (module-scoped) and a fresh copy of it per test.
recorded, tree = small_tree.recorded, small_tree.tree


def test_help_is_instant_and_imports_nothing_heavy() -> None:
    probe = "import sys, mla_golden.cli; print(sorted(m for m in ('torch', 'safetensors', 'deepdiff', 'mla_golden.golden.store') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
    # Bounded by what it imports, not by the clock: -X importtime lists every module --help loads.
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "mla_golden.cli", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "record" in run.stdout and "diff" in run.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")][1:]
    heavy = {"torch", "numpy", "safetensors", "deepdiff", "matplotlib"}
    assert not heavy & {name.split(".")[0] for name in imported}, sorted(heavy & {n.split(".")[0] for n in imported})
    assert len(imported) < 400, f"--help imports {len(imported)} modules (about 150 today: python, typer, rich)"


def test_version_prints_the_installed_distributions_and_imports_nothing_heavy() -> None:
    from importlib.metadata import version

    probe = (
        "import sys; from mla_golden.cli import main; sys.argv = ['mla-golden', '--version']\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(code, sorted(m for m in ('torch', 'safetensors', 'deepdiff') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.splitlines() == [f"mla-golden {version('mla-golden')}", "0 []"]


def test_record_then_unchanged_then_refuses_a_different_golden(tree: Path) -> None:
    matrix = tree.parent / "matrix.toml"
    code, report = cli_json("record", "--matrix", matrix, "--backend", "reference", "--out", tree)
    assert code == 0 and report["summary"] == {"unchanged": 3}
    rewrite(tree, KEY_128, lambda call: call.outputs["work_indptr"].__setitem__(1, 999))
    tampered = GoldenStore(tree).path_for(KEY_128).read_bytes()
    code, out = cli("record", "--matrix", matrix, "--backend", "reference", "--out", tree)
    assert code == 1
    assert f"REFUSED {KEY_128}" in out and "a different golden exists" in out
    assert "work_indptr: 1 of" in out, "the refusal shows its diff"
    assert GoldenStore(tree).path_for(KEY_128).read_bytes() == tampered, "refused: the file is untouched"
    code, report = cli_json("record", "--matrix", matrix, "--backend", "reference", "--out", tree, "--update")
    assert code == 0 and report["summary"] == {"updated": 1, "unchanged": 2}


def test_diff_replays_on_the_reference_and_prints_json(tree: Path) -> None:
    code, report = cli_json("diff", tree, "--backend", "reference")
    assert code == 0
    assert report["mode"] == "replay" and report["backend"]["name"] == "reference"
    assert {r["status"] for r in report["results"]} == {"equal"} and len(report["results"]) == 3


@pytest.mark.slow
def test_jobs_spread_the_work_over_processes_with_the_same_results(tree: Path, tmp_path: Path) -> None:
    code, report = cli_json("record", "--matrix", tree.parent / "matrix.toml", "--backend", "reference", "--out", tmp_path / "par", "--jobs", "2")
    assert code == 0 and report["summary"] == {"written": 3}
    code, report = cli_json("diff", tmp_path / "par", "--against", tree, "--jobs", "2")
    assert code == 0 and report["summary"] == {"equal": 3}


def test_diff_replay_flags_a_golden_the_backend_disagrees_with(tree: Path) -> None:
    rewrite(tree, KEY_16, lambda call: call.outputs["work_indptr"].__setitem__(2, 777))
    code, report = cli_json("diff", tree, "--backend", "reference")
    assert code == 1 and report["summary"] == {"equal": 2, "diverged": 1}
    bad = next(r for r in report["results"] if r["status"] != "equal")
    field = next(f for f in bad["diff"]["fields"] if f["status"] != "equal")
    assert bad["key"] == KEY_16 and (field["name"], field["count"], field["first"]["index"]) == ("work_indptr", 1, [2])
    assert field["first"]["expected"] == 777 and bad["diff"]["params"] == []


def test_diff_against_pinpoints_one_value_and_one_params_entry(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    info = load(GoldenStore(tree).path_for(KEY_128)).call
    row = int(info.written["work_info_set"].all(dim=1).nonzero()[3])

    def bump_kv_end(call: Any) -> None:
        call.outputs["work_info_set"][row, 5] += 1

    rewrite(other, KEY_128, bump_kv_end)
    rewrite(other, KEY_16, lambda call: call.params.__setitem__("kv_granularity", 32))
    code, report = cli_json("diff", other, "--against", tree)
    assert code == 1 and report["summary"] == {"equal": 1, "diverged": 2}
    results = {r["key"]: r for r in report["results"]}
    value = results[KEY_128]["diff"]
    field = next(f for f in value["fields"] if f["status"] != "equal")
    assert (field["name"], field["count"], field["first"]["index"]) == ("work_info_set", 1, [row, 5])
    assert field["first"]["actual"] == field["first"]["expected"] + 1
    assert [(w["index"], w["changed"]) for w in value["work_items"]] == [(row, ["kv_end"])]
    assert value["params"] == []
    params = results[KEY_16]["diff"]
    assert params["params"] == [{"path": "kv_granularity", "expected": 16, "actual": 32}]
    assert all(f["status"] == "equal" for f in params["fields"])
    code, text = cli("diff", other, "--against", tree)
    assert code == 1 and "kv_granularity: 16 -> 32" in text and "kv_end" in text


def test_diff_against_lists_calls_present_on_one_side_only(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    GoldenStore(other).path_for(KEY_16).unlink()
    code, report = cli_json("diff", other, "--against", tree)
    assert code == 1
    assert {r["key"]: r["status"] for r in report["results"]}[KEY_16] == "only-expected"
    code, report = cli_json("diff", tree, "--against", other)
    assert {r["key"]: r["status"] for r in report["results"]}[KEY_16] == "only-actual"


def test_diff_against_pairs_a_renamed_call_by_its_inputs(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    store = GoldenStore(other)
    call = store.read(KEY_16).call
    call.params["max_split_per_batch"] = 4
    store.path_for(KEY_16).unlink()
    store.write(Golden("decode/renamed", call))
    code, report = cli_json("diff", other, "--against", tree)
    assert code == 1 and report["summary"] == {"equal": 2, "diverged": 1}
    paired = next(r for r in report["results"] if r["status"] == "diverged")
    assert paired["key"] == "decode/renamed" and paired["message"] == "same inputs, params changed"
    assert paired["diff"]["params"] == [{"path": "max_split_per_batch", "expected": -1, "actual": 4}]


def test_diff_against_says_how_a_pair_of_other_keys_was_paired() -> None:
    # two device folders of one case: the same file names, other keys, other inputs
    shipped = ROOT / "goldens/decode/kimi-k2-mtp"
    code, report = cli_json("diff", shipped / "gfx942-cu304", "--against", shipped / "gfx950-cu256")
    paired = [r for r in report["results"] if r["status"] == "diverged"]
    assert code == 1 and paired
    for result in paired:
        assert result["message"] == "recorded under another key", result
        assert result["notes"][0].startswith("paired by path; keys 'decode/kimi-k2-mtp/gfx950-cu256/")
        assert any(f["count"] for f in result["diff"]["inputs"])  # not "same inputs"


@pytest.mark.slow
def test_corrupt_golden_exits_2_and_the_others_are_still_checked(tree: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(tree, clean)
    path = GoldenStore(tree).path_for(KEY_16)
    path.write_bytes(path.read_bytes()[:100])
    code, report = cli_json("diff", tree, "--backend", "reference")
    assert code == 2
    statuses = {r["path"]: r["status"] for r in report["results"]}
    assert statuses.pop(str(path)) == "bad"
    assert list(statuses.values()) == ["equal", "equal"]
    bad = next(r for r in report["results"] if r["status"] == "bad")
    assert "truncated" in bad["message"] or "header" in bad["message"]
    code, report = cli_json("diff", tree, "--against", clean)
    assert code == 2 and sorted(r["status"] for r in report["results"]) == ["bad", "equal", "equal"]
    real = subprocess.run([sys.executable, "-m", "mla_golden.cli", "diff", str(tree), "--against", str(clean), "-q"], capture_output=True, text=True)
    assert real.returncode == 2 and "exit 2 (bad input)" in real.stdout, "the real entry point exits with the status"


def test_show_and_list(tree: Path) -> None:
    path = GoldenStore(tree).path_for(KEY_128)
    code, out = cli("show", path)
    assert code == 0 and KEY_128 in out and "work items by CU part" in out and "reduce groups" in out
    code, data = cli_json("show", path, "--work", "3")
    assert code == 0 and data["key"] == KEY_128
    (part,) = data["cu_parts"]
    assert [item["work"] for item in part["items"]] == [3] and part["works"][0] <= 3 < part["works"][1]
    code, data = cli_json("show", path, "--cu", "0")
    assert [p["cu_part"] for p in data["cu_parts"]] == [0]
    works, parts = int(load(path).call.outputs["work_indptr"][-1]), load(path).call.outputs["work_indptr"].numel() - 1
    past = run("show", path, "--work", works)  # one past the last: an empty table read as "nothing there"
    assert past.code == 2 and f"has {works} work items (0..{works - 1})" in " ".join(past.stderr.split())
    past = run("show", path, "--cu", parts)
    assert past.code == 2 and f"has {parts} CU parts (0..{parts - 1})" in " ".join(past.stderr.split())
    code, listing = cli_json("list", tree)
    assert code == 0 and sorted(g["key"] for g in listing["goldens"])[0].startswith("decode/small/")
    assert {g["backend"] for g in listing["goldens"]} == {"reference"}
    assert {g["op"] for g in listing["goldens"]} == {"get_mla_metadata_v1", "get_ps_metadata_v1"}
    path.write_bytes(b"garbage")
    assert cli("list", tree)[0] == 2
    assert cli("show", path)[0] == 2


def test_head_ranges_read_as_half_open_ranges_in_show_diff_and_check(tree: Path) -> None:
    """One notation for q_head_range everywhere people read it: [start, end), like every other range."""
    key = next(k for k in (p.relative_to(tree).with_suffix("").as_posix() for p in GoldenStore(tree).paths()) if k.startswith("prefill/"))
    path = GoldenStore(tree).path_for(key)
    code, data = cli_json("show", path)
    packed = data["cu_parts"][0]["items"][0]["columns"]["q_head_range"]
    start, end = packed & 0xFFFF, packed >> 16
    code, out = cli("show", path, "--work", "0")
    assert code == 0 and f"[{start}, {end})" in out and f"{start}..{end}" not in out

    def move_heads(call: Any) -> None:
        call.outputs["work_info_set"][0, 7] = ((end + 1) << 16) | start

    rewrite(tree, key, move_heads)
    code, out = cli("diff", path, "--backend", "reference")
    assert code == 1 and f"*[{start}, {end + 1})" in out and f"[{start}, {end})" in out
    code, out = cli("check", path)
    assert code == 1 and f"[{start}, {end + 1})" in out


def test_usage_and_bad_input_exit_2(tree: Path, tmp_path: Path) -> None:
    assert cli("diff", tree, "--format", "xml")[0] == 2
    assert cli("diff", tree, tree, "--against", tree)[0] == 2
    assert cli("diff", tmp_path / "nowhere", "--backend", "reference")[0] == 2
    bad = tmp_path / "bad.toml"
    bad.write_text(MATRIX.replace('heads = 16', 'heads = "sixteen"'))
    result = CliRunner().invoke(app, ["record", "--matrix", str(bad), "--backend", "reference", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and f"{bad}:13:" in result.stderr and "'heads'" in result.stderr


STANDIN_AITER = '''\
"""A stand-in aiter with the 739c6317 planner signature (no real aiter here)."""
from helpers.standins import toy_plan, _is_fp8

__version__ = "0.0.0+standin"


def get_mla_metadata_v1(
    seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k, is_causal,
    work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map, reduce_partial_map,
    page_size=1, kv_granularity=16, max_seqlen_qo=-1, uni_seqlen_qo=-1, fast_mode=True, topk=-1,
    max_split_per_batch=-1, intra_batch_mode=False, dtype_q=None, dtype_kv=None,
):
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(dtype_q, dtype_kv), work_metadata_ptrs, work_indptr,
             work_info_set, reduce_indptr, reduce_final_map, reduce_partial_map)
'''

SCRIPT = '''\
"""A builder that imports aiter only after start-up, binds the planner by name, and plans three steps."""
import torch
from helpers import standins


def step(plan, kv):
    bufs = standins.toy_buffers(len(kv) - 1, 400)
    qo = torch.arange(len(kv), dtype=torch.int32)
    plan(qo, torch.tensor(kv, dtype=torch.int32), torch.ones(len(kv) - 1, dtype=torch.int32), 16, 1, True,
         bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"], bufs["reduce_indptr"],
         bufs["reduce_final_map"], bufs["reduce_partial_map"], max_seqlen_qo=1, dtype_q=torch.bfloat16,
         dtype_kv=torch.bfloat16)


def main():
    from aiter import get_mla_metadata_v1
    step(get_mla_metadata_v1, [0, 50, 200])
    step(get_mla_metadata_v1, [0, 50, 200])  # the same call again: same golden
    step(get_mla_metadata_v1, [0, 10, 400, 410])
    print("builder done")  # the program's own stdout must not spoil the report on ours


main()
'''


@pytest.mark.slow
def test_record_command_captures_the_calls_of_a_script_that_imports_aiter_late(tmp_path: Path) -> None:
    site = tmp_path / "site" / "aiter"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(STANDIN_AITER)
    script = tmp_path / "builder.py"
    script.write_text(SCRIPT)
    out = tmp_path / "goldens"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site.parent), str(TESTS)]))
    cmd = [sys.executable, "-m", "mla_golden.cli", "record", "--out", str(out), "--format", "json", "--", sys.executable, str(script)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["summary"] == {"written": 2}
    assert report["command_status"] == 0 and "builder done" in run.stderr
    goldens = [load(p) for p in GoldenStore(out).paths()]
    assert len(goldens) == 2
    for golden in goldens:
        assert golden.key.startswith("get_mla_metadata_v1/gfx942-cu304/b")
        assert golden.call.provenance["backend"] == "aiter"
        assert golden.call.provenance["aiter"]["version"] == "0.0.0+standin"
        assert golden.call.facts["ptrs_ok"] is True
    assert sorted(g.call.inputs["seqlens_kv_indptr"].tolist() for g in goldens) == [[0, 10, 400, 410], [0, 50, 200]]
    # An "upgraded" aiter that splits kv differently: same calls, other outputs -> refused, exit 1.
    (site / "__init__.py").write_text(STANDIN_AITER.replace("_is_fp8(dtype_q, dtype_kv)", "True"))
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert json.loads(run.stdout)["summary"] == {"refused": 2}


@pytest.mark.slow
def test_record_command_that_fails_exits_2(tmp_path: Path) -> None:
    run = CliRunner().invoke(app, ["record", "--out", str(tmp_path / "o"), "--", sys.executable, "-c", "import sys; sys.exit(3)"])
    assert run.exit_code == 2
    assert "exited with status 3" in run.stdout and "no aiter planner calls" in run.stderr
    missing = CliRunner().invoke(app, ["record", "--out", str(tmp_path / "o"), "--", str(tmp_path / "no-such-program")])
    assert missing.exit_code == 2 and "cannot run" in missing.stderr


def test_demo_commands_as_the_makefile_runs_them(tmp_path: Path) -> None:
    """`record` into a fresh folder, then `diff NEW --against goldens`: the shipped tree is what the reference records."""
    shipped = TESTS.parent / "goldens"
    assert any(GoldenStore(shipped).paths()), "goldens/ is shipped with the project"
    code, report = cli_json("record", "--backend", "reference", "--out", tmp_path / "out", "--quiet")
    assert code == 0 and set(report["summary"]) == {"written"}
    code, report = cli_json("diff", tmp_path / "out", "--against", shipped)
    assert code == 0, [r for r in report["results"] if r["status"] != "equal"][:2]


def test_check_passes_recorded_goldens_and_flags_a_broken_one(tree: Path) -> None:
    code, report = cli_json("check", tree)
    assert code == 0 and report["summary"] == {"passed": 3}
    info = load(GoldenStore(tree).path_for(KEY_16)).call
    row = int(info.written["work_info_set"].all(dim=1).nonzero()[0])

    def overlap(call: Any) -> None:  # a work's kv range now runs past its batch's end
        call.outputs["work_info_set"][row, 5] += 10_000

    rewrite(tree, KEY_16, overlap)
    code, report = cli_json("check", tree)
    assert code == 1 and report["summary"] == {"passed": 2, "violated": 1}
    bad = next(r for r in report["results"] if r["status"] == "violated")
    assert bad["key"] == KEY_16 and f"work {row}" in bad["message"]
    # each result says what the check found as data: the rules and kernel path it judged by, every violation
    found = check(load(GoldenStore(tree).path_for(KEY_16)).call)
    assert bad["check"]["rules"] == found.rules and bad["check"]["kernel"] == found.kernel and found.kernel
    assert bad["check"]["violation_count"] == len(found.violations) == len(bad["check"]["violations"])
    assert bad["check"]["violations"][0]["where"] == found.violations[0].where
    assert all(r["check"]["ok"] and r["check"]["rules"] for r in report["results"] if r["status"] == "passed")
    assert cli("check", tree)[1].rstrip().endswith("exit 1 (violation)"), "a check finds violations, not divergences"


def test_check_json_lists_a_hundred_violations_and_counts_them_all(tmp_path: Path) -> None:
    """A broken plan can break an invariant at every work: the JSON stays bounded, and says how many there were."""
    from mla_golden.runs.work import JSON_VIOLATIONS

    shipped = ROOT / "goldens" / "decode" / "dsv3-b512" / "gfx942-cu304" / "h128-fp8-q1-b512-jitter8192-p1.safetensors"
    golden = load(shipped)
    works = int(golden.call.outputs["work_indptr"][-1])
    golden.call.outputs["work_info_set"][:works, 5].add_(10_000)  # every kv range past its batch
    broken = tmp_path / "broken.safetensors"
    write(broken, Golden(golden.key, golden.call))
    code, report = cli_json("check", broken)
    found = report["results"][0]["check"]
    assert code == 1 and found["violation_count"] > JSON_VIOLATIONS == len(found["violations"])


def test_html_reports_of_diff_and_show(tree: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    rewrite(other, KEY_128, lambda call: call.outputs["work_info_set"].__setitem__((0, 5), 1))
    page = tmp_path / "report.html"
    code, _ = cli("diff", other, "--against", tree, "--html", page)
    text = page.read_text()
    assert code == 1 and 'class="work marked" data-work="0"' in text and KEY_128 in text
    picture = tmp_path / "show.html"
    code, _ = cli("show", GoldenStore(tree).path_for(KEY_16), "--html", picture)
    assert code == 0 and 'class="work"' in picture.read_text() and 'class="work marked"' not in picture.read_text()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_html_reports_are_written_with_the_users_umask(tree: Path, tmp_path: Path, umask: int) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    rewrite(other, KEY_128, lambda call: call.outputs["work_info_set"].__setitem__((0, 5), 1))
    old = os.umask(umask)
    try:
        assert cli("diff", other, "--against", tree, "--html", tmp_path / "diff.html")[0] == 1
        assert cli("show", GoldenStore(tree).path_for(KEY_16), "--html", tmp_path / "show.html")[0] == 0
        assert cli("check", tree, "--html", tmp_path / "check.html")[0] == 0
    finally:
        os.umask(old)
    for name in ("diff.html", "show.html", "check.html"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


@pytest.mark.slow
def test_record_killed_at_random_points_leaves_whole_goldens_and_the_next_run_cleans_up(tmp_path: Path) -> None:
    """SIGKILL a real `mla-golden record` mid-run (seeded points); every golden left loads, and a rerun finishes the tree."""
    import random
    import signal

    from mla_golden.golden.store import GoldenStore, load

    (tmp_path / "matrix.toml").write_text(MATRIX)
    out = tmp_path / "out"
    exe = Path(sys.executable).parent / "mla-golden"
    args = [str(exe), "record", "--matrix", str(tmp_path / "matrix.toml"), "--backend", "reference", "--out", str(out), "--update"]
    rng = random.Random(7)
    for _ in range(4):
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5 + rng.random() * 2.5)  # start-up takes ~2 s; then somewhere in the recording
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        for path in GoldenStore(out).paths():
            load(path)  # never partial
        for temp in out.rglob("*.tmp"):  # as if the next run came later: old enough to be taken as stale
            os.utime(temp, (time.time() - 60, time.time() - 60))
    # A temp file as a killed writer leaves it (its pid is gone):
    out.mkdir(exist_ok=True)
    from mla_golden.files import HOST as _HOST

    orphan = out / f".orphan.safetensors.{_HOST}.999999999.x.tmp"
    orphan.write_bytes(b"partial")
    os.utime(orphan, (time.time() - 60, time.time() - 60))
    done = subprocess.run(args, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"removed \d+ temp file\(s\) left by an interrupted run", done.stderr)
    assert not list(out.rglob("*.tmp")) and len(list(GoldenStore(out).paths())) == 3


@pytest.mark.slow
def test_png_of_show_and_diff(tree: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    rewrite(other, KEY_128, lambda call: call.outputs["work_info_set"].__setitem__((0, 5), 1))
    code, _ = cli("diff", other, "--against", tree, "--png", tmp_path / "diff.png")
    assert code == 1 and (tmp_path / "diff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _ = cli("show", GoldenStore(tree).path_for(KEY_16), "--png", tmp_path / "show.png")
    assert code == 0 and (tmp_path / "show.png").stat().st_size > 5_000


def test_png_without_the_plot_extra_names_it(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    result = CliRunner().invoke(app, ["show", str(GoldenStore(tree).path_for(KEY_16)), "--png", str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "plot extra" in result.output and not (tmp_path / "x.png").exists()


def test_an_unexpected_failure_on_one_golden_is_reported_and_the_rest_still_checked(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mla_golden.capture.canary

    real = mla_golden.capture.canary.replay

    def flaky_replay(call: Any, fn: Any, **kwargs: Any) -> Any:
        if call.op == "get_mla_metadata_v1" and call.params.get("num_heads_per_head_k") == 16:
            raise KeyError("boom")
        return real(call, fn, **kwargs)

    monkeypatch.setattr(mla_golden.capture.canary, "replay", flaky_replay)
    code, report = cli_json("diff", tree, "--backend", "reference")
    assert code == 2 and report["summary"] == {"equal": 2, "failed": 1}
    failed = next(r for r in report["results"] if r["status"] == "failed")
    assert failed["key"] == KEY_16 and "KeyError" in failed["message"]


@pytest.mark.slow
def test_record_command_with_a_missed_call_exits_2_naming_it(tmp_path: Path) -> None:
    """A call the recorder cannot keep as made (float32 buffer) is reported, never a silent 'no calls'."""
    site = tmp_path / "site" / "aiter"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(STANDIN_AITER)
    script = tmp_path / "builder.py"
    script.write_text(SCRIPT.replace('bufs["work_info_set"], bufs["work_indptr"]', 'bufs["work_info_set"].float(), bufs["work_indptr"]'))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), str(TESTS)]))
    cmd = [sys.executable, "-m", "mla_golden.cli", "record", "--out", str(tmp_path / "g"), "--format", "json", "--", sys.executable, str(script)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    report = json.loads(run.stdout)
    assert run.returncode == 2, run.stderr
    assert report["summary"] == {"missed": 3}
    assert all("work_info_set is torch.float32" in r["message"] for r in report["results"])


def test_record_dashdash_without_a_command_is_a_usage_error(tmp_path: Path) -> None:
    run = CliRunner().invoke(app, ["record", "--out", str(tmp_path / "o"), "--"])
    assert run.exit_code == 2 and "must be followed by a command" in run.output
    assert not (tmp_path / "o").exists()  # the matrix was not recorded


def test_the_summary_tables_fit_100_columns_and_a_resized_buffer_reads_as_such(tree: Path, tmp_path: Path) -> None:
    import torch

    other = tmp_path / "a-long-folder-name-so-that-keys-and-paths-would-overflow-a-narrow-table" / "other"
    shutil.copytree(tree, other)

    def grow(call: Any) -> None:  # only the buffer's size changes: the planner's rows are the same
        for table in (call.outputs, call.written):
            old = table["work_info_set"]
            table["work_info_set"] = torch.cat([old, torch.zeros(5, old.shape[1], dtype=old.dtype)])
        call.buffers["work_info_set"]["shape"][0] += 5

    rewrite(other, KEY_128, grow)
    rewrite(other, KEY_16, lambda call: call.params.__setitem__("kv_granularity", 32))
    code, text = cli("diff", other, "--against", tree)
    assert code == 1
    summary = text[text.rindex("mla-golden diff") :]  # the summary tables, after the reports (the counts line leads)
    assert summary.count("\n") > 5 and max(len(line) for line in summary.splitlines()) <= 100, summary
    rows = load(GoldenStore(tree).path_for(KEY_128)).call.outputs["work_info_set"].shape[0]
    assert f"work_info_set buffer [{rows}, 8] -> [{rows + 5}, 8]; written contents equal" in text


def test_diff_replays_on_a_plug_in_planner(tree: Path) -> None:
    from helpers import planted_planners

    code, report = cli_json("diff", tree, "--backend", "python:helpers.planted_planners:clean")
    assert code == 0 and report["backend"]["spec"] == "python:helpers.planted_planners:clean"
    assert {r["status"] for r in report["results"]} == {"equal"} and len(report["results"]) == 3
    code, report = cli_json("diff", tree, "--backend", "python:helpers.planted_planners:one_bug")
    store = GoldenStore(tree)
    for result in report["results"]:
        call = store.read(result["key"]).call
        hit = False  # the bug is in the decode planner only
        if "kv_last_page_lens" in call.inputs:
            kv = call.inputs["seqlens_kv_indptr"]
            tokens = (kv.diff() - 1) * call.params.get("page_size", 1) + call.inputs["kv_last_page_lens"]
            hit = int(tokens.max()) >= planted_planners.LONG_REQUEST
        assert (result["status"] != "equal") == hit, result["key"]
    assert code == (1 if any(r["status"] != "equal" for r in report["results"]) else 0)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("python:no_such_module_here", "module no_such_module_here does not import"),
        ("python:helpers.planted_planners:nothing", "has no attribute nothing"),
        ("python:helpers.planted_planners:incomplete", "incomplete has no get_ps_metadata_v1, get_mla_metadata_info_v1"),
        ("python:", "expected python:MODULE[:ATTR]"),
    ],
)
def test_a_bad_plug_in_planner_exits_2_saying_what_is_missing(tree: Path, spec: str, problem: str) -> None:
    result = CliRunner().invoke(app, ["diff", str(tree), "--backend", spec])
    assert result.exit_code == 2 and result.exception is None or isinstance(result.exception, SystemExit)
    assert problem in result.output, result.output


@pytest.mark.slow
@pytest.mark.parametrize("command", [["versions"], ["list", "goldens"], ["--help"]], ids=" ".join)
def test_output_into_a_closed_pipe_exits_141_not_the_divergence_code(command: list[str]) -> None:
    """``mla-golden versions | head -1``: rich and click exit 1 on a closed pipe, which here means a divergence."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        done = subprocess.run([str(Path(sys.executable).parent / "mla-golden"), *command], stdout=write_end,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_a_bad_golden_is_named_once_on_its_line(tmp_path: Path) -> None:
    shipped = ROOT / "goldens/prefill/dsv3-fp8-prefill/gfx950-cu256"
    broken = tmp_path / "gfx950-cu256" / "h16-b4-t3117-115ed9cb.safetensors"
    broken.parent.mkdir()
    broken.write_bytes((shipped / broken.name).read_bytes()[:-100])
    code, out = cli("check", tmp_path)
    assert code == 2
    [line] = [line for line in out.splitlines() if line.startswith("BAD ")]
    assert line == f"BAD {broken}"


def test_list_names_goldens_of_one_key_by_where_each_lies(tree: Path, tmp_path: Path) -> None:
    """A sweep's --out holds each reproducer twice, one per planner (a/ and b/): two rows of one key would read as a
    copy, so each is named by its path under the folder."""
    both = tmp_path / "out"
    for side in ("a", "b"):
        shutil.copytree(tree, both / side)
    code, out = cli("list", both)
    assert code == 0 and f"a/{KEY_16}" in out and f"b/{KEY_16}" in out
    code, listing = cli_json("list", both)
    assert sum(g["key"] == KEY_16 for g in listing["goldens"]) == 2, "the JSON keeps each golden's own key (and its path)"
