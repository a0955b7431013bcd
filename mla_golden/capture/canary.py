"""Run a planner and turn the run into a Call, written masks included.

Two probe runs on scratch buffers filled with two different canaries find the
written elements: whatever the planner did not store keeps its canary, so an
element is written when either run moved it off its canary. Written elements
on which the program's run and the probes disagree make the call
nondeterministic, and are named. The probes run on copies of the inputs, so
the caller's own tensors see exactly the program's one run.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mla_golden.binding import BoundCall, build_arguments, signature_of
from mla_golden.call import Call
from mla_golden.capture.buffer_bytes import all_zero, lean_copy, nonzero_end
from mla_golden.context import SIMULATED, as_recorded, backend_of, device_snapshot, env_snapshot, plan_for, provenance
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, schema_for, to_dtype
from mla_golden.tensors import bytes_equal, same

#: Two fill values per dtype that differ in every element.
CANARIES: dict[torch.dtype, tuple[int, int]] = {
    torch.int32: (-0x5A5A5A5B, 0x3C3C3C3D),
    torch.int64: (-0x5A5A5A5A5A5A5A5B, 0x3C3C3C3C3C3C3C3D),
    torch.uint64: (0xA5A5A5A5A5A5A5A5, 0x5A5A5A5A5A5A5A5A),
}
#: Buffers as a probe run fills them, by name.
_Buffers = dict[str, torch.Tensor]


class _Scratch(threading.local):
    """Per thread and probe: the CPU stand-ins of the last capture, by buffer name, refilled by the next capture
    of the same shapes instead of allocated: fresh pages cost more than a small planner call. A stand-in a
    capture keeps as its values (see :func:`_compare`) leaves the pool."""

    def __init__(self) -> None:
        self.pools: tuple[_Buffers, _Buffers] = ({}, {})


_SCRATCH = _Scratch()
#: Differing elements named per buffer (the count is always given).
_NAMED = 10
#: Buffers from this many elements first try whether both probes wrote all of them alike: two passes instead of
#: ten when they did; below it the extra check costs more than the passes it saves.
_WHOLE = 1 << 16


def _sync(tensors: Iterator[torch.Tensor] | list[torch.Tensor]) -> None:
    if any(t.device.type == "cuda" for t in tensors):
        torch.cuda.synchronize()


def _cpu(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous CPU copy (one operation for a CPU tensor: a capture makes a dozen)."""
    if tensor.device.type == "cpu":
        return tensor.detach().clone(memory_format=torch.contiguous_format)
    return tensor.detach().to("cpu", copy=True).contiguous()


def _scratch(buffers: Mapping[str, torch.Tensor], which: int) -> _Buffers:
    """Stand-ins for ``buffers`` filled with canary ``which``: this thread's pooled ones where they fit.

    A pooled stand-in is taken out of the pool while a probe uses it (see :func:`_restore`): a capture or replay
    reached from inside this probe's planner run on this thread (a replay through a spied planner) never gets it.
    """
    pool = _SCRATCH.pools[which]
    out: _Buffers = {}
    for name, buf in buffers.items():
        canary = CANARIES.get(buf.dtype)
        if canary is None:
            raise TypeError(f"output buffer {name!r} has dtype {buf.dtype}; planners fill int32/uint64 buffers")
        pooled = pool.pop(name, None) if buf.device.type == "cpu" else None
        if pooled is not None and pooled.shape == buf.shape and pooled.dtype == buf.dtype and buf.device.type == "cpu":
            out[name] = pooled.fill_(canary[which])
            continue
        # Filled on the CPU and copied: GPU kernels for uint64 fill are not everywhere.
        out[name] = torch.full(buf.shape, canary[which], dtype=buf.dtype).to(buf.device)
    return out


def _restore(runs: tuple[Mapping[str, torch.Tensor], ...], kept: Mapping[str, torch.Tensor] | None = None) -> None:
    """Put the probes' CPU stand-ins back in this thread's pool, except those a call keeps as its values."""
    for which, run in enumerate(runs):
        pool = _SCRATCH.pools[which]
        for name, stand_in in run.items():
            if stand_in.device.type != "cpu":
                continue
            if kept is not None and kept[name].untyped_storage().data_ptr() == stand_in.untyped_storage().data_ptr():
                continue  # the call owns it now
            pool[name] = stand_in


def _probe(invoke: Callable[[_Buffers], Any], buffers: Mapping[str, torch.Tensor]) -> tuple[_Buffers, _Buffers] | Exception:
    """Run ``invoke`` on two canary-filled stand-ins for ``buffers``: (run A, run B), or the error a run raised.

    The stand-ins are out of the pool until the caller hands them back (:func:`_restore`)."""
    runs: list[_Buffers] = []
    for which in (0, 1):
        scratch = _scratch(buffers, which)
        try:
            invoke(scratch)
        except Exception as exc:  # the planner's own error: part of the result
            _restore((*runs, scratch))
            return exc
        _sync(list(scratch.values()))
        runs.append(scratch)
    return runs[0], runs[1]


@dataclass
class _Compared:
    """What two probe runs (and the program's run) say about each buffer."""

    #: Written masks: moved off its canary in either probe (an element both left alone kept both canaries).
    masks: dict[str, torch.Tensor] = field(default_factory=dict)
    #: Flat indices of written elements the runs disagree on, per buffer that has any.
    found: dict[str, torch.Tensor] = field(default_factory=dict)
    #: The values kept: the program's run (or probe A) inside the written region, 0 elsewhere; never raw pointers.
    kept: dict[str, torch.Tensor] = field(default_factory=dict)


def _whole(
    a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], theirs: np.ndarray[Any, Any] | None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """When probes ``a`` and ``b`` wrote every element alike: where ``theirs`` differs from ``a``, and the
    values to keep (those of ``theirs``, or of ``a`` without it); else None.

    Prefill's whole buffers are ten megabytes, mostly a zero tail: that tail
    is found once (in ``a``), the other runs' tails are compared against zero
    pages and the rest byte by byte: no pass beyond the two compares the
    design needs, and nothing allocated or copied when the runs agree. The values kept are ``b``'s
    array or a lean copy of it (:func:`lean_copy`).
    """
    fa, fb = a.reshape(-1), b.reshape(-1)
    end = nonzero_end(fa)
    if not (all_zero(fb[end:]) and bytes_equal(fa[:end], fb[:end])):
        return None
    if theirs is None:
        return np.empty(0, dtype=np.int64), lean_copy(b, end)
    ft = theirs.reshape(-1)
    if all_zero(ft[end:]) and bytes_equal(ft[:end], fa[:end]):
        return np.empty(0, dtype=np.int64), lean_copy(b, end)
    np.copyto(b, theirs)
    return np.flatnonzero(theirs != a), lean_copy(b)


def _compare(
    run_a: Mapping[str, torch.Tensor], run_b: Mapping[str, torch.Tensor], live: Mapping[str, torch.Tensor] | None = None
) -> _Compared:
    """Compare the probe runs (and ``live``, the program's own run) buffer by buffer, and keep the values.

    Written: moved off its canary in probe A, or, among the elements probe A
    left at its canary, off the other canary in probe B (a planner may write a
    canary's value: the second canary exists for those). The kept values are
    ``live``'s (``run_a``'s without it), written into ``run_b``'s CPU arrays,
    which are kept as they are (the caller takes them out of the scratch
    pool, :func:`_restore`) unless :func:`lean_copy` keeps a smaller copy:
    keeping a buffer the runs agree on costs at most that copy. Elementwise
    work runs in numpy: on buffers of a few thousand elements torch's
    per-operation dispatch costs more than the comparisons.
    """
    result = _Compared()
    masks, found, kept = result.masks, result.found, result.kept
    for name, tensor in run_a.items():
        a, b = tensor.cpu().numpy(), run_b[name].cpu().numpy()
        first, second = CANARIES[tensor.dtype]
        if name == POINTER_OUTPUT:
            # Pointers differ between the two scratch allocations: written = both moved off their canary.
            masks[name] = torch.from_numpy((a != first) & (b != second))
            b.fill(0)
            kept[name] = torch.from_numpy(b)
            continue
        theirs = live[name].cpu().numpy() if live is not None else None
        whole = _whole(a, b, theirs) if a.size >= _WHOLE else None
        if whole is not None:  # both probes wrote every element alike (prefill's whole buffers)
            masks[name] = torch.ones((), dtype=torch.bool).expand(a.shape)  # one byte, not a fresh page per 4k elements
            kept[name] = torch.from_numpy(whole[1])
            if whole[0].size:
                found[name] = torch.from_numpy(whole[0])
            continue
        mask = written_mask(a, b, first, second)
        differ = a != b
        if theirs is not None:
            differ |= theirs != a
        differ &= mask
        masks[name] = torch.from_numpy(mask)
        np.multiply(a if theirs is None else theirs, mask, out=b)  # the values where written, 0 elsewhere
        kept[name] = torch.from_numpy(b)
        if differ.any():
            found[name] = torch.from_numpy(np.flatnonzero(differ))
    return result


def written_mask(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], first: int, second: int) -> np.ndarray[Any, Any]:
    """The elements probe ``a`` (filled with canary ``first``) or probe ``b`` (``second``) moved off its canary.

    Probe B's elements are compared only where probe A left its canary: an
    element A moved is written whatever B holds.
    """
    mask: np.ndarray[Any, Any] = a != first
    np.not_equal(b, second, out=mask, where=~mask)
    return mask


def _record_disagreements(
    facts: dict[str, Any], found: Mapping[str, torch.Tensor], buffers: Mapping[str, dict[str, Any]]
) -> None:
    """``deterministic`` and, when false, which elements differed: in the facts and in a note a report shows."""
    facts["deterministic"] = not found
    if not found:
        return
    facts["nondeterministic"] = {n: {"count": int(at.numel()), "at": at[:_NAMED].tolist()} for n, at in found.items()}
    for name, at in found.items():
        places = ", ".join(_element(name, int(i), buffers[name]["shape"]) for i in at[:_NAMED].tolist())
        more = f" and {at.numel() - _NAMED} more" if at.numel() > _NAMED else ""
        facts["notes"].append(
            f"{name}: {at.numel()} written element(s) differ between runs on the same inputs ({places}{more}); "
            "the program's own run is kept"
        )


def _element(name: str, flat: int, shape: list[int]) -> str:
    """``work_info_set[3, 4]`` for a flat index into a buffer of ``shape``."""
    index = []
    for size in reversed(shape):
        index.append(flat % size if size else 0)
        flat //= size if size else 1
    return f"{name}[{', '.join(map(str, reversed(index)))}]"


def _pointers_ok(buffers: Mapping[str, torch.Tensor], values: torch.Tensor, mask: torch.Tensor) -> bool | None:
    """Did the planner aim work_metadata_ptrs at work_indptr and work_info_set? None if it wrote none."""
    written = mask.tolist()
    if not any(written):
        return None
    want = [buffers["work_indptr"].data_ptr(), buffers["work_info_set"].data_ptr()]
    # aiter writes the first two; a longer buffer keeps the rest as the caller left it
    return len(written) >= 2 and all(written[:2]) and values.cpu()[:2].tolist() == want


def _buffer_specs(buffers: Mapping[str, torch.Tensor]) -> dict[str, dict[str, Any]]:
    return {n: {"shape": list(buffers[n].shape), "dtype": str(buffers[n].dtype)} for n in OUTPUTS}


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
    """A call that cannot be recorded faithfully, and why (``reason``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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


class LiveCapture:
    """One program call being captured: its inputs copied before it runs, its outputs probed after.

    ``sig`` is the signature that bound the call (default ``fn``'s own); it
    has no ``*args`` / ``**kwargs`` (the recorder follows such wrappers to the
    planner they call, and binds aiter's opaque compiled op on aiter's
    signature). The probes run ``fn`` on canary buffers and on fresh copies of
    the inputs as they were before the program's run, so a planner that
    changes its inputs changes them once, as unwatched, and that fact is
    recorded. Raises :class:`NotRecorded` when the inputs cannot be copied.
    """

    def __init__(self, op: str, fn: Callable[..., Any], bound: BoundCall, sig: inspect.Signature | None = None) -> None:
        self.op, self.fn, self.bound = op, fn, bound
        self.sig = sig or signature_of(fn, schema_for(op))
        try:
            self.before = {n: _cpu(t) for n, t in bound.inputs.items()}
            self.call = _base_call(op, fn, bound, self.before, list(bound.notes))
            self.call.strides = {n: list(t.stride()) for n, t in bound.inputs.items() if not t.is_contiguous()}
        except Exception as exc:
            raise NotRecorded(f"its inputs could not be copied ({type(exc).__name__}: {exc})") from exc

    def failed(self, exc: Exception) -> Call:
        """The call as the program's run raised ``exc``."""
        self.call.error = _message(exc)
        return self.call

    def finish(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        """The call with the outputs of the program's run, ``fn(*args, **kwargs)``, which has returned."""
        try:
            _outputs(self, args, kwargs)
        except Exception as exc:  # the recorder's failure, never the program's
            raise NotRecorded(f"recording failed after the call ({type(exc).__name__}: {exc})") from exc
        return self.call


def _like(values: torch.Tensor, model: torch.Tensor) -> torch.Tensor:
    """A fresh tensor holding ``values`` on ``model``'s device with ``model``'s strides."""
    if model.is_contiguous() and values.device == model.device:
        return values.clone()
    out = torch.empty_strided(model.shape, model.stride(), dtype=model.dtype, device=model.device)
    return out.copy_(values)


def _outputs(live: LiveCapture, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Fill the call's outputs, written masks and facts from the caller's buffers and two probe runs."""
    call, bound, sig, fn = live.call, live.bound, live.sig, live.fn
    caller = bound.buffers
    _sync(list(caller.values()))
    # The probes write only scratch buffers: a CPU caller's own buffers are read in place after them (another
    # thread of the program writing them meanwhile would be read as this call's output).
    outputs = {n: t.detach().contiguous() if t.device.type == "cpu" else _cpu(t) for n, t in caller.items()}
    schema = schema_for(live.op)
    # The signature has no *args / **kwargs (see LiveCapture): positions and keywords name its parameters.
    positional = [schema.canonical(n) for n in list(sig.parameters)[: len(args)]]
    keywords = {n: schema.canonical(n) for n in kwargs}
    facts = call.provenance["capture"]
    passed_inputs = [c for c in (*positional, *keywords.values()) if c in live.before]
    mutated = [c for c in passed_inputs if not same(bound.inputs[c].cpu(), live.before[c])]
    if mutated:
        changed = {c: int((bound.inputs[c].cpu() != live.before[c]).sum()) for c in mutated}
        facts["mutated_inputs"] = mutated
        facts["notes"].extend(
            f"the planner changed its input {c} in place ({changed[c]} element(s)); recorded as it was passed, "
            "and the probes ran on copies"
            for c in mutated
        )

    def swap(canonical: str, value: Any, scratch: dict[str, torch.Tensor]) -> Any:
        if canonical in scratch:
            return scratch[canonical]
        if canonical in live.before:
            return _like(live.before[canonical], bound.inputs[canonical])
        return value

    def invoke(scratch: dict[str, torch.Tensor]) -> None:
        fn(*(swap(c, v, scratch) for c, v in zip(positional, args)),
           **{n: swap(c, kwargs[n], scratch) for n, c in keywords.items()})  # fmt: skip

    probed = _probe(invoke, caller)
    if isinstance(probed, Exception):
        # The probe failed where the caller's run did not: no mask can be trusted.
        facts["deterministic"] = False
        facts["notes"].append(f"probe run raised {_message(probed)}; everything taken as written")
        masks = {n: torch.ones(t.shape, dtype=torch.bool) for n, t in outputs.items()}
        values = {n: torch.zeros_like(t) if n == POINTER_OUTPUT else _cpu(t) for n, t in outputs.items()}
        compared = _Compared(masks, kept=values)
    else:
        compared = _compare(*probed, outputs)
        _restore(probed, compared.kept)
        _record_disagreements(facts, compared.found, call.buffers)
    facts["ptrs_ok"] = _pointers_ok(caller, outputs[POINTER_OUTPUT], compared.masks[POINTER_OUTPUT])
    call.written = compared.masks
    call.outputs = compared.kept


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__


def replay(
    call: Call, fn: Callable[..., Any], *, on: str | torch.device = "cpu", buffers: Mapping[str, Mapping[str, Any]] | None = None
) -> Call:
    """Run ``call``'s inputs through planner ``fn`` on buffers mla-golden owns.

    Buffers are allocated as the recorded call's were, or as ``buffers``
    (shape and dtype per output, as ``Call.buffers`` holds them) says; the env
    is the recorded one; a reference backend plans for the recorded device.
    What had to be adapted to ``fn``'s signature is listed in the notes.
    """
    op = call.op
    inputs = {n: _laid_out(t.to(on), call.strides.get(n)) for n, t in call.inputs.items()}
    specs = call.buffers if buffers is None else buffers
    shapes = {n: torch.empty(spec["shape"], dtype=to_dtype(spec["dtype"]), device=on) for n, spec in specs.items()}
    args, kwargs, notes = build_arguments(op, fn, call.params, inputs, shapes)
    schema = schema_for(op)
    sig = signature_of(fn, schema)
    # Positional arguments follow aiter's signature (build_arguments); keywords name theirs.
    at: dict[int | str, str] = {**dict(enumerate(schema.canonical(n) for n in schema.signature[: len(args)])),
          **{n: schema.canonical(n) for n in kwargs}}  # fmt: skip

    def fresh(where: int | str, value: Any, scratch: dict[str, torch.Tensor]) -> Any:
        canonical = at.get(where)
        if canonical in scratch:
            return scratch[canonical]
        if canonical in inputs:  # fresh copies: a planner changing them changes no golden
            return _like(inputs[canonical], inputs[canonical])
        return value

    def invoke(scratch: dict[str, torch.Tensor]) -> None:
        fn(*(fresh(i, v, scratch) for i, v in enumerate(args)), **{n: fresh(n, v, scratch) for n, v in kwargs.items()})

    bound = BoundCall(op, dict(call.params), inputs, shapes, list(sig.parameters), notes)
    with as_recorded(call, functools.partial(_device_context, fn)):
        result = _base_call(op, fn, bound, {n: t.cpu() for n, t in call.inputs.items()}, notes)
        probed = _probe(invoke, shapes)
    if isinstance(probed, Exception):
        result.error = _message(probed)
        return result
    run_a, run_b = probed
    compared = _compare(run_a, run_b)
    _restore(probed, compared.kept)
    facts = result.provenance["capture"]
    _record_disagreements(facts, compared.found, result.buffers)
    facts["ptrs_ok"] = _pointers_ok(run_a, run_a[POINTER_OUTPUT], compared.masks[POINTER_OUTPUT])
    result.written = compared.masks
    result.outputs = compared.kept
    return result


def _laid_out(tensor: torch.Tensor, strides: list[int] | None) -> torch.Tensor:
    """``tensor``'s values with the strides the program passed (a non-contiguous input replays as one)."""
    if strides is None:
        return tensor
    out = torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device)
    out.copy_(tensor)
    return out


def _device_context(fn: Callable[..., Any], device: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """Plan for the recorded device when the backend simulates one (the reference, aiter-src)."""
    if backend_of(fn) not in SIMULATED:
        return contextlib.nullcontext()
    return plan_for(device)
