"""What check, diff, show and textconv cost on big legitimate goldens, as ratios to a floor measured in the same run.

    python benchmarks/bench_big_golden.py [--works 100000 1000000] [--only prefill]     (make bench: 10^5 and 10^6)

Each golden is a real reference plan: a gfx942/304 fp8 decode of N one-token
requests (about N work items; N = 10^6 is a 48 MB file). Measured, best of
``--rounds`` wall-clock runs in this process (the CLI's ~2 s of importing
torch left out), each including the load of its files, and each ratio against
a floor whose parts run in turn with it in every round:

- load: ``store.load`` of the golden (digest checked, tensors decoded);
- the floor: load + one whole-tensor pass per invariant of ``check``
  (a compare and a reduction over work_info_set's columns, times the number
  of invariants); diff's floor loads both files, and a diverged diff's also
  makes the passes over each side, since it checks both (the soundness of
  each plan);
- check: ``invariants`` of the loaded call: clean (the whole-tensor proof);
  with one planted bad kv_offset (the walk of the region to flag only); and
  once walked work by work, as every golden was before issue 30;
- check of a sparse (topk 64) decode golden and of a prefill golden (256-token
  requests, 16 head planes) of about as many works, each against its own floor
  (the whole-tensor proofs; the prefill one also once walked work by work, as
  every prefill golden was before);
- diff, re-recorded: the same call recorded again (bytes differ, content equal);
- diff, diverged: two works of different CU parts swapped (a different plan,
  sound on both sides: compared, decoded, geometry and check of each side);
- show / textconv: the commands' default output (summarised), in process.

``--only prefill`` builds and measures the prefill golden alone (its rows above).

The process keeps freed memory for reuse, as the ``mla-golden`` command's
does (:mod:`mla_golden.allocator`), the floor's parts included;
``--default-allocator`` measures with glibc's defaults, as a program calling
the library (a pytest run) has them.

Goal (issue 30): show and textconv in seconds; check and diff within 2x of
their floor.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 2.0


def _best(fn: Callable[[], object], rounds: int) -> float:
    return _against(fn, [], rounds)[0]


def _against(fn: Callable[[], object], floor: list[Callable[[], object]], rounds: int) -> tuple[float, float]:
    """Best of ``rounds`` runs of ``fn``, and the sum of the best of each ``floor`` part, run in turn with it in
    every round: a machine's drift (a loaded or throttled VM) moves both alike, where a floor measured once at
    the start read twice the load a check paid later."""
    best = [float("inf")] * (len(floor) + 1)
    for _ in range(rounds):
        for i, part in enumerate([fn, *floor]):
            start = time.perf_counter()
            part()
            best[i] = min(best[i], time.perf_counter() - start)
    return best[0], sum(best[1:])


def _goldens(works: int, folder: Path) -> tuple[Path, Path, Path]:
    """The golden, the same call recorded again, and a diverged plan of it (two works swapped across CU parts)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.calls import many_requests

    from mla_golden.golden.store import Golden, derived_key, write

    call = many_requests(works)
    key = derived_key(call)
    paths = folder / "a.safetensors", folder / "again.safetensors", folder / "moved.safetensors"
    write(paths[0], Golden(key, call))
    write(paths[1], Golden(key, dataclasses.replace(call, provenance={**call.provenance, "created": "2031-01-01T00:00:00Z"})))
    moved = copy.deepcopy(call)
    info, indptr = moved.outputs["work_info_set"], moved.outputs["work_indptr"]
    bounds = indptr.tolist()
    parts = [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]  # CU parts with works (not every one has)
    a, b = parts[0][1] - 1, parts[-1][0]  # the last work of the first such part and the first of the last
    info[[a, b]] = info[[b, a]]
    write(paths[2], Golden(key, moved))
    return paths


def _other_goldens(works: int, folder: Path) -> tuple[Path, Path, Path]:
    """A violated copy of the golden (one kv_offset off), and a sparse and a prefill golden of about ``works`` works."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.calls import decode_call, prefill_call

    from mla_golden.golden.store import Golden, derived_key, load, write
    from mla_golden.schema import WorkColumn as C

    paths = folder / "violated.safetensors", folder / "sparse.safetensors", folder / "prefill.safetensors"
    violated = load(folder / "a.safetensors").call
    violated.outputs["work_info_set"][int(violated.outputs["work_indptr"][-1]) // 2, C.KV_OFFSET] += 1
    sparse = decode_call([100 + i % 50 for i in range(works)], topk=64)
    prefill = prefill_call([256] * max(works // 16, 1))
    for path, call in zip(paths, (violated, sparse, prefill)):
        write(path, Golden(derived_key(call), call))
    return paths


def _floor_pass(path: Path) -> Callable[[], object]:
    """One whole-tensor pass per invariant over the golden's work rows (what a vectorised check can't beat)."""
    from mla_golden.checks import INVARIANTS
    from mla_golden.golden.store import load
    from mla_golden.schema import WorkColumn as C

    info = load(path).call.outputs["work_info_set"]

    def passes() -> object:
        return [bool((info[:, C.KV_START] <= info[:, C.KV_END]).all()) for _ in INVARIANTS]

    return passes


def _walked(path: Path) -> None:
    """check as every golden took it before issue 30: the walk over every work (the whole-tensor pass and the region
    walk off)."""
    from unittest import mock

    import mla_golden
    from mla_golden.checks import decode
    from mla_golden.golden.store import load

    with mock.patch.object(decode, "clean_plan", lambda *args: None), mock.patch.object(decode, "region", lambda *args: None):
        assert mla_golden.invariants(load(path).call).ok


def _prefill_walked(path: Path) -> None:
    """check of a prefill golden as every one took it before: the walk over every work (the whole-tensor pass off)."""
    from unittest import mock

    import mla_golden
    from mla_golden.checks import prefill
    from mla_golden.golden.store import load

    with mock.patch.object(prefill, "clean_plan", lambda *args: False):
        assert mla_golden.invariants(load(path).call).ok


def _prefill_rows(tag: str, path: Path, rounds: int) -> list[tuple[str, float, str]]:
    """check of the prefill golden at ``path``, by the whole-tensor proof and walked, against its own floor."""
    import mla_golden
    from mla_golden.golden.store import load

    count = int(load(path).call.outputs["work_indptr"][-1])

    def checked() -> None:
        assert mla_golden.invariants(load(path).call).ok

    took, own = _against(checked, [lambda: load(path), _floor_pass(path)], rounds)
    walked = _best(lambda: _prefill_walked(path), 1)
    return [
        (f"{tag}: check, prefill golden of {count} works", took, f"s, {took / own:.2f}x its floor {own:.3f} s"),
        (f"{tag}: check, prefill golden walked work by work", walked, f"s, {walked / own:.2f}x (every prefill golden before)"),
    ]


def bench_prefill(works: int, rounds: int) -> list[tuple[str, float, str]]:
    """The prefill rows of :func:`bench` alone (``--only prefill``): its golden built, nothing else."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.calls import prefill_call

    from mla_golden.golden.store import Golden, derived_key, write

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prefill.safetensors"
        call = prefill_call([256] * max(works // 16, 1))
        write(path, Golden(derived_key(call), call))
        return _prefill_rows(f"{int(call.outputs['work_indptr'][-1])} works", path, rounds)


def bench(works: int, rounds: int) -> list[tuple[str, float, str]]:
    from typer.testing import CliRunner

    import mla_golden
    from mla_golden.cli import app
    from mla_golden.differ import diff
    from mla_golden.golden.store import load

    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        golden, again, moved = _goldens(works, Path(tmp))
        built = time.perf_counter() - start
        size = golden.stat().st_size / 1e6
        call = load(golden).call
        count = int(call.outputs["work_indptr"][-1])
        tag = f"{count} works"
        load(golden)  # (the first load after writing reads a cold file: not what a check pays)
        load_s = _best(lambda: load(golden), rounds)
        passes = _best(_floor_pass(golden), rounds)
        floor, floor2 = load_s + passes, 2 * load_s + passes  # (shown; each ratio below has its own, interleaved)
        rows.append((f"{tag}: golden built (plan + write)", built, f"s, {size:.1f} MB"))
        rows.append((f"{tag}: load", load_s, "s"))
        rows.append(
            (f"{tag}: floor (load + a pass per invariant)", floor, f"s (the passes {passes:.3f} s); diff's: {floor2:.3f} s")
        )

        def check() -> None:
            assert mla_golden.invariants(load(golden).call).ok

        def diff_of(other: Path, equal: bool) -> Callable[[], None]:
            def run() -> None:
                result = diff(load(golden).call, load(other).call)
                assert result.equal == equal and (equal or result.soundness is not None and result.soundness.both_sound)

            return run

        violated, sparse, prefill = _other_goldens(works, Path(tmp))

        def check_of(path: Path, ok: bool) -> Callable[[], None]:
            def run() -> None:
                assert mla_golden.invariants(load(path).call).ok == ok

            return run

        loads, passes_of = (lambda: load(golden)), _floor_pass(golden)
        for name, fn, base in (
            ("check", check, [loads, passes_of]),
            ("check, violated (one bad kv_offset)", check_of(violated, False), [loads, passes_of]),
            ("diff, re-recorded", diff_of(again, True), [loads, loads, passes_of]),
            ("diff, diverged (sound)", diff_of(moved, False), [loads, loads, passes_of, passes_of]),
        ):
            took, own = _against(fn, base, rounds)
            rows.append((f"{tag}: {name}", took, f"s, {took / own:.2f}x its floor {own:.3f} s (goal <= {GOAL:.0f}x)"))
        walked = _best(lambda: _walked(golden), 1)
        rows.append((f"{tag}: check, walked work by work", walked, f"s, {walked / floor:.2f}x (every golden before)"))
        count = int(load(sparse).call.outputs["work_indptr"][-1])
        took, own = _against(check_of(sparse, True), [lambda: load(sparse), _floor_pass(sparse)], rounds)
        rows.append((f"{tag}: check, sparse (topk) golden of {count} works", took, f"s, {took / own:.2f}x its floor {own:.3f} s"))
        rows += _prefill_rows(tag, prefill, rounds)
        for command in ("show", "textconv"):

            def cli(command: str = command) -> None:
                ran = CliRunner().invoke(app, [command, str(golden)])
                assert ran.exit_code == 0, (ran.output, ran.exception)

            took = _best(cli, rounds)
            rows.append((f"{tag}: {command} (summarised)", took, f"s, {took / floor:.2f}x the floor (goal: seconds)"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=["prefill"], help="measure only these rows (and build only their golden)")
    parser.add_argument("--default-allocator", action="store_true", help="leave glibc's malloc as a program has it")
    args = parser.parse_args()
    if not args.default_allocator:
        from mla_golden.allocator import keep_freed_memory

        print(f"freed memory kept for reuse, as the command line does: {keep_freed_memory()}")
    measure = bench_prefill if args.only == "prefill" else bench
    for works in args.works:
        rows = measure(works, args.rounds)
        width = max(len(r[0]) for r in rows)
        for name, value, note in rows:
            print(f"{name:<{width}}  {value:8.3f}  {note}", flush=True)  # each size's rows as soon as measured


if __name__ == "__main__":
    main()
