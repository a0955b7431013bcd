"""The simulated GPU the reference planners plan for.

aiter reads the arch (``get_gfx()``) and CU count (``multiProcessorCount``) of
the current device; the reference reads them from here instead, so a planner
call on any machine can be told which GPU to plan for.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

#: The arch of :data:`DEFAULT_DEVICE`, and the one :func:`device` plans for unless told.
DEFAULT_ARCH = "gfx942"
#: LDS bytes per CU (``maxSharedMemoryPerMultiProcessor``) of the archs aiter plans for.
LDS_BYTES = {"gfx942": 65536, "gfx950": 163840}
#: CU count of each arch's full part (the default when only the arch is named).
FULL_PART_CUS = {"gfx942": 304, "gfx950": 256}


@dataclass(frozen=True)
class Device:
    """What aiter's planners read from the GPU they run on."""

    arch: str = DEFAULT_ARCH
    cu_num: int = FULL_PART_CUS[DEFAULT_ARCH]
    warp_size: int = 64
    lds_bytes: int = LDS_BYTES[DEFAULT_ARCH]

    def __post_init__(self) -> None:
        if not isinstance(self.arch, str) or not self.arch.startswith("gfx"):
            raise ValueError(f"device arch must look like 'gfx942', got {self.arch!r}")
        for name in ("cu_num", "warp_size", "lds_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"device {name} must be a positive int, got {value!r}")


#: MI300X, the most common target; documented in the README.
DEFAULT_DEVICE = Device()

_current: contextvars.ContextVar[Device] = contextvars.ContextVar(
    "mla_golden_reference_device", default=DEFAULT_DEVICE
)


def current_device() -> Device:
    """The device the reference planners plan for in this context."""
    return _current.get()


@contextlib.contextmanager
def device(
    arch: str = DEFAULT_ARCH,
    cu_num: int | None = None,
    *,
    warp_size: int = 64,
    lds_bytes: int | None = None,
) -> Iterator[Device]:
    """Plan for ``arch`` with ``cu_num`` CUs inside the block.

    ``cu_num`` defaults to the full part (304 for gfx942, 256 for gfx950);
    ``lds_bytes`` to the arch's LDS size.
    """
    if cu_num is None:
        cu_num = FULL_PART_CUS.get(arch)
        if cu_num is None:
            raise ValueError(f"no default cu_num for arch {arch!r}: pass cu_num=")
    dev = Device(arch, cu_num, warp_size, lds_bytes or LDS_BYTES.get(arch, 65536))
    token = _current.set(dev)
    try:
        yield dev
    finally:
        _current.reset(token)
