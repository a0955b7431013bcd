"""The buffers a caller on another planner version would allocate for a golden's call.

A builder sizes the metadata buffers with its aiter's own sizing helper
(``get_mla_metadata_info_v1`` / ``get_ps_metadata_info_v1``), so replaying a
golden under another version on the golden's buffers is not what that caller
would see: the new planner may need more room (aiter would write past the
buffer; the reference raises BufferTooSmallError) or pad a smaller buffer
differently. The golden does not store the sizing call, only its result; the
arguments are taken from the call and the one a builder chooses freely, the
batch size it sized for (vLLM: ``max_num_seqs``), is found as the smallest one
for which the recording version's helper gives the golden's shapes; a caller
may also leave the helper's ``max_split_per_batch`` at its default while
passing one to the planner (mla-golden's own matrix does), so both are tried.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mla_golden.call import Call
from mla_golden.schema import MLA_OP, OUTPUTS, to_dtype

#: Batch sizes tried beyond the call's own when looking for the one the caller sized for.
MAX_SIZING_BATCH = 4096

Specs = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Resizing:
    """The buffers a caller of the target version allocates, and what changed against the golden's."""

    buffers: Specs
    #: ``reduce_indptr [2] -> [5]`` per buffer whose shape changed; empty when none did.
    changes: tuple[str, ...]


def _variants(call: Call, batch_size: int) -> list[dict[str, Any]]:
    """The arguments a caller may have sized ``call`` with: as called, then with the helper's default split cap."""
    arguments = sizing_arguments(call, batch_size)
    if arguments.get("max_split_per_batch", -1) == -1:
        return [arguments]
    return [arguments, {**arguments, "max_split_per_batch": -1}]


def sizing_arguments(call: Call, batch_size: int) -> dict[str, Any]:
    """The sizing helper's arguments for ``call``, sized for ``batch_size`` requests (dtypes as torch dtypes)."""
    p = call.params
    if call.op == MLA_OP:
        return {
            "batch_size": batch_size,
            "max_seqlen_qo": p.get("max_seqlen_qo", -1),
            "num_head_qo": p["num_heads_per_head_k"] * p["num_heads_k"],
            "q_dtype": to_dtype(p.get("dtype_q_nope")),
            "kv_dtype": to_dtype(p.get("dtype_kv_nope")),
            "is_sparse": p.get("topk", -1) >= 0,
            "fast_mode": p.get("fast_mode", True),
            "intra_batch_mode": p.get("intra_batch_mode", False),
            "max_split_per_batch": p.get("max_split_per_batch", -1),
        }
    qo = call.inputs["seqlens_qo_indptr"].tolist()
    return {
        "batch_size": batch_size,
        "num_head_k": p["num_heads_k"],
        "max_qlen": max([b - a for a, b in zip(qo, qo[1:])] or [0]),
        "qlen_granularity": p.get("qlen_granularity", 256),
    }


def _sized(helper: Callable[..., Any], arguments: Mapping[str, Any]) -> Specs:
    """``helper``'s buffers for ``arguments`` (those its signature has: older helpers lack some)."""
    result = helper(**arguments)
    return {
        name: {"shape": [shape] if isinstance(shape, int) else list(shape), "dtype": str(dtype)}
        for name, (shape, dtype) in zip(OUTPUTS, result)
    }


def _shapes(specs: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[list[int], str]]:
    return {name: (list(spec["shape"]), str(spec["dtype"])) for name, spec in specs.items()}


def _accepted(helper: Callable[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    names = inspect.signature(helper).parameters
    return {k: v for k, v in arguments.items() if k in names}


def caller_buffers(call: Call, recorded: Callable[..., Any], target: Callable[..., Any]) -> Resizing | str:
    """The buffers ``target`` (a sizing helper) gives the caller that sized ``call``'s buffers with ``recorded``.

    Call it under the call's device and env. Returns why not instead when no
    batch size from the call's own to :data:`MAX_SIZING_BATCH` makes
    ``recorded`` give the golden's shapes (the caller sized by other rules),
    or when either helper refuses the arguments.
    """
    batches = len(call.inputs["seqlens_kv_indptr" if call.op == MLA_OP else "seqlens_qo_indptr"]) - 1
    want = _shapes(call.buffers)
    first = max(batches, 1)
    for arguments in (a for batch_size in range(first, MAX_SIZING_BATCH + 1) for a in _variants(call, batch_size)):
        try:
            found = _sized(recorded, _accepted(recorded, arguments))
        except (AssertionError, ValueError, TypeError) as error:
            return f"the recording version's sizing helper refuses the call's arguments ({type(error).__name__}: {error})"
        if _shapes(found) != want:
            continue
        try:
            buffers = _sized(target, _accepted(target, arguments))
        except (AssertionError, ValueError, TypeError) as error:
            return f"the sizing helper refuses the call's arguments ({type(error).__name__}: {error})"
        changes = tuple(
            f"{name} {want[name][0]} -> {spec['shape']}"
            for name, spec in buffers.items()
            if want[name] != (spec["shape"], spec["dtype"])
        )
        return Resizing(buffers, changes)
    return (
        f"the recording version's sizing helper gives the golden's buffer shapes for no batch size from "
        f"{first} to {MAX_SIZING_BATCH} (its caller sized them by other rules)"
    )
