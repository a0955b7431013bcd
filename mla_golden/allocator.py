"""Freed memory kept for reuse in a process of mla-golden's own, so a pass over a big golden pays no page faults.

A ``check`` or ``diff`` of a golden of a million works allocates and frees
a few hundred megabytes of 8 MB temporaries (a column of int64 each). glibc's
malloc hands a freed block of that size back to the kernel (it unmaps it, or
trims the heap above it), so the next temporary takes fresh pages: tens of
thousands of page faults per command, a sixth of a diverged diff's time on a
small VM. Raising the trim threshold and fixing the mmap threshold at its
ceiling keeps those blocks in the heap, where the next one reuses them; what
the process holds at its peak is unchanged, only handed back later (at exit,
for a command).

Only for a process mla-golden runs itself (the command line): it is a
process-wide setting, so the library never makes it in a program's process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Freed memory at the top of a heap kept up to this much (glibc's default: twice the mmap threshold, at most 64 MB).
TRIM_THRESHOLD = 1 << 30
#: Blocks below this come from the heap and go back to it (glibc's ceiling for the threshold on 64-bit: 32 MiB);
#: larger ones (a golden's file read whole) are their own mappings, as before.
MMAP_THRESHOLD = 1 << 25


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed blocks for reuse; False where there is no glibc to tell (macOS, Windows,
    musl) or it refused, and the process runs as it would have."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
