"""spy() enter/exit cost with ~3000 modules loaded (vLLM imports about that many), against a full scan.

    python benchmarks/bench_spy.py [MODULES]     (make bench runs it)

Loads MODULES synthetic modules (60 globals each: numbers, strings, functions,
classes, lists; five of them bind the planner, as builders do), then times
spy() enter and exit with the alias index (modules unchanged since the last
spy are not rescanned) and, as the baseline in the same run, with a full scan
of every module (how spy() worked before). Goal: <= 5 ms per enter and exit.
"""

from __future__ import annotations

import statistics
import sys
import time
import types

import mla_golden.capture.recorder
from mla_golden import reference
from mla_golden.capture import aliases

ROUNDS = 30


def _load_modules(count: int) -> list[str]:
    """``count`` synthetic modules in sys.modules; five of them alias the planner."""
    planner = sys.modules["aiter"].get_mla_metadata_v1
    names = []
    for i in range(count):
        module = types.ModuleType(f"synthetic_{i}")
        for j in range(12):
            setattr(module, f"CONST_{j}", j)
            setattr(module, f"NAME_{j}", f"value {j}")
            setattr(module, f"helper_{j}", lambda x, j=j: x + j)
            setattr(module, f"Class{j}", type(f"Class{j}", (), {}))
            setattr(module, f"table_{j}", [j] * 4)
        if i % (count // 5) == 0:
            module.get_mla_metadata_v1 = planner  # from aiter import get_mla_metadata_v1
        sys.modules[module.__name__] = module
        names.append(module.__name__)
    return names


def _time_spy() -> tuple[float, float]:
    """Median seconds of one spy() enter and of one exit."""
    enters, exits = [], []
    for _ in range(ROUNDS):
        spy = mla_golden.capture.recorder.spy("aiter")
        start = time.perf_counter()
        spy.__enter__()
        middle = time.perf_counter()
        spy.__exit__(None, None, None)
        end = time.perf_counter()
        enters.append(middle - start)
        exits.append(end - middle)
    return statistics.median(enters), statistics.median(exits)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    with reference.as_aiter():
        _load_modules(count)
        loaded = len(sys.modules)
        assert aliases.INDEX.cached, "this interpreter has no usable dict version tag: spy() falls back to full scans"
        enter, exit_ = _time_spy()
        mla_golden.capture.recorder.INDEX = aliases.AliasIndex(False)  # the baseline: every module scanned every time
        base_enter, base_exit = _time_spy()
    print(f"spy() with {loaded} modules loaded ({count} synthetic, 60 globals each), median of {ROUNDS}:")
    for what, ours, base in (("enter", enter, base_enter), ("exit", exit_, base_exit)):
        verdict = "ok" if ours <= 0.005 else "OVER GOAL"
        print(
            f"  {what:<5}  {ours * 1e3:6.2f} ms (goal <= 5 ms: {verdict});"
            f"  full-scan baseline {base * 1e3:6.2f} ms; {base / ours:.0f}x faster"
        )


if __name__ == "__main__":
    main()
