"""Small case matrices the CLI and process tests record (a few seconds each on the reference)."""

from __future__ import annotations

#: Two decode cases (128 and 16 fp8 heads, 4 requests) and one prefill case, on gfx942/304.
SMALL_MATRIX = """\
format = "mla-golden-matrix/1"
devices = ["gfx942:304"]

[[decode]]
name = "small"
heads = [128, 16]
dtype = "fp8"
batch = 4
context = "jitter:2000"

[[prefill]]
name = "small-prefill"
heads = 16
seq_lens = [[600, 7, 300]]
"""
