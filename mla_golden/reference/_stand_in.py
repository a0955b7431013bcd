"""Let ``import aiter`` give the reference, for tests on machines without aiter."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def as_aiter() -> Iterator[ModuleType]:
    """Install the reference as ``sys.modules['aiter']`` for the block, then put back what was there."""
    import mla_golden.reference as reference

    saved = sys.modules.get("aiter")
    sys.modules["aiter"] = reference
    try:
        yield reference
    finally:
        if saved is None:
            sys.modules.pop("aiter", None)
        else:
            sys.modules["aiter"] = saved
