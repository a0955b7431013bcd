"""aiter's ``dtypes`` module, for the GPU the reference plans for.

aiter (``aiter/utility/dtypes.py`` at e4048607) fixes ``dtypes.fp8`` at import
from the running GPU: ``float8_e4m3fnuz`` on gfx942, ``float8_e4m3fn`` on
gfx950 and the RDNA parts, ``uint8`` where it knows no fp8. Builders read it
to pick the dtypes they pass to the planners, so a stand-in that got it wrong
would record a gfx942 golden with gfx950's fp8. Here ``fp8`` (and
``d_dtypes["fp8"]``) follow :func:`mla_golden.reference.device` at the moment
they are read; every other name is fixed, as in aiter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from mla_golden.reference._device import current_device

#: aiter's 8-bit stand-in where torch (or the arch) has no such dtype (its ``_8bit_fallback``): also the fp8 of
#: an arch its ``defaultDtypes`` does not list.
FALLBACK_8BIT = torch.uint8

#: fp8 per arch, as aiter's ``defaultDtypes`` lists them.
FP8_BY_ARCH: dict[str, torch.dtype] = {
    "gfx942": torch.float8_e4m3fnuz,
    **{
        arch: torch.float8_e4m3fn
        for arch in ("gfx950", "gfx1100", "gfx1101", "gfx1102", "gfx1151", "gfx1200", "gfx1201", "gfx1250")
    },
}

i4x2: torch.dtype = getattr(torch, "int4", FALLBACK_8BIT)
fp4x2: torch.dtype = getattr(torch, "float4_e2m1fn_x2", FALLBACK_8BIT)
fp8_e8m0: torch.dtype = getattr(torch, "float8_e8m0fnu", FALLBACK_8BIT)
fp16 = torch.float16
bf16 = torch.bfloat16
fp32 = torch.float32
u32 = torch.uint32
i32 = torch.int32
i16 = torch.int16
i8 = torch.int8
u8 = torch.uint8
i64 = torch.int64
u64 = torch.uint64

#: aiter's ``AiterDtype`` enum, in order (csrc/include/aiter_enum.h at e4048607); also the keys of ``d_dtypes``.
AITER_DTYPE_NAMES = ("fp8", "fp8_e8m0", "fp16", "bf16", "fp32", "i4x2", "fp4x2", "u32", "i32", "i16", "i8", "u8", "i64", "u64")
globals().update({f"AITER_DTYPE_{name}": index for index, name in enumerate(AITER_DTYPE_NAMES)})

#: ``AiterDtype`` ids of the torch dtypes aiter maps (its ``_aiter_dtype_id``): both fp8 flavours are ``fp8``; every
#: other name of :data:`AITER_DTYPE_NAMES` is its dtype (a fallback uint8, such as i4x2 where torch has no int4,
#: takes u8's id: the later entry wins, as in aiter's own map).
AITER_DTYPE_IDS: dict[torch.dtype, int] = {
    torch.float8_e4m3fnuz: 0,
    torch.float8_e4m3fn: 0,
    **{globals()[name]: index for index, name in enumerate(AITER_DTYPE_NAMES) if name != "fp8"},
}


def aiter_dtype_id(dtype: object) -> int:
    """torch dtype -> ``AiterDtype`` id (aiter/utility/dtypes.py's ``_aiter_dtype_id``); aiter's message for dtypes
    it cannot pass."""
    try:
        return AITER_DTYPE_IDS[dtype]  # type: ignore[index]
    except (KeyError, TypeError):
        raise AssertionError(f"Unsupported dtype: {dtype}") from None


def fp8_of(arch: str, by_arch: Mapping[str, torch.dtype] = FP8_BY_ARCH) -> torch.dtype:
    """``arch``'s fp8 in a ``defaultDtypes`` table (this port's, or an aiter tree's own): :data:`FALLBACK_8BIT`
    where the table lists none, as aiter's ``get_dtype_fp8`` falls back."""
    return by_arch.get(arch, FALLBACK_8BIT)


def get_dtype_fp8() -> torch.dtype:
    """fp8 of the device the reference plans for now (aiter's ``get_dtype_fp8``)."""
    return fp8_of(current_device().arch)


def __getattr__(name: str) -> Any:
    """``fp8`` and ``d_dtypes`` are read per access: they depend on the current device."""
    if name == "fp8":
        return get_dtype_fp8()
    if name == "d_dtypes":
        fixed = globals()
        return {n: get_dtype_fp8() if n == "fp8" else fixed[n] for n in AITER_DTYPE_NAMES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
