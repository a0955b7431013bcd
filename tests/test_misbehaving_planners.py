"""Planner code that misbehaves fails its own calls, never the command.

A plug-in without aiter's signature is exit 2 in record, diff and sweep; a
planner raising SystemExit(0) or KeyboardInterrupt is that call's failure
(exit 2, with the summary), not an exit 0 having done nothing; and SIGTERM
ends a run whose in-process planner call never returns, reporting what it
did, as it ends one whose worker processes are busy.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.aiter_trees import entry_point, fake_compiler, tree_at
from helpers.processes import children, wait_gone
from helpers.repo import ROOT, TESTS
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.schema import ATTENTION_PY, CPP_FILE
from mla_golden.workers import usable_cpus

CLI = str(Path(sys.executable).parent / "mla-golden")
#: A few shipped goldens of both ops to replay.
GOLDENS = [ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx950-cu256", ROOT / "goldens" / "prefill" / "kimi-k2-fp8-prefill"]
#: One small group of the default matrix per op.
DEVICE = ["--device", "gfx950:256"]


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _command(name: str, backend: str, tmp_path: Path) -> list[str]:
    if name == "record":
        return ["record", "--backend", backend, "--out", str(tmp_path / "out"), *DEVICE, "--format", "json"]
    if name == "diff":
        return ["diff", *map(str, GOLDENS), "--backend", backend, "--format", "json"]
    return ["sweep", "--a", "reference", "--b", backend, "--cases", "4", "--format", "json"]


@pytest.mark.parametrize("command", ["record", "diff", "sweep"])
def test_a_plugin_without_aiters_signature_is_exit_2_everywhere(tmp_path: Path, command: str) -> None:
    result = _invoke(*_command(command, "python:helpers.planted_planners:unsigned", tmp_path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    output = " ".join(result.output.split())
    assert "not in aiter's signatures" in output
    assert "get_ps_metadata_info_v1(batch, heads) does not open with aiter's (batch_size, num_head_k, max_qlen)" in output


@pytest.mark.parametrize("command", ["record", "diff", "sweep"])
def test_a_plugin_taking_args_and_kwargs_is_taken_everywhere(tmp_path: Path, command: str) -> None:
    """``def get_mla_metadata_v1(*args, **kwargs)`` receives every argument as Python binds it: it plans as the
    reference it wraps (record writes, diff replays the shipped goldens equal, the sweep finds nothing)."""
    result = _invoke(*_command(command, "python:helpers.planted_planners:opaque", tmp_path))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("command", "plugin", "raised"),
    [
        *[(command, "exits", "SystemExit(0)") for command in ("record", "diff", "sweep")],
        *[(command, "interrupts", "KeyboardInterrupt()") for command in ("record", "diff", "sweep")],
        # a replay plans on the golden's own buffers: only record and sweep call the sizing helpers
        *[(command, "exiting_sizers", "SystemExit(0)") for command in ("record", "sweep")],
    ],
)
def test_a_planner_that_exits_fails_its_calls_and_the_run_is_exit_2_with_its_summary(
    tmp_path: Path, command: str, plugin: str, raised: str
) -> None:
    result = _invoke(*_command(command, f"python:helpers.planted_planners:{plugin}", tmp_path))
    assert result.exit_code == 2, result.output
    document = json.loads(result.stdout)
    if command == "sweep":
        assert document["counts"] == {"failed": 4}
        details = {case["detail"] for case in document["failed_cases"]}
    else:
        assert document["exit_code"] == 2 and document["results"]
        assert {r["status"] for r in document["results"]} == {"failed"}
        details = {r["message"] for r in document["results"]}
    assert all(f"planner code raised {raised}: that call failed" in d for d in details), details


@pytest.mark.slow
@pytest.mark.skipif(usable_cpus() < 2, reason="--jobs 2 runs in this process on one CPU")
@pytest.mark.parametrize(
    ("command", "plugin", "ended"),
    [("record", "dies", "exit status 3"), ("diff", "crashes", "killed by signal SIGSEGV"), ("sweep", "dies", "exit status 3")],
)
def test_a_planner_that_ends_its_worker_process_is_exit_2_saying_how(
    tmp_path: Path, command: str, plugin: str, ended: str, looping_env: dict[str, str]
) -> None:
    """No call can fail for a planner that takes its process down: the run stops with exit 2 (never 1, which reads as
    a divergence) and says how the worker ended, with no traceback."""
    args = [*_command(command, f"python:helpers.planted_planners:{plugin}", tmp_path), "--jobs", "2"]
    run = subprocess.run([CLI, *args], capture_output=True, text=True, env=looping_env)
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"error: a --jobs worker process died ({ended}): planner code that ends its process" in " ".join(run.stderr.split())
    assert "Traceback" not in run.stderr + run.stdout


@pytest.fixture
def looping_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI run whose planner loops (it touches ``looping`` first)."""
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "MLA_GOLDEN_TEST_LOOPING": str(tmp_path / "looping")}


def _terminated(args: list[str], env: dict[str, str], looping: Path) -> tuple[subprocess.Popen[str], str, str, list[int]]:
    """Run ``mla-golden ARGS`` and send it SIGTERM once its planner loops: the process, its output, and the children
    it had, all gone by then (a survivor keeps this waiting: the process group is killed only after)."""
    proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        while not looping.exists():
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
        helpers = children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate()  # no deadline a loaded machine could miss: a run that ignores SIGTERM hangs here
        wait_gone(helpers)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, stdout, stderr, helpers


@pytest.mark.slow
@pytest.mark.parametrize("command", ["record", "diff"])
def test_sigterm_ends_a_run_whose_in_process_planner_never_returns(tmp_path: Path, command: str, looping_env: dict[str, str]) -> None:
    args = [*_command(command, "python:helpers.planted_planners:loops", tmp_path), "--jobs", "1"]
    proc, stdout, stderr, _ = _terminated(args, looping_env, tmp_path / "looping")
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "interrupted by SIGTERM" in stderr
    document = json.loads(stdout)
    assert document["interrupted"] == "SIGTERM" and document["exit_code"] == 143
    if command == "record":
        assert not list((tmp_path / "out").rglob("*.safetensors")), "nothing written by the planner that never returned"


#: A tree's sizing helper and planner wrapper; LOOP_IN_PYTHON says whether the helper loops, else its built planner does.
LOOPING_TREE = """
def get_mla_metadata_info_v1(batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse, fast_mode=True):
    import os, pathlib
    if LOOP_IN_PYTHON:
        pathlib.Path(os.environ["MLA_GOLDEN_TEST_LOOPING"]).touch()
        while True:
            pass
    return ((2, torch.uint64), (2, torch.int32), ((1, 8), torch.int32), (2, torch.int32), ((1, 2), torch.int32), (1, torch.int32))

@compile_ops("module_mla_metadata")
def _impl(num_heads_k): ...

def get_mla_metadata_v1(seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k,
                        is_causal, work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
                        reduce_partial_map, page_size=1, kv_granularity=16, max_seqlen_qo=-1, uni_seqlen_qo=-1,
                        fast_mode=True, max_split_per_batch=-1, dtype_q=None, dtype_kv=None):
    return _impl(num_heads_k)
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["python", "harness"])
def test_sigterm_ends_an_aiter_src_run_whose_tree_loops_and_its_processes_with_it(
    tmp_path: Path, looping_env: dict[str, str], where: str
) -> None:
    tree = tree_at(tmp_path / "aiter", {CPP_FILE: entry_point(), ATTENTION_PY: LOOPING_TREE.replace("LOOP_IN_PYTHON", str(where == "python"))})
    harness = tmp_path / "looping-harness"  # a built planner that never returns
    harness.write_text('#!/bin/sh\ntouch "$MLA_GOLDEN_TEST_LOOPING"\nwhile :; do :; done\n')
    harness.chmod(0o755)
    fake = fake_compiler(tmp_path, f'cp {harness} "$2"')  # "builds" it
    env = {**looping_env, "CXX": str(fake), "MLA_GOLDEN_CACHE": str(tmp_path / "cache")}
    args = ["record", "--backend", f"aiter-src:{tree}", "--out", str(tmp_path / "out"), *DEVICE, "--format", "json", "--jobs", "1"]
    proc, stdout, stderr, helpers = _terminated(args, env, tmp_path / "looping")
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert json.loads(stdout)["interrupted"] == "SIGTERM"
    assert len(helpers) == (1 if where == "python" else 2), "the tree's Python (and its harness) ran in child processes"
