"""Benchmarks as ratios against baselines measured in the same run.

    python benchmarks/bench.py [GOLDENS_DIR]     (make bench runs it)

- ``diff A --against B`` over 8 copies of a golden tree on each side, as the
  CLI runs it (``runs.diff_trees``: pairing, strict loading, digest, diff),
  with B an unchanged copy of A and with B re-recorded (every pair's bytes
  differ), vs (a) DeepDiff on the same tensors as lists (what a user might
  write) and (b) the floor: safetensors load of both files + torch.equal per
  field; CPU time, best of interleaved runs;
- replay + diff on the reference backend: goldens per second;
- record throughput (goldens written per second) and the tree's size;
- golden format: size and load + diff time of vLLM-sized prefill goldens
  (buffers for max_num_seqs 128 x max_model_len 8192, 16 and 64 heads) in
  mla-golden/2 vs the whole-buffer mla-golden/1 encoding (goal: <= 1/10 size,
  no slower);
- corruption fuzz: 10000 seeded corruptions of the shipped goldens, counts
  printed (goal: all refused naming the file, 0 loaded, 0 tracebacks), and
  1500 forged goldens (content edited with a valid digest) through check,
  diff and the pictures (goal: 0 tracebacks, each under 1 s of CPU);
- CLI start-up: ``mla-golden --help`` vs ``python -c pass``;
- peak memory of ``mla-golden diff`` over the tree and over a tree four times
  larger (flat means it streams).
"""

from __future__ import annotations

import functools
import os
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


def _run(args: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def _with_bytecode() -> dict[str, str]:
    """This environment, allowed to write bytecode caches: an installed package has them (pip compiles them,
    and an editable one writes them on first use), so start-up is timed with them, not compiling every module."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _peak_rss_mb(args: list[str]) -> float:
    """Peak RSS of a child process, measured in a fresh grandchild so earlier children do not count."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    return int(out.stdout.strip()) / 1024


#: The tree diff runs over this many copies of the tree on each side (8 x the shipped 120 = 960 goldens).
COPIES = 8


def _cpu_best(fn: Callable[[], object], repeat: int = 3) -> float:
    """Best CPU time of ``repeat`` runs (CPU, not wall: other load on a shared machine stretches the clock)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def bench_diff(tree: Path) -> list[tuple[str, float, str]]:
    """``diff A --against B`` as the CLI runs it (runs.diff_trees: pairing, strict loads, digests, diffs) vs the floor.

    Twice: B an unchanged copy of A (a CI diff of goldens nobody re-recorded: every pair byte-identical, so each
    pair is decoded once) and B re-recorded (same calls, new timestamps: every pair's bytes differ, both decoded).
    """
    import torch
    from deepdiff import DeepDiff
    from safetensors.torch import load_file

    from mla_golden.runs import diff_trees

    torch.set_num_threads(1)  # as the CLI's workers run
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        recorded = Path(tmp, "recorded")
        subprocess.run([*CLI, "record", "--backend", "reference", "--out", str(recorded), "--quiet"], check=True, stdout=subprocess.DEVNULL)
        for label, source in (("unchanged copies", tree), ("re-recorded", recorded)):
            sides = Path(tmp, label, "a"), Path(tmp, label, "b")
            for side, origin in zip(sides, (tree, source)):
                for i in range(COPIES):
                    shutil.copytree(origin, side / str(i))
            pairs = list(zip(*(sorted(side.rglob("*.safetensors")) for side in sides), strict=True))

            def ours(sides: tuple[Path, Path] = sides, pairs: list[tuple[Path, Path]] = pairs) -> None:
                results = diff_trees(*sides)
                assert len(results) == len(pairs) and all(r.status.ok for r in results)

            def floor(pairs: list[tuple[Path, Path]] = pairs) -> None:
                for path_a, path_b in pairs:
                    a, b = load_file(str(path_a)), load_file(str(path_b))
                    for name, tensor in a.items():
                        torch.equal(tensor, b[name])

            # interleaved, best of each: both sides meet the same moments of load
            t_ours = t_floor = float("inf")
            for _ in range(3):
                t_ours, t_floor = min(t_ours, _cpu_best(ours, 1)), min(t_floor, _cpu_best(floor, 1))
            n = len(pairs)
            rows.append((f"diff A --against B, {n} goldens, {label} (CPU s)", t_ours, f"{t_ours / n * 1e3:.2f} ms/pair"))
            rows.append((f"  floor: safetensors load + torch.equal, {label}", t_floor,
                         f"{t_floor / n * 1e3:.2f} ms/pair; mla-golden is {t_ours / t_floor:.2f}x the floor (goal <= 2x)"))  # fmt: skip

        sample = pairs[:4]  # DeepDiff walks lists element by element: a sample, scaled to the tree

        def deepdiff_lists() -> None:
            for path_a, path_b in sample:
                a, b = load_file(str(path_a)), load_file(str(path_b))
                DeepDiff({k: v.tolist() for k, v in a.items()}, {k: v.tolist() for k, v in b.items()})

        t_deep = _cpu_best(deepdiff_lists, repeat=1) * len(pairs) / len(sample)
    rows.append(("baseline: DeepDiff on lists, re-recorded", t_deep,
                 f"{t_deep / len(pairs) * 1e3:.2f} ms/pair; mla-golden is {t_deep / t_ours:.0f}x faster (goal >= 50x)"))  # fmt: skip
    return rows


def _v1_bytes(golden: object) -> bytes:
    """The mla-golden/1 encoding of a golden (whole buffers plus bool masks): the baseline v2 is measured against."""
    import json

    from safetensors.torch import save

    call = golden.call  # type: ignore[attr-defined]
    tensors = {f"input.{n}": t.contiguous() for n, t in call.inputs.items()}
    for name in call.outputs:
        tensors[f"output.{name}"] = call.outputs[name].contiguous()
        tensors[f"written.{name}"] = call.written[name].contiguous()
    meta = {"format": "mla-golden/1", "op": call.op, "key": golden.key}  # type: ignore[attr-defined]
    for field in ("params", "device", "env", "buffers", "provenance"):
        meta[field] = json.dumps(getattr(call, field), sort_keys=True)
    return save(tensors, metadata=meta)


def _load_diff(path: Path) -> None:
    import mla_golden

    mla_golden.diff(mla_golden.load(path).call, mla_golden.load(path).call)


def bench_format() -> list[tuple[str, float, str]]:
    """vLLM-sized prefill goldens: mla-golden/2 vs /1 size, and load + diff time."""
    from mla_golden.backends import resolve
    from mla_golden.golden.store import Golden, to_bytes
    from mla_golden.matrix import Case, capture

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for heads in (16, 64):
            case = Case(name=f"vllm-prefill-h{heads}", op="get_ps_metadata_v1", group="bench", model="vLLM prefill",
                        arch="gfx950", cu_num=256, env={}, heads=heads, seq_lens=(8192, 3000, 1000, 517),
                        sizing_batch=128, sizing_qlen=8192)  # fmt: skip
            [(_, call)] = list(capture([case], resolve("reference")))
            golden = Golden(case.name, call)
            v1, v2 = Path(tmp, "v1.safetensors"), Path(tmp, "v2.safetensors")
            v1.write_bytes(_v1_bytes(golden))
            v2.write_bytes(to_bytes(golden))

            t1, t2 = (_best(functools.partial(_load_diff, path), 10) for path in (v1, v2))
            s1, s2 = v1.stat().st_size, v2.stat().st_size
            rows.append((f"vLLM prefill golden h{heads}, size v2", s2 / 2**20,
                         f"MB; v1 {s1 / 2**20:.2f} MB; v2/v1 = {s2 / s1:.3f} (goal <= 0.1)"))  # fmt: skip
            rows.append((f"vLLM prefill golden h{heads}, load+diff v2", t2,
                         f"v1 {t1 * 1e3:.1f} ms; v2/v1 = {t2 / t1:.2f} (goal <= 1)"))  # fmt: skip
    return rows


def bench_fuzz(paths: list[Path], count: int = 10000) -> list[tuple[str, float, str]]:
    """The suite's corruption fuzz (tests/helpers/corruption.py), larger."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import corruption

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = corruption.run(paths, count=count, seed=1, workdir=Path(tmp), cpu_bound_s=corruption.CPU_BOUND_S)
        took = time.perf_counter() - start
    print(result.summary())
    for failure in (result.loaded + result.tracebacks + result.unnamed + result.slow)[:10]:
        print("  FAILED:", failure)
    bad = len(result.loaded) + len(result.tracebacks) + len(result.unnamed) + len(result.slow)
    start = time.perf_counter()
    forged = corruption.forge_run(paths, count=1500, seed=1, cpu_bound_s=1.0)
    forge_took = time.perf_counter() - start
    print(f"{forged.tried} forged goldens (valid digest, wild values): tracebacks {len(forged.tracebacks)}, "
          f"over 1 CPU s {len(forged.slow)}; slowest {forged.slowest_s * 1e3:.0f} CPU ms")  # fmt: skip
    for failure in (forged.tracebacks + forged.slow)[:10]:
        print("  FAILED:", failure)
    return [
        ("corruption fuzz", took, f"s for {result.total} corruptions; {bad} not refused cleanly (goal 0)"),
        ("forged-content fuzz", forge_took, f"s for {forged.tried}; {len(forged.tracebacks) + len(forged.slow)} failed (goal 0)"),
    ]


def main() -> None:
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "goldens"
    paths = sorted(p for p in tree.rglob("*.safetensors") if not p.name.startswith("."))
    if not paths:
        sys.exit(f"no goldens under {tree}")
    rows = bench_diff(tree) + bench_format() + bench_fuzz(paths)

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

    env = _with_bytecode()
    _run([*CLI, "--help"], env)  # writes the bytecode caches where this environment had been told not to
    help_t = statistics.median(_run([*CLI, "--help"], env) for _ in range(5))
    pass_t = statistics.median(_run([sys.executable, "-c", "pass"], env) for _ in range(5))
    rows.append(("CLI --help", help_t, f"{help_t / pass_t:.1f}x python -c pass ({pass_t * 1e3:.0f} ms) (goal < 4x)"))

    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        unit = "" if note.startswith("MB") else " s"
        print(f"{name:<{width}}  {value:9.3f}{unit}  {note}")


if __name__ == "__main__":
    main()
