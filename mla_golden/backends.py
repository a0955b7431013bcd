"""Which planner implementation a CLI run records from or replays on.

``aiter`` is the live library on a GPU; ``reference`` is mla-golden's CPU port
of it; ``auto`` takes aiter when it imports and can plan on this machine, and
the reference otherwise, and says why, so nobody mistakes a reference run for
a hardware one.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mla_golden.errors import BackendError
from mla_golden.schema import SCHEMAS

NAMES = ("auto", "aiter", "reference")
#: Buffer-sizing helper of each planner op.
SIZERS = {op: schema.sizer for op, schema in SCHEMAS.items()}


@dataclass(frozen=True)
class Backend:
    """A planner module and how to plan with it."""

    name: str
    module: ModuleType
    #: Why this backend was chosen (for ``auto``) or where it comes from.
    reason: str
    #: torch device the planner's tensors live on.
    tensor_device: str

    def planner(self, op: str) -> Callable[..., Any]:
        """The planner function for ``op``, looked up now (so a spy's wrapper is seen)."""
        fn = getattr(self.module, op, None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {op}")
        return fn

    def sizer(self, op: str) -> Callable[..., Any]:
        """The ``get_*_info_v1`` helper that sizes ``op``'s buffers."""
        fn = getattr(self.module, SIZERS[op], None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {SIZERS[op]}")
        return fn

    def plans_for(self, arch: str, cu_num: int) -> contextlib.AbstractContextManager[Any]:
        """Plan for ``arch``/``cu_num`` inside the block (the reference's device context).

        aiter plans for the GPU it runs on; :meth:`live_device` says which.
        """
        if self.name == "reference":
            return self.module.device(arch, cu_num)
        return contextlib.nullcontext()

    def live_device(self) -> tuple[str, int] | None:
        """(arch, cu_num) of the GPU aiter plans for; None for the reference (it plans for any)."""
        if self.name == "reference":
            return None
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        arch = (getattr(props, "gcnArchName", "") or "").split(":")[0]
        return arch, int(props.multi_processor_count)


def _reference() -> Backend:
    module = importlib.import_module("mla_golden.reference")
    return Backend("reference", module, "mla-golden's CPU port of aiter e4048607", "cpu")


def _aiter() -> Backend:
    """Live aiter, or BackendError saying why it cannot plan here."""
    try:
        module = importlib.import_module("aiter")
    except Exception as exc:  # aiter's import can fail in many ways (no GPU, ABI, JIT build)
        raise BackendError(f"aiter does not import: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in (*SIZERS, *SIZERS.values()) if not callable(getattr(module, n, None))]
    if missing:
        raise BackendError(f"aiter has no {', '.join(missing)}")
    import torch

    if not torch.cuda.is_available():
        raise BackendError("aiter imports but torch sees no ROCm/CUDA device")
    version = getattr(module, "__version__", None) or "unknown version"
    return Backend("aiter", module, f"live aiter ({version})", "cuda")


def resolve(name: str) -> Backend:
    """The backend called ``name`` (auto, aiter, reference); BackendError when it cannot be used."""
    if name == "reference":
        return _reference()
    if name == "aiter":
        return _aiter()
    if name == "auto":
        try:
            return _aiter()
        except BackendError as exc:
            backend = _reference()
            return Backend(backend.name, backend.module, f"{backend.reason}; {exc}", backend.tensor_device)
    raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)}")
