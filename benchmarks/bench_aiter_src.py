"""aiter-src: one batch-256 decode call (gfx950/256, fp8, 16 heads, kv 8192) after the build.

    MLA_GOLDEN_AITER_REPO=AITER_REPO python benchmarks/bench_aiter_src.py [REV]

Prints the call's wall time (best and median of 50) and the CPU time per
call of the harness process (five runs of aiter's planner, from
/proc/PID/stat), of the tree's Python process (its wrapper and sizing
helper) and of this one (sending, encoding, decoding), against the
reference planning the same call in the same run (goal: at most 20 ms a
call). The first use of REV (default e4048607)
builds it; that is not timed.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

import mla_golden
from mla_golden import reference
from mla_golden.aiter_build import harness

CALLS = 50
BATCH, HEADS, KV_LEN = 256, 16, 8192


def _call(module: Any) -> float:
    fp8 = torch.float8_e4m3fn
    qo = torch.arange(BATCH + 1, dtype=torch.int32)
    kv = torch.arange(BATCH + 1, dtype=torch.int32) * KV_LEN
    last = torch.ones(BATCH, dtype=torch.int32)
    info = module.get_mla_metadata_info_v1(BATCH, 1, HEADS, fp8, fp8, is_sparse=False, fast_mode=True)
    ptrs, work_indptr, work_info, reduce_indptr, final_map, partial_map = (
        torch.empty((s,) if isinstance(s, int) else s, dtype=d) for s, d in info
    )
    start = time.perf_counter()
    module.get_mla_metadata_v1(
        qo, kv, last, HEADS, 1, True, ptrs, work_info, work_indptr, reduce_indptr, final_map, partial_map,
        max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=fp8, dtype_kv=fp8,
    )  # fmt: skip
    return time.perf_counter() - start


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(rev: str = "e4048607") -> None:
    if not os.environ.get("MLA_GOLDEN_AITER_REPO"):
        sys.exit("set MLA_GOLDEN_AITER_REPO to a git clone of ROCm/aiter")
    module = mla_golden.aiter_src(rev)
    timings: dict[str, list[float]] = {}
    cpu = python_cpu = tree_cpu = 0.0
    for name, planner in (("reference", reference), ("aiter-src", module)):
        with planner.device("gfx950", 256):
            _call(planner)  # warm: the harness process starts, the namespace is made
            if name == "aiter-src":
                pid, tree_pid = harness.process_for(module.harness_binary).pid(), module.python_process.pid()
                cpu, tree_cpu = _cpu_seconds(pid), _cpu_seconds(tree_pid)
            own = time.process_time()
            timings[name] = [_call(planner) for _ in range(CALLS)]
            own = (time.process_time() - own) / CALLS
            if name == "aiter-src":
                cpu = (_cpu_seconds(pid) - cpu) / CALLS
                tree_cpu = (_cpu_seconds(tree_pid) - tree_cpu) / CALLS
                python_cpu = own
    ref, src = (statistics.median(timings[n]) for n in ("reference", "aiter-src"))
    print(f"aiter-src {module.planner_identity.label}: batch-{BATCH} decode call, {CALLS} calls")
    print(f"  wall: best {min(timings['aiter-src']) * 1e3:.1f} ms, median {src * 1e3:.1f} ms (goal <= 20 ms)")
    print(
        f"  CPU per call: harness {cpu * 1e3:.1f} ms + the tree's Python {tree_cpu * 1e3:.1f} ms + this process "
        f"{python_cpu * 1e3:.1f} ms (the wall time on an idle machine)"
    )
    print(f"  reference: median {ref * 1e3:.2f} ms; aiter-src / reference = {src / ref:.0f}x")


if __name__ == "__main__":
    main(*sys.argv[1:2])
