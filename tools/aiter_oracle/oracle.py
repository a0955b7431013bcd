"""Plan one case on the host build of an aiter checkout and describe the result as a record.

Format of cases and records: ../shared/conformance/README.md (the per-version
records). The harness runs every case five times (see emu/harness_runtime.hpp): an
element is ``written`` when every run stored the same value to it, and
``indeterminate`` when it was stored to but its value changed with the bytes
after an input's end (runs 1, 3) or with the LDS contents (runs 2, 4).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiter_py import OUTPUT_NAMES, SIZING, AiterPyError, AiterPython, Buf, DeviceSpec, torch_dtype
from build import CppParam, Harness

PRODUCER = "oracle-host-emulation"
OUTPUT_CANARIES = (0x5A5A5A5A, 0x3C3C3C3C, 0x69696969, 0x1E1E1E1E, 0x4B4B4B4B)
TAIL_RUNS = (1, 3)  # runs that change only the bytes after each input's end
LDS_RUNS = (2, 4)  # runs that change only the LDS fill
RUNS = len(OUTPUT_CANARIES)
CASE_TIMEOUT_S = 120
SCALAR_TYPE_NAMES = {
    "bfloat16": "BFloat16",
    "float16": "Half",
    "float32": "Float",
    "float8_e4m3fn": "Float8_e4m3fn",
    "float8_e4m3fnuz": "Float8_e4m3fnuz",
    "int32": "Int",
}


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


@dataclass
class RunResult:
    error: tuple[str, str, int, str] | None = None  # kind, file, line, message
    values: dict[str, list[int]] = field(default_factory=dict)
    tails: dict[str, dict[int, int]] = field(default_factory=dict)


def _parse(stdout: str) -> list[RunResult]:
    runs: list[RunResult] = []
    lines = iter(stdout.splitlines())
    for line in lines:
        if line.startswith("RUN "):
            runs.append(RunResult())
        elif line.startswith("ERROR "):
            _, kind, file, lineno = line.split(" ", 3)
            runs[-1].error = (kind, file, int(lineno), next(lines))
        elif line.startswith("BUF "):
            parts = line.split()
            runs[-1].values[parts[1]] = [int(x) for x in parts[3:]]
        elif line.startswith("TAIL "):
            parts = line.split()
            nums = [int(x) for x in parts[3:]]
            runs[-1].tails[parts[1]] = dict(zip(nums[0::2], nums[1::2]))
    if len(runs) != RUNS:
        raise RuntimeError(f"harness printed {len(runs)} runs instead of {RUNS}")
    return runs


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= (1 << 31) else v


def _canary(run: int, dtype: str) -> int:
    word = OUTPUT_CANARIES[run]
    return word | (word << 32) if dtype == "torch.uint64" else word


class Oracle:
    """One checkout: its Python layer and its compiled planners."""

    def __init__(self, checkout: Path, harness: Harness, commit: str) -> None:
        self.checkout = checkout
        self.py = AiterPython(checkout)
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

    def buffers(self, case: dict[str, Any], device: DeviceSpec) -> dict[str, Any]:
        op = case["op"]
        given = case.get("buffers") or {}
        names = OUTPUT_NAMES[op]
        if all(isinstance(given.get(n), dict) and "shape" in given[n] for n in names):
            return given
        sizing = given.get("sizing_call") or self.sizing_call(op, case["call"])
        ns = self.py.namespace(device, {})
        helper = self.py.load(SIZING[op], ns)
        kwargs = {k: (torch_dtype(v) if k in ("q_dtype", "kv_dtype") else v) for k, v in sizing.items()}
        with environment(case["env"]):
            result = helper(**kwargs)
        out: dict[str, Any] = {"sized_by": f"aiter.{SIZING[op]}", "sizing_call": sizing}
        for name, (shape, dtype) in zip(names, result):
            shape = [shape] if isinstance(shape, int) else list(shape)
            out[name] = {"shape": shape, "dtype": str(dtype)}
        return out

    def binding(self, case: dict[str, Any], buffers: dict[str, Any], device: DeviceSpec) -> list[tuple[str, Any]]:
        """The arguments, in order, that the checkout's Python hands to the C++ op."""
        op = case["op"]
        sink: dict[str, Any] = {}
        ns = self.py.namespace(device, sink)
        wrapper = self.py.load(op, ns)
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
        return sink["args"]

    def harness_input(self, case: dict[str, Any], device: DeviceSpec, bound: list[tuple[str, Any]]) -> str:
        params: tuple[CppParam, ...] = self.harness.signatures[case["op"]]
        if len(params) != len(bound):
            raise AiterPyError(
                f"{case['op']}: the Python binding passes {len(bound)} arguments, the C++ entry point takes {len(params)}"
            )
        env = case["env"]
        lines = [
            f"DEVICE {device.arch} {device.cu_num} {device.warp_size} {device.lds_bytes}",
            f"ENV {len(env)} " + " ".join(f"{k} {'-' if v is None else v}" for k, v in env.items()),
            f"OP {case['op']}",
        ]
        for i, (param, (name, value)) in enumerate(zip(params, bound)):
            lines.append(f"PARAM {i} " + _encode(param, name, value))
        lines.append("END")
        return "\n".join(lines) + "\n"

    # ---------------------------------------------------------------- run + record
    def record(self, case: dict[str, Any]) -> dict[str, Any]:
        for key in ("case_id", "op", "device", "env", "call"):
            if key not in case:
                raise CaseError(f"case {case.get('case_id', '?')}: missing key {key!r}")
        if case["op"] not in OUTPUT_NAMES:
            raise CaseError(f"case {case['case_id']}: unknown op {case['op']!r}")
        dev = case["device"]
        device = DeviceSpec(dev["arch"], dev["cu_num"], dev.get("warp_size", 64), dev.get("lds_bytes", 65536))
        buffers = self.buffers(case, device)
        bound = self.binding(case, buffers, device)
        try:
            proc = subprocess.run(
                [str(self.harness.binary)],
                input=self.harness_input(case, device, bound),
                capture_output=True,
                text=True,
                timeout=CASE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise CaseError(f"case {case['case_id']}: the planner did not finish within {CASE_TIMEOUT_S} s") from exc
        if proc.returncode != 0:
            detail = (proc.stdout.split("EMUFAIL", 1)[-1] if "EMUFAIL" in proc.stdout else proc.stderr).strip()[-2000:]
            raise CaseError(f"case {case['case_id']}: the harness failed (exit {proc.returncode}): {detail}")
        runs = _parse(proc.stdout)
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
        if runs[0].error is not None:
            kind, file, line, message = runs[0].error
            at = file.find("csrc/")
            rec["result"] = "error"
            rec["error"] = {"message": message, "source": f"{file[at:] if at >= 0 else file}:{line}", "kind": kind}
        else:
            rec["result"] = "ok"
            self._outputs(rec, buffers, runs)
        rec["producer"] = PRODUCER
        return rec

    def _outputs(self, rec: dict[str, Any], buffers: dict[str, Any], runs: list[RunResult]) -> None:
        outputs: dict[str, Any] = {}
        anomalies: list[str] = []
        lds_dependent = False
        for name in OUTPUT_NAMES[rec["op"]]:
            spec = buffers[name]
            dtype = spec["dtype"]
            vals = [r.values[name] for r in runs]
            numel = len(vals[0])
            stored = [any(vals[r][i] != _canary(r, dtype) for r in range(RUNS)) for i in range(numel)]
            past_end = [stored[i] and any(vals[0][i] != vals[r][i] for r in TAIL_RUNS) for i in range(numel)]
            from_lds = [stored[i] and any(vals[0][i] != vals[r][i] for r in LDS_RUNS) for i in range(numel)]
            other = [
                stored[i] and not (past_end[i] or from_lds[i]) and any(vals[r][i] == _canary(r, dtype) for r in range(RUNS))
                for i in range(numel)
            ]
            indet = [past_end[i] or from_lds[i] or other[i] for i in range(numel)]
            written = [stored[i] and not indet[i] for i in range(numel)]
            out: dict[str, Any] = {"shape": spec["shape"], "dtype": dtype}
            if dtype == "torch.uint64":
                out["skipped"] = True
                out["written"] = _runs(stored)
                outputs[name] = out
                continue
            values = [_signed32(vals[0][i]) if written[i] else 0 for i in range(numel)]
            while values and values[-1] == 0:
                values.pop()
            out["written"] = _runs(written)
            out["values"] = values
            if any(indet):
                out["indeterminate"] = _runs(indet)
            if any(past_end):
                anomalies.append(f"{name}: values depend on reads past the end of an input tensor")
            if any(from_lds):
                lds_dependent = True
                anomalies.append(f"{name}: values depend on LDS contents read before being written")
            beyond = sorted(set().union(*(r.tails.get(name, {}).keys() for r in runs)))
            if beyond:
                out["written_beyond_end"] = _runs_of_indices([numel + i for i in beyond])
                out["values_beyond_end"] = [_signed32(runs[0].tails.get(name, {}).get(i, 0)) for i in beyond]
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


def _encode(param: CppParam, name: str, value: Any) -> str:
    if param.kind == "tensor":
        if not isinstance(value, Buf):
            raise AiterPyError(f"C++ parameter {param.name} is a tensor, Python passes {name}={value!r}")
        code = "u64" if value.dtype == "torch.uint64" else "i32"
        dims = " ".join(str(d) for d in value.shape)
        if value.values is not None:
            data = " ".join(str(int(v)) for v in value.values)
            return f"tensor {name} {code} in {len(value.shape)} {dims} {len(value.values)} {data}"
        return f"tensor {name} {code} out {len(value.shape)} {dims}"
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
