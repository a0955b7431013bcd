"""A seeded corruption fuzz over golden files: byte and bit flips, truncations, metadata and tensor edits.

Every corrupted file must be refused by the library's own entry point, the
way the CLI refuses it (exit 2, naming the file): ``GoldenError`` naming the
path. Anything else is counted: a file that loads (an exit 0 the CLI would
give), an exception of another type (a traceback), or a load over the time
bound. ``tests/golden/test_corruption_fuzz.py`` runs it; ``make bench`` runs a larger
one and prints the counts.
"""

from __future__ import annotations

import json
import random
import struct
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mla_golden.errors import GoldenError
from mla_golden.golden.store import load

#: One corruption may not cost more CPU than this to be refused (the largest shipped golden loads in milliseconds);
#: ``make bench`` holds the fuzz to it (a test reading a clock would fail on a loaded CI box).
CPU_BOUND_S = 1.0


def _flip_bytes(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(raw))
        raw[i] = (raw[i] + rng.randint(1, 255)) % 256  # always a change
    return bytes(raw)


def _flip_bit(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    i = rng.randrange(len(raw))
    raw[i] ^= 1 << rng.randrange(8)
    return bytes(raw)


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _append(data: bytes, rng: random.Random) -> bytes:
    return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _join(header: dict[str, Any], body: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + body


#: Metadata edits a careless or hostile hand might make (each leaves valid JSON and safetensors).
_METADATA_EDITS: list[Callable[[dict[str, Any], random.Random], None]] = [
    lambda m, r: m.update(key=m["key"] + "x"),
    lambda m, r: m.update(extra="1"),
    lambda m, r: m.update(params=m["params"].replace(": 16", ": 16.0", 1).replace(": 1,", ": 2,", 1)),
    lambda m, r: m.update(device=m["device"].replace('"warp_size": 64', '"warp_size": 7')),
    lambda m, r: m.update(device=m["device"].replace("lds_bytes\": ", "lds_bytes\": 1")),
    lambda m, r: m.update(provenance=m["provenance"].replace("reference", "referencf")),
    lambda m, r: m.update(buffers=m["buffers"].replace("[", "[1", 1)),
    lambda m, r: m.pop(r.choice(sorted(m))),
    lambda m, r: m.update(format="mla-golden/1"),
    lambda m, r: m.update(digest="sha256:" + "0" * 64),
]


def _edit_metadata(data: bytes, rng: random.Random) -> bytes:
    header, body = _split(data)
    meta = header["__metadata__"]
    before = dict(meta)
    for _ in range(5):  # an edit may not apply to this golden (a replace that finds nothing): try another
        rng.choice(_METADATA_EDITS)(meta, rng)
        if meta != before:
            break
    else:
        meta["key"] += "/x"
    return _join(header, body)


def _edit_tensor(data: bytes, rng: random.Random) -> bytes:
    """Change one element of one tensor, or a tensor's declared shape/dtype, keeping the file well-formed."""
    header, body = _split(data)
    names = sorted(k for k, v in header.items() if k != "__metadata__" and v["data_offsets"][1] > v["data_offsets"][0])
    name = rng.choice(names)
    spec = header[name]
    start, end = spec["data_offsets"]
    if rng.random() < 0.7:
        raw = bytearray(body)
        i = rng.randrange(start, end)
        raw[i] ^= 1 << rng.randrange(8) if spec["dtype"] != "BOOL" else 1
        return _join(header, bytes(raw))
    if rng.random() < 0.5 and len(spec["shape"]) == 2 and spec["shape"][0] > 1:
        spec["shape"] = [spec["shape"][0] // 2, spec["shape"][1] * 2]  # same bytes, other shape
    else:
        spec["dtype"] = {"I32": "U32", "I64": "F64", "U64": "I64", "BOOL": "U8"}.get(spec["dtype"], "I8")
    return _join(header, body)


KINDS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "byte flips": _flip_bytes,
    "bit flip": _flip_bit,
    "truncation": _truncate,
    "trailing bytes": _append,
    "metadata edit": _edit_metadata,
    "tensor edit": _edit_tensor,
}


@dataclass
class FuzzResult:
    """Counts of one fuzz run, and the first few of each kind of failure."""

    tried: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    loaded: list[str] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    #: Each load's CPU time was measured (``slow`` and ``slowest_s`` mean something).
    timed: bool = False

    @property
    def total(self) -> int:
        return sum(self.tried.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.tried.items()))
        return (
            f"{self.total} corruptions ({kinds}): refused with GoldenError naming the file {self.refused}, "
            f"loaded (exit 0) {len(self.loaded)}, tracebacks {len(self.tracebacks)}, unnamed {len(self.unnamed)}"
            + (f", over the CPU bound {len(self.slow)}; slowest {self.slowest_s * 1e3:.1f} CPU ms" if self.timed else "")
        )


def corrupt(goldens: Sequence[Path], count: int, seed: int) -> list[tuple[str, Path, bytes]]:
    """``count`` corrupted copies (kind, source, bytes), spread over ``goldens`` and the kinds, seeded."""
    rng = random.Random(seed)
    sources = {path: path.read_bytes() for path in goldens}
    out = []
    for i in range(count):
        source = goldens[i % len(goldens)]
        kind = list(KINDS)[i % len(KINDS)]
        data = sources[source]
        bad = KINDS[kind](data, rng)
        if bad == data:  # a flip that restores the byte: corrupt again
            bad = _flip_bytes(data, rng)
        out.append((kind, source, bad))
    return out


def run(goldens: Sequence[Path], count: int, seed: int, workdir: Path, cpu_bound_s: float | None = None) -> FuzzResult:
    """Corrupt and load ``count`` files in-process; count how each was handled. With ``cpu_bound_s`` (benchmarks
    only: tests read no clock) each load's CPU time is measured and those over it listed."""
    result = FuzzResult(timed=cpu_bound_s is not None)
    path = workdir / "corrupt.safetensors"
    for kind, source, data in corrupt(goldens, count, seed):
        result.tried[kind] += 1
        path.write_bytes(data)
        what = f"{kind} of {source.name}"
        start = time.process_time() if cpu_bound_s is not None else 0.0
        try:
            load(path)
            result.loaded.append(what)
        except GoldenError as exc:
            result.refused += 1
            if str(path) not in str(exc):
                result.unnamed.append(f"{what}: {exc}")
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            result.tracebacks.append(f"{what}: {type(exc).__name__}: {exc}")
        if cpu_bound_s is not None:
            took = time.process_time() - start
            result.slowest_s = max(result.slowest_s, took)
            if took > cpu_bound_s:
                result.slow.append(f"{what}: {took:.2f}s")
    return result


#: Values a forged or buggy golden may hold where lengths, indices and counts are expected.
WILD_VALUES = (2**31 - 1, -(2**31), -1, 0, 1, 2**16, 2**30, 7)


@dataclass
class ForgeResult:
    """Counts of a run over goldens whose content was edited with a valid digest (a forger, or a planner bug)."""

    tried: int = 0
    tracebacks: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)
    slowest_s: float = 0.0


def forge_run(goldens: Sequence[Path], count: int, seed: int, cpu_bound_s: float | None = None, start: int = 0) -> ForgeResult:
    """Edit one value (an output element, an input element or an int param) to a wild one, then check, diff and draw.

    The digest cannot catch these: the bound on the work must come from the
    decoding itself (every index checked against its buffer, every walk sized
    by the file). With ``cpu_bound_s`` (benchmarks only: tests read no clock)
    each forged golden's CPU time is measured and those over it listed; the goldens are taken in turn from the ``start``-th.
    """
    import mla_golden
    from mla_golden.geometry import INDPTRS, describe_schedule, geometry, indptr_problem
    from mla_golden.render.html import Entry, render_diff_page

    rng = random.Random(seed)
    result = ForgeResult()
    for i in range(start, start + count):
        source = goldens[i % len(goldens)]
        good = load(source).call
        outputs, inputs, params = dict(good.outputs), dict(good.inputs), dict(good.params)
        kind = rng.choice(("output", "input", "param") if outputs else ("input", "param"))
        if kind == "output":
            name = rng.choice([n for n in outputs if n != "work_metadata_ptrs"])
            flat, written = outputs[name].clone().reshape(-1), good.written[name].reshape(-1).nonzero().reshape(-1)
            if len(written):
                flat[int(written[rng.randrange(len(written))])] = rng.choice(WILD_VALUES)
            outputs[name] = flat.reshape(good.outputs[name].shape)
        elif kind == "input":
            name = rng.choice(sorted(inputs))
            inputs[name] = inputs[name].clone()
            if len(inputs[name]):
                inputs[name][rng.randrange(len(inputs[name]))] = rng.choice(WILD_VALUES)
        else:
            name = rng.choice(sorted(n for n, v in params.items() if isinstance(v, int) and not isinstance(v, bool)))
            params[name] = rng.choice(WILD_VALUES)
        forged = mla_golden.Call(**{**good.__dict__, "outputs": outputs, "inputs": inputs, "params": params})
        what = f"{kind} {name} of {source.name}"
        began = time.process_time() if cpu_bound_s is not None else 0.0
        try:
            mla_golden.invariants(forged)
            found = mla_golden.diff(good, forged)
            mla_golden.render_text(found)
            if forged.error is None:
                geometry(forged)
                if not any(indptr_problem(forged, n) for n in INDPTRS):  # show refuses the others
                    describe_schedule(forged)
                render_diff_page([Entry("forged", "diverged", diff=found, expected=good, actual=forged)])
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            result.tracebacks.append(f"{what}: {type(exc).__name__}: {exc}")
        result.tried += 1
        if cpu_bound_s is not None:
            took = time.process_time() - began
            result.slowest_s = max(result.slowest_s, took)
            if took > cpu_bound_s:
                result.slow.append(f"{what}: {took:.2f} CPU s")
    return result
