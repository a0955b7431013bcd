"""The tree's own Python layer: facts it reads from the tree rather than from the newest port."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.aiter_trees import ATTENTION

from mla_golden.aiter_build.python_layer import DTYPES_PY, AiterPython
from mla_golden.reference import Device
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.schema import ATTENTION_PY

#: aiter/utility/dtypes.py's table as v0.1.10 wrote it (gfx942 and gfx950 only), and as v0.1.16 did (gfx12xx too).
OLD_TABLE = 'import torch\ndefaultDtypes = {\n    "gfx942": {"fp8": torch.float8_e4m3fnuz},\n    "gfx950": {"fp8": torch.float8_e4m3fn},\n}\n'
NEWER_TABLE = OLD_TABLE.replace("},\n}", '},\n    "gfx1201": {"fp8": torch.float8_e4m3fn},\n}')
assert NEWER_TABLE != OLD_TABLE


def _fp8(root: Path, dtypes: str | None, arch: str) -> torch.dtype:
    (root / ATTENTION_PY).parent.mkdir(parents=True, exist_ok=True)
    (root / ATTENTION_PY).write_text(ATTENTION)
    if dtypes is not None:
        (root / DTYPES_PY).parent.mkdir(parents=True, exist_ok=True)
        (root / DTYPES_PY).write_text(dtypes)
    fp8: torch.dtype = AiterPython(root).namespace(Device(arch, 32, 32, 65536), {})["dtypes"].fp8
    return fp8


@pytest.mark.parametrize(
    ("dtypes", "arch", "expected"),
    [
        (OLD_TABLE, "gfx942", torch.float8_e4m3fnuz),
        (OLD_TABLE, "gfx950", torch.float8_e4m3fn),
        (OLD_TABLE, "gfx1201", torch.uint8),  # aiter's 8-bit fallback: that tree does not know the arch
        (NEWER_TABLE, "gfx1201", torch.float8_e4m3fn),
        (None, "gfx1201", FP8_BY_ARCH["gfx1201"]),  # no table in the tree: the newest port's
    ],
)
def test_fp8_per_arch_is_the_trees_own_table(tmp_path: Path, dtypes: str | None, arch: str, expected: torch.dtype) -> None:
    """The tree's Python read fp8 as e4m3fnuz on every arch but gfx950, while aiter (and the reference) give e4m3fn on
    gfx11xx/12xx: the tree's own ``defaultDtypes`` is the fact for that tree."""
    assert _fp8(tmp_path, dtypes, arch) == expected
