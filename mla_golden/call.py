"""Plain data for one captured planner call, and the list a spy collects."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from mla_golden.errors import CallNotFound as CallNotFound  # re-exported: importable from here too


@dataclass
class Call:
    """One planner call: what went in, what came out, and where it ran.

    Tensors are CPU copies. ``outputs`` hold the planner's values inside the
    written region and 0 elsewhere (the rest of a buffer is whatever the
    caller's allocator left there, so it is not kept).
    """

    op: str
    #: Scalar arguments by canonical name; dtypes as "torch.bfloat16" or None.
    params: dict[str, Any]
    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    #: Bool masks: elements the planner wrote.
    written: dict[str, torch.Tensor] = field(default_factory=dict)
    #: Every output buffer as the caller allocated it: {"shape": [...], "dtype": "torch.int32"}.
    buffers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: arch, cu_num, warp_size, lds_bytes of the GPU planned for.
    device: dict[str, Any] = field(default_factory=dict)
    #: Planner environment variables (value or None when unset).
    env: dict[str, str | None] = field(default_factory=dict)
    #: backend, aiter version, torch version, created (UTC), signature, capture facts.
    provenance: dict[str, Any] = field(default_factory=dict)
    #: The message of the exception the planner raised, if it raised.
    error: str | None = None
    #: Strides of inputs the program passed non-contiguous (values are kept contiguous), so a replay passes them alike.
    strides: dict[str, list[int]] = field(default_factory=dict)

    @property
    def facts(self) -> dict[str, Any]:
        """Capture facts: ``deterministic`` and ``ptrs_ok`` (pointers aimed at the caller's buffers)."""
        facts: dict[str, Any] = self.provenance.get("capture", {})
        return facts


class Calls:
    """The calls a spy captured, in call order; safe to append from many threads."""

    def __init__(self) -> None:
        self._items: list[Call] = []
        self._lock = threading.Lock()
        #: Calls passed to the planner untouched but not recorded, each with the reason.
        self.missed: list[str] = []

    def append(self, call: Call) -> None:
        with self._lock:
            self._items.append(call)

    def all(self, op: str | None = None) -> list[Call]:
        """Every call, or every call of ``op``."""
        with self._lock:
            return [c for c in self._items if op is None or c.op == op]

    def one(self, op: str | None = None) -> Call:
        """The single call (of ``op``); CallNotFound when there are none or several, or when a call was missed."""
        found = self.all(op)
        missed = f"; {len(self.missed)} call(s) made but not recorded: {'; '.join(self.missed)}" if self.missed else ""
        if len(found) != 1 or missed:
            what = f"calls of {op}" if op else "calls"
            seen = ", ".join(c.op for c in self.all()) or "none"
            raise CallNotFound(f"expected exactly one of the {what}, captured {len(found)} (all captured: {seen}){missed}")
        return found[0]

    def __iter__(self) -> Iterator[Call]:
        return iter(self.all())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __getitem__(self, index: int) -> Call:
        with self._lock:
            return self._items[index]
