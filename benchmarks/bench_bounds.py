"""What check costs as inputs grow, and what forged goldens cost (issue 18.5, 19.4).

    python benchmarks/bench_bounds.py     (make bench runs it)

- check over one reference decode call of 10k, 30k and 100k one-token
  requests: seconds of wall and CPU time, and the 100k / 10k ratio
  (goal: 100k in under 5 s; linear means a ratio near 10).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench_check_scaling() -> list[tuple[str, float, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from planner_calls import many_requests

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


def main() -> None:
    rows = bench_check_scaling()
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:9.3f}  {note}")


if __name__ == "__main__":
    main()
