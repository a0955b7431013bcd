"""Self-consistent forged goldens: edited content written back through the store, so the digest is valid."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from mla_golden.golden.store import Golden, GoldenStore, load


def _grown(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    grown = torch.zeros(shape, dtype=tensor.dtype)
    grown[: tensor.shape[0]] = tensor
    return grown


def forge(source: Path, out: Path, *, params: dict[str, Any] | None = None, buffers: dict[str, list[int]] | None = None) -> Path:
    """``source``'s golden with ``params`` changed and ``buffers`` declared with other shapes, written under ``out``."""
    golden = load(source)
    call = golden.call
    declared = {name: dict(spec) for name, spec in call.buffers.items()}
    outputs, written = dict(call.outputs), dict(call.written)
    for name, shape in (buffers or {}).items():
        declared[name]["shape"] = shape
        if name in outputs:  # grown along its first dimension, the new part never written
            outputs[name] = _grown(outputs[name], shape)
            written[name] = _grown(written[name], shape)
    call = dataclasses.replace(
        call, params={**call.params, **(params or {})}, buffers=declared, outputs=outputs, written=written
    )
    store = GoldenStore(out)
    store.write(Golden(golden.key, call), update=True)
    return store.path_for(golden.key)
