"""The command line's process keeps freed memory for reuse: a second round of big temporaries takes no fresh pages."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's"
)

# Three rounds of four 16 MB blocks, each freed: glibc's default trims the 64 MB off the heap's top after every
# round, so each round faults its pages in again; kept, only the first does. Faults are counted, not timed.
ROUNDS = """
import resource, sys
import numpy as np
{setup}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    before = faults()
    blocks = [np.ones(1 << 21, dtype=np.int64) for _ in range(4)]
    del blocks
    print(faults() - before)
"""


def _faults(setup: str) -> list[int]:
    run = subprocess.run([sys.executable, "-c", ROUNDS.format(setup=setup)], capture_output=True, text=True, check=True)
    return [int(line) for line in run.stdout.split()]


def test_kept_memory_is_reused_without_page_faults() -> None:
    default = _faults("")
    kept = _faults("from mla_golden.allocator import keep_freed_memory\nassert keep_freed_memory()")
    assert min(default[1:]) > default[0] // 2, f"glibc trims between rounds by default: {default}"
    assert max(kept[1:]) < kept[0] // 10, f"the later rounds reuse the first round's pages: {kept}"


def test_the_command_line_keeps_freed_memory() -> None:
    """``mla-golden`` (its entry point) makes the setting before it runs a command."""
    setup = (
        "from mla_golden.cli import main\nsys.argv = ['mla-golden', 'versions', '--format', 'json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint()"
    )
    run = subprocess.run([sys.executable, "-c", ROUNDS.format(setup=setup)], capture_output=True, text=True, check=True)
    counts = [int(line) for line in run.stdout.strip().splitlines()[-3:]]
    assert max(counts[1:]) < counts[0] // 10, counts
