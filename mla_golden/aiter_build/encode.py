"""The C++ call the tree's Python layer bound, as the harness's case text.

Format: emu/harness_runtime.hpp (``DEVICE``, ``ENV``, ``OP``, one ``PARAM`` per
C++ parameter, ``END``). A tensor argument is an input (its values are sent)
unless it is one of the op's output buffers (only its shape is sent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from mla_golden.aiter_build.build import CppParam
from mla_golden.aiter_build.python_layer import OUTPUT_NAMES as PYTHON_OUTPUT_NAMES
from mla_golden.aiter_build.python_layer import AiterPyError, Buf
from mla_golden.reference import Device

#: Output buffers under every name aiter has given them (the prefill planner's ``work_info`` too).
OUTPUT_NAMES = frozenset(name for names in PYTHON_OUTPUT_NAMES.values() for name in names)
#: torch dtype name -> at::ScalarType name the harness knows.
SCALAR_TYPE_NAMES = {
    "bfloat16": "BFloat16",
    "float16": "Half",
    "float32": "Float",
    "float8_e4m3fn": "Float8_e4m3fn",
    "float8_e4m3fnuz": "Float8_e4m3fnuz",
    "int32": "Int",
}


def case_text(
    op: str,
    device: Device,
    env: Mapping[str, str | None],
    params: Sequence[CppParam],
    bound: Sequence[tuple[str, Any]],
) -> str:
    """The harness input for one call of ``op`` with the arguments the Python binding ``bound``."""
    if len(params) != len(bound):
        raise AiterPyError(f"{op}: the Python binding passes {len(bound)} arguments, the C++ entry point takes {len(params)}")
    for name, value in env.items():
        if value is not None and (not value or any(ch.isspace() for ch in value)):
            raise AiterPyError(f"environment variable {name}={value!r}: the harness passes only values without spaces")
    lines = [
        f"DEVICE {device.arch} {device.cu_num} {device.warp_size} {device.lds_bytes}",
        f"ENV {len(env)} " + " ".join(f"{k} {'-' if v is None else v}" for k, v in env.items()),
        f"OP {op}",
    ]
    for i, (param, (name, value)) in enumerate(zip(params, bound)):
        lines.append(f"PARAM {i} " + encode(param, name, value))
    lines.append("END")
    return "\n".join(lines) + "\n"


def encode(param: CppParam, name: str, value: Any) -> str:
    """One ``PARAM`` line's body."""
    if param.kind == "tensor":
        return _tensor(param, name, value)
    if param.kind in ("int", "bool", "enum"):
        return f"int {int(value)}"
    if param.kind == "opt_int":
        return "optint " + ("-" if value is None else str(int(value)))
    if param.kind in ("opt_scalar_type", "scalar_type"):
        if value is None:
            return "optst -"
        key = str(value).removeprefix("torch.")
        if key not in SCALAR_TYPE_NAMES:
            raise AiterPyError(f"{name}: dtype {value} has no at::ScalarType in the harness")
        return "optst " + SCALAR_TYPE_NAMES[key]
    raise AiterPyError(f"unsupported C++ parameter kind {param.kind}")


def _tensor(param: CppParam, name: str, value: Any) -> str:
    if isinstance(value, Buf):
        dtype, shape, values = value.dtype, value.shape, value.values
    elif isinstance(value, torch.Tensor):
        dtype, shape = str(value.dtype), tuple(value.shape)
        values = None if name in OUTPUT_NAMES else value.detach().reshape(-1).cpu().tolist()
        if values is not None and (value.dtype != torch.int32 or not value.is_contiguous()):
            # aiter's own AITER_CHECKs on dtype and stride would see the harness's copy, not this tensor
            raise AiterPyError(
                f"{name}: the aiter-src harness passes contiguous int32 inputs only, got a "
                f"{'' if value.is_contiguous() else 'non-contiguous '}{value.dtype} tensor"
            )
    else:
        raise AiterPyError(f"C++ parameter {param.name} is a tensor, Python passes {name}={value!r}")
    code = "u64" if dtype == "torch.uint64" else "i32"
    dims = " ".join(str(d) for d in shape)
    if values is not None:
        data = " ".join(str(int(v)) for v in values)
        return f"tensor {name} {code} in {len(shape)} {dims} {len(values)} {data}"
    return f"tensor {name} {code} out {len(shape)} {dims}"
