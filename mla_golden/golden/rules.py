"""What a golden's call must be, whatever its encoding: the rules the writer and the reader share.

The writer runs :func:`check_call` before writing and the reader after
decoding (:mod:`mla_golden.golden.format`), so nothing is written that would
not load, and a corrupt or forged file is refused with what is wrong.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.golden.keys import check_key
from mla_golden.golden.safetensors_file import MAX_ELEMENTS
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, SCHEMAS, OpSchema, schema_for, to_dtype

#: AMD targets (gfx942, gfx950, ...) and, for captures on a CUDA device (the recorder's GPU path is tested there), sm_90 and the like.
_ARCH = re.compile(r"gfx[1-9][0-9a-f]{2,3}|sm_[1-9][0-9]{1,2}")
#: Plausible ranges of what aiter reads from the GPU (LDS: 64 KiB on gfx942, 160 KiB on gfx950).
_DEVICE_RANGES = {"cu_num": (1, 4096), "warp_size": (32, 64), "lds_bytes": (16 * 1024, 4 * 1024 * 1024)}


def param_kind(schema: OpSchema, name: str) -> type | None:
    """The JSON type a param holds: bool, int, or None for a dtype name (a string or null)."""
    if name in schema.dtype_params:
        return None
    default = schema.scalars[name]
    if isinstance(default, bool) or name == "is_causal":
        return bool
    return int


def check_call(call: Call, key: str, *, outputs: bool = True) -> list[str]:
    """Problems that keep ``call`` under ``key`` from being a valid golden (empty when none).

    ``outputs=False`` skips the output buffers (a v2 reader builds them from
    runs it has already checked).
    """
    if call.op not in SCHEMAS:
        return [f"unknown op {call.op!r}"]
    problems = check_head(call, key) + _check_buffers(call.buffers)
    if problems or call.error is not None or not outputs:
        if call.error is not None and (call.outputs or call.written):
            problems.append("a call that raised keeps no outputs")
        return problems
    for name in OUTPUTS:
        problems += _check_output(name, call.buffers[name], call.outputs.get(name), call.written.get(name))
    return problems


def check_head(call: Call, key: str) -> list[str]:
    """:func:`check_call`'s problems with everything but the output buffers (a reader checks those as it builds them)."""
    schema = schema_for(call.op)
    problems = check_key(key)
    problems += _check_params(schema, call.params, errored=call.error is not None)
    problems += _check_device(call.device)
    for name, value in call.env.items():
        if name not in schema.env_vars or not (value is None or isinstance(value, str)):
            problems.append(f"env: {name!r} is not a planner variable of {call.op} mapped to a string or null")
    if set(call.inputs) != set(schema.inputs):
        problems.append(f"inputs: expected {', '.join(schema.inputs)}, got {', '.join(call.inputs) or 'none'}")
    problems += _check_strides(call)
    for name, tensor in call.inputs.items():
        # int64 is kept for a call aiter rejected, so its replay is rejected the same way.
        allowed = (torch.int32,) if call.error is None else (torch.int32, torch.int64)
        if tensor.dtype not in allowed or tensor.dim() != 1:
            problems.append(f"input {name}: expected a 1-D int32 tensor, got {tensor.dtype} of rank {tensor.dim()}")
        elif tensor.numel() > MAX_ELEMENTS:
            problems.append(f"input {name}: {tensor.numel()} elements (limit {MAX_ELEMENTS})")
    return problems


def _check_strides(call: Call) -> list[str]:
    """Recorded strides: for known inputs, one non-negative int per dimension, the strided span bounded."""
    for name, strides in call.strides.items():
        tensor = call.inputs.get(name)
        if tensor is None or not isinstance(strides, list) or len(strides) != tensor.dim():
            return [f"layout: strides for {name!r} do not match an input"]
        if not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_ELEMENTS for s in strides):
            return [f"layout: strides of {name} should be ints in 0..{MAX_ELEMENTS}, got {strides}"]
        span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, strides) if size)
        if span > MAX_ELEMENTS:
            return [f"layout: strides of {name} span {span} elements (limit {MAX_ELEMENTS})"]
    return []


def _check_params(schema: OpSchema, params: Mapping[str, Any], *, errored: bool) -> list[str]:
    try:
        return list(_params_problems(schema.name, tuple((k, v, type(v), _spelling(v)) for k, v in params.items()), errored))
    except TypeError:  # an unhashable value (a list, say): checked without the cache
        return _params_check(schema, params, errored=errored)


@functools.lru_cache(maxsize=4096)
def _params_problems(op: str, items: tuple[tuple[str, Any, type, str | None], ...], errored: bool) -> tuple[str, ...]:
    """:func:`_params_check`, remembered: a tree's goldens repeat a few dozen parameter sets.

    ``True == 1`` and ``0.0 == -0.0`` as keys: the items carry each value's type and a float's spelling, so
    values a message would show differently never share an entry.
    """
    return tuple(_params_check(schema_for(op), {name: value for name, value, _, _ in items}, errored=errored))


def _spelling(value: Any) -> str | None:
    return repr(value) if type(value) is float else None


def _params_check(schema: OpSchema, params: Mapping[str, Any], *, errored: bool) -> list[str]:
    problems = []
    missing = [name for name in schema.scalars if name not in params]
    unknown = [name for name in params if name not in schema.scalars]
    if missing:
        problems.append(f"params: missing {', '.join(missing)}")
    if unknown:
        problems.append(f"params: unknown parameter(s) {', '.join(map(repr, unknown))} for {schema.name}")
    for name, value in params.items():
        if name not in schema.scalars:
            continue
        kind = param_kind(schema, name)
        if kind is None:
            try:
                to_dtype(value)
            except ValueError as exc:
                problems.append(f"params: {name}: {exc}")
        elif errored:
            # A call aiter rejected may hold any scalar: it is kept as the program passed it.
            if not (value is None or isinstance(value, (bool, int, float, str))):
                problems.append(f"params: {name} should be a scalar, got {type(value).__name__}")
        elif not (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
            problems.append(f"params: {name} should be {kind.__name__}, got {value!r}")
    return problems


def _check_device(device: Mapping[str, Any]) -> list[str]:
    problems = []
    arch = device.get("arch")
    if not (isinstance(arch, str) and _ARCH.fullmatch(arch)):
        problems.append(f"device: arch should look like 'gfx942' (or 'sm_90' on CUDA), got {arch!r}")
    for key, (low, high) in _DEVICE_RANGES.items():
        value = device.get(key)
        if value is None and key != "cu_num":
            continue
        if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
            problems.append(f"device: {key} should be an int in {low}..{high}, got {value!r}")
    if device.get("warp_size") not in (None, 32, 64):
        problems.append(f"device: warp_size should be 32 or 64, got {device.get('warp_size')!r}")
    name = device.get("name")
    if name is not None and not (isinstance(name, str) and 0 < len(name) <= 200 and name.isprintable()):
        problems.append(f"device: name should be the GPU's printable name, got {name!r}")
    unknown = sorted(set(device) - {"arch", "name", *_DEVICE_RANGES})
    if unknown:
        problems.append(f"device: unknown field(s) {', '.join(map(repr, unknown))}")
    return problems


@functools.lru_cache(maxsize=4096)
def buffers_problems(text: str) -> tuple[str, ...]:
    """:func:`_check_buffers` of a golden's ``buffers`` metadata (valid JSON), remembered by its text: a tree's
    goldens repeat a few dozen buffer layouts."""
    return tuple(_check_buffers(json.loads(text)))


def _check_buffers(buffers: Mapping[str, Any]) -> list[str]:
    problems = []
    if set(buffers) != set(OUTPUTS):
        problems.append(f"buffers: expected entries for {', '.join(OUTPUTS)}")
    for name in OUTPUTS:
        spec = buffers.get(name)
        want = "torch.uint64" if name == POINTER_OUTPUT else "torch.int32"
        if not (
            isinstance(spec, dict)
            and set(spec) == {"shape", "dtype"}
            and isinstance(spec["shape"], list)
            and 1 <= len(spec["shape"]) <= 2
            and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_ELEMENTS for d in spec["shape"])
            and math.prod(spec["shape"]) <= MAX_ELEMENTS
        ):
            problems.append(f"buffers: entry for {name} missing or malformed (want shape of rank 1 or 2, <= {MAX_ELEMENTS} elements)")
        elif spec["dtype"] != want:
            problems.append(f"buffers: {name} is {spec['dtype']}, aiter's planner takes {want}")
    if not problems:
        total = sum(math.prod(buffers[name]["shape"]) for name in OUTPUTS)
        if total > MAX_ELEMENTS:  # loading builds every buffer: their sum, not each, bounds a load's memory
            problems.append(f"buffers: {total} elements in all (limit {MAX_ELEMENTS})")
    return problems


def _check_output(name: str, spec: Mapping[str, Any], out: torch.Tensor | None, mask: torch.Tensor | None) -> list[str]:
    if out is None or mask is None:
        return [f"output {name}: missing values or written mask"]
    want = to_dtype(spec["dtype"])
    if out.dtype != want or list(out.shape) != spec["shape"]:
        return [f"output {name}: {out.dtype} {list(out.shape)} does not match its buffer {spec['dtype']} {spec['shape']}"]
    if mask.dtype != torch.bool or mask.shape != out.shape:
        return [f"output {name}: written mask should be bool shaped {spec['shape']}"]
    nonzero = out != 0
    if name == POINTER_OUTPUT and bool(nonzero.any()):
        return [f"output {name}: pointer values are not kept (all must be 0)"]
    if bool((nonzero & ~mask).any()):
        return [f"output {name}: nonzero values outside the written elements"]
    return []
