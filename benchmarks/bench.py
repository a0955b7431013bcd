"""Benchmarks as ratios against baselines measured in the same run.

    python benchmarks/bench.py [GOLDENS_DIR]     (make bench runs it)

- diff throughput over a golden tree vs (a) DeepDiff on the same tensors as
  lists (what a user might write) and (b) the floor: safetensors load of both
  files + torch.equal per field;
- replay + diff on the reference backend: goldens per second;
- record throughput (goldens written per second) and the tree's size;
- CLI start-up: ``mla-golden --help`` vs ``python -c pass``;
- peak memory of ``mla-golden diff`` over the tree and over a tree four times
  larger (flat means it streams).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [str(Path(sys.executable).parent / "mla-golden")]  # the installed console script


def _best(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _run(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _peak_rss_mb(args: list[str]) -> float:
    """Peak RSS of a child process, measured in a fresh grandchild so earlier children do not count."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


def bench_diff(paths: list[Path]) -> list[tuple[str, float, str]]:
    import torch
    from deepdiff import DeepDiff
    from safetensors.torch import load_file

    import mla_golden

    def ours() -> None:
        for path in paths:
            mla_golden.diff(mla_golden.load(path).call, mla_golden.load(path).call)

    def floor() -> None:
        for path in paths:
            a, b = load_file(str(path)), load_file(str(path))
            for name, tensor in a.items():
                torch.equal(tensor, b[name])

    sample = paths[:4]  # DeepDiff walks lists element by element: a sample, scaled to the tree

    def deepdiff_lists() -> None:
        for path in sample:
            a, b = load_file(str(path)), load_file(str(path))
            DeepDiff({k: v.tolist() for k, v in a.items()}, {k: v.tolist() for k, v in b.items()})

    t_ours, t_floor = _best(ours), _best(floor)
    t_deep = _best(deepdiff_lists, repeat=1) * len(paths) / len(sample)
    per = lambda t: f"{t / len(paths) * 1e3:.2f} ms/golden"  # noqa: E731
    return [
        ("diff (mla-golden: load both + diff)", t_ours, per(t_ours)),
        ("baseline (a) DeepDiff on lists", t_deep, f"{per(t_deep)}; mla-golden is {t_deep / t_ours:.0f}x faster (goal >= 50x)"),
        ("baseline (b) safetensors load + torch.equal", t_floor, f"{per(t_floor)}; mla-golden is {t_ours / t_floor:.2f}x the floor (goal <= 2x)"),
    ]


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "goldens"
    paths = sorted(p for p in tree.rglob("*.safetensors") if not p.name.startswith("."))
    if not paths:
        sys.exit(f"no goldens under {tree}")
    rows = bench_diff(paths)

    t_replay = _run([*CLI, "diff", str(tree), "--backend", "reference", "--quiet"])
    rows.append(("replay + diff, reference backend (CLI)", t_replay, f"{len(paths) / t_replay:.0f} goldens/s (goal: tree < 10 s)"))

    with tempfile.TemporaryDirectory() as tmp:
        t_record = _run([*CLI, "record", "--backend", "reference", "--out", tmp, "--quiet"])
        written = len(list(Path(tmp).rglob("*.safetensors")))
        rows.append(("record default matrix (CLI)", t_record, f"{written / t_record:.0f} goldens/s ({written} goldens)"))

        big = Path(tmp) / "big"
        for i in range(4):
            shutil.copytree(tree, big / str(i))
        rss_one = _peak_rss_mb([*CLI, "diff", str(tree), "--against", str(tree), "--quiet"])
        rss_four = _peak_rss_mb([*CLI, "diff", str(big), "--against", str(big), "--quiet"])
        rows.append(("peak RSS, diff --against, tree x1", rss_one, "MB"))
        rows.append(("peak RSS, diff --against, tree x4", rss_four, f"MB; ratio {rss_four / rss_one:.2f} (goal: flat, ~1)"))

    size_mb = sum(p.stat().st_size for p in paths) / 2**20
    rows.append(("shipped tree size", size_mb, f"MB in {len(paths)} goldens (goal < 20 MB)"))

    help_t = statistics.median(_run([*CLI, "--help"]) for _ in range(5))
    pass_t = statistics.median(_run([sys.executable, "-c", "pass"]) for _ in range(5))
    rows.append(("CLI --help", help_t, f"{help_t / pass_t:.1f}x python -c pass ({pass_t * 1e3:.0f} ms) (goal < 4x)"))

    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        unit = "" if note.startswith("MB") else " s"
        print(f"{name:<{width}}  {value:9.3f}{unit}  {note}")


if __name__ == "__main__":
    main()
