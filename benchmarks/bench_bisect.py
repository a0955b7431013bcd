"""Bisect the upgrade preview's diverging calls over aiter's real history, cold and warm.

    MLA_GOLDEN_AITER_REPO=AITER_CLONE python benchmarks/bench_bisect.py [--jobs N] [--all]

Records the shipped matrix as aiter v0.1.16.post2 plans it (reference@v0.1.16.post2), keeps the calls the
upgrade preview to v0.1.20 reports as not equal (--all: every call), then runs ``mla_golden.bisect`` from
v0.1.16.post2 to v0.1.20 twice: cold (a fresh build cache: every tree it needs is extracted and built) and
warm (the same cache). Prints the wall and CPU time of each run, the trees built, and the goals: builds at
most ceil(log2(n)) + 2 among the n planner changes by meaning on the line; cold under 10 minutes on a 2-core
machine, warm under 30 s. Without MLA_GOLDEN_AITER_REPO it says so and exits 0 (make bench runs it).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

GOOD, BAD = "v0.1.16.post2", "v0.1.20"


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _preview_calls(out: Path, keep_all: bool) -> Path:
    """The matrix recorded on GOOD's port, and the folder of the calls its preview on BAD reports as not equal."""
    import mla_golden
    from mla_golden.backends import resolve
    from mla_golden.golden.store import Golden, GoldenStore
    from mla_golden.matrix import capture, load_matrix

    recorded = GoldenStore(out / "recorded")
    for case, call in capture(load_matrix(), resolve(f"reference@{GOOD}")):
        if not isinstance(call, Exception):
            recorded.write(Golden(case.name, call))
    if keep_all:
        return recorded.root
    chosen = GoldenStore(out / "preview-not-equal")
    bad = resolve(f"reference@{BAD}")
    for path in recorded.paths():
        golden = mla_golden.load(path)
        if not mla_golden.diff(golden.call, bad.replay(golden.call), judge=False).same_content:
            chosen.write(Golden(golden.key, golden.call))
    return chosen.root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="bisect every call of the matrix, not only the preview's")
    args = parser.parse_args()
    repo = os.environ.get("MLA_GOLDEN_AITER_REPO")
    if not repo:
        print("bench_bisect: set MLA_GOLDEN_AITER_REPO to a clone of ROCm/aiter to run it; skipped")
        return 0
    import mla_golden

    work = Path(tempfile.mkdtemp(prefix="bench-bisect-"))
    try:
        calls = _preview_calls(work, args.all)
        count = sum(1 for _ in calls.rglob("*.safetensors"))
        os.environ["MLA_GOLDEN_CACHE"] = str(work / "cache")
        rows = []
        for run in ("cold", "warm"):
            wall, cpu = time.perf_counter(), _cpu()
            result = mla_golden.bisect([calls], good=GOOD, bad=BAD, repo=repo, jobs=args.jobs)
            rows.append((run, time.perf_counter() - wall, _cpu() - cpu, result))
        n = len(rows[0][3].line) - 1
        bound = math.ceil(math.log2(n)) + 2
        print(f"bisect {GOOD} -> {BAD} over {count} call(s), --jobs {args.jobs}; {n} planner changes by meaning on the line")
        for run, wall, cpu, result in rows:
            outcomes = {o: sum(1 for r in result.planners if r.outcome == o) for o in ("built", "cached", "port", "failed")}
            found = ", ".join(f"#{c.state.commit.pr} ({len(c.keys)})" for c in result.changes if c.state is not None)
            print(f"  {run}: {wall:6.1f} s wall, {cpu:6.1f} s CPU; trees {outcomes}; found {found}")
        built = sum(1 for r in rows[0][3].planners if r.outcome in ("built", "cached"))
        print(f"  goal: builds <= ceil(log2({n})) + 2 = {bound}: {built} tree(s) built or taken from the cache in the cold run "
              f"({'met' if built <= bound else 'NOT met'}); cold <= 600 s: {'met' if rows[0][1] <= 600 else 'NOT met'}; "
              f"warm <= 30 s: {'met' if rows[1][1] <= 30 else 'NOT met'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
