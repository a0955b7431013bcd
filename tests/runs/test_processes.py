"""`--jobs` workers never outlive the run: killed with it however it ends, and capped at the CPU count."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.matrices import SMALL_MATRIX
from helpers.processes import children, wait_gone

from mla_golden.workers import cap_jobs, usable_cpus

CLI = str(Path(sys.executable).parent / "mla-golden")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_workers_die_with_their_parent_and_write_nothing_after(tmp_path: Path, sig: Any) -> None:
    out = tmp_path / "goldens"
    parent = subprocess.Popen(
        [CLI, "record", "--backend", "reference", "--out", str(out), "--jobs", "2", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        workers: list[int] = []
        while parent.poll() is None and len(workers) < min(2, usable_cpus()):
            workers = children(parent.pid, workers_only=True)
            time.sleep(0.05)
        assert workers, "the workers never started"
        os.kill(parent.pid, sig)
        parent.wait()  # an event, not a clock: a parent that never exits is the bug, and keeps this waiting
        wait_gone(workers)  # they die with their parent: a survivor keeps this waiting
        count = len(list(out.rglob("*.safetensors")))
        time.sleep(1.0)
        assert len(list(out.rglob("*.safetensors"))) == count  # nothing written after the parent is gone
    finally:
        for pid in [parent.pid, *children(parent.pid, workers_only=True)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_jobs_are_capped_at_the_cpu_count() -> None:
    cpus = usable_cpus()
    assert cap_jobs(cpus) == (cpus, None)
    jobs, note = cap_jobs(1000)
    assert jobs == cpus and note is not None and f"capped at {cpus}" in note


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [["record", "--backend", "reference", "--out", "{tmp}/g", "--device", "gfx942:304"],
     ["sweep", "--a", "reference", "--b", "reference", "--cases", "8"]],
    ids=lambda c: c[0],
)  # fmt: skip
def test_record_and_sweep_say_they_capped_jobs(tmp_path: Path, command: list[str]) -> None:
    run = subprocess.run(
        [CLI, *(arg.format(tmp=tmp_path) for arg in command), "--jobs", "1000"], capture_output=True, text=True
    )
    if usable_cpus() >= 1000:
        pytest.skip("a machine with 1000 CPUs")
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"--jobs 1000 capped at {usable_cpus()}" in run.stderr


def _goldens(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*.safetensors")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_record_stops_writing_reports_what_it_wrote_and_exits_128_plus_the_signal(tmp_path: Path, sig: Any) -> None:
    """Ctrl-C / SIGTERM: the pool used to run every queued case before exiting (22 -> 320 goldens), silently."""
    import json

    out = tmp_path / "goldens"
    parent = subprocess.Popen(
        [CLI, "record", "--backend", "reference", "--out", str(out), "--jobs", "2", "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        while len(_goldens(out)) < 4 and parent.poll() is None:
            time.sleep(0.02)
        assert parent.poll() is None, "the run ended before it could be interrupted"
        os.killpg(parent.pid, sig)  # as a terminal's Ctrl-C does: the whole process group
        stdout, stderr = parent.communicate()
        on_disk = _goldens(out)
        time.sleep(1.0)
        assert _goldens(out) == on_disk, "goldens written after the run ended"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == 128 + sig, stderr[-2000:]
    assert f"interrupted by {sig.name}" in stderr
    document = json.loads(stdout)
    assert document["interrupted"] == sig.name and document["exit_code"] == 128 + sig
    reported = {Path(r["path"]).relative_to(out).as_posix() for r in document["results"] if r["status"] == "written"}
    assert reported == on_disk  # what it says it wrote is exactly what is there
    size = re.search(r"(\d+) case\(s\)", stderr)
    assert size is not None, stderr
    matrix_size = int(size.group(1))
    assert len(on_disk) < matrix_size




@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_case_refused_mid_run_is_that_cases_failure_and_the_others_are_written(tmp_path: Path, jobs: str) -> None:
    """Its folder a symlink leading out of --out: once a traceback (with --jobs 2 a TypeError and BrokenProcessPool)."""
    import json

    (tmp_path / "matrix.toml").write_text(SMALL_MATRIX)
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "decode").symlink_to(outside)
    run = subprocess.run(
        [CLI, "record", "--backend", "reference", "--matrix", str(tmp_path / "matrix.toml"), "--out", str(out),
         "--jobs", jobs, "--format", "json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    document = json.loads(run.stdout)
    by_status: dict[str, list[dict[str, Any]]] = {}
    for r in document["results"]:
        by_status.setdefault(r["status"], []).append(r)
    assert sorted(r["key"] for r in by_status["failed"]) == [
        "decode/small/gfx942-cu304/h128-fp8-q1-b4-jitter2000-p1", "decode/small/gfx942-cu304/h16-fp8-q1-b4-jitter2000-p1",
    ]  # fmt: skip
    assert all("outside the golden folder" in r["message"] for r in by_status["failed"])
    assert len(by_status["written"]) == 1 and by_status["written"][0]["key"].startswith("prefill/small-prefill/")
    assert run.returncode == 2 and not list(outside.iterdir())


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_to_record_command_reaches_the_programs_group_and_leaves_nothing_behind(tmp_path: Path, sig: Any) -> None:
    """Once the program was re-parented to init and kept recording, and the hook folder stayed."""
    facts = tmp_path / "facts"
    program = (
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen(['sh', '-c', \"trap '' INT TERM; sleep 300\"])\n"  # a child that ignores the signal
        f"open({str(facts)!r} + '.tmp', 'w').write(f\"{{os.getpid()}} {{child.pid}} {{os.environ['PYTHONPATH'].split(os.pathsep)[0]}}\")\n"
        f"os.rename({str(facts)!r} + '.tmp', {str(facts)!r})\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen(
        [CLI, "record", "--out", str(tmp_path / "goldens"), "--", sys.executable, "-c", program],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        while not facts.exists() and parent.poll() is None:
            time.sleep(0.05)
        assert facts.exists(), parent.communicate()
        program_pid, child_pid, hook_dir = facts.read_text().split(" ", 2)
        os.kill(parent.pid, sig)  # the run only: it must pass the signal on
        _stdout, stderr = parent.communicate()  # a run that does not pass the signal on ends when the program's sleep does
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
    assert parent.returncode == 128 + sig, stderr[-2000:]
    assert f"interrupted by {sig.name}" in stderr
    assert not _alive(int(program_pid)) and not _alive(int(child_pid))
    assert not Path(hook_dir).exists()


@pytest.mark.slow
@pytest.mark.skipif(usable_cpus() < 2, reason="two workers")
def test_a_worker_that_dies_between_tasks_stops_the_pool_with_how_it_ended(tmp_path: Path) -> None:
    """A planner that takes its worker down on one case only: the task that finished comes back, and the next
    submit, which the broken executor refuses, says how the worker ended (never a raw BrokenProcessPool)."""
    from helpers import pool_tasks

    from mla_golden.errors import WorkerDied
    from mla_golden.pool import Pool

    flag = tmp_path / "die"
    with Pool[str](2) as pool:
        pool.submit("dies", pool_tasks.exit_when, str(flag))
        pool.submit("ok", pool_tasks.echo, 7)
        assert pool.next_done() == ("ok", 7)
        flag.touch()
        with pytest.raises(WorkerDied, match=r"worker process died \(exit status 3\)"):
            while True:  # the executor notices the death a moment later: until then it takes tasks
                pool.submit("next", pool_tasks.echo, 1)
                time.sleep(0.01)
