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
from typing import Any

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

    ``read`` receives the values of the input tensors looked at.
    """
    read = {} if read is None else read
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
    indptrs = {name: _values(arguments.get(name)) for name in _INDPTRS[op]}
    read.update(indptrs)
    for name, values in indptrs.items():
        found += _indptr_problems(name, arguments.get(name), values)
    if op == _MLA:
        found += _last_page_problems(arguments, indptrs["seqlens_kv_indptr"], read)
    else:
        lens = _values(arguments.get("context_lens")) or []
        negative = next((i for i, n in enumerate(lens) if n < 0), None)
        if negative is not None:
            found.append(("context_lens", f"context_lens[{negative}] = {lens[negative]} is negative"))
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


def _values(tensor: Any) -> list[int] | None:
    """The values of an int 1-D contiguous tensor; None for anything else (aiter's own checks judge those)."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta" or tensor.dim() != 1:
        return None
    if tensor.dtype not in (torch.int32, torch.int64) or not tensor.is_contiguous():
        return None
    return tensor.tolist()


def _sane_indptr(tensor: torch.Tensor, values: list[int]) -> bool:
    """Is the indptr ``values`` (read from ``tensor``) non-negative and non-decreasing? On a CPU tensor through
    numpy's view of it: a few microseconds where Python's min and pairwise walk took fifty at batch 1024."""
    if not values:
        return True
    if tensor.device.type == "cpu":
        array = tensor.numpy()
        return bool(array.min() >= 0 and (array[1:] >= array[:-1]).all())
    return min(values) >= 0 and all(map(operator.le, values, values[1:]))


def _within(tensor: Any, values: list[int], low: int, high: int) -> bool:
    """Is every one of ``values`` (read from ``tensor``) in ``[low, high]``? As :func:`_sane_indptr` does it."""
    if not values:
        return True
    if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
        array = tensor.numpy()
        return bool(low <= array.min() and array.max() <= high)
    return low <= min(values) and max(values) <= high


def _indptr_problems(name: str, tensor: Any, values: list[int] | None) -> list[tuple[str, str]]:
    if not isinstance(tensor, torch.Tensor):
        return [(name, f"must be a tensor, got {type(tensor).__name__}")]
    if tensor.device.type == "meta":
        return [(name, "is on the meta device: it holds no values to plan with")]
    if tensor.dim() == 0:
        return [(name, "must be 1-D (an indptr of batch + 1 entries), got a 0-d tensor")]
    if values is None or _sane_indptr(tensor, values):
        return []  # the usual case, checked at C speed: the planners pay it on every call
    negative = next((i for i, v in enumerate(values) if v < 0), None)
    if negative is not None:
        return [(name, f"{name}[{negative}] = {values[negative]} is negative")]
    falls = next((i for i in range(1, len(values)) if values[i] < values[i - 1]), None)
    if falls is not None:
        return [(name, f"decreases at [{falls}]: {values[falls - 1]} -> {values[falls]} (an indptr never decreases)")]
    return []


def _last_page_problems(arguments: Mapping[str, Any], kv: list[int] | None, read: dict[str, list[int] | None]) -> list[tuple[str, str]]:
    name = "kv_last_page_lens"
    tensor = arguments.get(name)
    if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
        return [(name, "is on the meta device: it holds no values to plan with")]
    last = read[name] = _values(tensor)
    page_size = _integer(arguments.get("page_size"))
    if last is None or kv is None or page_size is None:
        return []
    if _within(tensor, last, 1, page_size):
        return []  # every page holds 1..page_size tokens: nothing to find batch by batch
    for b, n in enumerate(last[: len(kv) - 1]):
        if kv[b + 1] > kv[b] and not 1 <= n <= page_size:
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
