"""Sweep benchmarks, as ratios measured in the same run.

    python benchmarks/bench_sweep.py [--cases N] [--jobs J] [--scaling-cases M]     (make bench runs it)

- overhead: a sweep in this process (serial vs parallel decode planner over
  the default space: every case runs both planners, nothing diverges).
  Everything but the planners' own calls (sizing helper + planner, both
  sides) is the sweep's overhead: generating points, inputs and canary
  buffers, comparing, journal and bookkeeping. Measured in CPU seconds of this
  process (what other processes on a shared machine do not inflate) and, for
  reference, in wall seconds. Goal: <= 20% of the planners' time.
- scaling: a divergent sweep as users run it (docs/sweep-spaces/versions.toml,
  aiter aded0f84 vs e4048607, with ``out``: every divergent case shrunk and its
  reproducer goldens written) with ``--jobs 1`` (this process), ``--jobs J``
  and Ray on the same J CPUs (warm actors); wall time net of start-up (worker
  processes import torch and warm the planners; Ray starts its instance), the
  start-up printed apart. Goals: ``--jobs 8`` >= 6x ``--jobs 1`` on 16 free
  cores (J = 2: >= 1.7x on two free cores); Ray no slower than ``--jobs J``.
  Wall scaling needs the cores free, so the load average is printed beside it.
- common vs rare: the same planted bug (a decode request this long gets a
  wrong last work_indptr entry) swept against the reference over the default
  space at the same case budget, once with a threshold most decode cases
  pass (common) and once with one few do (rare). Each group's first case is
  shrunk; later cases of a known cause are tried at its minimal call first,
  not shrunk again. Goal: the common bug costs <= 2x the time of the rare one
  (it was ~10x: every divergent case shrunk).
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mla_golden
from mla_golden import reference
from mla_golden.sweeper.driver import Findings

A = "reference+AITER_MLA_META_USE_PARALLEL=0"
B = "reference+AITER_MLA_META_USE_PARALLEL=1"
VERSIONS = Path(__file__).resolve().parent.parent / "docs" / "sweep-spaces" / "versions.toml"
OLD, NEW = "reference@aded0f84", "reference@e4048607"


def overhead(cases: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mla_golden.sweep(A, B, cases=20, seed=99)  # imports and first calls out of the way
        cpu = time.process_time()
        inline = mla_golden.sweep(A, B, cases=cases, seed=1, out=Path(tmp) / "inline")
        cpu = time.process_time() - cpu
    print(f"sweep of {cases} cases ({A} vs {B}, default space), counts {inline.counts}")
    planner_cpu = sum(r.planner_cpu_s for r in inline.results)
    print(f"overhead (CPU): {(cpu - planner_cpu) / cases * 1e3:.3f} ms/case over {planner_cpu / cases * 1e3:.3f} ms/case "
          f"in the planners = {(cpu - planner_cpu) / planner_cpu:.1%} of planner time (goal <= 20%)")
    wall = inline.elapsed_s - inline.startup_s
    print(f"overhead (wall): {(wall - inline.planner_s) / inline.planner_s:.1%} of planner time")


def _divergent(cases: int, out: Path | None, **how: object) -> tuple[Findings, float]:
    """The sweep and its wall seconds net of start-up."""
    found = mla_golden.sweep(OLD, NEW, VERSIONS, cases=cases, seed=0, out=out, **how)  # type: ignore[arg-type]
    return found, found.elapsed_s - found.startup_s


def _best_of(rounds: int, cases: int, jobs: int, out: Path | None) -> tuple[list[float], list[float], Findings, Findings]:
    """--jobs 1 and --jobs J sweeps, alternating for ``rounds``: their net seconds, and the last findings of each."""
    ones, manys = [], []
    for i in range(rounds):
        one, t1 = _divergent(cases, out / f"one{i}" if out else None)
        many, tj = _divergent(cases, out / f"many{i}" if out else None, jobs=jobs)
        ones.append(t1)
        manys.append(tj)
    return ones, manys, one, many


def scaling(cases: int, jobs: int, rounds: int) -> None:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        mla_golden.sweep(OLD, NEW, VERSIONS, cases=20, seed=99)  # imports and first calls out of the way
        ones, manys, one, many = _best_of(rounds, cases, jobs, Path(tmp))
        assert [(r.index, r.status, r.kind) for r in one.results] == [(r.index, r.status, r.kind) for r in many.results]
        assert [g.signature for g in one.groups] == [g.signature for g in many.groups]
        t1, tj = min(ones), min(manys)
        print(f"divergent sweep of {cases} cases ({OLD} vs {NEW}, {VERSIONS.name}): {one.counts}, {len(one.groups)} groups; "
              f"best of {rounds} alternating rounds")
        print(f"scaling: --jobs 1 {t1:.2f} s, --jobs {jobs} {tj:.2f} s -> {t1 / tj:.2f}x net of start-up "
              f"(median {statistics.median(ones) / statistics.median(manys):.2f}x; start-up {many.startup_s:.2f} s apart) "
              f"(goal: >= 6x at --jobs 8 on 16 cores, >= 1.7x at --jobs 2 on 2)")
        busy1, busyj = sum(r.seconds for r in one.results), sum(r.seconds for r in many.results)
        print(f"  worker time per case: {busy1 / cases * 1e3:.2f} ms at --jobs 1, {busyj / cases * 1e3:.2f} ms at --jobs {jobs}; "
              f"workers busy {busyj / (jobs * manys[-1]):.0%} of the last --jobs {jobs} sweep")
        ones, manys, _, _ = _best_of(rounds, cases, jobs, None)
        print(f"  without out (nothing written): --jobs 1 {min(ones):.2f} s, --jobs {jobs} {min(manys):.2f} s -> "
              f"{min(ones) / min(manys):.2f}x")
        try:
            import ray
        except ImportError:
            print("Ray: not installed (the ray extra); not measured")
        else:
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
            try:
                on_ray, tr = _divergent(cases, Path(tmp) / "ray", ray="local")
                again, tr2 = _divergent(cases, Path(tmp) / "ray2", ray="local")
            finally:
                ray.shutdown()
            assert [r.status for r in on_ray.results] == [r.status for r in one.results]
            print(f"Ray, {jobs} warm actors: {min(tr, tr2):.2f} s net of start-up ({on_ray.startup_s:.2f} s apart) = "
                  f"{min(tr, tr2) / tj:.2f}x the time of --jobs {jobs} (goal <= 1x)")
    load = max(load, os.getloadavg()[0])
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (wall scaling needs the cores free)")


def _long_request_bug(tokens: int) -> SimpleNamespace:
    """The reference, but a decode call with a request of ``tokens`` KV tokens or more gets work_indptr[-1] + 1."""

    def get_mla_metadata_v1(*args: Any, **kwargs: Any) -> None:
        reference.get_mla_metadata_v1(*args, **kwargs)
        call = inspect.signature(reference.get_mla_metadata_v1).bind(*args, **kwargs).arguments
        kv, last, page = call["seqlens_kv_indptr"], call["kv_last_page_lens"], call.get("page_size", 1)
        if int(((kv.diff() - 1) * page + last).max()) >= tokens:
            call["work_indptr"][-1] += 1

    functions = {n: getattr(reference, n) for n in ("get_mla_metadata_info_v1", "get_ps_metadata_v1", "get_ps_metadata_info_v1")}
    return SimpleNamespace(get_mla_metadata_v1=get_mla_metadata_v1, **functions)


#: Planted in most decode cases of the default space (contexts of 4k..128k tokens), and in few.
COMMON, RARE = _long_request_bug(2000), _long_request_bug(120_000)


def common_vs_rare(cases: int, rounds: int) -> None:
    """The sweep's time with a bug most cases show against one few do, at one case budget (best of ``rounds``)."""
    mla_golden.sweep("reference", "python:bench_sweep:RARE", cases=20, seed=99)  # imports and first calls out of the way
    times: dict[str, list[float]] = {"COMMON": [], "RARE": []}
    found: dict[str, Findings] = {}
    for _ in range(rounds):
        for name in times:
            found[name] = mla_golden.sweep("reference", f"python:bench_sweep:{name}", cases=cases)
            times[name].append(found[name].elapsed_s)
    common, rare = min(times["COMMON"]), min(times["RARE"])
    divergent = {name: f.counts.get("diverged", 0) for name, f in found.items()}
    shrunk = {name: sum(1 for r in f.results if r.status == "diverged" and not r.seeded and r.shrink_evals > 1) for name, f in found.items()}
    print(f"common vs rare bug, {cases} cases of the default space: common {divergent['COMMON']} divergent cases "
          f"({shrunk['COMMON']} shrunk) {common:.2f} s, rare {divergent['RARE']} ({shrunk['RARE']} shrunk) {rare:.2f} s -> "
          f"{common / rare:.2f}x (goal <= 2x; groups {len(found['COMMON'].groups)} and {len(found['RARE'].groups)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases of the overhead sweep")
    parser.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="workers of the scaling sweep")
    parser.add_argument("--scaling-cases", type=int, default=1500, help="cases of the divergent scaling sweep")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of the scaling sweeps (best taken)")
    parser.add_argument("--bug-cases", type=int, default=500, help="cases of the common vs rare bug sweeps")
    args = parser.parse_args()
    overhead(args.cases)
    common_vs_rare(args.bug_cases, args.rounds)
    scaling(args.scaling_cases, args.jobs, args.rounds)


if __name__ == "__main__":
    main()
