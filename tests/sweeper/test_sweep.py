"""``mla_golden.sweep`` / ``mla-golden sweep``: device and env overrides, reproducers, resuming, the CLI."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.clock import FakeClock
from helpers.processes import children, wait_gone
from helpers.repo import ROOT
from typer.testing import CliRunner

import mla_golden
from mla_golden.cli import app
from mla_golden.context import as_recorded
from mla_golden.golden.store import load
from mla_golden.reference.dtypes import AITER_DTYPE_NAMES, FP8_BY_ARCH
from mla_golden.reference.mla_v1 import plan_mla_metadata_v1
from mla_golden.sweeper.evaluate import DIVERGED, EQUAL, evaluate, template
from mla_golden.sweeper.planners import parse_planner_spec, resolve_planner
from mla_golden.sweeper.render import render_text
from mla_golden.sweeper.space import Point, parse

OVERRIDE_SPACE = """\
format = "mla-golden-space/1"
devices = ["gfx942:304", "gfx942:80"]

[[decode]]
name = "d"
heads = [16, 128]
dtype = "fp8"
batch = [1, 9]
context = "jitter:3000"

[[prefill]]
name = "p"
devices = ["gfx950:256"]
heads = 16
seq_lens = [[700, 33]]
"""

PARALLEL_SPACE = """\
format = "mla-golden-space/1"
devices = ["gfx942:304", "gfx950:256"]

[[decode]]
name = "eligible"
heads = [16, 64, 128]
dtype = ["bf16", "fp8"]
batch = "1..3000"
context = ["jitter:1..65536", "uniform:1..65536"]
max_split_per_batch = ["vllm", -1, 2]
causal = [true, false]
"""

SERIAL = "reference+AITER_MLA_META_USE_PARALLEL=0"
PARALLEL = "reference+AITER_MLA_META_USE_PARALLEL=1"


def _write(tmp_path: Path, text: str, name: str = "space.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cu_override_diverges_exactly_where_the_cu_count_changes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    findings = mla_golden.sweep("reference", "reference:gfx942:80", parse(OVERRIDE_SPACE), out=out)
    assert findings.stopped_by == "space" and len(findings.results) == 2 * 2 * 2 + 1
    by_device = {(r.point["arch"], r.point["cu_num"], r.point["op"]): r.status for r in findings.results}
    assert by_device[("gfx942", 80, "get_mla_metadata_v1")] == EQUAL, "planning for 80 CUs either way"
    assert by_device[("gfx942", 304, "get_mla_metadata_v1")] == DIVERGED
    assert by_device[("gfx950", 256, "get_ps_metadata_v1")] == DIVERGED, "the override moves prefill to 80 CUs too"
    [region_decode, *rest] = sorted(findings.summary.regions, key=lambda r: -r.cases)
    assert region_decode.where == {"device": "gfx942:304"} and region_decode.everywhere
    assert findings.summary.never()["device"] == ["gfx942:80"]
    # Every divergence shrank to one request of the shortest length.
    assert {tuple(r.point["seq_lens"]) for r in findings.reproducers} == {(1,)}
    assert all(r.confirmed for r in findings.reproducers)
    # The goldens reproduce it: same keys on both sides, and diff sees the divergence.
    keys_a = sorted(p.relative_to(out / "a") for p in (out / "a").rglob("*.safetensors"))
    keys_b = sorted(p.relative_to(out / "b") for p in (out / "b").rglob("*.safetensors"))
    # One cause per op (work_indptr sized for 80 CUs): one group and one reproducer each, heads 16 and 128 together.
    assert len(findings.reproducers) == len(findings.groups) == 2
    decode = next(g for g in findings.groups if g.signature[0] == "get_mla_metadata_v1")
    assert decode.cases == 2 * 2 and len(decode.minimal_calls) == 2 and decode.fields == ("works",)  # heads x batch
    # The workers wrote every distinct minimal call (two decode, one prefill); each group's is among them.
    minimal = {key for g in findings.groups for key in g.minimal_calls}
    assert keys_a == keys_b and {str(k).removesuffix(".safetensors") for k in keys_a} == minimal and len(minimal) == 3
    assert all(len(r.written) == 2 and all(Path(p).exists() for p in r.written) for r in findings.reproducers)
    result = CliRunner().invoke(app, ["diff", str(out / "b"), "--against", str(out / "a"), "--format", "json"])
    assert result.exit_code == 1, result.output
    diffs = json.loads(result.output)["results"]
    assert {d["status"] for d in diffs} == {"diverged"} and len(diffs) == 3
    golden = load(out / "b" / keys_b[0])
    assert golden.call.device["cu_num"] == 80 and golden.call.provenance["sweep"]["planner"] == "reference:gfx942:80"


def test_a_reproducer_is_read_back_from_the_goldens_its_worker_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver judges a group on the goldens the worker wrote instead of capturing its call on both planners
    again; without them (no ``out``, or a file gone since) it captures, and finds the same."""
    from mla_golden.sweeper import driver
    from mla_golden.sweeper.evaluate import capture as real

    captured: list[Point] = []

    def counting(point: Point, planner: Any) -> Any:
        captured.append(point)
        return real(point, planner)

    monkeypatch.setattr(driver, "capture", counting)
    point = Point("get_mla_metadata_v1", "gfx942", 304, 16, (3000, 40), q_dtype="fp8", kv_dtype="fp8")
    out = tmp_path / "out"
    read = mla_golden.sweep("reference", "reference:gfx942:80", [point], out=out)
    [rep] = read.reproducers
    assert captured == [] and rep.confirmed and rep.calls is not None and len(rep.written) == 2
    assert [call.device["cu_num"] for call in rep.calls] == [304, 80]
    bare = mla_golden.sweep("reference", "reference:gfx942:80", [point])
    assert len(captured) == 2 and bare.reproducers[0].written == []
    assert [g.to_dict() for g in bare.groups] == [g.to_dict() for g in read.groups], "the same cause, rule and soundness"
    Path(rep.written[1]).unlink()
    resumed = mla_golden.sweep("reference", "reference:gfx942:80", [point], out=out)
    assert resumed.resumed == 1 and len(captured) == 4
    assert [g.to_dict() for g in resumed.groups] == [g.to_dict() for g in read.groups]


def _parallel_kernel(point: Point) -> bool:
    """Does aiter's dispatch pick the parallel planner for ``point`` when it is allowed to?"""
    call, _ = template(point, resolve_planner(PARALLEL))
    fp8, bf16 = AITER_DTYPE_NAMES.index("fp8"), AITER_DTYPE_NAMES.index("bf16")  # aiter's AiterDtype ids
    ids: dict[str | None, int | None] = {None: None, "torch.bfloat16": bf16, **{str(dtype): fp8 for dtype in FP8_BY_ARCH.values()}}
    p = call.params
    with as_recorded(call):
        dispatch = plan_mla_metadata_v1(
            call.inputs["seqlens_qo_indptr"], call.inputs["seqlens_kv_indptr"], call.inputs["kv_last_page_lens"],
            p["num_heads_per_head_k"], 1, p["is_causal"], 1 << 20, page_size=1, kv_granularity=16, max_seqlen_qo=1,
            uni_seqlen_qo=1, max_split_per_batch=p["max_split_per_batch"],
            dtype_q_nope=ids[p["dtype_q_nope"]], dtype_kv_nope=ids[p["dtype_kv_nope"]],
        )  # fmt: skip
    return dispatch.kernel_name.endswith("parallel")


def test_serial_and_parallel_planners_agree_over_their_shared_eligibility() -> None:
    findings = mla_golden.sweep(SERIAL, PARALLEL, parse(PARALLEL_SPACE), cases=60, seed=3)
    points = [Point.from_dict(r.point) for r in findings.results]
    assert len(points) == 60 and findings.counts == {EQUAL: 60}, findings.counts
    parallel = sum(_parallel_kernel(p) for p in points)
    assert parallel >= 30, f"only {parallel} of 60 cases ran the parallel planner: the comparison would be vacuous"
    # The summary says so per side, as the planner's own dispatch decided it.
    paths = findings.kernel_paths
    assert sum(paths["A"].values()) == sum(paths["B"].values()) == 60
    assert set(paths["A"]) <= {"serial/native", "serial/folded"}, "A pins the serial planner"
    assert sum(n for path, n in paths["B"].items() if path.startswith("parallel")) == parallel
    assert "decode kernel paths (cases): A serial/" in render_text(findings)
    assert max(p.batch for p in points) > 1000, "batches past the LDS batch-info threshold"


def test_a_changed_env_pin_is_found_and_shrunk() -> None:
    # AITER_ENABLE_EXPERIMENTAL=1 doubles the clusters for fp8 MTP with heads x qlen == 64 on gfx950.
    space = parse(
        'devices = ["gfx950:256"]\n[[decode]]\nname = "mtp"\nheads = [16, 32]\ndtype = "fp8"\nqlen = [2, 4]\n'
        'batch = [4, 40]\ncontext = "jitter:20000"\n'
    )
    findings = mla_golden.sweep("reference", "reference+AITER_ENABLE_EXPERIMENTAL=1", space)
    diverged = {(r.point["heads"], r.point["qlen"]) for r in findings.results if r.status == DIVERGED}
    assert diverged and (16, 2) not in diverged, findings.counts
    for rep in findings.reproducers:
        original = [r for r in findings.results if r.minimal == rep.point]
        assert original, "each reproducer comes from a swept case"
        assert len(rep.point["seq_lens"]) <= min(len(r.point["seq_lens"]) for r in original)
        assert evaluate(Point.from_dict(rep.point), resolve_planner("reference"), resolve_planner("reference+AITER_ENABLE_EXPERIMENTAL=1")).status == DIVERGED


@pytest.mark.parametrize(("a", "b"), [("reference@33d168a0", "reference@v0.1.16.post2"), ("reference", "reference:gfx950")])
def test_the_one_run_screen_agrees_with_the_differ(a: str, b: str) -> None:
    """Each verdict of the hot path is what the differ says about the two full captures (written masks included)."""
    from mla_golden.differ import diff
    from mla_golden.sweeper.evaluate import capture
    from mla_golden.sweeper.space import load_space

    space = load_space(ROOT / "docs" / "sweep-spaces" / "versions.toml")
    pa, pb = resolve_planner(a), resolve_planner(b)
    seen = set()
    for point in itertools.islice(space.points(seed=11, limit=100), 40):
        verdict = evaluate(point, pa, pb)
        if verdict.status not in (EQUAL, DIVERGED):
            continue  # undefined on a side: there is nothing defined to compare
        found = diff(capture(point, pa), capture(point, pb))
        differs = found.error is not None or any(not f.equal for f in found.fields)
        assert verdict.status == (DIVERGED if differs else EQUAL), (point, verdict, found.cause)
        seen.add(verdict.status)
    assert seen == {DIVERGED, EQUAL}, "both verdicts were exercised"


def test_resume_runs_only_what_the_journal_lacks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    space = parse(PARALLEL_SPACE)
    first = mla_golden.sweep("reference", "reference:gfx942:80", space, cases=12, out=out)
    assert first.resumed == 0 and len(first.results) == 12
    journal = out / "sweep.jsonl"
    with open(journal, "a", encoding="utf-8") as fh:
        fh.write('{"index": 99, "point": {"op"')  # a kill mid-append tears the last line
    again = mla_golden.sweep("reference", "reference:gfx942:80", space, cases=20, out=out)
    assert again.resumed == 12 and len(again.results) == 20
    assert [r.index for r in again.results] == list(range(20))
    assert [r.status for r in again.results[:12]] == [r.status for r in first.results]
    assert len(journal.read_text().splitlines()) == 1 + 20, "header, then one line per case; the torn line is gone"
    fresh = mla_golden.sweep("reference", "reference:gfx942:80", space, cases=20)
    assert [r.point for r in fresh.results] == [r.point for r in again.results], "a resumed sweep sweeps the same points"


def test_a_journal_of_another_sweep_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    space = _write(tmp_path, OVERRIDE_SPACE)
    mla_golden.sweep("reference", "reference:gfx942:80", space, out=out, cases=2)
    result = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "reference:gfx950", "--space", str(space), "--out", str(out)])
    assert result.exit_code == 2
    assert "journal of another sweep" in result.output and "reference:gfx942:80" in result.output


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_sweep_leaves_no_workers_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    space = _write(tmp_path, PARALLEL_SPACE)
    command = [sys.executable, "-m", "mla_golden.cli", "sweep", "--a", SERIAL, "--b", PARALLEL, "--space", str(space),
               "--cases", "400", "--jobs", "2", "--out", str(out), "-q"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / "sweep.jsonl"
    while proc.poll() is None and (not journal.exists() or len(journal.read_text().splitlines()) < 3):
        time.sleep(0.2)
    workers = children(proc.pid)
    assert workers, "the sweep started worker processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_gone(workers)  # they die with the sweep: a survivor keeps this waiting
    done = len(journal.read_text().splitlines()) - 1
    assert 0 < done < 400
    result = CliRunner().invoke(app, ["sweep", "--a", SERIAL, "--b", PARALLEL, "--space", str(space), "--cases", "400",
                                      "--out", str(out), "--format", "json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["resumed"] >= done and document["cases"] == 400


def test_cli_json_html_and_exit_status(tmp_path: Path) -> None:
    space = _write(tmp_path, OVERRIDE_SPACE)
    page = tmp_path / "report.html"
    runner = CliRunner()
    result = runner.invoke(app, ["sweep", "--a", "reference", "--b", "reference:gfx942:80", "--space", str(space),
                                 "--format", "json", "--html", str(page)])  # fmt: skip
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["format"] == "mla-golden-sweep/1" and document["diverged"] is True
    assert document["counts"] == {"diverged": 5, "equal": 4}, "gfx942:304 decode (4) and prefill (1) move to 80 CUs"
    assert document["regions"][0]["where"] == {"device": "gfx942:304"}
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "http" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "device gfx942:304" in html and "<svg" in html
    text = runner.invoke(app, ["sweep", "--a", "reference", "--b", "reference", "--space", str(space)])
    assert text.exit_code == 0 and text.stdout.startswith("no divergence")


def test_quiet_prints_the_verdict_and_the_regions_only(tmp_path: Path) -> None:
    space = _write(tmp_path, OVERRIDE_SPACE)
    args = ["sweep", "--a", "reference", "--b", "reference:gfx942:80", "--space", str(space)]
    runner = CliRunner()
    quiet = runner.invoke(app, [*args, "--out", str(tmp_path / "out"), "--quiet"])  # reproducers written, not listed
    document = json.loads(runner.invoke(app, [*args, "--format", "json"]).stdout)
    assert quiet.exit_code == 1 and quiet.stderr == ""
    headline, *rest = quiet.stdout.splitlines()
    assert re.fullmatch(r"DIVERGED \(2 group\(s\), all sound on both sides\): A reference .* 9 cases \(diverged 5, equal 4\), .*", headline)
    regions = [region["description"] for region in document["regions"]]
    assert regions and rest == ["regions:", *(f"  {region}" for region in regions), "exit 1 (divergence)"]
    full = runner.invoke(app, args).stdout.splitlines()
    assert full[0].split(" in ")[0] == headline.split(" in ")[0]  # the same verdict, up to its times
    assert len(full) > len(rest) + 10, "the full report also gives causes, counts per value, reproducers"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--a", "reference", "--b", "nope"], "unknown backend 'nope'"),
        (["--a", "reference@deadbeef", "--b", "reference"], "unknown aiter planner version"),
        (["--a", "reference", "--b", "reference:gfx999:100"], "unknown arch 'gfx999'"),
        (["--a", "reference", "--b", "reference", "--cases", "5", "--time", "1"], "one budget"),
        (["--a", "reference", "--b", "reference", "--space", "missing.toml"], "missing.toml: cannot read"),
        (["--a", "reference", "--b", "reference", "ray://x:1"], "unexpected extra argument"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(args: list[str], problem: str) -> None:
    result = CliRunner().invoke(app, ["sweep", *args])
    assert result.exit_code == 2 and problem in result.output, result.output


def test_bad_space_file_exits_2_with_its_line(tmp_path: Path) -> None:
    space = _write(tmp_path, OVERRIDE_SPACE.replace('dtype = "fp8"', 'dtype = "fp4"'))
    result = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "reference", "--space", str(space)])
    assert result.exit_code == 2 and f"{space}:7" in result.output and "key 'dtype'" in result.output


@pytest.mark.slow
def test_time_budget_stops_the_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.sweeper import driver, work
    from mla_golden.sweeper.evaluate import evaluate as real

    clock = FakeClock()
    monkeypatch.setattr(driver, "time", clock)

    def timed(*args: Any, **kwargs: Any) -> Any:  # every case takes 10 ms of the budget
        clock.advance(0.01)
        return real(*args, **kwargs)

    monkeypatch.setattr(work, "evaluate", timed)
    findings = mla_golden.sweep("reference", "reference", seconds=1.5)
    # 1.5 s is 150 cases; chunks already handed out when the budget ran out finish too
    assert findings.stopped_by == "time" and 150 <= len(findings.results) <= 150 + (driver.IN_FLIGHT + 1) * driver.MAX_CHUNK


def test_a_shrink_cut_short_is_reported_in_text_json_and_html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.sweeper import shrink
    from mla_golden.sweeper.render import render_html

    monkeypatch.setattr(shrink, "MAX_EVALS", 1)
    points = [Point("get_mla_metadata_v1", "gfx942", 304, 16, (3000, 500, 70, 9), q_dtype="fp8", kv_dtype="fp8")]
    findings = mla_golden.sweep("reference", "reference:gfx942:80", points)
    [case] = findings.results
    assert case.status == DIVERGED and case.shrink_exhausted == "evals" and case.shrink_evals == 1
    [rep] = findings.reproducers
    assert rep.exhausted == "evals" and len(rep.point["seq_lens"]) > 1, "one evaluation cannot reach one request"
    document = json.loads(json.dumps(findings.to_dict()))
    assert document["shrink_exhausted"] == {"evals": 1} and document["reproducers"][0]["exhausted"] == "evals"
    for page in (render_text(findings), render_html(findings)):
        assert "NOT minimal: shrinking ran out of its evaluation budget" in page
        assert "shrinking ran out of its evaluation budget on 1 divergent case(s)" in page
    monkeypatch.setattr(shrink, "MAX_EVALS", 400)
    whole = mla_golden.sweep("reference", "reference:gfx942:80", points)
    assert whole.reproducers[0].exhausted is None and whole.reproducers[0].point["seq_lens"] == [1]
    assert "NOT minimal" not in render_text(whole) and whole.to_dict()["shrink_exhausted"] == {}


def test_the_time_budget_bounds_shrinking_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.sweeper import driver, shrink, work
    from mla_golden.sweeper.evaluate import evaluate as real

    work.warm(parse_planner_spec("reference"), parse_planner_spec("reference:gfx942:80"))  # the warm-up runs before the slow planners below
    clock = FakeClock()
    for module in (driver, shrink):
        monkeypatch.setattr(module, "time", clock)

    def slow(*args: Any, **kwargs: Any) -> Any:  # a planner pair whose every call takes 0.4 s
        clock.advance(0.4)
        return real(*args, **kwargs)

    monkeypatch.setattr(work, "evaluate", slow)
    points = [Point("get_mla_metadata_v1", "gfx942", 304, 16, tuple(range(3000, 3064)), q_dtype="fp8", kv_dtype="fp8")]
    findings = mla_golden.sweep("reference", "reference:gfx942:80", points, seconds=1.0)
    [case] = findings.results
    assert case.status == DIVERGED and case.shrink_exhausted == "time"
    assert case.shrink_evals < 7, "reaching one request takes 7 evaluations, 2.8 s; the 1 s budget stopped it"
