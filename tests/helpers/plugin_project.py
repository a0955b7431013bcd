"""The builder project the plugin's pytester tests run: the stand-ins module and a test that records two goldens.

``TEST_FILE`` spies two decode builds of the fake aiter (``BUILDER_DTYPE=none`` drops their dtypes) and asserts
each matches its golden (``decode`` and ``0``); write both with ``STANDINS`` as ``standins.py`` beside it.
"""

from __future__ import annotations

import textwrap

from helpers.repo import TESTS

STANDINS = (TESTS / "helpers" / "standins.py").read_text()

TEST_FILE = textwrap.dedent(
    """
    import os
    import torch
    import standins

    DTYPE = {"fp8": torch.float8_e4m3fn, "none": None}[os.environ.get("BUILDER_DTYPE", "fp8")]

    def build(aiter):
        bufs = standins.toy_buffers(3, 200)
        standins.toy_decode(aiter, bufs, dtype_q=DTYPE, dtype_kv=DTYPE)

    def test_decode_metadata(mla_golden):
        aiter = standins.fake_aiter()
        with mla_golden.spy(aiter) as spy:
            build(aiter)
            build(aiter)
        first, second = spy.calls.all()
        mla_golden.assert_matches(first, name="decode")
        mla_golden.assert_matches(second)
    """
)
