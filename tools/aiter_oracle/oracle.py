"""Plan one case on the host build of an aiter checkout and describe the result as a record.

Format of cases and records: ../shared/conformance/README.md (the per-version
records). The build, the tree's Python layer and the harness are the package's
(mla_golden/aiter_build/); this turns what the harness found into a record.
The harness runs every case five times (see emu/harness_runtime.hpp): an
element is ``written`` when every run stored the same value to it, and
``indeterminate`` when it was stored to but its value changed with the bytes
after an input's end (runs 1, 3) or with the LDS contents (runs 2, 4).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np

from mla_golden.aiter_build.build import Harness
from mla_golden.aiter_build.encode import case_text
from mla_golden.aiter_build.harness import BufferFound, CaseFound, process_for
from mla_golden.aiter_build.python_layer import OUTPUT_NAMES, SIZING, AiterPyError, AiterPython, Buf, torch_dtype
from mla_golden.errors import AiterSourceError
from mla_golden.reference import Device

PRODUCER = "oracle-host-emulation"


class CaseError(ValueError):
    """A case line the oracle cannot run (names the case and what is wrong)."""


@contextmanager
def environment(env: dict[str, str | None]) -> Iterator[None]:
    """The case's environment for the Python layer (the harness sets it for C++ itself)."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _runs(mask: list[bool]) -> list[list[int]]:
    out: list[list[int]] = []
    start = None
    for i, m in enumerate(mask + [False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append([start, i])
            start = None
    return out


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= (1 << 31) else v


class Oracle:
    """One checkout: its Python layer and its compiled planners."""

    def __init__(self, checkout: Path, harness: Harness, commit: str, csrc_root: Path | None = None) -> None:
        self.checkout = checkout
        self.py = AiterPython(checkout, csrc_root)
        self.harness = harness
        self.commit = commit

    # ---------------------------------------------------------------- inputs -> C++ call
    def sizing_call(self, op: str, call: dict[str, Any]) -> dict[str, Any]:
        """The helper's keyword arguments for a caller that sizes buffers for ``call``."""
        args, kwargs = call["args"], call["kwargs"]
        if op == "get_mla_metadata_v1":
            q = kwargs.get("dtype_q") or kwargs.get("dtype_q_nope")
            kv = kwargs.get("dtype_kv") or kwargs.get("dtype_kv_nope")
            full = {
                "batch_size": len(args["seqlens_qo_indptr"]) - 1,
                "max_seqlen_qo": kwargs.get("max_seqlen_qo", -1),
                "num_head_qo": args["num_heads_per_head_k"] * args["num_heads_k"],
                "q_dtype": q,
                "kv_dtype": kv,
                "is_sparse": kwargs.get("topk", -1) >= 0,
                "fast_mode": kwargs.get("fast_mode", True),
                "max_split_per_batch": kwargs.get("max_split_per_batch", -1),
            }
        else:
            qo = args["seqlens_qo_indptr"]
            full = {
                "batch_size": len(qo) - 1,
                "num_head_k": args["num_heads_k"],
                "max_qlen": max((b - a for a, b in zip(qo, qo[1:])), default=0),
                "qlen_granularity": kwargs.get("qlen_granularity", 256),
            }
        node = self.py.functions.get(SIZING[op])
        if node is None:
            raise AiterPyError(f"aiter/ops/attention.py has no {SIZING[op]}")
        accepted = {a.arg for a in node.args.args + node.args.kwonlyargs}
        return {k: v for k, v in full.items() if k in accepted}

    def buffers(self, case: dict[str, Any], device: Device) -> dict[str, Any]:
        op = case["op"]
        given = case.get("buffers") or {}
        names = OUTPUT_NAMES[op]
        if all(isinstance(given.get(n), dict) and "shape" in given[n] for n in names):
            return given
        sizing = given.get("sizing_call") or self.sizing_call(op, case["call"])
        ns = self.py.namespace(device, {})
        helper = self.py.load_function(SIZING[op], ns)
        kwargs = {k: (torch_dtype(v) if k in ("q_dtype", "kv_dtype") else v) for k, v in sizing.items()}
        with environment(case["env"]):
            result = helper(**kwargs)
        out: dict[str, Any] = {"sized_by": f"aiter.{SIZING[op]}", "sizing_call": sizing}
        for name, (shape, dtype) in zip(names, result):
            shape = [shape] if isinstance(shape, int) else list(shape)
            out[name] = {"shape": shape, "dtype": str(dtype)}
        return out

    def binding(self, case: dict[str, Any], buffers: dict[str, Any], device: Device) -> list[tuple[str, Any]]:
        """The arguments, in order, that the checkout's Python hands to the C++ op."""
        op = case["op"]
        sink: dict[str, Any] = {}
        ns = self.py.namespace(device, sink)
        wrapper = self.py.load_function(op, ns)
        call = case["call"]
        args = {}
        for name, value in call["args"].items():
            args[name] = Buf(name, "torch.int32", (len(value),), list(value)) if isinstance(value, list) else value
        for name in OUTPUT_NAMES[op]:
            spec = buffers[name]
            args[name] = Buf(name, spec["dtype"], tuple(spec["shape"]))
        kwargs = {k: (torch_dtype(v) if k.startswith("dtype") and isinstance(v, str) else v) for k, v in call["kwargs"].items()}
        with environment(case["env"]):
            try:
                wrapper(**args, **kwargs)
            except TypeError as exc:
                raise CaseError(f"case {case['case_id']}: the call does not fit this commit's {op}: {exc}") from exc
        if "args" not in sink:
            raise AiterPyError(f"{op} never reached a compiled binding")
        return cast(list[tuple[str, Any]], sink["args"])

    def harness_input(self, case: dict[str, Any], device: Device, bound: list[tuple[str, Any]]) -> str:
        return case_text(case["op"], device, case["env"], self.harness.signatures[case["op"]], bound)

    # ---------------------------------------------------------------- run + record
    def record(self, case: dict[str, Any]) -> dict[str, Any]:
        for key in ("case_id", "op", "device", "env", "call"):
            if key not in case:
                raise CaseError(f"case {case.get('case_id', '?')}: missing key {key!r}")
        if case["op"] not in OUTPUT_NAMES:
            raise CaseError(f"case {case['case_id']}: unknown op {case['op']!r}")
        dev = case["device"]
        device = Device(dev["arch"], dev["cu_num"], dev.get("warp_size", 64), dev.get("lds_bytes", 65536))
        buffers = self.buffers(case, device)
        bound = self.binding(case, buffers, device)
        try:
            found = process_for(self.harness.binary).run(self.harness_input(case, device, bound))
        except AiterSourceError as exc:
            raise CaseError(f"case {case['case_id']}: {exc}") from exc
        rec: dict[str, Any] = {
            "case_id": case["case_id"],
            "op": case["op"],
            "aiter_commit": self.commit,
            "device": case["device"],
            "env": case["env"],
            "call": case["call"],
            "buffers": buffers,
        }
        if "tags" in case:
            rec["tags"] = case["tags"]
        if found.error is not None:
            kind, file, line, message = found.error
            at = file.find("csrc/")
            rec["result"] = "error"
            rec["error"] = {"message": message, "source": f"{file[at:] if at >= 0 else file}:{line}", "kind": kind}
        else:
            rec["result"] = "ok"
            self._outputs(rec, buffers, found)
        rec["producer"] = PRODUCER
        return rec

    def _outputs(self, rec: dict[str, Any], buffers: dict[str, Any], found: CaseFound) -> None:
        outputs: dict[str, Any] = {}
        anomalies: list[str] = []
        lds_dependent = False
        for name in OUTPUT_NAMES[rec["op"]]:
            spec = buffers[name]
            dtype = spec["dtype"]
            buf: BufferFound = found.buffers[name]
            stored, past_end, from_lds = buf.stored, buf.past_end, buf.from_lds
            indet = past_end | from_lds | buf.unsettled
            written = stored & ~indet
            out: dict[str, Any] = {"shape": spec["shape"], "dtype": dtype}
            if dtype == "torch.uint64":
                out["skipped"] = True
                out["written"] = _runs(stored.tolist())
                outputs[name] = out
                continue
            values = np.where(written, buf.values.view(np.int32), 0).tolist()
            while values and values[-1] == 0:
                values.pop()
            out["written"] = _runs(written.tolist())
            out["values"] = values
            if indet.any():
                out["indeterminate"] = _runs(indet.tolist())
            if past_end.any():
                anomalies.append(f"{name}: values depend on reads past the end of an input tensor")
            if from_lds.any():
                lds_dependent = True
                anomalies.append(f"{name}: values depend on LDS contents read before being written")
            if buf.tail:
                beyond = sorted(buf.tail)
                numel = len(buf.values)
                out["written_beyond_end"] = _runs_of_indices([numel + i for i in beyond])
                out["values_beyond_end"] = [_signed32(buf.tail[i] & 0xFFFFFFFF) for i in beyond]
                anomalies.append(f"{name}: write beyond buffer end")
            outputs[name] = out
        if lds_dependent:
            # Nothing the planner computed after reading undefined LDS is defined.
            for out in outputs.values():
                if out.get("skipped"):
                    continue
                mask = [False] * _numel(out["shape"])
                for a, b in out["written"] + out.get("indeterminate", []):
                    for i in range(a, b):
                        mask[i] = True
                out["written"], out["values"] = [], []
                if any(mask):
                    out["indeterminate"] = _runs(mask)
            rec["indeterminate_record"] = True
        rec["outputs"] = outputs
        if anomalies:
            rec["anomalies"] = anomalies


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _runs_of_indices(indices: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for i in indices:
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out
