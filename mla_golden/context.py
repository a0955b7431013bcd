"""Where a call ran: device, planner environment and provenance.

The same inputs give different metadata on another GPU or with other env
flags (aiter reads the arch, CU count and its env switches at call time), so
every Call carries them.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib.metadata
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import torch

from mla_golden.planner_id import planner_of, stamp
from mla_golden.schema import schema_for

#: Backends that plan for the reference's device context rather than a GPU.
SIMULATED = ("reference", "aiter-src")


def backend_of(fn: Callable[..., Any]) -> str:
    """'aiter', 'reference', 'aiter-src', or the defining module of a stand-in planner."""
    module = getattr(fn, "__module__", None) or "unknown"
    if module == "aiter" or module.startswith("aiter."):
        return "aiter"
    if module.startswith("mla_golden.reference"):
        return "reference"
    if module.startswith("mla_golden.aiter_build"):
        return "aiter-src"
    return module


def env_snapshot(op: str) -> dict[str, str | None]:
    """The planner's environment variables now (None = unset)."""
    return {name: os.environ.get(name) for name in schema_for(op).env_vars}


def device_snapshot(fn: Callable[..., Any], tensors: Iterable[torch.Tensor]) -> dict[str, Any]:
    """The GPU the call planned for.

    The reference plans for its device context; a planner running on a GPU
    tensor plans for that GPU; anything else (a CPU stand-in) is taken to plan
    for the reference's current device.
    """
    if backend_of(fn) not in SIMULATED:
        for tensor in tensors:
            if tensor.device.type == "cuda":
                return gpu_device(tensor.device)
    from mla_golden.reference import current_device

    dev = current_device()
    return {"arch": dev.arch, "cu_num": dev.cu_num, "warp_size": dev.warp_size, "lds_bytes": dev.lds_bytes}


def plan_for(device: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """The reference's device context for a recorded device dict (the inverse of :func:`device_snapshot`).

    Missing keys take the reference's defaults: arch gfx942, the arch's full
    CU count and LDS size, warp size 64.
    """
    from mla_golden.reference import DEFAULT_DEVICE
    from mla_golden.reference import device as reference_device

    return reference_device(
        device.get("arch", DEFAULT_DEVICE.arch),
        device.get("cu_num"),
        warp_size=device.get("warp_size", DEFAULT_DEVICE.warp_size),
        lds_bytes=device.get("lds_bytes"),
    )


#: os.environ is process-wide: planner_env blocks of concurrent replays (threads) take turns.
_ENV_LOCK = threading.RLock()


@contextlib.contextmanager
def planner_env(env: Mapping[str, str | None]) -> Iterator[None]:
    """Set the planner's env vars (None = unset) for the block, then restore them.

    os.environ is process-wide: concurrent replays in threads serialise here.
    """
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in env}
        try:
            _set_env(env)
            yield
        finally:
            _set_env(saved)


def _set_env(env: Mapping[str, str | None]) -> None:
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class Recorded(Protocol):
    """What :func:`as_recorded` reads of a call: a :class:`~mla_golden.call.Call`, or a record of one."""

    @property
    def env(self) -> Mapping[str, str | None]: ...

    @property
    def device(self) -> Mapping[str, Any]: ...


@contextlib.contextmanager
def as_recorded(
    call: Recorded, plan: Callable[[Mapping[str, Any]], contextlib.AbstractContextManager[Any]] = plan_for
) -> Iterator[None]:
    """Plan as ``call`` was planned: its env set and, for the block, ``plan(call.device)``.

    ``plan`` is how the planner at hand is told its device: the reference's device context by default; a
    backend that plans for the GPU it runs on passes one that sets nothing.
    """
    with planner_env(call.env), plan(call.device):
        yield


def gpu_device(device: torch.device) -> dict[str, Any]:
    """The device dict (arch, cu_num, name, warp_size, lds_bytes) of the GPU ``device`` names."""
    props = torch.cuda.get_device_properties(device)
    # ROCm's torch names the target in gcnArchName ('gfx942:sramecc+:xnack-'); CUDA builds may carry the
    # attribute with the product name, so only a HIP build's value is an arch.
    gcn = (getattr(props, "gcnArchName", "") or "") if torch.version.hip else ""
    arch = gcn.split(":")[0] if gcn else f"sm_{props.major}{props.minor}"
    info: dict[str, Any] = {"arch": arch, "cu_num": props.multi_processor_count, "name": props.name}
    for key, attr in (("warp_size", "warp_size"), ("lds_bytes", "shared_memory_per_multiprocessor")):
        value = getattr(props, attr, None)
        if value is not None:
            info[key] = int(value)
    return info


def aiter_version() -> dict[str, str | None]:
    """Version (and commit, where the build says) of the aiter loaded, if any."""
    module = sys.modules.get("aiter")
    if module is None:
        return {"version": None, "commit": None}
    version = getattr(module, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version("amd-aiter")
        except importlib.metadata.PackageNotFoundError:
            version = None
    commit = getattr(module, "__commit__", None) or getattr(module, "__git_commit__", None)
    return {"version": version, "commit": commit}


def provenance(fn: Callable[..., Any], signature: list[str]) -> dict[str, Any]:
    """Who produced a call: backend, versions, time, the signature it went through."""
    backend = backend_of(fn)
    info: dict[str, Any] = {
        "backend": backend,
        "function": f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}",
        "torch": torch.__version__,
        "mla_golden": _own_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "signature": signature,
    }
    if backend == "aiter":
        info["aiter"] = aiter_version()
    stamp(info, planner_of(fn, backend, info.get("aiter")))
    return info


@functools.cache
def _own_version() -> str:
    """The installed mla-golden's version, read once: a metadata lookup costs more than a small planner call."""
    try:
        return importlib.metadata.version("mla-golden")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
