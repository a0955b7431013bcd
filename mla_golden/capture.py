"""Run a planner and turn the run into a Call, written masks included.

An element counts as written when two runs on scratch buffers filled with two
different canaries agree on it: whatever the planner did not
store keeps its canary, and the canaries differ everywhere. The caller's own
buffers are never touched by that probing.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.context import SIMULATED, backend_of, device_snapshot, env_snapshot, plan_for, provenance
from mla_golden.schema import (
    OUTPUTS,
    POINTER_OUTPUT,
    BoundCall,
    build_arguments,
    schema_for,
    signature_of,
    to_dtype,
)

#: Two fill values per dtype that differ in every element.
CANARIES: dict[torch.dtype, tuple[int, int]] = {
    torch.int32: (-0x5A5A5A5B, 0x3C3C3C3D),
    torch.int64: (-0x5A5A5A5A5A5A5A5B, 0x3C3C3C3C3C3C3C3D),
    torch.uint64: (0xA5A5A5A5A5A5A5A5, 0x5A5A5A5A5A5A5A5A),
}
_ENV_LOCK = threading.RLock()


def _sync(tensors: Iterator[torch.Tensor] | list[torch.Tensor]) -> None:
    if any(t.device.type == "cuda" for t in tensors):
        torch.cuda.synchronize()


def _cpu(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True).contiguous()


def _scratch(buffers: Mapping[str, torch.Tensor], which: int) -> dict[str, torch.Tensor]:
    out = {}
    for name, buf in buffers.items():
        canary = CANARIES.get(buf.dtype)
        if canary is None:
            raise TypeError(f"output buffer {name!r} has dtype {buf.dtype}; planners fill int32/uint64 buffers")
        # Filled on the CPU and copied: GPU kernels for uint64 fill are not everywhere.
        out[name] = torch.full(buf.shape, canary[which], dtype=buf.dtype).to(buf.device)
    return out


def _probe(invoke: Callable[[dict[str, torch.Tensor]], Any], buffers: Mapping[str, torch.Tensor]):
    """Run ``invoke`` on two canary-filled copies of ``buffers``: (run A, run B, error)."""
    runs = []
    for which in (0, 1):
        scratch = _scratch(buffers, which)
        try:
            invoke(scratch)
        except Exception as exc:  # the planner's own error: part of the result
            return None, None, exc
        _sync(list(scratch.values()))
        runs.append(scratch)
    return runs[0], runs[1], None


def _masks(run_a: dict[str, torch.Tensor], run_b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    masks = {}
    for name, a in run_a.items():
        a, b = a.cpu(), run_b[name].cpu()
        if name == POINTER_OUTPUT:
            # Pointers differ between the two scratch allocations: written = both moved off their canary.
            masks[name] = (a != CANARIES[a.dtype][0]) & (b != CANARIES[b.dtype][1])
        else:
            masks[name] = a == b
    return masks


def _pointers_ok(buffers: Mapping[str, torch.Tensor], values: torch.Tensor, mask: torch.Tensor) -> bool | None:
    """Did the planner aim work_metadata_ptrs at work_indptr and work_info_set? None if it wrote none."""
    if not bool(mask.any()):
        return None
    want = torch.tensor(
        [buffers["work_indptr"].data_ptr(), buffers["work_info_set"].data_ptr()], dtype=torch.uint64
    )
    # aiter writes the first two; a longer buffer keeps the rest as the caller left it
    return values.numel() >= 2 and bool(mask[:2].all()) and torch.equal(values.cpu()[:2].to(torch.uint64), want)


def _buffer_specs(buffers: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    return {n: {"shape": list(buffers[n].shape), "dtype": str(buffers[n].dtype)} for n in OUTPUTS}


def _kept(values: torch.Tensor, mask: torch.Tensor, pointer: bool) -> torch.Tensor:
    """Values inside the written region, 0 elsewhere; raw pointers are never kept."""
    values = values.cpu()
    if pointer:
        return torch.zeros_like(values)
    return torch.where(mask, values, torch.zeros_like(values))


def _base_call(op: str, fn: Callable[..., Any], bound: BoundCall, inputs: dict[str, torch.Tensor], notes: list[str]) -> Call:
    prov = provenance(fn, bound.signature)
    prov["capture"] = {"notes": notes}
    return Call(
        op=op,
        params=dict(bound.params),
        inputs=inputs,
        buffers=_buffer_specs(bound.buffers),
        device=device_snapshot(fn, [*bound.inputs.values(), *bound.buffers.values()]),
        env=env_snapshot(op),
        provenance=prov,
    )


class NotRecorded(Exception):
    """A call that cannot be recorded faithfully: ``reason``, and whether the planner already ran.

    When it ran, ``result`` / ``error`` are what it gave the program.
    """

    def __init__(self, reason: str, *, ran: bool = False, result: Any = None, error: Exception | None = None) -> None:
        super().__init__(reason)
        self.reason, self.ran, self.result, self.error = reason, ran, result, error


def unrecordable(bound: BoundCall) -> str | None:
    """Why a bound call cannot be recorded as the program made it (None when it can).

    Such a call is passed to the planner untouched: recording it would need
    a conversion that changes what the planner sees.
    """
    for name, tensor in bound.buffers.items():
        want = torch.uint64 if name == POINTER_OUTPUT else torch.int32
        if not isinstance(tensor, torch.Tensor):
            return f"output {name} is a {type(tensor).__name__}, not a tensor"
        if tensor.device.type == "meta":
            return f"output buffer {name} is on the meta device: it holds no values"
        if tensor.dtype != want:
            return f"output buffer {name} is {tensor.dtype}; aiter's planner fills {want} buffers"
    for name, tensor in bound.inputs.items():
        if not isinstance(tensor, torch.Tensor):
            return f"input {name} is a {type(tensor).__name__}, not a tensor"
        if tensor.device.type == "meta":
            return f"input {name} is on the meta device: it holds no values"
        if tensor.dtype not in (torch.int32, torch.int64) or tensor.dim() != 1:
            return f"input {name} is {tensor.dtype} of rank {tensor.dim()}; a golden keeps 1-D int32 (or int64) inputs"
    return None


def capture_live(
    op: str, fn: Callable[..., Any], bound: BoundCall, args: tuple, kwargs: dict, sig: inspect.Signature | None = None
) -> tuple[Call, Any, Exception | None]:
    """Call ``fn(*args, **kwargs)`` exactly as the caller did and capture it.

    ``sig`` is the signature that bound the call (default ``fn``'s own).
    Returns (Call, result, the planner's exception or None); the caller
    re-raises the exception so its own code sees it unchanged. Raises
    :class:`NotRecorded` when recording fails (saying whether the planner ran).
    """
    try:
        inputs = {n: _cpu(t) for n, t in bound.inputs.items()}
        call = _base_call(op, fn, bound, inputs, list(bound.notes))
        call.strides = {n: list(t.stride()) for n, t in bound.inputs.items() if not t.is_contiguous()}
    except Exception as exc:
        raise NotRecorded(f"its inputs could not be copied ({type(exc).__name__}: {exc})") from exc
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        call.error = _message(exc)
        return call, None, exc
    try:
        _outputs(call, op, fn, bound, args, kwargs, sig)
    except Exception as exc:  # the recorder's failure, never the program's
        raise NotRecorded(f"recording failed after the call ({type(exc).__name__}: {exc})", ran=True, result=result) from exc
    return call, result, None


def _outputs(
    call: Call, op: str, fn: Callable[..., Any], bound: BoundCall, args: tuple, kwargs: dict, sig: inspect.Signature | None
) -> None:
    """Fill ``call``'s outputs and written masks from the caller's buffers and two probe runs."""
    caller = bound.buffers
    _sync(list(caller.values()))
    live = {n: _cpu(t) for n, t in caller.items()}
    schema = schema_for(op)
    sig = sig or signature_of(fn, schema)
    original = sig.bind(*args, **kwargs)

    def invoke(scratch: dict[str, torch.Tensor]) -> None:
        trial = sig.bind(*original.args, **original.kwargs)
        for name in trial.arguments:
            if schema.canonical(name) in scratch:
                trial.arguments[name] = scratch[schema.canonical(name)]
        fn(*trial.args, **trial.kwargs)

    run_a, run_b, err = _probe(invoke, caller)
    facts = call.provenance["capture"]
    if err is not None:
        # The probe failed where the caller's run did not: no mask can be trusted.
        facts["deterministic"] = False
        facts["notes"].append(f"probe run raised {_message(err)}; everything taken as written")
        masks = {n: torch.ones(t.shape, dtype=torch.bool) for n, t in live.items()}
    else:
        masks = _masks(run_a, run_b)
        facts["deterministic"] = all(
            torch.equal(live[n][masks[n]], run_a[n].cpu()[masks[n]]) for n in live if n != POINTER_OUTPUT
        )
    facts["ptrs_ok"] = _pointers_ok(caller, live[POINTER_OUTPUT], masks[POINTER_OUTPUT])
    call.written = masks
    call.outputs = {n: _kept(live[n], masks[n], n == POINTER_OUTPUT) for n in live}


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__


@contextlib.contextmanager
def planner_env(env: Mapping[str, str | None]) -> Iterator[None]:
    """Set the planner's env vars (None = unset) for the block, then restore them.

    os.environ is process-wide: concurrent replays in threads serialise here.
    """
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in env}
        try:
            _set_env(env)
            yield
        finally:
            _set_env(saved)


def _set_env(env: Mapping[str, str | None]) -> None:
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def replay(call: Call, fn: Callable[..., Any], *, on: str | torch.device = "cpu") -> Call:
    """Run ``call``'s inputs through planner ``fn`` on buffers mla-golden owns.

    Buffers are allocated as the recorded call's were; the env is the
    recorded one; a reference backend plans for the recorded device. What had
    to be adapted to ``fn``'s signature is listed in the notes.
    """
    op = call.op
    inputs = {n: _laid_out(t.to(on), call.strides.get(n)) for n, t in call.inputs.items()}
    shapes = {n: torch.empty(spec["shape"], dtype=to_dtype(spec["dtype"]), device=on) for n, spec in call.buffers.items()}
    kwargs, notes = build_arguments(op, fn, call.params, inputs, shapes)
    schema = schema_for(op)
    sig = signature_of(fn, schema)
    buffer_params = {n: schema.canonical(n) for n in sig.parameters if schema.canonical(n) in OUTPUTS}

    def invoke(scratch: dict[str, torch.Tensor]) -> None:
        trial = dict(kwargs)
        for name, canonical in buffer_params.items():
            trial[name] = scratch[canonical]
        fn(**trial)

    bound = BoundCall(op, dict(call.params), inputs, shapes, list(sig.parameters), notes)
    with planner_env(call.env), _device_context(fn, call.device):
        result = _base_call(op, fn, bound, {n: t.cpu() for n, t in call.inputs.items()}, notes)
        run_a, run_b, err = _probe(invoke, shapes)
    if err is not None:
        result.error = _message(err)
        return result
    masks = _masks(run_a, run_b)
    facts = result.provenance["capture"]
    facts["deterministic"] = True
    facts["ptrs_ok"] = _pointers_ok(run_a, run_a[POINTER_OUTPUT], masks[POINTER_OUTPUT])
    result.written = masks
    result.outputs = {n: _kept(run_a[n], masks[n], n == POINTER_OUTPUT) for n in run_a}
    return result


def _laid_out(tensor: torch.Tensor, strides: list[int] | None) -> torch.Tensor:
    """``tensor``'s values with the strides the program passed (a non-contiguous input replays as one)."""
    if strides is None:
        return tensor
    out = torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out


def _device_context(fn: Callable[..., Any], device: Mapping[str, Any]) -> contextlib.AbstractContextManager:
    """Plan for the recorded device when the backend simulates one (the reference, aiter-src)."""
    if backend_of(fn) not in SIMULATED:
        return contextlib.nullcontext()
    return plan_for(device)
