"""The golden format: a Call <-> safetensors tensors and string metadata, and the rules both sides keep.

``mla-golden/2`` (written): tensors ``input.<name>``; for a call that returned,
per output buffer ``written.<name>`` (int64 [n, 2]: the written element runs,
flat ``[start, end)``), ``data.<name>`` (int64 [m, 2]: runs inside the written
ones that hold values) and ``values.<name>`` (those values, in the buffer's
dtype); every other written element is 0. Buffer shapes and dtypes are in the
``buffers`` metadata, so a file's size follows what the planner wrote, not how
big the caller's buffers were. Optional metadata ``layout`` holds the strides
of inputs the program passed non-contiguous. Metadata ``digest`` is ``sha256:<hex>`` over a
canonical encoding of every other metadata entry and every tensor; a file
whose digest does not match is refused.

``mla-golden/1`` (read only): whole ``output.<name>`` buffers with bool
``written.<name>`` masks and no digest; such files load with a note.

:func:`mla_golden.golden.rules.check_call` holds the rules on a call; the
writer runs it before writing and the reader after decoding, so nothing is
written that would not load.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy
import torch

from mla_golden.call import Call
from mla_golden.errors import GoldenError
from mla_golden.golden.rules import buffers_problems, check_call, check_head
from mla_golden.golden.safetensors_file import DTYPES, RawFile
from mla_golden.limits import declared_bound
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, SCHEMAS, schema_for, to_dtype

FORMAT = "mla-golden/2"
FORMAT_V1 = "mla-golden/1"
V1_NOTE = f"{FORMAT_V1} file: carries no content digest (`mla-golden record --update` rewrites it as {FORMAT})"
_JSON_KEYS = ("params", "device", "env", "buffers", "provenance")
_REQUIRED = {"format", "op", "key", *_JSON_KEYS}
_OPTIONAL = {FORMAT: {"error", "digest", "layout"}, FORMAT_V1: {"error"}}
#: Zero gaps up to this long inside a written run are stored, not split into two data runs (a run costs 16 bytes).
_GAP = 4
_ST_CODES = {torch.int32: "I32", torch.int64: "I64", torch.uint64: "U64", torch.bool: "BOOL"}
# ---------------------------------------------------------------- runs


def _runs(flags: torch.Tensor) -> torch.Tensor:
    """[n, 2] int64 ``[start, end)`` of the True stretches of a flat bool tensor."""
    edges = torch.diff(torch.nn.functional.pad(flags.to(torch.int8), (1, 1)))
    return torch.stack(((edges == 1).nonzero().reshape(-1), (edges == -1).nonzero().reshape(-1)), dim=1)


def _data_runs(values: torch.Tensor, written: torch.Tensor, runs: torch.Tensor) -> torch.Tensor:
    """Runs of nonzero written values, short zero gaps inside one written run bridged."""
    nonzero = _runs((values != 0) & written)
    if len(nonzero) < 2:
        return nonzero
    run_id = torch.zeros(values.numel() + 1, dtype=torch.int64)
    run_id[runs[:, 0]] = 1
    run_id = run_id.cumsum(0)
    starts, ends = nonzero[1:, 0], nonzero[:-1, 1]
    bridge = (starts - ends <= _GAP) & (run_id[ends - 1] == run_id[starts])
    keep_start = torch.cat((torch.tensor([True]), ~bridge))
    keep_end = torch.cat((~bridge, torch.tensor([True])))
    return torch.stack((nonzero[keep_start, 0], nonzero[keep_end, 1]), dim=1)


def _positions(runs: torch.Tensor) -> torch.Tensor:
    """Every flat index covered by ``runs``, in order."""
    lengths = runs[:, 1] - runs[:, 0]
    total = int(lengths.sum())
    offsets = lengths.cumsum(0) - lengths
    return torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(runs[:, 0] - offsets, lengths)


def _check_runs(what: str, runs: torch.Tensor, numel: int) -> str | None:
    if runs.dtype != torch.int64 or runs.dim() != 2 or runs.shape[1] != 2:
        return f"{what}: expected int64 runs shaped [n, 2], got {runs.dtype} {list(runs.shape)}"
    if not len(runs):
        return None
    starts, ends = runs[:, 0], runs[:, 1]
    if bool((starts >= ends).any()) or bool((starts[1:] <= ends[:-1]).any()):
        return f"{what}: runs must be non-empty, sorted and apart"
    if int(starts[0]) < 0 or int(ends[-1]) > numel:
        return f"{what}: runs reach outside the buffer's {numel} elements"
    return None


# ---------------------------------------------------------------- digest


def content_digest(metadata: Mapping[str, str], raw: Mapping[str, tuple[str, list[int], Any]]) -> str:
    """sha256 over every metadata entry but ``digest`` and every tensor (name, dtype, shape, bytes)."""
    plain = {k: v for k, v in metadata.items() if k != "digest"}
    parts = [b"mla-golden content digest 1\n", json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()]
    for name in sorted(raw):
        code, shape, data = raw[name]
        parts += (b"\n", _tensor_line(name, code, shape, len(data)), b"\n", data)
    if sum(memoryview(part).nbytes for part in parts) < _JOINED:
        return "sha256:" + hashlib.sha256(b"".join(parts)).hexdigest()  # one update: most goldens are tens of KiB
    digest = hashlib.sha256()  # the same bytes in turn: a copy of a big golden's tensors costs more than the updates
    for part in parts:
        digest.update(part)
    return "sha256:" + digest.hexdigest()


#: Bytes up to which a digest hashes its parts joined (one update); past it, part by part.
_JOINED = 1 << 20


#: Names and dtype codes that json.dumps writes as they are (no escapes).
_PLAIN = re.compile(r"[A-Za-z0-9_.]*")


def _tensor_line(name: str, code: str, shape: list[int], size: int) -> bytes:
    """``json.dumps([name, code, shape, size])``, byte for byte (20 per golden; the same few recur in a tree)."""
    if all(type(d) is int for d in shape):  # no bool: True would share 1's cache entry
        return _int_line(name, code, tuple(shape), size)
    return json.dumps([name, code, list(shape), size]).encode()


@functools.lru_cache(maxsize=8192)
def _int_line(name: str, code: str, shape: tuple[int, ...], size: int) -> bytes:
    if _PLAIN.fullmatch(name) and _PLAIN.fullmatch(code):  # json.dumps writes both as they are
        return f'["{name}", "{code}", [{", ".join(map(str, shape))}], {size}]'.encode()
    return json.dumps([name, code, list(shape), size]).encode()


def _raw_of(tensor: torch.Tensor) -> tuple[str, list[int], bytes]:
    data = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return _ST_CODES[tensor.dtype], list(tensor.shape), data


# ---------------------------------------------------------------- encoding


def encode(call: Call, key: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``call`` as mla-golden/2 tensors and metadata; GoldenError-free only for a valid call (see golden_rules.check_call)."""
    tensors: dict[str, torch.Tensor] = {f"input.{n}": t.detach().cpu().contiguous() for n, t in call.inputs.items()}
    if call.error is None:
        for name in OUTPUTS:
            values = call.outputs[name].detach().cpu().reshape(-1)
            written = call.written[name].detach().cpu().to(torch.bool).reshape(-1)
            runs = _runs(written)
            data = _data_runs(values, written, runs) if name != POINTER_OUTPUT else runs[:0]
            tensors[f"written.{name}"] = runs
            tensors[f"data.{name}"] = data
            tensors[f"values.{name}"] = values[_positions(data)] if len(data) else values[:0].clone()
    metadata = {
        "format": FORMAT,
        "op": call.op,
        "key": key,
        "params": json.dumps(call.params, sort_keys=True),
        "device": json.dumps(call.device, sort_keys=True),
        "env": json.dumps(call.env, sort_keys=True),
        "buffers": json.dumps(call.buffers, sort_keys=True),
        "provenance": json.dumps(call.provenance, sort_keys=True, default=str),
    }
    if call.error is not None:
        metadata["error"] = call.error
    if call.strides:
        metadata["layout"] = json.dumps(call.strides, sort_keys=True)
    metadata["digest"] = content_digest(metadata, {n: _raw_of(t) for n, t in tensors.items()})
    return tensors, metadata


# ---------------------------------------------------------------- decoding


def decode(path: Any, raw: RawFile) -> tuple[str, Call, str]:
    """(key, call, format) from a checked safetensors file; GoldenError naming ``path`` otherwise."""
    metadata, tensors = raw.metadata, raw.tensors
    fmt = metadata["format"]  # an mla-golden/ family name: the reader refused a file without one
    if fmt not in _OPTIONAL:
        raise GoldenError(path, f"unknown format {str(fmt)[:80]!r} (this mla-golden reads {FORMAT!r} and {FORMAT_V1!r})")
    missing = sorted(_REQUIRED - metadata.keys())
    extra = sorted(metadata.keys() - _REQUIRED - _OPTIONAL[fmt])
    if missing or extra:
        what = f"missing {', '.join(missing)}" if missing else f"unexpected {', '.join(k[:40] for k in extra)}"
        raise GoldenError(path, f"metadata: {what}")
    if fmt == FORMAT:
        if "digest" not in metadata:
            raise GoldenError(path, "metadata 'digest' missing")
        if content_digest(metadata, raw.raw) != metadata["digest"]:
            raise GoldenError(path, "content digest mismatch: the file was changed after it was written")
    op = metadata["op"]
    if op not in SCHEMAS:
        raise GoldenError(path, f"unknown op {op[:80]!r}")
    schema = schema_for(op)
    fields = {key: _json_field(path, metadata, key) for key in _JSON_KEYS}
    error = metadata.get("error")
    strides = _json_field(path, metadata, "layout") if "layout" in metadata else {}
    problems = list(buffers_problems(metadata["buffers"]))
    if problems:
        raise GoldenError(path, problems[0])
    declared = sum(math.prod(spec["shape"]) for spec in fields["buffers"].values())
    stored = sum(math.prod(shape) for _, shape, _ in raw.raw.values())  # from the checked header: no tensor built
    if declared > declared_bound(stored):  # loading builds every buffer: bounded by what the file holds
        raise GoldenError(
            path, f"buffers: {declared} elements declared for {stored} stored (at most {declared_bound(stored)} for this file)"
        )
    outputs: dict[str, torch.Tensor] = {}
    written: dict[str, torch.Tensor] = {}
    expected = {f"input.{n}" for n in schema.inputs}
    if error is None:
        kinds = ("written", "data", "values") if fmt == FORMAT else ("output", "written")
        expected |= {f"{kind}.{n}" for kind in kinds for n in OUTPUTS}
    missing_t, extra_t = sorted(expected - tensors.keys()), sorted(tensors.keys() - expected)
    if missing_t or extra_t:
        what = f"missing tensors: {', '.join(missing_t)}" if missing_t else f"unexpected tensors: {', '.join(t[:40] for t in extra_t)}"
        raise GoldenError(path, what)
    if error is None:
        for name in OUTPUTS:
            spec = fields["buffers"][name]
            if fmt == FORMAT:
                outputs[name], written[name] = _dense(path, name, spec, tensors, raw.raw)
            else:
                outputs[name], written[name] = tensors[f"output.{name}"], tensors[f"written.{name}"]
    call = Call(
        op=op,
        params=fields["params"],
        inputs={n: tensors[f"input.{n}"] for n in schema.inputs},
        outputs=outputs,
        written=written,
        buffers=fields["buffers"],
        device=fields["device"],
        env=fields["env"],
        provenance=fields["provenance"],
        error=error,
        strides=strides,
    )
    # v2 outputs were built from runs checked above, and the buffers before that; v1 stores them whole
    problems = check_head(call, metadata["key"]) if fmt == FORMAT else check_call(call, metadata["key"])
    if problems:
        raise GoldenError(path, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return metadata["key"], call, fmt


def _json_field(path: Any, metadata: Mapping[str, str], key: str) -> dict[str, Any]:
    try:
        value = json.loads(metadata[key])
    except (ValueError, RecursionError) as exc:
        raise GoldenError(path, f"metadata {key!r} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(value, dict):
        raise GoldenError(path, f"metadata {key!r} should be a JSON object")
    return value


def _dense(
    path: Any, name: str, spec: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], raw: Mapping[str, tuple[str, list[int], Any]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole buffer and its written mask from stored runs, every run checked against the buffer first."""
    shape, dtype = spec["shape"], to_dtype(spec["dtype"])
    numel = math.prod(shape)
    few_runs, few_data = _few(raw[f"written.{name}"]), _few(raw[f"data.{name}"])
    if few_runs is not None and few_data is not None:
        return _dense_few(path, name, shape, dtype, numel, few_runs, few_data, raw[f"values.{name}"])
    runs, data, values = tensors[f"written.{name}"], tensors[f"data.{name}"], tensors[f"values.{name}"]
    for what, r in ((f"written.{name}", runs), (f"data.{name}", data)):
        problem = _check_runs(what, r, numel)
        if problem:
            raise GoldenError(path, problem)
    if len(data):
        if name == POINTER_OUTPUT:
            raise GoldenError(path, f"data.{name}: pointer values are not kept (all must be 0)")
        home = torch.searchsorted(runs[:, 0].contiguous(), data[:, 0].contiguous(), right=True) - 1
        if not len(runs) or bool((home < 0).any()) or bool((data[:, 1] > runs[home.clamp(min=0), 1]).any()):
            raise GoldenError(path, f"data.{name}: values stored outside the written runs")
    stored = int((data[:, 1] - data[:, 0]).sum()) if len(data) else 0
    if values.dtype != dtype or values.dim() != 1 or values.numel() != stored:
        raise GoldenError(path, f"values.{name}: expected {stored} values of {dtype}, got {values.dtype} {list(values.shape)}")
    out = torch.zeros(numel, dtype=dtype)
    if stored:
        out[_positions(data)] = values
    return out.reshape(shape), _mask(runs, numel).reshape(shape)


#: Up to this many runs a field is decoded with Python ints: a torch op per check costs more than the loop.
_FEW_RUNS = 64


def _few(stored: tuple[str, list[int], Any]) -> list[int] | None:
    """The flat ints of int64 [n, 2] runs (``stored``: dtype code, shape, bytes) with n small enough for the
    Python path, read from the bytes without a tensor; None for any other (it takes the checked torch path)."""
    code, shape, data = stored
    if code != "I64" or len(shape) != 2 or shape[1] != 2 or shape[0] > _FEW_RUNS:
        return None
    return memoryview(data).cast("B").cast("q").tolist()


def _run_pairs(path: Any, what: str, flat: list[int], numel: int) -> list[tuple[int, int]]:
    """A few runs (flat ints) as ``[start, end)`` pairs, held to the rules of :func:`_check_runs`."""
    pairs = list(zip(flat[::2], flat[1::2]))
    end = -1
    for start, stop in pairs:
        if start >= stop or start <= end:
            raise GoldenError(path, f"{what}: runs must be non-empty, sorted and apart")
        end = stop
    if pairs and (pairs[0][0] < 0 or pairs[-1][1] > numel):
        raise GoldenError(path, f"{what}: runs reach outside the buffer's {numel} elements")
    return pairs


def _dense_few(
    path: Any, name: str, shape: list[int], dtype: torch.dtype | None, numel: int, runs: list[int], data: list[int],
    values: tuple[str, list[int], Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_dense` for a field of a few runs (the usual case: a written prefix), same checks, Python ints;
    ``values`` as stored (dtype code, shape, bytes), read by numpy without a tensor."""
    written = _run_pairs(path, f"written.{name}", runs, numel)
    stored_runs = _run_pairs(path, f"data.{name}", data, numel)
    if stored_runs and name == POINTER_OUTPUT:
        raise GoldenError(path, f"data.{name}: pointer values are not kept (all must be 0)")
    starts = [start for start, _ in written]
    for start, stop in stored_runs:
        home = bisect.bisect_right(starts, start) - 1
        if home < 0 or stop > written[home][1]:
            raise GoldenError(path, f"data.{name}: values stored outside the written runs")
    stored = sum(stop - start for start, stop in stored_runs)
    code, values_shape, values_bytes = values
    if DTYPES[code] != dtype or len(values_shape) != 1 or values_shape[0] != stored:
        raise GoldenError(path, f"values.{name}: expected {stored} values of {dtype}, got {DTYPES[code]} {list(values_shape)}")
    # numpy slices cost a tenth of torch's per op on arrays this small; torch then shares the memory
    out = numpy.zeros(numel, dtype=_NUMPY[dtype])
    if stored:
        source, at = numpy.frombuffer(values_bytes, dtype=_NUMPY[dtype]), 0
        for start, stop in stored_runs:
            out[start:stop] = source[at : at + stop - start]
            at += stop - start
    mask = numpy.zeros(numel, dtype=numpy.bool_)
    for start, stop in written:
        mask[start:stop] = True
    return torch.from_numpy(out.reshape(shape)), torch.from_numpy(mask.reshape(shape))


#: The buffers' dtypes in numpy (the schema allows only these).
_NUMPY = {torch.int32: numpy.int32, torch.int64: numpy.int64, torch.uint64: numpy.uint64}


def _mask(runs: torch.Tensor, numel: int) -> torch.Tensor:
    """A flat bool mask, True inside ``runs`` (checked: sorted, apart, in range)."""
    if len(runs) <= 64:  # the usual case: a prefix or a few stretches
        mask = torch.zeros(numel, dtype=torch.bool)
        for start, end in runs.tolist():
            mask[start:end] = True
        return mask
    delta = torch.zeros(numel + 1, dtype=torch.int8)
    delta[runs[:, 0]] = 1
    delta[runs[:, 1]] = -1  # apart, so no index is both an end and a start
    return delta.cumsum(0, dtype=torch.int8)[:numel] > 0
