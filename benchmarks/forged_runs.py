"""Worker for bench_bounds: diff (replay on the reference) and check each forged golden in this process.

    python benchmarks/forged_runs.py DIR...     prints one JSON line per DIR: seconds, peak RSS MB, statuses

Peak RSS is the process's high-water mark, reset before each golden (Linux ``clear_refs``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    from mla_golden.runs import check_worker, golden_files, replay_worker

    for folder in sys.argv[1:]:
        Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts again from here
        start = time.perf_counter()
        statuses: list[str] = []
        try:
            files, bad = golden_files([Path(folder)])
            results = bad + replay_worker(files, "reference", 20, False) + check_worker(files)
            statuses = [f"{r.status}: {r.message[:120]}" for r in results]
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            statuses = [f"traceback: {type(exc).__name__}: {exc}"]
        took = time.perf_counter() - start
        print(json.dumps({"folder": folder, "seconds": took, "peak_mb": _peak_mb(), "statuses": statuses}), flush=True)


if __name__ == "__main__":
    main()
