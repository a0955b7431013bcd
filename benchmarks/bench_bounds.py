"""What check costs as inputs grow, and what forged goldens cost.

    python benchmarks/bench_bounds.py     (make bench runs it)

- check over one reference decode call of 10k, 30k and 100k one-token
  requests: seconds of wall and CPU time, and the 100k / 10k ratio
  (goal: 100k in under 5 s; linear means a ratio near 10).
- a fuzz over forged self-consistent goldens (valid digest): wild int params
  and buffers declared far larger, each replayed (diff) and checked in a worker
  process; counts of runs within 5 s and within 500 MB of peak RSS (torch
  included), and of tracebacks (goal: all within both, 0 tracebacks).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench_check_scaling() -> list[tuple[str, float, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.calls import many_requests

    import mla_golden

    rows, cpu = [], {}
    for batch in (10_000, 30_000, 100_000):
        call = many_requests(batch)
        wall, cpu0 = time.perf_counter(), time.process_time()
        result = mla_golden.invariants(call)
        wall, cpu[batch] = time.perf_counter() - wall, time.process_time() - cpu0
        goal = " (goal < 5 s)" if batch == 100_000 else ""
        rows.append((f"check, {batch} decode requests", wall, f"s wall, {cpu[batch]:.2f} s CPU{goal}; ok={result.ok}"))
    rows.append(("check, 100k / 10k CPU time", cpu[100_000] / cpu[10_000], "x (linear: ~10)"))
    return rows


TIME_BOUND_S, MEMORY_BOUND_MB = 5.0, 500.0


def _forge_all(count: int, seed: int, tmp: Path) -> list[tuple[str, Path]]:
    """``count`` forged goldens, one per folder: (what was forged, folder)."""
    from helpers.corruption import WILD_VALUES
    from helpers.forged import forge

    from mla_golden.golden.safetensors_file import MAX_ELEMENTS
    from mla_golden.golden.store import load

    rng = random.Random(seed)
    sources = sorted(p for p in (ROOT / "goldens").rglob("*.safetensors"))
    wild = (*WILD_VALUES, 2**31, -(2**31) - 1, 2**26, 4096)
    forged = []
    for i in range(count):
        source = sources[rng.randrange(len(sources))]
        call = load(source).call
        folder = tmp / str(i)
        if rng.random() < 0.7 or not call.buffers:
            names = sorted(n for n, v in call.params.items() if isinstance(v, int) and not isinstance(v, bool))
            edits = {name: rng.choice(wild) for name in rng.sample(names, rng.randint(1, 2))}
            what = f"params {edits}"
            kwargs: dict = {"params": edits}
        else:
            name = rng.choice(sorted(call.buffers))
            shape = list(call.buffers[name]["shape"])
            total = sum(max(1, _prod(s["shape"])) for s in call.buffers.values())
            room = max(1, (MAX_ELEMENTS - total) // max(1, _prod(shape[1:])))
            shape[0] += rng.choice((room, room // 2, 1000 * shape[0]))
            shape[0] = min(shape[0], shape[0] - 1 + room)
            what = f"buffer {name} declared {shape}"
            kwargs = {"buffers": {name: shape}}
        try:
            forge(source, folder, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the store refuses to write some forgeries: not a run
            print(f"  not forged ({what}): {type(exc).__name__}: {str(exc)[:100]}")
            continue
        forged.append((f"{source.name}: {what}", folder))
    return forged


def _prod(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def bench_forged(count: int = 60, seed: int = 1) -> list[tuple[str, float, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as tmp:
        forged = _forge_all(count, seed, Path(tmp))
        worker = [sys.executable, str(ROOT / "benchmarks" / "forged_runs.py"), *(str(f) for _w, f in forged)]
        start = time.perf_counter()
        done = subprocess.run(worker, capture_output=True, text=True, check=False)
        took = time.perf_counter() - start
    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    what = {str(folder): w for w, folder in forged}
    slow = [r for r in runs if r["seconds"] > TIME_BOUND_S]
    big = [r for r in runs if r["peak_mb"] > MEMORY_BOUND_MB]
    tracebacks = [r for r in runs if any(s.startswith(("traceback", "failed")) for s in r["statuses"])]
    print(
        f"{len(runs)} forged goldens (of {len(forged)} forged): within {TIME_BOUND_S:.0f} s {len(runs) - len(slow)}, "
        f"within {MEMORY_BOUND_MB:.0f} MB {len(runs) - len(big)}, tracebacks {len(tracebacks)}; slowest "
        f"{max((r['seconds'] for r in runs), default=0):.2f} s, largest {max((r['peak_mb'] for r in runs), default=0):.0f} MB"
    )
    for r in (slow + big + tracebacks)[:10]:
        print(f"  OVER: {what[r['folder']]}: {r['seconds']:.2f} s, {r['peak_mb']:.0f} MB, {r['statuses'][:2]}")
    if done.returncode:
        print("  the worker failed:", done.stderr[-2000:])
    bad = len({r["folder"] for r in slow + big + tracebacks}) + len(forged) - len(runs)
    return [("forged goldens: diff + check each", took, f"s for {len(runs)}; {bad} over a bound or failed (goal 0)")]


def main() -> None:
    rows = bench_check_scaling() + bench_forged()
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:9.3f}  {note}")


if __name__ == "__main__":
    main()
