"""`--jobs` workers never outlive the run: killed with it however it ends, and capped at the CPU count."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mla_golden.workers import cap_jobs, usable_cpus

CLI = str(Path(sys.executable).parent / "mla-golden")


def _children(pid: int) -> list[int]:
    """Live worker processes whose parent is ``pid`` (multiprocessing's spawn children, not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_workers_die_with_their_parent_and_write_nothing_after(tmp_path, sig):
    out = tmp_path / "goldens"
    parent = subprocess.Popen(
        [CLI, "record", "--backend", "reference", "--out", str(out), "--jobs", "2", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < min(2, usable_cpus()):
            workers = _children(parent.pid)
            time.sleep(0.05)
        assert workers, "the workers never started"
        os.kill(parent.pid, sig)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.05)
        survivors = [w for w in workers if _alive(w)]
        assert survivors == [], f"workers outlived their parent: {survivors}"
        count = len(list(out.rglob("*.safetensors")))
        time.sleep(1.0)
        assert len(list(out.rglob("*.safetensors"))) == count  # nothing written after the parent is gone
    finally:
        for pid in [parent.pid, *_children(parent.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_jobs_are_capped_at_the_cpu_count():
    cpus = usable_cpus()
    assert cap_jobs(cpus) == (cpus, None)
    jobs, note = cap_jobs(1000)
    assert jobs == cpus and note is not None and f"capped at {cpus}" in note


def test_record_says_it_capped_jobs(tmp_path):
    run = subprocess.run(
        [CLI, "record", "--backend", "reference", "--out", str(tmp_path / "g"), "--jobs", "1000", "--device", "gfx942:304"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if usable_cpus() >= 1000:
        pytest.skip("a machine with 1000 CPUs")
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"--jobs 1000 capped at {usable_cpus()}" in run.stderr
