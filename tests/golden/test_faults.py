"""Nothing lost under faults: concurrent writers, writers killed mid-write."""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import standins

import mla_golden
from mla_golden.golden.store import Golden, GoldenStore, WriteOutcome, to_bytes


def _toy_call(seed: int = 0) -> mla_golden.Call:
    aiter = standins.fake_aiter()
    bufs = standins.toy_buffers(3, 400)
    kv = torch.tensor([0, 50, 200 + seed, 400], dtype=torch.int32)
    with mla_golden.spy(aiter) as spy:
        aiter.get_mla_metadata_v1(torch.tensor([0, 1, 2, 3], dtype=torch.int32), kv,
                                  torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values())  # fmt: skip
    return spy.calls.one()


def _writer(root: str, worker: int, barrier: Any, results: Any) -> None:
    store = GoldenStore(root)
    shared, own = Golden("shared/one", _toy_call(0)), Golden(f"own/{worker}", _toy_call(worker + 1))
    barrier.wait()
    results.put([store.write(shared).value, store.write(own).value])


def test_eight_processes_writing_same_and_different_keys(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), i, barrier, results)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:  # waited on as events, not against a clock a loaded machine would miss
        proc.join()
        assert proc.exitcode == 0
    outcomes = [results.get() for _ in procs]  # each writer put its outcome before it exited
    shared = [o[0] for o in outcomes]
    assert shared.count(WriteOutcome.WRITTEN.value) == 1 and shared.count(WriteOutcome.UNCHANGED.value) == 7
    assert all(o[1] == WriteOutcome.WRITTEN.value for o in outcomes)
    store = GoldenStore(tmp_path)
    assert len(list(store.paths())) == 9 and not list(tmp_path.rglob("*.tmp"))
    assert mla_golden.diff(_toy_call(0), store.read("shared/one").call).equal


def _rewrite_forever(root: str, source: str, start: int, ready: Any) -> None:
    """Rewrite goldens in a loop: the test kills this process somewhere in the middle."""
    golden = mla_golden.load(source)
    store = GoldenStore(root)
    ready.set()
    i = start
    while True:
        golden.key = f"k/{i % 16}"
        store.write(golden, update=True)
        i += 1


@pytest.mark.slow
def test_writers_killed_at_random_points_leave_only_whole_goldens(tmp_path: Path) -> None:
    source = tmp_path / "source.safetensors"
    source.write_bytes(to_bytes(Golden("k/0", _toy_call(3))))
    root = tmp_path / "tree"
    rng = random.Random(1234)
    ctx = multiprocessing.get_context("fork")  # forked writers start in milliseconds
    for _ in range(60):
        ready = ctx.Event()
        proc = ctx.Process(target=_rewrite_forever, args=(str(root), str(source), rng.randrange(16), ready))
        proc.start()
        assert ready.wait(60)
        time.sleep(rng.random() * 0.05)  # a random point in the write loop
        proc.kill()  # SIGKILL
        proc.join()
        store = GoldenStore(root)
        for path in store.paths():
            assert mla_golden.load(path).key.startswith("k/")  # never partial
        store.clean_stale_temps()  # the writer is dead: removed at once
        assert not store.stale_temps() and not list(root.rglob("*.tmp"))
    assert 1 <= len(list(GoldenStore(root).paths())) <= 16


def test_a_dead_local_writers_temp_file_is_stale_at_once(tmp_path: Path) -> None:
    from mla_golden.files import HOST as _HOST

    store = GoldenStore(tmp_path)
    old = time.time() - 60
    live = tmp_path / f".x.safetensors.{_HOST}.{os.getpid()}.abc.tmp"
    dead = tmp_path / f".x.safetensors.{_HOST}.999999999.abc.tmp"
    fresh_dead = tmp_path / f".y.safetensors.{_HOST}.999999999.abc.tmp"
    foreign = tmp_path / ".x.safetensors.otherhost.1.abc.tmp"
    ancient_foreign = tmp_path / ".z.safetensors.otherhost.1.abc.tmp"
    for path in (live, dead, fresh_dead, foreign, ancient_foreign):
        path.write_bytes(b"partial")
    for path in (live, dead, foreign):
        os.utime(path, (old, old))
    os.utime(ancient_foreign, (old - 3600, old - 3600))
    # a dead writer's, however young; another host's only after an hour; a live writer's never
    assert store.stale_temps() == sorted([dead, fresh_dead, ancient_foreign])
    assert store.clean_stale_temps() == sorted([dead, fresh_dead, ancient_foreign]) and live.exists() and foreign.exists()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_goldens_and_reports_get_the_users_umask_not_0600(tmp_path: Path, umask: int) -> None:
    from mla_golden.files import atomic_write

    store = GoldenStore(tmp_path)
    before = os.umask(umask)
    try:
        store.write(Golden("k", _toy_call(0)))
        atomic_write(tmp_path / "report.html", "<p>x</p>")
    finally:
        os.umask(before)
    assert store.path_for("k").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "report.html").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "report.html").read_text() == "<p>x</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.safetensors", "report.html"]
