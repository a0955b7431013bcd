"""Sweep benchmarks, as ratios measured in the same run.

    python benchmarks/bench_sweep.py [CASES]     (make bench runs it)

- overhead: a sweep in this process (serial vs parallel decode planner over
  the default space: every case runs both planners, nothing diverges).
  Everything but the planners' own calls (sizing helper + planner, both
  sides) is the sweep's overhead: generating points, inputs and canary
  buffers, comparing, journal and bookkeeping. Measured in CPU seconds of this
  process (what other processes on a shared machine do not inflate) and, for
  reference, in wall seconds. Goal: <= 20% of the planners' time.
- scaling: the same sweep with ``--jobs 1`` (this process) and ``--jobs 2``
  (two worker processes); the ratio of their sweeping times, worker start-up
  (each worker imports torch) reported apart. Goal: >= 1.7x on 2 cores; it
  needs the two cores free, so the load average is printed beside it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import mla_golden

A = "reference+AITER_MLA_META_USE_PARALLEL=0"
B = "reference+AITER_MLA_META_USE_PARALLEL=1"


def main() -> None:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        mla_golden.sweep(A, B, cases=20, seed=99)  # imports and first calls out of the way
        cpu = time.process_time()
        inline = mla_golden.sweep(A, B, cases=cases, seed=1, out=Path(tmp) / "inline")
        cpu = time.process_time() - cpu
        load = os.getloadavg()[0]
        driver = time.process_time()
        two = mla_golden.sweep(A, B, cases=cases, seed=1, jobs=2, out=Path(tmp) / "two")
        driver = time.process_time() - driver
        load = max(load, os.getloadavg()[0])
    print(f"sweep of {cases} cases ({A} vs {B}, default space), counts {inline.counts}")
    planner_cpu = sum(r.planner_cpu_s for r in inline.results)
    print(f"overhead (CPU): {(cpu - planner_cpu) / cases * 1e3:.3f} ms/case over {planner_cpu / cases * 1e3:.3f} ms/case "
          f"in the planners = {(cpu - planner_cpu) / planner_cpu:.1%} of planner time (goal <= 20%)")
    wall = inline.elapsed_s - inline.startup_s
    print(f"overhead (wall): {(wall - inline.planner_s) / inline.planner_s:.1%} of planner time")
    t1, t2 = wall, two.elapsed_s - two.startup_s
    print(f"scaling: --jobs 1 (in-process) {t1:.2f} s, --jobs 2 {t2:.2f} s -> {t1 / t2:.2f}x (goal >= 1.7x); "
          f"worker start-up {two.startup_s:.2f} s apart (with it: {inline.elapsed_s / two.elapsed_s:.2f}x); "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    # On a shared machine the wall ratio says how much CPU the others left; the CPU each setup spends
    # says what two free cores give: the driver and both workers' CPU, spread over two cores.
    workers = sum(r.cpu_s for r in two.results)
    print(f"scaling from CPU spent: --jobs 1 {cpu:.2f} s, --jobs 2 {workers:.2f} s in the workers + {driver:.2f} s "
          f"in the driver -> {cpu / ((workers + driver) / 2):.2f}x on two free cores")


if __name__ == "__main__":
    main()
