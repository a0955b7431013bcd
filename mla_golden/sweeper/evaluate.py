"""Run one sweep point on both planners and say whether they agree.

The hot path runs each planner once, on buffers it sized with its own helper
and filled with one canary, and compares the whole buffers: an element written
on one side only keeps the canary there, so written masks and values inside
the written region are compared at once (work_metadata_ptrs: only whether it
was written; raw pointers differ by allocation). Error status and message and
buffer shapes count too. Only a divergent point is captured in full (two
canary runs per side, as ``mla-golden diff`` replays) and confirmed by the
differ; that capture is what the reproducer goldens hold.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mla_golden import cases
from mla_golden.binding import as_aiter_callers_pass, build_arguments, signature_of
from mla_golden.call import Call
from mla_golden.capture.canary import CANARIES, _message, replay
from mla_golden.context import as_recorded, planner_env
from mla_golden.errors import AdaptationError, BufferTooSmallError
from mla_golden.reference import kernel_log
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, schema_for, to_dtype
from mla_golden.sweeper.planners import Planner
from mla_golden.sweeper.space import DECODE, Point

#: Verdicts. ``undefined``: a planner's result is not defined by the inputs on one side (aiter
#: reads memory it never wrote), so equality cannot be judged; ``skipped``: a side cannot make
#: this call (its signature cannot express it, or live aiter runs on another device); ``failed``:
#: judging it went wrong (planner code raised SystemExit or KeyboardInterrupt, say): exit 2.
EQUAL, DIVERGED, UNDEFINED, SKIPPED, FAILED = "equal", "diverged", "undefined", "skipped", "failed"
#: Which side an ``undefined`` verdict's result is undefined on (its ``kind``).
BOTH = "both"
UNDEFINED_SIDES = ("A", "B", BOTH)
#: What diverged, most telling first: the error status or message, a buffer shape with what was
#: written in it, output values; ``sizing``: only buffer sizes changed, what was written is the same.
KIND_ERROR, KIND_SHAPE, KIND_VALUES, KIND_SIZING = "error", "shape", "values", "sizing"
#: Where a divergence first shows, as groups tell causes apart (:attr:`Verdict.signature`): the works (which
#: CU part runs which work, and what it covers) or the reduce bookkeeping.
WORKS, REDUCE = "works", "reduce"
FAMILIES = {
    POINTER_OUTPUT: WORKS, "work_indptr": WORKS, "work_info_set": WORKS,
    "reduce_indptr": REDUCE, "reduce_final_map": REDUCE, "reduce_partial_map": REDUCE,
}  # fmt: skip
_CANARY = CANARIES[torch.int32][0]
#: The uint64 canary as two int32 canaries: what the shared int32 fill leaves in work_metadata_ptrs.
_POINTER_CANARY = torch.full((2,), _CANARY, dtype=torch.int32).view(torch.uint64)[0].item()


@dataclass
class Side:
    """One planner's run of a point (hot path): error, or its buffers as the canary run left them."""

    error: str | None = None
    undefined: bool = False
    #: The planner's own time, wall and CPU seconds: what a builder's call costs (the sizing
    #: helper, allocating the buffers it sized, the planner call).
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    shapes: tuple[tuple[int, ...], ...] = ()
    buffers: tuple[torch.Tensor, ...] = ()
    #: The storage all the int32 buffers are views of.
    flat: torch.Tensor | None = None
    #: The decode kernel path that planned it ("serial/native", "parallel/folded"...; None: unknown or prefill).
    path: str | None = None
    #: When it raised because a buffer was too small for its plan: that plan, on buffers with room for it.
    overflow: Side | None = None


@dataclass
class Verdict:
    status: str
    kind: str | None = None
    #: One line: what differs (or why the point was skipped).
    detail: str = ""
    #: Planner time of both sides, wall and CPU seconds.
    planner_s: float = 0.0
    planner_cpu_s: float = 0.0
    #: What diverged, as groups tell causes apart: the buffers whose shape or values differ, or
    #: which side raised ("A raised", "both raised").
    fields: tuple[str, ...] = ()
    #: The kernel path of each side (:attr:`Side.path`).
    paths: tuple[str | None, str | None] = (None, None)

    @property
    def signature(self) -> tuple[str | None, ...]:
        """Kind and the family of buffers it first shows in (:data:`FAMILIES`; for an error, which side raised):
        two divergences with the same signature are taken to have one cause.

        Not every field, nor the first buffer itself: a longer call that splits its requests changes the
        reduce maps too, and one cause moves reduce_indptr first at one size and reduce_final_map at another.
        """
        first = self.fields[0] if self.fields else None
        return (self.kind, FAMILIES.get(first, first) if first is not None else None)


def point_inputs(point: Point) -> dict[str, torch.Tensor]:
    """The input tensors of ``point``'s call (the same whichever planner runs it; planners do not write them)."""
    if point.op == DECODE:
        return cases.decode_inputs(point.seq_lens, point.qlen, point.page_size)
    return cases.prefill_inputs(point.seq_lens, point.block_size)


def template(point: Point, planner: Planner, inputs: dict[str, torch.Tensor] | None = None) -> tuple[Call, dict[str, Any]]:
    """The call ``planner`` makes for ``point`` (params, inputs, device, env; no buffers yet) and its sizing args."""
    arch, cu_num = planner.spec.device_for(point.arch, point.cu_num)
    env = planner.env_for(dict(point.env))
    device = {"arch": arch, "cu_num": cu_num}
    inputs = inputs if inputs is not None else point_inputs(point)
    if point.op == DECODE:
        q, kv = cases.arch_dtype_name(point.q_dtype, arch), cases.arch_dtype_name(point.kv_dtype, arch)
        params = cases.decode_params(point.heads, point.causal, point.page_size, point.qlen, point.max_split_per_batch, q, kv)
        params["topk"] = point.topk
        sizing = {
            "batch_size": point.batch, "max_seqlen_qo": point.qlen, "num_head_qo": point.heads,
            "q_dtype": q, "kv_dtype": kv, "is_sparse": point.topk >= 0, "fast_mode": True,
            "max_split_per_batch": point.max_split_per_batch,
        }  # fmt: skip
    else:
        params = {**point.prefill_settings(), "num_heads_k": point.heads, "is_causal": point.causal}
        sizing = {
            "batch_size": point.batch, "num_head_k": point.heads, "max_qlen": max(point.seq_lens),
            "qlen_granularity": point.qlen_granularity,
        }  # fmt: skip
    call = Call(op=point.op, params=params, inputs=inputs, device=device, env=env)
    call.provenance = {"sweep": {"planner": str(planner.spec), "runs": planner.label}}
    return call, sizing


def _size(planner: Planner, op: str, sizing: dict[str, Any]) -> Any:
    """Call the sizing helper as Python binds it: the arguments its signature names (older helpers lack
    max_split_per_batch), or all of them, as aiter's callers pass them, to one taking ``*args`` / ``**kwargs``."""
    schema = schema_for(op)
    fn = planner.function(schema.sizer)
    values = {k: to_dtype(v) if k.endswith("_dtype") else v for k, v in sizing.items()}
    accepted = planner.parameters(fn)
    if accepted.variadic:
        passed = as_aiter_callers_pass(signature_of(fn, schema), schema.sizer_signature, schema.sizer_positional, values)
        if passed is not None:
            return fn(*passed[0], **passed[1])
    return fn(**{k: v for k, v in values.items() if k in accepted.names})


def _specs(sized: Any) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """The helper's (shape, dtype) list with every shape a tuple (aiter gives 1-D shapes as ints)."""
    return [((shape,) if isinstance(shape, int) else tuple(shape), dtype) for shape, dtype in sized]


class _Clock:
    """Wall and CPU time of the planner's own calls (the sweep's work in between is paused out)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.resume()

    def resume(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.thread_time()

    def pause(self) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.thread_time() - self._cpu

    def stop(self) -> tuple[float, float]:
        self.pause()
        return self.wall, self.cpu


class Unexpressible(Exception):
    """A side's planner signature cannot make this call (e.g. page_size > 1 before aiter had pages)."""


def _canary_buffers(
    specs: list[tuple[tuple[int, ...], torch.dtype]], device: str
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The output buffers, canary-filled, and the int32 storage the value buffers are views of.

    One fill for all six buffers (the uint64 pointer pair first, as four
    int32) costs less than one per buffer, and the values compare in one call.
    """
    sizes = [math.prod(shape) for shape, _ in specs[1:]]
    pointers = 2 * math.prod(specs[0][0])
    storage = torch.full((pointers + sum(sizes),), _CANARY, dtype=torch.int32, device=device)
    flat = storage[pointers:]
    buffers = {POINTER_OUTPUT: storage[:pointers].view(torch.uint64).view(specs[0][0])}
    for name, (shape, _), part in zip(OUTPUTS[1:], specs[1:], flat.split(sizes)):
        buffers[name] = part.view(shape)
    return buffers, flat


def _planning_for(planner: Planner, call: Call) -> contextlib.AbstractContextManager[Any]:
    """The env and device context of ``call``; none when both are already in place (the common case, and cheaper)."""
    env_set = all(os.environ.get(k) == v for k, v in call.env.items())
    device_set = planner.plans_for_now(call.device)
    if env_set:
        return contextlib.nullcontext() if device_set else planner.device_context(call.device)
    return planner_env(call.env) if device_set else as_recorded(call, planner.device_context)


def _arguments(planner: Planner, call: Call, buffers: dict[str, torch.Tensor]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``build_arguments`` for this call, its work remembered per planner and params.

    What ``build_arguments`` decides depends on the signature and the params
    only, except for an input the signature lacks (checked by value): such
    calls are bound afresh every time.
    """
    fn = planner.function(call.op)
    key = (call.op, tuple(call.params.items()))
    plan = planner.bindings.get(key)
    tensors = {**call.inputs, **buffers}
    if plan is None:
        args, kwargs, _ = build_arguments(call.op, fn, call.params, call.inputs, buffers)
        by_id = {id(t): name for name, t in tensors.items()}
        carried = {by_id[id(v)] for v in (*args, *kwargs.values()) if id(v) in by_id}
        if carried >= set(call.inputs):
            planner.bindings[key] = (
                [(by_id.get(id(v)), v) for v in args],
                {k: (by_id.get(id(v)), v) for k, v in kwargs.items()},
            )
        return args, kwargs
    positional, keywords = plan
    return (
        tuple(v if name is None else tensors[name] for name, v in positional),
        {k: v if name is None else tensors[name] for k, (name, v) in keywords.items()},
    )


def run_side(point: Point, planner: Planner, inputs: dict[str, torch.Tensor] | None = None) -> Side:
    """Hot path: size, fill with one canary, plan once (module doc)."""
    call, sizing = template(point, planner, inputs)
    if planner.tensor_device != "cpu":  # live aiter plans on its GPU, from inputs there
        call.inputs = {name: t.to(planner.tensor_device) for name, t in call.inputs.items()}
    fn = planner.function(point.op)
    with _planning_for(planner, call):
        clock = _Clock()
        try:
            sized_by_helper = _size(planner, point.op, sizing)
        except Exception as exc:  # the helper rejecting the inputs is a result
            return Side(_message(exc), _undefined(exc), *clock.stop())
        specs = _specs(sized_by_helper)
        if [d for _, d in specs] != [torch.uint64, *[torch.int32] * (len(OUTPUTS) - 1)]:
            raise TypeError(f"{planner.spec}: {schema_for(point.op).sizer} gave buffer dtypes {[d for _, d in specs]}")
        buffers, flat = _canary_buffers(specs, planner.tensor_device)
        clock.pause()
        try:
            args, kwargs = _arguments(planner, call, buffers)
        except AdaptationError as exc:
            raise Unexpressible(f"{planner.spec}: {exc}") from exc
        kernel_log.forget()
        clock.resume()
        try:
            fn(*args, **kwargs)
        except Exception as exc:
            side = Side(_message(exc), _undefined(exc), *clock.stop())
            if isinstance(exc, BufferTooSmallError):
                side.overflow = _with_room(planner, call, fn, specs, exc)
            return side
        seconds, cpu_seconds = clock.stop()
    shapes = tuple(shape for shape, _ in specs)
    return Side(None, False, seconds, cpu_seconds, shapes, tuple(buffers.values()), flat, _path(planner))


def _with_room(
    planner: Planner, call: Call, fn: Any, specs: list[tuple[tuple[int, ...], torch.dtype]], overflow: BufferTooSmallError
) -> Side | None:
    """The plan of a planner that overflowed its buffers, on buffers with room for it (each that overflows grown to
    what it asked for): what it planned differently, when it overflowed because it did; None when it still fails."""
    schema = schema_for(call.op)
    for _ in OUTPUTS:
        name = schema.canonical(overflow.buffer)
        if name not in OUTPUTS:
            return None
        index = OUTPUTS.index(name)
        shape, dtype = specs[index]
        columns = math.prod(shape[1:])
        specs = [*specs[:index], ((-(-overflow.needed // columns), *shape[1:]), dtype), *specs[index + 1 :]]
        buffers, flat = _canary_buffers(specs, planner.tensor_device)
        args, kwargs = _arguments(planner, call, buffers)
        try:
            fn(*args, **kwargs)
        except BufferTooSmallError as again:
            overflow = again
            continue
        except Exception:  # noqa: BLE001 - a plan that fails otherwise has nothing to compare
            return None
        return Side(None, False, shapes=tuple(shape for shape, _ in specs), buffers=tuple(buffers.values()), flat=flat)
    return None


def _path(planner: Planner) -> str | None:
    """The decode kernel path the reference (or a plug-in built on it) noted; None for live aiter."""
    path = kernel_log.last_kernel() if planner.backend.name in ("reference", "python") else None
    return None if path is None else str(path)


def _undefined(exc: BaseException) -> bool:
    return type(exc).__name__ == "UndefinedResultError"


def compare(a: Side, b: Side) -> Verdict:
    """Hot-path verdict from two canary runs."""
    seconds, cpu = a.seconds + b.seconds, a.cpu_seconds + b.cpu_seconds
    if a.undefined or b.undefined:
        return Verdict(UNDEFINED, *_undefined_on(a, b), seconds, cpu)
    if a.error or b.error:
        if a.error == b.error:
            return Verdict(EQUAL, planner_s=seconds, planner_cpu_s=cpu)
        pa, pb = (a.overflow if a.error else a), (b.overflow if b.error else b)
        if pa is not None and pb is not None:  # an overflow: what did the plan that overflowed do?
            changed = tuple(n for n, ta, tb in zip(OUTPUTS, pa.buffers, pb.buffers) if not _same_written(n, ta, tb))
            if changed:
                detail = f"error: {a.error or 'none'} -> {b.error or 'none'}; with room for both plans, {changed[0]} differs"
                return Verdict(DIVERGED, KIND_VALUES, detail, seconds, cpu, changed)
        raised = "both raised" if a.error and b.error else ("A raised" if a.error else "B raised")
        detail = f"error: {a.error or 'none'} -> {b.error or 'none'}"
        return Verdict(DIVERGED, KIND_ERROR, detail, seconds, cpu, (raised,))
    reshaped = [(name, sa, sb) for name, sa, sb in zip(OUTPUTS, a.shapes, b.shapes) if sa != sb]
    if reshaped:
        name, sa, sb = reshaped[0]
        changed = tuple(n for n, ta, tb in zip(OUTPUTS, a.buffers, b.buffers) if not _same_written(n, ta, tb))
        kind = KIND_SHAPE if changed else KIND_SIZING
        fields = tuple(n for n in OUTPUTS if n in changed or any(n == r[0] for r in reshaped))
        written = "; written contents differ" if changed else "; written contents equal"
        return Verdict(DIVERGED, kind, f"{name} shape {list(sa)} -> {list(sb)}{written}", seconds, cpu, fields)
    pointer = _POINTER_CANARY
    assert a.flat is not None and b.flat is not None  # both sides planned without error
    if torch.equal(a.flat, b.flat) and torch.equal(a.buffers[0] != pointer, b.buffers[0] != pointer):
        return Verdict(EQUAL, planner_s=seconds, planner_cpu_s=cpu)
    differing = []
    for name, ta, tb in zip(OUTPUTS, a.buffers, b.buffers):
        if name == POINTER_OUTPUT:
            ta, tb = ta != pointer, tb != pointer
        if not torch.equal(ta, tb):
            differing.append((name, ta, tb))
    assert differing, "the flat buffers differ but no buffer does"
    name, ta, tb = differing[0]
    return Verdict(DIVERGED, KIND_VALUES, _first_difference(name, ta, tb), seconds, cpu, tuple(n for n, _, _ in differing))


def _undefined_on(a: Side, b: Side) -> tuple[str, str]:
    """Which side is undefined (:data:`UNDEFINED_SIDES`) and why, in one line.

    Undefined on both sides is never equal, whatever each side's wording: neither result is defined, so
    nothing was compared.
    """
    if a.undefined and b.undefined:
        reason = a.error if a.error == b.error else f"A: {_clip(a.error, 96)}; B: {_clip(b.error, 96)}"
        return BOTH, _clip(reason, 200)
    return ("A", _clip(a.error, 200)) if a.undefined else ("B", _clip(b.error, 200))


def _clip(text: str | None, most: int) -> str:
    text = text or ""
    return text if len(text) <= most else text[: most - 4] + " ..."


def _same_written(name: str, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Did both sides write the same elements with the same values, whatever the buffers' sizes?"""
    unwritten = _POINTER_CANARY if name == POINTER_OUTPUT else _CANARY
    if a.dim() != b.dim():
        return False
    overlap = tuple(slice(0, min(x, y)) for x, y in zip(a.shape, b.shape))
    for t in (a, b):  # nothing written outside the part both buffers have
        outside = torch.ones(t.shape, dtype=torch.bool, device=t.device)
        outside[overlap] = False
        if bool((t[outside] != unwritten).any()):
            return False
    ta, tb = a[overlap], b[overlap]
    if name == POINTER_OUTPUT:
        return torch.equal(ta != unwritten, tb != unwritten)
    return torch.equal(ta, tb)


def _first_difference(name: str, a: torch.Tensor, b: torch.Tensor) -> str:
    a, b = a.cpu(), b.cpu()
    flat = int((a != b).reshape(-1).nonzero()[0])
    count = int((a != b).sum())
    # numpy's, not torch.unravel_index: torch's first call imports sympy (a second of every worker's first divergence)
    where = ", ".join(str(int(i)) for i in np.unravel_index(flat, tuple(a.shape)))

    def show(t: torch.Tensor) -> str:
        value = int(t.reshape(-1)[flat])
        return "unwritten" if value == _CANARY else str(value)

    return f"{name}[{where}]: {show(a)} -> {show(b)} ({count} element(s))"


def evaluate(point: Point, a: Planner, b: Planner, where_defined: bool = True) -> Verdict:
    """The hot-path verdict for ``point``; SKIPPED when a side cannot make the call. ``where_defined``: compare a
    point undefined on both sides where it is defined (:func:`_where_defined`; a shrink, which looks for a
    divergence, need not)."""
    try:
        for planner in (a, b):
            live = planner.live_device()
            if live is not None and live != planner.spec.device_for(point.arch, point.cu_num):
                return Verdict(SKIPPED, detail=f"{planner.spec} runs on {live[0]}:{live[1]}, the point plans for another device")
        inputs = point_inputs(point)
        device = dict(zip(("arch", "cu_num"), a.spec.device_for(point.arch, point.cu_num)))
        shared = device == dict(zip(("arch", "cu_num"), b.spec.device_for(point.arch, point.cu_num)))
        with a.device_context(device) if shared else contextlib.nullcontext():
            side_a, side_b = run_side(point, a, inputs), run_side(point, b, inputs)
            verdict = compare(side_a, side_b)
            if where_defined and verdict.status == UNDEFINED and verdict.kind == BOTH:
                verdict = _where_defined(point, a, b, inputs, verdict)
        verdict.paths = (side_a.path, side_b.path)
        return verdict
    except Unexpressible as exc:
        return Verdict(SKIPPED, detail=str(exc))


#: The detail of a point undefined on both sides that is equal wherever it is defined.
EQUAL_WHERE_DEFINED = "equal where defined: undefined on both sides, at the same elements"


def _where_defined(point: Point, a: Planner, b: Planner, inputs: dict[str, torch.Tensor], verdict: Verdict) -> Verdict:
    """Both sides undefined: compare what is defined (``allow_undefined``: a placeholder in each element read
    past an input's end), equal only when the same elements are undefined and every other one is equal.

    A plan wholly undefined (nothing but the pointers written), a side that raises even so, or any
    difference leaves the point undefined: not compared.
    """
    from mla_golden.reference import allow_undefined

    with allow_undefined():
        side_a, side_b = run_side(point, a, inputs), run_side(point, b, inputs)
    seconds, cpu = verdict.planner_s + side_a.seconds + side_b.seconds, verdict.planner_cpu_s + side_a.cpu_seconds + side_b.cpu_seconds
    if all(side.flat is not None and bool((side.flat != _CANARY).any()) for side in (side_a, side_b)):
        if compare(side_a, side_b).status == EQUAL:
            return Verdict(EQUAL, None, EQUAL_WHERE_DEFINED, seconds, cpu)
    return Verdict(UNDEFINED, BOTH, verdict.detail, seconds, cpu)


def capture(point: Point, planner: Planner) -> Call:
    """The full call (written masks from two canary runs, as ``mla-golden diff`` replays it) for a golden."""
    call, sizing = template(point, planner)
    with as_recorded(call, planner.device_context):
        try:
            sized = _size(planner, point.op, sizing)
        except Exception as exc:  # the helper rejected the inputs: no buffer could be sized
            call.error = _message(exc)
            call.buffers = {n: {"shape": [0], "dtype": "torch.uint64" if n == POINTER_OUTPUT else "torch.int32"} for n in OUTPUTS}
            call.provenance["sweep"]["notes"] = ["the sizing helper raised; buffers recorded as empty"]
            return call
    specs = _specs(sized)
    call.buffers = {name: {"shape": list(shape), "dtype": str(dtype)} for name, (shape, dtype) in zip(OUTPUTS, specs)}
    with planner.device_context(call.device):  # replay() sets it for the reference's own functions only
        captured = replay(call, planner.function(point.op), on=planner.tensor_device)
    captured.provenance["sweep"] = call.provenance["sweep"]
    return captured
