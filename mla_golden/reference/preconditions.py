"""Preconditions of aiter's planners that aiter itself does not check.

aiter trusts its caller: indptrs that decrease or go negative, a last page
holding 0 or more than ``page_size`` tokens, head counts or a gqa ratio of 0
or below, an arch it has no plan for, or float / int64 / meta output buffers
give a garbage plan (or a crash) without a word. The public planners call
:func:`require` first and raise :class:`PreconditionError` naming the
argument; ``mla_golden.invariants`` flags the same problems in a golden through
:func:`problems`. What aiter does check (element types and contiguity of the
indptrs, kv granularity a power of two, ...) is left to its own checks, so
the reference keeps aiter's verdict and message for those.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, TypeGuard

import torch

from mla_golden.reference._device import LDS_BYTES, current_device
from mla_golden.reference.errors import PreconditionError

_MLA = "get_mla_metadata_v1"
_PS = "get_ps_metadata_v1"
#: Integer scalars that must be positive, per planner. The PS port already refuses a non-int scalar (as
#: aiter's int32 binding does), zero block_size / granularities (undefined in aiter) and odd buffers itself.
_POSITIVE = {
    _MLA: ("num_heads_per_head_k", "num_heads_k", "page_size", "kv_granularity"),
    _PS: ("gqa_ratio", "num_heads_k", "qhead_granularity"),
}
#: Other integer scalars (any sign: -1 means "not given" to aiter).
_INTEGER = {
    _MLA: ("max_seqlen_qo", "uni_seqlen_qo", "topk", "max_split_per_batch", "mla_version"),
    _PS: (),
}
_INDPTRS = {_MLA: ("seqlens_qo_indptr", "seqlens_kv_indptr"), _PS: ("seqlens_qo_indptr", "pages_kv_indptr")}
_BUFFERS = {
    "work_metadata_ptrs": torch.uint64,
    "work_indptr": torch.int32,
    "reduce_indptr": torch.int32,
    "reduce_final_map": torch.int32,
    "reduce_partial_map": torch.int32,
}


def require(op: str, arguments: Mapping[str, Any]) -> dict[str, list[int] | None]:
    """Raise :class:`PreconditionError` for the first broken precondition of planner ``op``'s ``arguments``.

    Returns the input values it read (None where it could not): the planner
    reuses them instead of reading its inputs a second time on every call.
    """
    read: dict[str, list[int] | None] = {}
    found = problems(op, arguments, current_device().arch, read)
    if found:
        raise PreconditionError(*found[0])
    return read


def problems(
    op: str, arguments: Mapping[str, Any], arch: str, read: dict[str, list[int] | None] | None = None
) -> list[tuple[str, str]]:
    """(argument, problem) for every broken precondition; output buffers absent from ``arguments`` are skipped.

    ``read`` receives the values of the input tensors looked at. Without it no input is listed unless it
    breaks a precondition (a golden's million-batch indptr is judged through numpy, not as a Python list).
    """
    found: list[tuple[str, str]] = []
    if arch not in LDS_BYTES:
        found.append(("arch", f"{arch!r} is not an arch aiter's planners plan for ({', '.join(sorted(LDS_BYTES))})"))
    for name in (*_POSITIVE[op], *_INTEGER[op]):
        value = _integer(arguments.get(name))
        if value is None and op == _PS:
            continue  # the port's own int32 check names it
        if value is None:
            found.append((name, f"must be an int, got {arguments.get(name)!r} ({type(arguments.get(name)).__name__})"))
        elif name in _POSITIVE[op] and value <= 0:
            found.append((name, f"must be positive, got {value}"))
    looked_at = (*_INDPTRS[op], "kv_last_page_lens") if op == _MLA else _INDPTRS[op]
    if read is not None:
        read.update({name: _values(arguments.get(name)) for name in looked_at})
    for name in _INDPTRS[op]:
        found += _indptr_problems(name, arguments.get(name))
    if op == _MLA:
        found += _last_page_problems(arguments)
    else:
        lens = arguments.get("context_lens")
        if _readable(lens) and not _within(lens, 0, None):
            negative = next(i for i, n in enumerate(lens.tolist()) if n < 0)
            found.append(("context_lens", f"context_lens[{negative}] = {int(lens[negative])} is negative"))
    for name, dtype in ({**_BUFFERS, "work_info_set": torch.int32} if op == _MLA else {}).items():
        if name in arguments:
            found += _buffer_problems(name, arguments[name], dtype)
    return found


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # int, IntEnum, numpy ints
    except TypeError:
        value = getattr(value, "value", None)  # a plain Enum such as aiter's MlaVersion
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def _readable(tensor: Any) -> TypeGuard[torch.Tensor]:
    """An int 1-D contiguous tensor with values (anything else is left to aiter's own checks)."""
    return (
        isinstance(tensor, torch.Tensor)
        and tensor.device.type != "meta"
        and tensor.dim() == 1
        and tensor.dtype in (torch.int32, torch.int64)
        and tensor.is_contiguous()
    )


def _values(tensor: Any) -> list[int] | None:
    """The values of a :func:`_readable` tensor; None for anything else."""
    return tensor.tolist() if _readable(tensor) else None


def _array(tensor: torch.Tensor) -> Any:
    """The tensor's values as a numpy array (a view on the CPU): checked at C speed, not as a Python list."""
    return tensor.numpy() if tensor.device.type == "cpu" else tensor.cpu().numpy()


def _within(tensor: torch.Tensor, low: int, high: int | None) -> bool:
    """Is every value of ``tensor`` (readable) in ``[low, high]`` (``high`` None: no upper bound)?"""
    if not tensor.numel():
        return True
    array = _array(tensor)
    return bool(low <= array.min() and (high is None or array.max() <= high))


def _indptr_problems(name: str, tensor: Any) -> list[tuple[str, str]]:
    if not isinstance(tensor, torch.Tensor):
        return [(name, f"must be a tensor, got {type(tensor).__name__}")]
    if tensor.device.type == "meta":
        return [(name, "is on the meta device: it holds no values to plan with")]
    if tensor.dim() == 0:
        return [(name, "must be 1-D (an indptr of batch + 1 entries), got a 0-d tensor")]
    if not _readable(tensor) or not tensor.numel():
        return []
    array = _array(tensor)
    if array.min() >= 0 and (array[1:] >= array[:-1]).all():
        return []  # the usual case, checked at C speed: the planners pay it on every call
    values = tensor.tolist()
    negative = next((i for i, v in enumerate(values) if v < 0), None)
    if negative is not None:
        return [(name, f"{name}[{negative}] = {values[negative]} is negative")]
    falls = next(i for i in range(1, len(values)) if values[i] < values[i - 1])
    return [(name, f"decreases at [{falls}]: {values[falls - 1]} -> {values[falls]} (an indptr never decreases)")]


def _last_page_problems(arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    name = "kv_last_page_lens"
    tensor, kv = arguments.get(name), arguments.get("seqlens_kv_indptr")
    if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
        return [(name, "is on the meta device: it holds no values to plan with")]
    page_size = _integer(arguments.get("page_size"))
    if not _readable(tensor) or not _readable(kv) or page_size is None:
        return []
    if _within(tensor, 1, page_size):
        return []  # every page holds 1..page_size tokens: nothing to find batch by batch
    last, kv_values = tensor.tolist(), kv.tolist()
    for b, n in enumerate(last[: len(kv_values) - 1]):
        if kv_values[b + 1] > kv_values[b] and not 1 <= n <= page_size:
            return [(name, f"{name}[{b}] = {n}: a last page holds 1..page_size={page_size} tokens")]
    return []


def _buffer_problems(name: str, buffer: Any, dtype: torch.dtype) -> list[tuple[str, str]]:
    if not isinstance(buffer, torch.Tensor):
        return [(name, f"must be a tensor, got {type(buffer).__name__}")]
    if buffer.device.type == "meta":
        return [(name, "is on the meta device: the planner cannot write it")]
    if buffer.dtype != dtype:
        return [(name, f"is {buffer.dtype}; the planner writes {dtype}")]
    return []
