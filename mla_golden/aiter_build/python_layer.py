"""The tree's own Python layer of the two planner ops, read from aiter/ops/attention.py.

The sizing helpers (``get_mla_metadata_info_v1``, ``get_ps_metadata_info_v1``) and
the op wrappers are extracted with ``ast`` and executed against small stand-ins for
the device queries (``get_gfx``, CU count, ``torch.cuda``) so buffers and the
arguments that reach C++ are exactly what that commit's Python computes. A
``compile_ops``-bound function becomes a recorder of its bound arguments: that is
the C++ call.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import inspect
import math
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mla_golden.aiter_build import tree
from mla_golden.errors import AiterSourceError
from mla_golden.reference import Device
from mla_golden.reference.dtypes import fp8_of
from mla_golden.reference.mla_v1_dispatch import MlaVersion
from mla_golden.schema import ATTENTION_PY, MLA_OP, OUTPUTS, PS_OP, SCHEMAS, to_dtype

ENUM_H = "csrc/include/aiter_enum.h"
DTYPES_PY = "aiter/utility/dtypes.py"
#: Each op's sizing helper, as the schema names it.
SIZING = {op: schema.sizer for op, schema in SCHEMAS.items()}
#: Each op's output buffers as aiter's Python names them, in its sizing helper's order (the schema's):
#: the prefill planner calls work_info_set ``work_info``.
OUTPUT_NAMES = {
    MLA_OP: OUTPUTS,
    PS_OP: tuple("work_info" if name == "work_info_set" else name for name in OUTPUTS),
}


AiterPyError = AiterSourceError  # the name tools/aiter_oracle knows

@dataclass
class Buf:
    """A tensor argument: an input's values, or an output buffer's shape and dtype."""

    name: str
    dtype: str  # torch dtype name, e.g. "torch.int32"
    shape: tuple[int, ...]
    values: list[int] | None = None


def torch_dtype(name: str | None) -> torch.dtype | None:
    """``"torch.bfloat16"`` -> ``torch.bfloat16``; None stays None (the schema's reading, as this layer's error)."""
    try:
        return to_dtype(name)
    except ValueError as exc:
        raise AiterPyError(str(exc)) from exc


def parse(source: str, path: Path) -> ast.Module:
    """``source`` (the file ``path``) parsed; AiterPyError naming the file and line when it does not parse."""
    try:
        return ast.parse(source, str(path))
    except SyntaxError as exc:
        raise AiterPyError(f"{path}, line {exc.lineno}: {exc.msg} (the tree's Python does not parse)") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; nesting too deep for the parser
        raise AiterPyError(f"{path}: the tree's Python does not parse ({type(exc).__name__}: {exc})") from None


def _module_level_functions(module: ast.Module) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in module.body if isinstance(node, ast.FunctionDef)}


def _is_compiled(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Name) and target.id == "compile_ops":
            return True
    return False


def _free_names(node: ast.FunctionDef) -> set[str]:
    bound = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            names.add(sub.id)
        elif isinstance(sub, ast.Name):
            bound.add(sub.id)
        elif isinstance(sub, ast.FunctionDef) and sub is not node:
            bound.add(sub.name)
            bound.update(a.arg for a in sub.args.args)
    return names - bound


class _CudaStandIn:
    """torch.cuda as the sizing helpers see it: one device with the record's CU count."""

    def __init__(self, device: Device) -> None:
        self._device = device

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, _device: Any) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            multi_processor_count=self._device.cu_num,
            gcnArchName=self._device.arch,
            warp_size=self._device.warp_size,
            max_shared_memory_per_multiprocessor=self._device.lds_bytes,
        )

    def is_available(self) -> bool:
        return True


class _TorchStandIn(types.ModuleType):
    def __init__(self, device: Device) -> None:
        super().__init__("torch")
        self.cuda = _CudaStandIn(device)

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _experimental_enabled() -> bool:
    # aiter.jit.core.is_experimental_enabled: unset/"0"/non-numeric = off
    try:
        return int(os.environ.get("AITER_ENABLE_EXPERIMENTAL", "0")) != 0
    except ValueError:
        return False


class AiterPython:
    """Sizing helpers and op wrappers of one checkout, evaluated for one device."""

    def __init__(self, checkout: Path, csrc_root: Path | None = None) -> None:
        path = checkout / ATTENTION_PY
        if not path.is_file():
            raise AiterPyError(f"{checkout}: no {ATTENTION_PY} (the planners' Python wrappers and sizing helpers)")
        self.source = tree.read_text(path)
        self.functions = _module_level_functions(parse(self.source, path))
        self.dtype_ids = _aiter_dtype_ids((csrc_root or checkout) / ENUM_H)
        self.fp8_by_arch = _fp8_by_arch(checkout / DTYPES_PY)
        self.checkout = checkout

    def namespace(self, device: Device, recorder: dict[str, Any]) -> dict[str, Any]:
        fp8 = fp8_of(device.arch, self.fp8_by_arch)
        dtypes = types.SimpleNamespace(
            fp8=fp8, bf16=torch.bfloat16, fp16=torch.float16, fp32=torch.float32, i32=torch.int32, u64=torch.uint64
        )

        def dtype_id(d: torch.dtype) -> int:
            key = {"float8_e4m3fn": "fp8", "float8_e4m3fnuz": "fp8", "bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
            name = key.get(str(d).removeprefix("torch."))
            if name is None or name not in self.dtype_ids:
                raise AssertionError(f"Unsupported dtype: {d}")
            return self.dtype_ids[name]

        ns: dict[str, Any] = {
            "torch": _TorchStandIn(device),
            "math": math,
            "dtypes": dtypes,
            "get_gfx": lambda: device.arch,
            "get_cu_num": lambda: device.cu_num,
            "is_experimental_enabled": _experimental_enabled,
            "MlaVersion": MlaVersion,
            "_aiter_dtype_id": dtype_id,
            "Optional": Any,
            "List": list,
            "Tuple": tuple,
        }
        ns["__recorder_sink__"] = recorder
        ns["__builtins__"] = self._builtins()
        return ns

    def _builtins(self) -> dict[str, Any]:
        """Builtins whose ``from aiter.x.y import z`` loads x/y.py from the checkout alone.

        A wrapper may import a small helper module inside its body (e.g. a PR's
        env parsing); loading just that file avoids aiter's package __init__.
        """
        import builtins

        real_import = builtins.__import__
        checkout = self.checkout

        def aiter_import(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
            if level == 0 and (name == "aiter" or name.startswith("aiter.")):
                if not fromlist:
                    raise AiterPyError(f"{ATTENTION_PY}: 'import {name}' needs the whole aiter package")
                key = f"_mla_golden_aiter_build_{abs(hash(str(checkout)))}.{name}"
                if key not in sys.modules:
                    path = checkout.joinpath(*name.split(".")).with_suffix(".py")
                    if not path.is_file():
                        raise AiterPyError(f"{ATTENTION_PY} imports {name}, which is not a single file in the checkout")
                    tree.read_bytes(path)  # refused when it is too big to be a helper
                    spec = importlib.util.spec_from_file_location(key, path)
                    assert spec is not None and spec.loader is not None
                    module = importlib.util.module_from_spec(spec)
                    sys.modules[key] = module
                    spec.loader.exec_module(module)
                return sys.modules[key]
            return real_import(name, globals_, locals_, fromlist, level)

        table = dict(vars(builtins))
        table["__import__"] = aiter_import
        return table

    def load_function(self, name: str, ns: dict[str, Any]) -> Callable[..., Any]:
        """Define module function ``name`` (and the module functions it calls) in ``ns``."""
        node = self.functions.get(name)
        if node is None:
            raise AiterPyError(f"{ATTENTION_PY} has no function {name}")
        if name not in ns:
            self._define(name, node, ns)
        fn: Callable[..., Any] = ns[name]  # what exec (or _recorder) put there
        return fn

    def _define(self, name: str, node: ast.FunctionDef, ns: dict[str, Any]) -> None:
        """Put ``name`` in ``ns``: a recorder for a compiled op, else the function's own code, untyped."""
        if _is_compiled(node):
            ns[name] = _recorder(name, node, ns["__recorder_sink__"])
            return
        node = copy.deepcopy(node)
        for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
            arg.annotation = None
        node.decorator_list = []
        node.returns = None
        module = ast.Module(body=[node], type_ignores=[])
        ast.fix_missing_locations(module)
        exec(compile(module, f"{ATTENTION_PY}:{name}", "exec"), ns)
        for free in sorted(_free_names(node)):
            if free not in ns and free in self.functions:
                self.load_function(free, ns)


def _recorder(name: str, node: ast.FunctionDef, sink: dict[str, Any]) -> Callable[..., Any]:
    """A stand-in for a compile_ops binding: records the bound arguments (the C++ call)."""
    node = copy.deepcopy(node)
    for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
        arg.annotation = None
    stub_src = ast.unparse(
        ast.FunctionDef(
            name=name,
            args=node.args,
            body=[ast.Pass()],
            decorator_list=[],
            returns=None,
            type_comment=None,
            lineno=1,
            col_offset=0,
        )
    )
    ns: dict[str, Any] = {"MlaVersion": MlaVersion, "torch": torch, "Optional": Any}
    exec(compile(ast.parse(stub_src), name, "exec"), ns)
    signature = inspect.signature(ns[name])

    def record(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        sink["binding"] = name
        sink["args"] = list(bound.arguments.items())

    record.__signature__ = signature  # type: ignore[attr-defined]
    return record


def _fp8_by_arch(dtypes_py: Path) -> dict[str, torch.dtype]:
    """The tree's own fp8 per arch: its ``defaultDtypes`` literal, read with ``ast`` (the list grew across
    versions: gfx942 and gfx950 only at v0.1.10, gfx12xx from v0.1.16, gfx11xx later). Where the tree has no such
    literal, the newest port's table (:data:`mla_golden.reference.dtypes.FP8_BY_ARCH`)."""
    from mla_golden.reference.dtypes import FP8_BY_ARCH

    if not dtypes_py.is_file():
        return dict(FP8_BY_ARCH)
    try:
        module = ast.parse(tree.read_text(dtypes_py), str(dtypes_py))
    except SyntaxError:
        return dict(FP8_BY_ARCH)
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "defaultDtypes" for t in node.targets):
            if not isinstance(node.value, ast.Dict):
                break
            found: dict[str, torch.dtype] = {}
            for key, value in zip(node.value.keys, node.value.values):
                fp8 = _fp8_entry(value)
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and fp8 is not None:
                    found[key.value] = fp8
            return found
    return dict(FP8_BY_ARCH)


def _fp8_entry(value: ast.expr) -> torch.dtype | None:
    """``{"fp8": torch.float8_e4m3fn}`` -> torch.float8_e4m3fn; anything else -> None."""
    if not isinstance(value, ast.Dict):
        return None
    for key, dtype in zip(value.keys, value.values):
        if isinstance(key, ast.Constant) and key.value == "fp8" and isinstance(dtype, ast.Attribute):
            found = getattr(torch, dtype.attr, None)
            return found if isinstance(found, torch.dtype) else None
    return None


def _aiter_dtype_ids(enum_h: Path) -> dict[str, int]:
    """AiterDtype enumerator values (AITER_DTYPE_fp8 = 0, ...) from the checkout's header."""
    if not enum_h.is_file():
        return {}
    text = tree.read_text(enum_h)
    start = text.find("AITER_DTYPE_fp8")
    if start < 0:
        return {}
    block = text[start : text.find("}", start)]
    ids = {}
    for i, item in enumerate(x.strip() for x in block.split(",")):
        if item.startswith("AITER_DTYPE_"):
            ids[item.removeprefix("AITER_DTYPE_").split("=")[0].strip()] = i
    return ids
