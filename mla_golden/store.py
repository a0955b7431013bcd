"""The golden store: one call per safetensors file, written atomically.

Format (README, "Golden format"): tensors ``input.<name>``, ``output.<name>``,
``written.<name>``; string metadata ``format``, ``op``, ``key``, ``params``,
``device``, ``env``, ``buffers``, ``provenance`` and, for a call that raised,
``error``. Paths come only from keys the caller gives, sanitised; nothing
read from a file ever becomes a path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.differ import same_content
from mla_golden.errors import GoldenError
from mla_golden.files import HOST, TEMP_SUFFIX, fsync_dir, write_temp
from mla_golden.schema import MLA_OP, OUTPUTS, POINTER_OUTPUT, SCHEMAS, schema_for, to_dtype

FORMAT = "mla-golden/1"
SUFFIX = ".safetensors"
#: A temp file younger than this is never taken for a dead writer's.
STALE_AFTER_S = 10.0
FOREIGN_STALE_AFTER_S = 3600.0
#: Larger headers are refused before parsing (a golden's header is a few KiB).
MAX_HEADER_BYTES = 16 * 1024 * 1024
#: Larger buffers are refused as absurd (aiter's largest are a few million elements).
MAX_ELEMENTS = 1 << 25
_JSON_KEYS = ("params", "device", "env", "buffers", "provenance")
_SAFETENSORS_DTYPES = {"I32": torch.int32, "U64": torch.uint64, "BOOL": torch.bool, "I64": torch.int64}


@dataclass
class Golden:
    """A call as stored under ``key`` (``path`` where it was read from or written to)."""

    key: str
    call: Call
    path: Path | None = None


class WriteOutcome(str, Enum):
    WRITTEN = "written"
    UNCHANGED = "unchanged"
    UPDATED = "updated"
    REFUSED = "refused"


# ---------------------------------------------------------------- keys and paths

_SHORT_DTYPES = {
    None: "none",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.float8_e4m3fn": "fp8",
    "torch.float8_e4m3fnuz": "fp8fnuz",
}


def _short(dtype: str | None) -> str:
    return _SHORT_DTYPES.get(dtype, str(dtype).removeprefix("torch."))


def _tensor_digest(tensor: torch.Tensor) -> list[Any]:
    data = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return [str(tensor.dtype), list(tensor.shape), hashlib.sha256(data).hexdigest()]


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def inputs_digest(call: Call) -> str:
    """Same for two calls of the same op with the same input tensors."""
    return _digest({"op": call.op, "inputs": {n: _tensor_digest(t) for n, t in sorted(call.inputs.items())}})


def shape_label(call: Call) -> str:
    """The call's shape and dtypes in a few characters (``b4-h128-q1-p1-fp8-fp8``); part of :func:`derived_key`."""
    p = call.params
    batch = max(call.inputs[schema_for(call.op).inputs[0]].numel() - 1, 0)
    if call.op == MLA_OP:
        q, kv = _short(p.get("dtype_q_nope")), _short(p.get("dtype_kv_nope"))
        rope = "" if (p.get("dtype_q_rope"), p.get("dtype_kv_rope")) == (p.get("dtype_q_nope"), p.get("dtype_kv_nope")) else "-mixed"
        return f"b{batch}-h{p.get('num_heads_per_head_k')}-q{p.get('max_seqlen_qo')}-p{p.get('page_size')}-{q}-{kv}{rope}"
    return f"b{batch}-g{p.get('gqa_ratio')}-hk{p.get('num_heads_k')}-qg{p.get('qlen_granularity')}-kg{p.get('kvlen_granularity')}"


def derived_key(call: Call) -> str:
    """``<op>/<arch>-cu<N>/<shape-and-dtype>-<digest>``: same call, same key; different calls, different keys.

    The digest covers everything that determines the output: inputs (shapes,
    dtypes, bytes), params, device, env and buffer shapes.
    """
    digest = _digest(
        {
            "op": call.op,
            "inputs": {n: _tensor_digest(t) for n, t in sorted(call.inputs.items())},
            "params": call.params,
            "device": {k: call.device.get(k) for k in ("arch", "cu_num", "warp_size", "lds_bytes")},
            "env": call.env,
            "buffers": call.buffers,
        }
    )[:12]
    device = f"{call.device.get('arch', 'unknown')}-cu{call.device.get('cu_num', 0)}"
    shape = shape_label(call)
    return f"{call.op}/{device}/{shape}-{digest}"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def key_path(root: Path, key: str) -> Path:
    """Where ``key`` lives under ``root``: each '/'-part sanitised, never escaping root."""
    parts = []
    for part in key.split("/"):
        clean = _UNSAFE.sub("_", part).strip("_") or "_"
        if clean.startswith("."):
            clean = "_" + clean
        if len(clean) > 120 or clean != part:
            # Keep distinct keys distinct after sanitising.
            clean = f"{clean[:100]}-{hashlib.sha256(part.encode()).hexdigest()[:8]}"
        parts.append(clean)
    return root.joinpath(*parts).with_name(parts[-1] + SUFFIX)


# ---------------------------------------------------------------- encoding


def _encode(golden: Golden) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    call = golden.call
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in call.inputs.items():
        tensors[f"input.{name}"] = tensor.detach().cpu().contiguous()
    if call.error is None:
        for name in OUTPUTS:
            tensors[f"output.{name}"] = call.outputs[name].detach().cpu().contiguous()
            tensors[f"written.{name}"] = call.written[name].detach().cpu().to(torch.bool).contiguous()
    metadata = {
        "format": FORMAT,
        "op": call.op,
        "key": golden.key,
        "params": json.dumps(call.params, sort_keys=True),
        "device": json.dumps(call.device, sort_keys=True),
        "env": json.dumps(call.env, sort_keys=True),
        "buffers": json.dumps(call.buffers, sort_keys=True),
        "provenance": json.dumps(call.provenance, sort_keys=True, default=str),
    }
    if call.error is not None:
        metadata["error"] = call.error
    return tensors, metadata


def to_bytes(golden: Golden) -> bytes:
    """The safetensors bytes of a golden."""
    from safetensors.torch import save

    tensors, metadata = _encode(golden)
    return save(tensors, metadata=metadata)


# ---------------------------------------------------------------- reading


def load(path: Path | str) -> Golden:
    """Read and validate one golden; GoldenError naming the file and problem otherwise.

    The header is checked before any tensor data is read, and only the bytes
    the header declares are read: a huge foreign file costs no memory.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(8)
            if len(data) < 8:
                raise GoldenError(path, f"not a safetensors file: only {len(data)} bytes")
            (header_len,) = struct.unpack("<Q", data)
            size = os.fstat(fh.fileno()).st_size
            if header_len > MAX_HEADER_BYTES:
                raise GoldenError(path, f"not a golden: header claims {header_len} bytes (limit {MAX_HEADER_BYTES})")
            if 8 + header_len > size:
                raise GoldenError(path, f"truncated: header claims {header_len} bytes, file has {size - 8} after the length")
            header = _parse_header(path, fh.read(header_len))
            metadata = header.pop("__metadata__", None)
            if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
                raise GoldenError(path, "not a golden: no string __metadata__ in the safetensors header")
            _check_format(path, metadata)
            specs = {name: _tensor_spec(path, name, spec) for name, spec in header.items()}
            end = max((spec[3] for spec in specs.values()), default=0)
            if 8 + header_len + end > size:
                raise GoldenError(path, f"truncated: tensor data ends at byte {8 + header_len + end}, file has {size}")
            body = bytearray(end)  # writable, so tensors view it without a copy each
            fh.readinto(body)
    except OSError as exc:
        raise GoldenError(path, f"cannot read: {exc.strerror or exc}") from exc
    tensors = {name: _tensor(path, name, spec, body) for name, spec in specs.items()}
    return _decode(path, metadata, tensors)


def _parse_header(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # bad UTF-8, bad JSON, absurd nesting or numbers
        raise GoldenError(path, f"not a safetensors file: header is not JSON ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(header, dict):
        raise GoldenError(path, "not a safetensors file: header is not a JSON object")
    return header


def _check_format(path: Path, metadata: dict[str, str]) -> None:
    fmt = metadata.get("format")
    if fmt is None:
        raise GoldenError(path, "not an mla-golden file: metadata 'format' missing")
    if fmt != FORMAT:
        raise GoldenError(path, f"unknown format {fmt!r} (this mla-golden reads {FORMAT!r})")


def _tensor_spec(path: Path, name: str, spec: Any) -> tuple[torch.dtype, list[int], int, int]:
    """(dtype, shape, start, end) of a header entry, checked for sanity."""
    if not (
        isinstance(spec, dict)
        and spec.get("dtype") in _SAFETENSORS_DTYPES
        and isinstance(spec.get("shape"), list)
        and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_ELEMENTS for d in spec["shape"])
        and isinstance(spec.get("data_offsets"), list)
        and len(spec["data_offsets"]) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in spec["data_offsets"])
    ):
        raise GoldenError(path, f"tensor {name!r}: unsupported dtype or malformed shape/offsets in header")
    numel = math.prod(spec["shape"])
    if numel > MAX_ELEMENTS:
        raise GoldenError(path, f"tensor {name!r}: absurd shape {spec['shape']}")
    start, end = spec["data_offsets"]
    dtype = _SAFETENSORS_DTYPES[spec["dtype"]]
    if not 0 <= start <= end or end - start != numel * dtype.itemsize:
        raise GoldenError(path, f"tensor {name!r}: data offsets {start}..{end} do not fit its shape (corrupt)")
    return dtype, spec["shape"], start, end


def _tensor(path: Path, name: str, spec: tuple[torch.dtype, list[int], int, int], body: bytearray) -> torch.Tensor:
    """One tensor, viewing the data read for it."""
    dtype, shape, start, end = spec
    numel = math.prod(shape)
    if end == start:
        return torch.empty(shape, dtype=dtype)
    if start % dtype.itemsize:
        # safetensors aligns data, but a hand-made file need not be: copy to an aligned buffer
        body, start = bytearray(body[start:end]), 0
    if dtype == torch.bool:
        values = torch.frombuffer(body, dtype=torch.uint8, count=numel, offset=start)
        if bool((values > 1).any()):
            raise GoldenError(path, f"tensor {name!r}: bool tensor holds values other than 0/1")
        return values.view(torch.bool).reshape(shape)
    return torch.frombuffer(body, dtype=dtype, count=numel, offset=start).reshape(shape)


def _json_field(path: Path, metadata: dict[str, str], key: str, kind: type) -> Any:
    if key not in metadata:
        raise GoldenError(path, f"metadata {key!r} missing")
    try:
        value = json.loads(metadata[key])
    except (ValueError, RecursionError) as exc:
        raise GoldenError(path, f"metadata {key!r} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(value, kind):
        raise GoldenError(path, f"metadata {key!r} should be a JSON {kind.__name__}")
    return value


def _decode(path: Path, metadata: dict[str, str], tensors: dict[str, torch.Tensor]) -> Golden:
    op = metadata.get("op")
    if op not in SCHEMAS:
        raise GoldenError(path, f"unknown op {op!r}")
    if "key" not in metadata:
        raise GoldenError(path, "metadata 'key' missing")
    schema = schema_for(op)
    fields = {key: _json_field(path, metadata, key, dict) for key in _JSON_KEYS}
    error = metadata.get("error")
    _check_buffers(path, fields["buffers"])
    _check_context(path, schema, fields)
    expected = {f"input.{n}" for n in schema.inputs}
    if error is None:
        expected |= {f"{kind}.{n}" for kind in ("output", "written") for n in OUTPUTS}
    missing, extra = sorted(expected - tensors.keys()), sorted(tensors.keys() - expected)
    if missing:
        raise GoldenError(path, f"missing tensors: {', '.join(missing)}")
    if extra:
        raise GoldenError(path, f"unexpected tensors: {', '.join(extra)}")
    for name in schema.inputs:
        tensor = tensors[f"input.{name}"]
        # int32 is what planners take; int64 is kept so a call rejected for its dtype replays as rejected.
        if tensor.dtype not in (torch.int32, torch.int64) or tensor.dim() != 1:
            raise GoldenError(path, f"input.{name}: expected a 1-D int32 tensor, got {tensor.dtype} {list(tensor.shape)}")
    if error is None:
        for name in OUTPUTS:
            spec = fields["buffers"][name]
            out, mask = tensors[f"output.{name}"], tensors[f"written.{name}"]
            want_dtype = torch.uint64 if name == POINTER_OUTPUT else torch.int32
            if str(out.dtype) != spec["dtype"] or out.dtype != want_dtype or list(out.shape) != spec["shape"]:
                raise GoldenError(
                    path,
                    f"output.{name}: {out.dtype} {list(out.shape)} does not match buffers entry "
                    f"{spec['dtype']} {spec['shape']} (expected {want_dtype})",
                )
            if mask.dtype != torch.bool or mask.shape != out.shape:
                raise GoldenError(path, f"written.{name}: expected a bool mask shaped {list(out.shape)}")
    call = Call(
        op=op,
        params=fields["params"],
        inputs={n: tensors[f"input.{n}"] for n in schema.inputs},
        outputs={n: tensors[f"output.{n}"] for n in OUTPUTS} if error is None else {},
        written={n: tensors[f"written.{n}"] for n in OUTPUTS} if error is None else {},
        buffers=fields["buffers"],
        device=fields["device"],
        env=fields["env"],
        provenance=fields["provenance"],
        error=error,
    )
    return Golden(key=metadata["key"], call=call, path=path)


def _check_buffers(path: Path, buffers: dict[str, Any]) -> None:
    for name in OUTPUTS:
        spec = buffers.get(name)
        if not (
            isinstance(spec, dict)
            and isinstance(spec.get("shape"), list)
            and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_ELEMENTS for d in spec["shape"])
            and spec.get("dtype") in ("torch.int32", "torch.uint64")
        ):
            raise GoldenError(path, f"metadata 'buffers': entry for {name!r} missing or malformed")
        if math.prod(spec["shape"]) > MAX_ELEMENTS:
            raise GoldenError(path, f"metadata 'buffers': absurd shape {spec['shape']} for {name!r}")


def _check_context(path: Path, schema: Any, fields: dict[str, Any]) -> None:
    """params, device and env hold what a replay will feed the planner: known names, plain values."""
    for name, value in fields["params"].items():
        if name not in schema.scalars:
            raise GoldenError(path, f"metadata 'params': unknown parameter {name!r} for {schema.name}")
        if name in schema.dtype_params:
            try:
                to_dtype(value)
            except ValueError as exc:
                raise GoldenError(path, f"metadata 'params': {name}: {exc}") from exc
        elif not (value is None or isinstance(value, (bool, int, float, str))):
            raise GoldenError(path, f"metadata 'params': {name} should be a scalar, got {type(value).__name__}")
    device = fields["device"]
    if not isinstance(device.get("arch"), str):
        raise GoldenError(path, "metadata 'device': 'arch' should be a string like 'gfx942'")
    for key in ("cu_num", "warp_size", "lds_bytes"):
        value = device.get(key)
        if (key == "cu_num" or value is not None) and not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise GoldenError(path, f"metadata 'device': {key!r} should be a positive int, got {value!r}")
    for key, value in fields["env"].items():
        if not (isinstance(key, str) and (value is None or isinstance(value, str))):
            raise GoldenError(path, f"metadata 'env': {key!r} should map to a string or null")


# ---------------------------------------------------------------- writing


def write(path: Path, golden: Golden, *, update: bool = False) -> WriteOutcome:
    """Write ``golden`` to ``path`` atomically.

    Temp file in the same folder, fsync, then a no-clobber link (or a rename
    when ``update``): readers see the old file or the new one, never a part.
    An identical golden already there is left alone (UNCHANGED); a different
    one is REFUSED unless ``update``. Concurrent writers of one key end with
    one valid file.
    """
    path = Path(path)
    data = to_bytes(golden)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GoldenError(path, f"cannot create folder {path.parent}: {exc.strerror or exc}") from exc
    existed = path.exists()
    if existed:
        outcome = _compare_existing(path, golden)
        if outcome is WriteOutcome.UNCHANGED or (outcome is WriteOutcome.REFUSED and not update):
            return outcome
    tmp = _write_temp(path, data)
    try:
        if update:
            os.replace(tmp, path)
            fsync_dir(path.parent)
            return WriteOutcome.UPDATED if existed else WriteOutcome.WRITTEN
        try:
            os.link(tmp, path)
        except FileExistsError:
            # Another writer got there first: same content is fine, else refuse.
            return _compare_existing(path, golden)
        fsync_dir(path.parent)
        return WriteOutcome.WRITTEN
    except OSError as exc:
        raise GoldenError(path, f"cannot write: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _compare_existing(path: Path, golden: Golden) -> WriteOutcome:
    try:
        existing = load(path)
    except GoldenError:
        return WriteOutcome.REFUSED  # a corrupt file is never silently replaced
    if existing.key == golden.key and same_content(existing.call, golden.call):
        return WriteOutcome.UNCHANGED
    return WriteOutcome.REFUSED


def _write_temp(path: Path, data: bytes) -> Path:
    try:
        return write_temp(path, data)
    except OSError as exc:
        raise GoldenError(path, f"cannot write in {path.parent}: {exc.strerror or exc}") from exc


# ---------------------------------------------------------------- the tree


class GoldenStore:
    """A folder of goldens addressed by key."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, key: str) -> Path:
        return key_path(self.root, key)

    def exists(self, key: str) -> bool:
        return self.path_for(key).is_file()

    def read(self, key: str) -> Golden:
        return load(self.path_for(key))

    def write(self, golden: Golden, *, update: bool = False) -> WriteOutcome:
        path = self.path_for(golden.key)
        outcome = write(path, golden, update=update)
        golden.path = path
        return outcome

    def paths(self) -> Iterator[Path]:
        """Every golden file under the root, in a stable order (temp files skipped)."""
        if not self.root.is_dir():
            return iter(())
        return iter(sorted(p for p in self.root.rglob(f"*{SUFFIX}") if not p.name.startswith(".")))

    def stale_temps(self, min_age: float = STALE_AFTER_S) -> list[Path]:
        """Temp files left by writers that died mid-write.

        A temp file is stale when it is at least ``min_age`` seconds old and
        its writer, on this host, no longer runs; one from another host (a
        shared folder) only after an hour, since its pid cannot be checked.
        """
        if not self.root.is_dir():
            return []
        now = time.time()
        stale = []
        for path in self.root.rglob(f".*{SUFFIX}.*{TEMP_SUFFIX}"):
            parts = path.name.removesuffix(TEMP_SUFFIX).split(".")
            host, pid = parts[-3], parts[-2]
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue  # its writer just finished
            if age < min_age:
                continue
            dead = host == HOST and (not pid.isdigit() or not _alive(int(pid)))
            if dead or (host != HOST and age >= FOREIGN_STALE_AFTER_S):
                stale.append(path)
        return sorted(stale)

    def clean_stale_temps(self, min_age: float = STALE_AFTER_S) -> list[Path]:
        """Remove what :meth:`stale_temps` finds; returns the paths removed (to be reported)."""
        removed = []
        for path in self.stale_temps(min_age):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
        return removed

    def same_inputs(self, call: Call) -> Iterator[Golden]:
        """Readable goldens of the same op and input tensors as ``call``."""
        want = inputs_digest(call)
        for path in self.paths():
            try:
                golden = load(path)
            except GoldenError:
                continue
            if golden.call.op == call.op and inputs_digest(golden.call) == want:
                yield golden


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
