"""Reference planners today vs at a baseline commit (590845e by default), side by side in one run.

    python benchmarks/bench_planners.py [--baseline REV | --baseline-dir DIR] [--rounds N]

The baseline's ``mla_golden`` package is taken from git (``git archive REV
mla_golden``) into a temporary folder; each side runs in its own child
process (so each imports its own ``mla_golden``), the two alternating round
by round so that load on a shared machine hits both alike. Each child times
the vLLM decode shapes of ``test_bench_reference.py`` (gfx950/256, fp8, 16
heads, batch 256 and 1024) and the fp8 prefill, single-threaded, best of
many calls in CPU time (wall time swings with other load on a shared machine). Printed: ms per call on each side and today/baseline (goal <= 1).
On a machine with a GPU the children see it as the CLI does (torch.cuda
initialised), the case where per-call device queries would cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Runs in each child: times the planners of whichever mla_golden is first on sys.path (CPU time: steady on a busy machine).
CHILD = r"""
import json, random, sys, time
import torch
torch.set_num_threads(1)
if torch.cuda.is_available():
    torch.cuda.init()  # as a program with a GPU has it: the planners must not pay for it per call
import mla_golden.reference as ref

def indptr(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)

def alloc(info):
    return [torch.empty(s if isinstance(s, tuple) else (s,), dtype=d) for s, d in info]

def decode(kv_lens):
    fp8 = torch.float8_e4m3fn
    b = len(kv_lens)
    qo, kv, last = indptr([1] * b), indptr(kv_lens), torch.ones(b, dtype=torch.int32)
    ptrs, indptr_, info, r_indptr, r_final, r_partial = alloc(ref.get_mla_metadata_info_v1(b, 1, 16, fp8, fp8, is_sparse=False, fast_mode=True))
    return lambda: ref.get_mla_metadata_v1(qo, kv, last, 16, 1, True, ptrs, info, indptr_, r_indptr, r_final, r_partial,
        page_size=1, kv_granularity=16, max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=True, dtype_q=fp8, dtype_kv=fp8)

def prefill():
    lens = [8192] * 64
    ip, ctx = indptr(lens), torch.tensor(lens, dtype=torch.int32)
    bufs = alloc(ref.get_ps_metadata_info_v1(64, 128, 8192, 256))
    return lambda: ref.get_ps_metadata_v1(ip, ip, ctx, 1, 128, *bufs, qhead_granularity=1, qlen_granularity=256,
        kvlen_granularity=128, block_size=1, is_causal=True)

def best(fn, seconds):
    fn()
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t = time.process_time(); fn(); times.append(time.process_time() - t)
    return min(times) * 1e3

rng = random.Random(0)
seconds = float(sys.argv[1])
with ref.device("gfx950", 256):
    calls = {"decode b256 kv8192": decode([8192] * 256),
             "decode b1024 variable kv": decode([rng.randint(1, 16384) for _ in range(1024)]),
             "prefill 64x8k 128 heads": prefill()}
    print(json.dumps({name: best(fn, seconds) for name, fn in calls.items()}))
"""


def baseline_tree(rev: str, into: Path) -> Path:
    """``mla_golden`` as it was at ``rev``, extracted under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "mla_golden"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_side(path: Path, seconds: float) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(seconds)], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(path)}, cwd=path,
    )  # fmt: skip
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="590845e")
    parser.add_argument("--baseline-dir", type=Path, help="a folder holding the baseline's mla_golden (where git is not at hand)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per shape and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = args.baseline_dir.resolve() if args.baseline_dir else baseline_tree(args.baseline, Path(tmp))
        sides: dict[str, list[dict[str, float]]] = {"today": [], args.baseline: []}
        for _ in range(args.rounds):
            sides["today"].append(run_side(ROOT, args.seconds))
            sides[args.baseline].append(run_side(old, args.seconds))
    for name in sides["today"][0]:
        now = statistics.median(r[name] for r in sides["today"])
        then = statistics.median(r[name] for r in sides[args.baseline])
        print(f"{name:<26} today {now:7.3f} ms  {args.baseline} {then:7.3f} ms  today/{args.baseline} = {now / then:.2f} (goal <= 1)")


if __name__ == "__main__":
    main()
