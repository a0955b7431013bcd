"""Whole-tensor helpers the passes over a golden of a million works are built from.

Each is what torch does, done where it is cheaper: numpy tests and counts a
CPU bool tensor many times faster than torch's ``all``, ``any`` and ``sum``,
widens int32 to int64 about 4x faster, and a power-of-two divisor is a shift.
On another device each falls back to torch's own operation.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch

from mla_golden.schema import WORK_ROW

#: Integer dtypes that widen to int64 through numpy (and whose values numpy's int64 arithmetic cannot overflow).
NARROW_INTS = (torch.int32, torch.int16, torch.int8, torch.uint8)


def all_true(flags: torch.Tensor) -> bool:
    """Every flag set: numpy's test of a CPU bool tensor is about 15x torch's ``all`` on a golden's written masks."""
    return bool(flags.numpy().all()) if flags.device.type == "cpu" else bool(flags.all())


def any_true(flags: torch.Tensor) -> bool:
    """Some flag set: numpy's test, for the reason :func:`all_true` gives."""
    return bool(flags.numpy().any()) if flags.device.type == "cpu" else bool(flags.any())


def count_true(flags: torch.Tensor) -> int:
    """How many flags are set: numpy counts a million in microseconds, where torch's sum widens each to int64."""
    return int(np.count_nonzero(flags.numpy())) if flags.device.type == "cpu" else int(flags.sum())


def flat_nonzero(flags: torch.Tensor) -> torch.Tensor:
    """The int64 indices of the set flags of a 1-D bool tensor: numpy's, about 7x torch's ``nonzero`` on a million."""
    if flags.device.type == "cpu" and flags.dim() == 1:
        return torch.from_numpy(np.flatnonzero(flags.numpy()))
    return flags.nonzero().reshape(-1)


def same(x: torch.Tensor, y: torch.Tensor) -> bool:
    """``torch.equal`` of integer or bool tensors; two CPU tensors of one dtype and shape, each contiguous, through
    C's memcmp: 2x torch's speed on int32, 15x on a bool mask (all a golden holds). Equal bytes are equal values;
    bools whose bytes differ are asked of torch (a bool's byte may be any nonzero value where it was viewed from
    bytes)."""
    if (
        MEMCMP is not None and x.dtype == y.dtype and x.shape == y.shape and x.device.type == y.device.type == "cpu"
        and (x.dtype == torch.bool or not x.dtype.is_floating_point and not x.dtype.is_complex)
        and x.is_contiguous() and y.is_contiguous() and not x.is_neg() and not y.is_neg()
    ):  # fmt: skip
        if x.numel() == 0 or MEMCMP(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0:
            return True
        return x.dtype == torch.bool and torch.equal(x, y)
    return torch.equal(x, y)


def bytes_equal(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> bool:
    """Do contiguous arrays of one shape and dtype hold the same bytes? C's memcmp: twice numpy's speed, no temporary."""
    if MEMCMP is None or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return bool(np.array_equal(x, y))
    return MEMCMP(x.ctypes.data, y.ctypes.data, x.nbytes) == 0


def leading_true(flags: torch.Tensor) -> int:
    """How many of the 1-D bool ``flags`` are True before the first False (all of them when none is): numpy's
    argmin stops at the first False, where listing every unwritten element took a pass and its memory."""
    array = flags.cpu().numpy()
    return int(array.argmin()) if not array.all() else array.size


def rows_written(mask: torch.Tensor) -> torch.Tensor:
    """Per row of a work_info_set written mask (rows of WORK_ROW flags), whether any element is written: a row
    of eight one-byte flags is read as one 64-bit word, where torch's ``any(dim=1)`` took 5 ms a million rows."""
    rows = mask.reshape(-1, WORK_ROW)
    if WORK_ROW == 8 and rows.device.type == "cpu" and rows.dtype == torch.bool and rows.is_contiguous():
        return torch.from_numpy(rows.numpy().view(np.uint64).reshape(-1) != 0)
    return rows.any(dim=1)


def widened(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` as int64: numpy's widening of a CPU tensor is about 4x torch's on a million int32s."""
    if tensor.dtype == torch.int64:
        return tensor
    if tensor.device.type != "cpu" or tensor.dtype not in NARROW_INTS:
        return tensor.to(torch.int64)
    return torch.from_numpy(tensor.numpy().astype(np.int64, order="C"))  # one copy, contiguous whatever the strides


def running_difference(end: torch.Tensor, start: torch.Tensor) -> torch.Tensor:
    """The running sums of ``end - start`` as int64, from 0 (n + 1 values): numpy widens inside the subtraction,
    where widening each column first (strided columns of a work table) cost two more passes and copies."""
    if any(t.device.type != "cpu" or t.dtype not in NARROW_INTS for t in (end, start)):
        return torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(widened(end) - widened(start), 0)])
    sums = np.zeros(end.numel() + 1, dtype=np.int64)
    np.cumsum(np.subtract(end.numpy(), start.numpy(), dtype=np.int64), out=sums[1:])
    return torch.from_numpy(sums)


#: Rows per block when a table is widened into columns: a block's rows (512 KB of int32) and its columns stay in cache.
_BLOCK_ROWS = 1 << 14


def widened_columns(rows: torch.Tensor) -> torch.Tensor:
    """A 2-D table ``rows`` as int64 laid out column by column (each column contiguous), returned transposed back
    so that it indexes as ``rows`` does: numpy transposes and widens a block of rows at a time, in cache, where
    torch's transposed copy and then the widening each passed over the whole table (a million eight-column rows:
    18 ms, against 30-35 ms)."""
    if rows.device.type != "cpu" or rows.dtype not in NARROW_INTS:
        return widened(rows.t().contiguous()).t()
    source = rows.numpy()
    columns = np.empty((source.shape[1], source.shape[0]), dtype=np.int64)
    for start in range(0, source.shape[0], _BLOCK_ROWS):
        columns[:, start : start + _BLOCK_ROWS] = source[start : start + _BLOCK_ROWS].T
    return torch.from_numpy(columns).t()


def floor_divmod(values: torch.Tensor, divisor: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Floor quotient and remainder of int64 ``values`` by a positive ``divisor``: a shift and a mask where it is
    a power of two (an arithmetic shift floors negatives too), a third of a division's time."""
    if divisor & (divisor - 1) == 0:
        return values >> (divisor.bit_length() - 1), values & (divisor - 1)
    quotient = torch.div(values, divisor, rounding_mode="floor")
    return quotient, values - quotient * divisor


def stable_order(key: torch.Tensor) -> torch.Tensor:
    """The stable permutation sorting ``key``: numpy's, which runs in linear time on the ordered runs a plan's rows
    come in (each plane's works in tile and kv order, a diverged plan's few works out of place), where torch.sort
    sorts from scratch."""
    return torch.from_numpy(np.argsort(key.cpu().contiguous().numpy(), kind="stable"))


def _libc_memcmp() -> Callable[[int, int, int], int] | None:
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (AttributeError, OSError, TypeError):  # no C library reachable this way (Windows): numpy / torch compare
        return None
    memcmp.restype = ctypes.c_int
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return cast(Callable[[int, int, int], int], memcmp)


#: C's memcmp (None where no C library is reachable through ctypes).
MEMCMP = _libc_memcmp()
