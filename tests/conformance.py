"""Load ../shared/conformance records (aiter's own planner outputs) as tensors.

Format: ../shared/conformance/README.md. Shared by every test that checks the
reference planners, the differ or the checks against real aiter data.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import torch

from mla_golden.call import Call
from mla_golden.schema import canonical_params, implied_input, schema_for

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE_DIR = Path(
    os.environ.get("MLA_GOLDEN_CONFORMANCE", ROOT.parent / "shared" / "conformance")
)


#: Fill of every output buffer before a planner call: an element still holding it was not written.
CANARY = 0x5A5A5A5A
#: get_mla_metadata_v1's buffers in aiter's C++ argument order (the order an overflowing buffer is reported in).
MLA_BUFFER_NAMES = (
    "work_metadata_ptrs",
    "work_info_set",
    "work_indptr",
    "reduce_indptr",
    "reduce_final_map",
    "reduce_partial_map",
)
#: get_ps_metadata_v1's buffers, in argument order (= get_ps_metadata_info_v1's return order).
PS_BUFFER_NAMES = (
    "work_metadata_ptrs",
    "work_indptr",
    "work_info",
    "reduce_indptr",
    "reduce_final_map",
    "reduce_partial_map",
)


def canary_buffers(names: tuple[str, ...], sizes: list) -> dict[str, torch.Tensor]:
    """Buffers as a ``get_*_info_v1`` helper sizes them (``sizes``: (shape, dtype) in ``names`` order), canary-filled."""
    return {
        name: torch.full(shape if isinstance(shape, tuple) else (shape,), CANARY, dtype=dtype)
        for name, (shape, dtype) in zip(names, sizes, strict=True)
    }


def torch_dtype(name: str | None) -> torch.dtype | None:
    """'torch.float8_e4m3fn' -> torch.float8_e4m3fn; None stays None."""
    if name is None:
        return None
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown torch dtype name {name!r}")
    return dtype


def runs_mask(runs: list[list[int]], numel: int) -> torch.Tensor:
    """Flat bool mask from half-open [start, end) runs."""
    mask = torch.zeros(numel, dtype=torch.bool)
    for start, end in runs:
        mask[start:end] = True
    return mask


@dataclass
class Expected:
    """One output buffer as aiter left it, flat."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    values: torch.Tensor  # flat int64, 0 where not written
    written: torch.Tensor  # flat bool
    indeterminate: torch.Tensor  # flat bool
    skipped: bool  # raw pointers, values not recorded
    beyond_end: list[list[int]]


def expected_outputs(outputs: dict, names: tuple[str, ...] | None = None) -> dict[str, Expected]:
    """Decode a record's ``outputs`` object (or ``old.outputs``)."""
    result: dict[str, Expected] = {}
    for name, out in outputs.items():
        shape = tuple(out["shape"])
        numel = 1
        for dim in shape:
            numel *= dim
        values = torch.zeros(numel, dtype=torch.int64)
        vals = out.get("values", [])
        if vals:
            values[: len(vals)] = torch.tensor(vals, dtype=torch.int64)
        result[name] = Expected(
            shape=shape,
            dtype=torch_dtype(out["dtype"]),
            values=values,
            written=runs_mask(out.get("written", []), numel),
            indeterminate=runs_mask(out.get("indeterminate", []), numel),
            skipped=bool(out.get("skipped", False)),
            beyond_end=out.get("written_beyond_end", []),
        )
    return result


@cache
def _load(filename: str) -> tuple[dict, ...]:
    path = CONFORMANCE_DIR / filename
    with path.open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def conformance_files(prefix: str) -> list[str]:
    """File names in the conformance folder starting with ``prefix``."""
    if not CONFORMANCE_DIR.is_dir():
        return []
    return sorted(p.name for p in CONFORMANCE_DIR.glob(f"{prefix}*.jsonl"))


def records(prefix: str) -> Iterator[dict]:
    """Every record of every file starting with ``prefix`` (e.g. 'mla_v1-')."""
    for filename in conformance_files(prefix):
        yield from _load(filename)


def record_params(prefix: str) -> list:
    """pytest params, one per record, id = case_id; a skip marker when absent."""
    recs = list(records(prefix))
    if not recs:
        return [
            pytest.param(
                None,
                marks=pytest.mark.skip(reason=f"no {prefix}*.jsonl under {CONFORMANCE_DIR}"),
            )
        ]
    return [pytest.param(rec, id=rec["case_id"]) for rec in recs]


def input_tensors(call: dict) -> dict[str, torch.Tensor]:
    """The record's positional list arguments as int32 CPU tensors."""
    return {
        name: torch.tensor(value, dtype=torch.int32)
        for name, value in call["args"].items()
        if isinstance(value, list)
    }


def alloc_buffers(buffers: dict, fill: int) -> dict[str, torch.Tensor]:
    """Output buffers shaped as the record says, every element set to ``fill``."""
    out = {}
    for name, spec in buffers.items():
        if not isinstance(spec, dict) or "shape" not in spec:
            continue
        out[name] = torch.full(tuple(spec["shape"]), fill, dtype=torch_dtype(spec["dtype"]))
    return out


def record_call(record: dict, side: str = "new") -> Call:
    """A record as an :class:`mla_golden.Call` (``side="old"``: a cross_version record's old commit).

    Parameters get canonical names (legacy ``dtype_q`` / ``dtype_kv`` fill the
    nope/rope dtypes they leave unset; a parameter the call lacks takes the
    schema default). ``indeterminate`` elements count as not written.
    Pointers are not recorded, so the ``ptrs_ok`` fact is unknown (None). The new
    side of a cross_version record is the per-version record with its case_id.
    """
    schema = schema_for(record["op"])
    source = record if side == "new" else record["old"]
    call = record.get("call_old", record["call"]) if side == "old" else record["call"]
    params, _ = canonical_params(record["op"], {**call["args"], **call["kwargs"]})
    inputs = input_tensors(call)
    for name in schema.inputs:
        if name not in inputs:  # an older signature
            inputs[name] = implied_input(schema, name, inputs)
    outputs, written = {}, {}
    if source["result"] == "ok":
        for name, out in expected_outputs(source["outputs"]).items():
            canonical = schema.canonical(name)
            mask = out.written & ~out.indeterminate
            outputs[canonical] = torch.where(mask, out.values, 0).to(out.dtype).reshape(out.shape)
            written[canonical] = mask.reshape(out.shape)
    buffers = {
        schema.canonical(name): {"shape": spec["shape"], "dtype": spec["dtype"]}
        for name, spec in source["buffers"].items()
        if isinstance(spec, dict) and "shape" in spec
    }
    commit = record.get("old_commit") if side == "old" else record.get("aiter_commit") or record.get("new_commit")
    return Call(
        op=record["op"],
        params=params,
        inputs=inputs,
        outputs=outputs,
        written=written,
        buffers=buffers,
        device=dict(record["device"]),
        env=dict(record["env"]),
        provenance={
            "backend": "aiter",
            "aiter": {"commit": commit},
            "capture": {"ptrs_ok": None, "deterministic": True},
        },
        error=None if source["result"] == "ok" else source["error"]["message"],
    )
