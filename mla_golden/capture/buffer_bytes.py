"""Big buffers compared and kept at the byte level: zero checks through C's memcmp (:data:`.tensors.MEMCMP`), and lean copies of a buffer's values on zero pages the kernel maps only when touched."""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np

from mla_golden.tensors import MEMCMP


def lean_copy(values: np.ndarray[Any, Any], end: int | None = None) -> np.ndarray[Any, Any]:
    """``values`` to keep, or when its second half is all zeros, a copy of what comes before its zero tail on
    zeroed memory that the kernel maps only when touched. ``end``: where that tail starts, when the caller
    has found it already (:func:`nonzero_end`).

    A prefill buffer is sized for the longest batch the program allows and the
    planner zeroes what a batch leaves over, usually most of it: a spy keeping
    every call then holds (and pays fresh pages for) the values alone, and the
    buffer itself stays in the scratch pool for the next capture.
    """
    flat = values.reshape(-1)
    end = nonzero_end(flat) if end is None else end
    if end > flat.size // 2:
        return values
    lean = zeroed(values.shape, values.dtype)
    lean.reshape(-1)[:end] = flat[:end]
    return lean


#: From this size a lean copy gets its own anonymous mapping (smaller ones come from the allocator).
_MAPPED = 1 << 20


def zeroed(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Zeros whose pages cost nothing until written: a fresh anonymous mapping reads as the kernel's zero page
    and is unmapped when the array is freed. (``np.zeros`` may get recycled heap from the allocator, which
    calloc must clear page by page, once a large block has been freed.)"""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < _MAPPED:
        return np.zeros(shape, dtype=dtype)
    return np.frombuffer(_private_anonymous(nbytes), dtype=dtype).reshape(shape)


def _private_anonymous(nbytes: int) -> mmap.mmap:
    """A private anonymous mapping (``mmap.mmap(-1, n)`` alone is a shared one on POSIX: shmem, dearer pages)."""
    if hasattr(mmap, "MAP_PRIVATE"):
        return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return mmap.mmap(-1, nbytes)  # Windows: anonymous memory backed by the paging file


#: Elements per step when :func:`nonzero_end` narrows down the last nonzero element.
ZERO_SPAN = 1 << 14
#: Bytes compared against zeros in one step: a private mapping never written, so every page of it reads as the
#: kernel's one zero page (a memcmp against it reads the other side alone from memory).
_ZERO_BYTES = 1 << 20
_ZERO_MAP = _private_anonymous(_ZERO_BYTES)
_ZERO_ADDR = np.frombuffer(_ZERO_MAP, dtype=np.uint8).ctypes.data


def nonzero_end(flat: np.ndarray[Any, Any]) -> int:
    """Where the zero tail of a 1-D array starts: just after its last nonzero element (0 when all are zero).

    Walks back from the end a megabyte at a time, then within the first
    block holding a nonzero byte: it reads the zero tail and little more.
    """
    if MEMCMP is None or not flat.flags.c_contiguous:
        found = np.flatnonzero(flat)
        return int(found[-1]) + 1 if found.size else 0
    block = _last_nonzero_block(flat, flat.size, _ZERO_BYTES // flat.itemsize)
    if block is None:
        return 0
    start, stop = _last_nonzero_block(flat, block[1], ZERO_SPAN) or block
    return start + int(np.flatnonzero(flat[start:stop])[-1]) + 1


def _last_nonzero_block(flat: np.ndarray[Any, Any], end: int, step: int) -> tuple[int, int] | None:
    """The last block of ``flat[:end]`` (``step`` elements each, counted back from ``end``) holding a nonzero
    byte, as (start, stop), or None when all of ``flat[:end]`` is zero."""
    assert MEMCMP is not None
    base, size = flat.ctypes.data, flat.itemsize
    while end > 0:
        start = max(end - step, 0)
        if MEMCMP(base + start * size, _ZERO_ADDR, (end - start) * size):
            return start, end
        end = start
    return None


def all_zero(flat: np.ndarray[Any, Any]) -> bool:
    """Is every element of a 1-D array 0? memcmp against zero pages in steps: no temporary, stops early."""
    if MEMCMP is None or not flat.flags.c_contiguous:
        return not flat.any()
    base, nbytes = flat.ctypes.data, flat.nbytes
    for start in range(0, nbytes, _ZERO_BYTES):
        if MEMCMP(base + start, _ZERO_ADDR, min(_ZERO_BYTES, nbytes - start)):
            return False
    return True
