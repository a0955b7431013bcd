"""One aiter tree's own planners as a module, shaped like ``reference.at(VERSION)``.

The planners and sizing helpers have the tree's Python signatures: they run
the tree's own wrapper and sizing code (:mod:`.python_layer`, in a process of
its own: :mod:`.python_process`) for the reference's current device, and the
C++ call the wrapper binds runs in the tree's built harness (:mod:`.harness`). What the harness found becomes what
the reference returns: aiter's values where its five runs agree,
:class:`UndefinedResultError` (or, inside ``allow_undefined()``, placeholders)
where they depend on memory aiter never wrote, :class:`AiterCheckError` for a
failed check, :class:`BufferTooSmallError` for a write past a buffer's end.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mla_golden.aiter_build import build, harness, tree
from mla_golden.aiter_build.encode import OUTPUT_NAMES, case_text
from mla_golden.aiter_build.harness import CaseFound
from mla_golden.aiter_build.python_layer import SIZING
from mla_golden.aiter_build.python_process import PythonProcess
from mla_golden.errors import AiterCheckError, AiterSourceError, BufferTooSmallError, UndefinedResultError
from mla_golden.planner_id import AITER_SRC, RecordedPlanner
from mla_golden.reference import Device, _undefined, current_device
from mla_golden.reference.mla_v1_dispatch import MlaVersion
from mla_golden.reference.versioned import SIMULATION
from mla_golden.schema import ATTENTION_PY, CPP_DIR, CPP_FILE, ENV_VARS

POINTERS = "work_metadata_ptrs"
#: Where a build keeps the tree's sources (``__FILE__`` of a failed check points there).
BUILT_SOURCES = "/src/csrc/"


class AiterSource(types.ModuleType):
    """The planners of one aiter tree, usable wherever the ``aiter`` module is.

    ``tree`` says where its sources are, ``planner_identity`` how goldens
    recorded on it name it (the commit, else a digest of the planner sources).
    """

    tree: tree.Tree
    planner_identity: RecordedPlanner
    #: the built harness its calls run in
    harness_binary: Path
    #: the process the tree's Python runs in
    python_process: PythonProcess

    def __repr__(self) -> str:
        return f"<mla_golden aiter-src {self.planner_identity.label} ({self.tree.spec})>"


class _Planners:
    """The state behind one module: the tree's Python layer (in its own process) and its harness."""

    def __init__(self, source: tree.Tree, built: build.Harness) -> None:
        self.py = PythonProcess(source.py_root, source.csrc_root)
        #: what the tree's Python defines (loading it starts its process: a tree that does not load stops here)
        self.loaded = self.py.load_tree()
        self.built = built
        #: every environment variable ever sent: later cases unset those no longer set
        self.env_names: set[str] = set(ENV_VARS)

    def device(self) -> Device:
        return current_device()

    def env(self) -> dict[str, str | None]:
        self.env_names.update(name for name in os.environ if name.startswith("AITER_"))
        return {name: os.environ.get(name) for name in sorted(self.env_names)}

    def plan(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        spec = self.device()
        result, bound = self.py.call(op, spec, args, kwargs, self._outputs(op, args, kwargs))
        if bound is None:
            raise AiterSourceError(f"{op} of the aiter tree never reached its compiled binding")
        text = case_text(op, spec, self.env(), self.built.signatures[op], bound)
        found = harness.process_for(self.built.binary).run(text)
        _apply(op, found, dict(bound))
        return result

    def size(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.py.call(SIZING[op], self.device(), args, kwargs)[0]

    def _outputs(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> frozenset[int]:
        """Ids of the output buffers among the arguments (they travel as their layout only)."""
        try:
            named = self.loaded.signatures[op].bind(*args, **kwargs).arguments
        except TypeError:  # the tree's function says how the call does not fit
            return frozenset()
        return frozenset(id(value) for name, value in named.items() if name in OUTPUT_NAMES and isinstance(value, torch.Tensor))


def _apply(op: str, found: CaseFound, arguments: dict[str, Any]) -> None:
    """Write what the harness found into the caller's buffers, or raise as the reference does."""
    if found.error is not None:
        _kind, file, line, message = found.error
        at = file.rfind(BUILT_SOURCES)  # the build compiled <build>/src/csrc/...: name the tree's own path
        raise AiterCheckError(message, f"{file[at + len('/src/') :] if at >= 0 else file}:{line}")
    for name, buf in found.buffers.items():  # in argument order: the first buffer aiter overruns
        if buf.tail:
            numel = len(buf.values)
            raise BufferTooSmallError(name, numel, numel + max(buf.tail) + 1)
    planned = {name: buf for name, buf in found.buffers.items() if name != POINTERS}
    whole = [name for name, buf in planned.items() if buf.from_lds.any() or buf.unsettled.any()]
    past = {name: buf.past_end for name, buf in planned.items() if buf.past_end.any()}
    allowed = _undefined.undefined_allowed()
    if whole and not allowed:
        raise UndefinedResultError(
            f"{op}: aiter's plan for these inputs is undefined: {', '.join(whole)} depend on LDS contents read "
            "before being written, or which elements aiter stores to depends on memory past an input's end. "
            "Inside allow_undefined() only work_metadata_ptrs is written"
        )
    if past and not whole and not allowed:
        where = "; ".join(f"{int(mask.sum())} elements of {name} (first at {int(np.argmax(mask))})" for name, mask in past.items())
        raise UndefinedResultError(
            f"{op}: aiter reads an input past its end, so these outputs are undefined: {where}. Inside "
            "allow_undefined() the defined elements are returned and a placeholder in these"
        )
    if POINTERS in found.buffers:
        _store_pointers(found, arguments)
    if whole:
        return
    for name, buf in planned.items():
        target = arguments.get(name)
        if not isinstance(target, torch.Tensor):
            continue
        written = buf.stored & ~buf.past_end
        values = torch.from_numpy(buf.values.view(np.int32).copy())
        _store(target, torch.from_numpy(written), values, torch.from_numpy(buf.past_end))


def _store(target: torch.Tensor, written: torch.Tensor, values: torch.Tensor, undefined: torch.Tensor) -> None:
    flat = target.view(-1) if target.is_contiguous() else target.reshape(-1).clone()
    values = values.to(flat.device, flat.dtype)
    flat[written.to(flat.device)] = values[written]
    if undefined.any():
        flat[undefined.to(flat.device)] = _undefined.UNDEFINED_PLACEHOLDER
    if not target.is_contiguous():
        target.copy_(flat.view(target.shape))


def _store_pointers(found: CaseFound, arguments: dict[str, Any]) -> None:
    """The pointers aiter stores, to the caller's tensors instead of the harness's copies."""
    target = arguments.get(POINTERS)
    buf = found.buffers[POINTERS]
    if not isinstance(target, torch.Tensor):
        return
    by_address = {address: name for name, address in found.addresses.items()}
    flat = target.view(-1)
    for index in np.flatnonzero(buf.stored):
        value = int(buf.values[index])
        name = by_address.get(value)
        tensor = arguments.get(name) if name is not None else None
        if isinstance(tensor, torch.Tensor):
            value = tensor.data_ptr()
        flat[int(index) : int(index) + 1].copy_(torch.tensor([value], dtype=torch.uint64))


def _function(planners: _Planners, name: str, kind: str, op: str, identity: RecordedPlanner) -> Callable[..., Any]:
    """A module-level function with the tree's signature for ``name``."""
    run = planners.plan if kind == "plan" else planners.size

    def call(*args: Any, **kwargs: Any) -> Any:
        return run(op, args, kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = "mla_golden.aiter_build"
    call.__doc__ = f"aiter's {name} of {identity.label}, run on the host build of its own sources."
    call.__signature__ = planners.loaded.signatures[name]  # type: ignore[attr-defined]
    call.planner_identity = identity  # type: ignore[attr-defined]
    return call


def source_digest(source: tree.Tree) -> str:
    """sha256 (16 hex) of the planner sources: names a tree that has no known commit."""
    h = hashlib.sha256()
    files = [source.csrc_root / CPP_FILE, *sorted((source.csrc_root / CPP_DIR).glob("*.cuh"))]
    for path in files:
        build.hash_file(h, str(path.relative_to(source.csrc_root)), tree.read_bytes(path))
    build.hash_file(h, ATTENTION_PY, tree.read_bytes(source.py_root / ATTENTION_PY))
    return h.hexdigest()[:16]


def load_source(source: tree.Tree) -> AiterSource:
    """Build (or reuse) ``source``'s harness and make its module."""
    built = build.build(source.csrc_root, tree.cache_root() / "builds")
    identity = RecordedPlanner(AITER_SRC, None if source.commit else f"src-{source_digest(source)}", source.commit)
    module = AiterSource(f"mla_golden.aiter_src[{identity.label}]", __doc__)
    module.tree = source
    module.planner_identity = identity
    module.harness_binary = built.binary
    for attr, value in SIMULATION.items():
        setattr(module, attr, value)
    planners = _Planners(source, built)
    module.python_process = planners.py
    for op, sizer in SIZING.items():
        if op in built.signatures and op in planners.loaded.functions:
            setattr(module, op, _function(planners, op, "plan", op, identity))
        if sizer in planners.loaded.functions:
            setattr(module, sizer, _function(planners, sizer, "size", op, identity))
    if "mla_version" in inspect.signature(getattr(module, "get_mla_metadata_v1", lambda: None)).parameters:
        module.MlaVersion = MlaVersion  # type: ignore[attr-defined]
    return module
