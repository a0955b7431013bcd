"""Big buffers compared and kept at the byte level: C memcmp compares, zero checks, and lean copies of a buffer's values on zero pages the kernel maps only when touched."""

from __future__ import annotations

import ctypes
import math
import mmap
from collections.abc import Callable
from typing import Any, cast

import numpy as np


def lean_copy(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``values`` to keep, or when its second half is all zeros, a copy of what comes before its zero tail on
    zeroed memory that the kernel maps only when touched.

    A prefill buffer is sized for the longest batch the program allows and the
    planner zeroes what a batch leaves over, usually most of it: a spy keeping
    every call then holds (and pays fresh pages for) the values alone, and the
    buffer itself stays in the scratch pool for the next capture.
    """
    flat = values.reshape(-1)
    half = flat.size // 2
    if not all_zero(flat[half:]):
        return values
    end = half  # walk back to just after the last nonzero element
    while end:
        start = max(end - ZERO_SPAN, 0)
        if not all_zero(flat[start:end]):
            end = start + int(np.flatnonzero(flat[start:end])[-1]) + 1
            break
        end = start
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


#: Elements per step when :func:`lean_copy` walks a zero tail back, and zero bytes to compare a step with.
ZERO_SPAN = 1 << 14


_ZEROS = np.zeros(ZERO_SPAN * 8, dtype=np.uint8)


def all_zero(flat: np.ndarray[Any, Any]) -> bool:
    """Is every element of a 1-D array 0? memcmp against zeros in steps: no temporary, stops early."""
    if _MEMCMP is None or not flat.flags.c_contiguous:
        return not flat.any()
    step, zeros = _ZEROS.nbytes // flat.itemsize, _ZEROS.ctypes.data
    for start in range(0, flat.size, step):
        part = flat[start : start + step]
        if _MEMCMP(part.ctypes.data, zeros, part.nbytes):
            return False
    return True


def bytes_equal(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> bool:
    """Do contiguous arrays of one shape and dtype hold the same bytes? C's memcmp: twice numpy's speed, no temporary."""
    if _MEMCMP is None or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return bool(np.array_equal(x, y))
    return _MEMCMP(x.ctypes.data, y.ctypes.data, x.nbytes) == 0


def _libc_memcmp() -> Callable[[int, int, int], int] | None:
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (AttributeError, OSError, TypeError):  # no C library reachable this way (Windows): numpy compares
        return None
    memcmp.restype = ctypes.c_int
    memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return cast(Callable[[int, int, int], int], memcmp)


_MEMCMP = _libc_memcmp()
