"""Load the conformance records (aiter's own planner outputs) and check a planner against them.

Format: tests/data/conformance/README.md. The records ship with the project,
gzipped, in tests/data/conformance/ (``MLA_GOLDEN_CONFORMANCE`` may name
another folder); missing data fails the run (:class:`MissingConformanceData`),
it never skips. Shared by every test that checks the reference planners, the
differ or the checks against real aiter data.
"""

from __future__ import annotations

import gzip
import inspect
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pytest
import torch

from helpers.repo import ROOT
from mla_golden.binding import canonical_params, implied_input
from mla_golden.call import Call
from mla_golden.context import as_recorded
from mla_golden.reference import (
    UNDEFINED_PLACEHOLDER,
    AiterCheckError,
    BufferTooSmallError,
    UndefinedResultError,
    UnknownVersionError,
    allow_undefined,
)
from mla_golden.reference.versions import resolve_version
from mla_golden.schema import MLA_OP, OUTPUTS, PS_OP, schema_for

DATA_DIR = ROOT / "tests" / "data" / "conformance"
CONFORMANCE_DIR = Path(os.environ.get("MLA_GOLDEN_CONFORMANCE", DATA_DIR))
SUFFIXES = (".jsonl.gz", ".jsonl")
_T = TypeVar("_T")


class MissingConformanceData(FileNotFoundError):
    """The conformance records a test needs are not there: the run must fail, not skip."""


#: Fill of every output buffer before a planner call: an element still holding it was not written.
CANARY = 0x5A5A5A5A


def buffer_names(op: str) -> tuple[str, ...]:
    """``op``'s output buffers in its argument order, spelled as its signature spells them (the schema's)."""
    schema = schema_for(op)
    return tuple(name for name in schema.signature if schema.canonical(name) in OUTPUTS)


#: get_mla_metadata_v1's buffers in aiter's C++ argument order (the order an overflowing buffer is reported in).
MLA_BUFFER_NAMES = buffer_names(MLA_OP)
#: get_ps_metadata_v1's buffers, in argument order (= get_ps_metadata_info_v1's return order).
PS_BUFFER_NAMES = buffer_names(PS_OP)


class RecordedOn(NamedTuple):
    """A record's env and device, which :func:`mla_golden.context.as_recorded` reads as a call's."""

    env: dict[str, str | None]
    device: dict[str, Any]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> RecordedOn:
        return cls(record["env"], record["device"])


#: The PS planner's six output buffers, in its argument order.
PsBuffers = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def ps_outputs(buffers: Iterable[torch.Tensor]) -> PsBuffers:
    """``buffers`` as a tuple of known length: passed as ``*ps_outputs(...)``, the keyword arguments after
    them still type-check (a list of unknown length could fill those parameters too)."""
    a, b, c, d, e, f = buffers
    return a, b, c, d, e, f


def canary_buffers(names: tuple[str, ...], sizes: Iterable[tuple[Any, torch.dtype]]) -> dict[str, torch.Tensor]:
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


def expected_outputs(outputs: dict[str, Any], names: tuple[str, ...] | None = None) -> dict[str, Expected]:
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
        dtype = torch_dtype(out["dtype"])
        assert dtype is not None, f"output {name}: a record without its dtype"
        result[name] = Expected(
            shape=shape,
            dtype=dtype,
            values=values,
            written=runs_mask(out.get("written", []), numel),
            indeterminate=runs_mask(out.get("indeterminate", []), numel),
            skipped=bool(out.get("skipped", False)),
            beyond_end=out.get("written_beyond_end", []),
        )
    return result


@cache
def _load(path: Path) -> tuple[dict[str, Any], ...]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


def file_stem(path: Path) -> str:
    """'mla_v1-e4048607a535.jsonl.gz' -> 'mla_v1-e4048607a535'."""
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name.removesuffix(suffix)
    return path.name


def conformance_files(prefix: str, folder: Path = CONFORMANCE_DIR) -> list[Path]:
    """Record files (``.jsonl`` or ``.jsonl.gz``) directly in ``folder`` whose names start with ``prefix``.

    Raises :class:`MissingConformanceData` when there are none.
    """
    found = sorted(
        path
        for path in folder.glob(f"{prefix}*")
        if path.is_file() and path.name.endswith(SUFFIXES)
    )
    if not found:
        raise MissingConformanceData(
            f"no conformance records {prefix}*.jsonl[.gz] under {folder} (they ship in "
            f"{DATA_DIR.relative_to(ROOT)}; MLA_GOLDEN_CONFORMANCE overrides the folder)"
        )
    return found


def records(prefix: str) -> Iterator[dict[str, Any]]:
    """Every record of every file starting with ``prefix`` (e.g. 'mla_v1-e4048607')."""
    for path in conformance_files(prefix):
        yield from _load(path)


def record_params(prefix: str) -> list[Any]:
    """pytest params, one per record, id = case_id (missing data raises at collection)."""
    return [pytest.param(rec, id=rec["case_id"]) for rec in records(prefix)]


def input_tensors(call: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The record's positional list arguments as int32 CPU tensors."""
    return {
        name: torch.tensor(value, dtype=torch.int32)
        for name, value in call["args"].items()
        if isinstance(value, list)
    }


def alloc_buffers(buffers: dict[str, Any], fill: int) -> dict[str, torch.Tensor]:
    """Output buffers shaped as the record says, every element set to ``fill``."""
    out = {}
    for name, spec in buffers.items():
        if not isinstance(spec, dict) or "shape" not in spec:
            continue
        out[name] = torch.full(tuple(spec["shape"]), fill, dtype=torch_dtype(spec["dtype"]))
    return out


def record_call(record: dict[str, Any], side: str = "new") -> Call:
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


# --- per planner version -------------------------------------------------------------------

#: Where the tools/aiter_oracle helper writes the records it produces (same file names).
ORACLE_DIR = CONFORMANCE_DIR / "oracle"


@dataclass(frozen=True)
class VersionCase:
    """One record as the reference version ``version`` must reproduce it.

    ``call`` is in that version's Python signature; ``expected`` is
    record-shaped (``buffers``, ``result``, ``outputs`` or ``error``,
    ``indeterminate_record``, ``planner_internals`` when known).
    ``refusal_ok``: the record's undefined elements were detected roughly
    (``producer`` oracle-host-emulation: garbage that happened to give the
    same value twice goes unnoticed, and a whole-plan dependence on LDS shows
    as scattered elements) and the same inputs have anomalies in the e4048607
    file, so refusing with UndefinedResultError is conformant; the elements
    the reference then defines must still match.
    """

    version: str
    source: str
    case_id: str
    op: str
    device: dict[str, Any]
    env: dict[str, Any]
    call: dict[str, Any]
    expected: dict[str, Any]
    refusal_ok: bool

    @property
    def id(self) -> str:
        return f"{self.version}-{self.case_id}"


def _version_of(commit: str) -> str | None:
    """The ported version whose planner ``commit`` carries, None if none."""
    try:
        return resolve_version(commit).name
    except UnknownVersionError:
        return None


@cache
def version_cases() -> tuple[VersionCase, ...]:
    """Every record of every ported version, from the shipped files and the oracle's.

    ``mla_v1-*`` / ``ps_v1-*`` records are their ``aiter_commit``'s own;
    ``cross_version-*`` records give their ``old_commit``'s side (a record
    that does not differ has the new commit's outputs: the per-version record
    with its case_id).
    """
    newest = {rec["case_id"]: rec for prefix in ("mla_v1-e4048607", "ps_v1-e4048607") for rec in records(prefix)}
    folders = [CONFORMANCE_DIR] + ([ORACLE_DIR] if ORACLE_DIR.is_dir() else [])
    cases: list[VersionCase] = []
    for folder in folders:
        for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(SUFFIXES)):
            stem = file_stem(path)
            kind = stem.partition("-")[0]
            source = f"{folder.name}/{stem}"
            for rec in _load(path):
                # the records name their commit (the file names' 12-hex labels are not always exact)
                version = _version_of(rec["old_commit"] if kind == "cross_version" else rec["aiter_commit"])
                if version is not None:
                    cases.append(_case(version, source, rec, kind, newest))
    return tuple(cases)


def _case(version: str, source: str, rec: dict[str, Any], kind: str, newest: dict[str, dict[str, Any]]) -> VersionCase:
    if kind != "cross_version":
        same_inputs = newest.get(rec["case_id"], {})
        rough = rec.get("producer") == "oracle-host-emulation"
        refusal_ok = rough and bool(same_inputs.get("anomalies"))
        return VersionCase(version, source, rec["case_id"], rec["op"], rec["device"], rec["env"], rec["call"], rec, refusal_ok)
    new = newest[rec["case_id"]]
    side = dict(rec["old"]) if "old" in rec else dict(new)
    if side["result"] == "error":
        # the same check fails at the old commit, at its own line of its own source
        side["error"] = {"message": side["error"]["message"]}
    internals = rec.get("diff", {}).get("planner_internals", {}).get("old")
    if internals is not None:
        side["planner_internals"] = internals
    call = rec.get("call_old", rec["call"])
    return VersionCase(version, source, rec["case_id"], rec["op"], rec["device"], rec["env"], call, side, False)


def version_params(op: str, *, with_internals: bool = False, ok_only: bool = False) -> list[Any]:
    """pytest params, one per chunk of (version, record) cases of ``op`` from one record file (see :func:`chunks`).

    ``with_internals``: only cases that record aiter's host dispatch;
    ``ok_only``: only cases aiter planned (not rejected).
    """
    cases = [
        case
        for case in version_cases()
        if case.op == op
        and (not with_internals or "planner_internals" in case.expected)
        and (not ok_only or case.expected["result"] == "ok")
    ]
    if not cases:
        raise MissingConformanceData(f"no {op} records for any reference version under {CONFORMANCE_DIR}")
    return chunks(cases, lambda case: f"{case.version}-{case.source}")


#: Records per test item. One item per record made 7,000 items, 79% of the suite, whose per-item
#: overhead outweighed the checks; a chunk still names every failing record (:func:`check_each`).
CHUNK = 40


def chunks(cases: Sequence[_T], group: Callable[[_T], str], size: int = CHUNK) -> list[Any]:
    """pytest params, each a list of up to ``size`` cases of one group (a record file), id '<group>[start:end]'.

    A new record file gets its own items; chunks keep xdist's workers evenly loaded.
    """
    by_group: dict[str, list[_T]] = {}
    for case in cases:
        by_group.setdefault(group(case), []).append(case)
    return [
        pytest.param(part[start : start + size], id=f"{name}[{start}:{start + len(part[start : start + size])}]")
        for name, part in by_group.items()
        for start in range(0, len(part), size)
    ]


def check_each(cases: Sequence[_T], check: Callable[[_T], object], name: Callable[[_T], str]) -> None:
    """``check`` every case; then fail once, naming every failing case (by case id) and why."""
    __tracebackhide__ = True
    failures = []
    for case in cases:
        try:
            check(case)
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - every failing record is reported
            first = (str(exc).strip() or type(exc).__name__)[:600]
            failures.append(f"{name(case)}: {type(exc).__name__}: {first}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(cases)} records fail:\n" + "\n".join(failures), pytrace=False)


def call_arguments(call: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """A record's call as Python arguments: lists become int32 tensors, dtype names torch dtypes."""
    tensors = input_tensors(call)
    args = [tensors.get(name, value) for name, value in call["args"].items()]
    kwargs = {k: torch_dtype(v) if k.startswith("dtype") else v for k, v in call["kwargs"].items()}
    return args, kwargs


def replay(module: object, case: VersionCase, buffers: dict[str, torch.Tensor]) -> None:
    """Call ``case`` on ``module`` (a reference version) on the case's device and env."""
    args, kwargs = call_arguments(case.call)
    order = buffer_names(case.op)
    with as_recorded(case):
        getattr(module, case.op)(*args, *(buffers[name] for name in order), **kwargs)


def sizing(module: object, case: VersionCase) -> list[tuple[tuple[int, ...], torch.dtype]]:
    """The case's buffers as ``module``'s own sizing helper makes them for the record's sizing call.

    Arguments the helper does not take are left out (33d168a0's has no
    ``max_split_per_batch``; an old caller could not pass one).
    """
    helper = getattr(module, schema_for(case.op).sizer)
    accepted = inspect.signature(helper).parameters
    call = {k: torch_dtype(v) if k.endswith("dtype") else v for k, v in case.expected["buffers"]["sizing_call"].items() if k in accepted}
    with as_recorded(case):
        info = helper(**call)
    return [((shape,) if isinstance(shape, int) else tuple(shape), dtype) for shape, dtype in info]


def check_buffer(name: str, actual: torch.Tensor, expected: Expected, buffers: dict[str, Any], skip: torch.Tensor | None = None) -> None:
    """Written elements equal aiter's; untouched ones keep the canary (``skip``: elements not compared)."""
    __tracebackhide__ = True
    assert tuple(actual.shape) == expected.shape, name
    flat = actual.reshape(-1)
    if expected.skipped:
        # raw pointers: aiter stores work_indptr's then work_info_set's address
        work_info = buffers.get("work_info_set", buffers.get("work_info"))
        assert work_info is not None, "no work_info_set / work_info buffer"
        pointers = iter([buffers["work_indptr"].data_ptr(), work_info.data_ptr()])
        want = [next(pointers) if written else CANARY for written in expected.written.tolist()]
        assert flat.view(torch.int64).tolist() == want, name
        return
    got = flat.to(torch.int64)
    compared = ~expected.indeterminate if skip is None else ~expected.indeterminate & ~skip
    bad = (got != expected.values) & expected.written & compared
    assert not bad.any(), (
        f"{name}: {int(bad.sum())} written elements differ, first at flat index "
        f"{int(bad.nonzero()[0])}: got {int(got[bad][0])}, aiter {int(expected.values[bad][0])}"
    )
    clobbered = (got != CANARY) & ~expected.written & compared
    assert not clobbered.any(), (
        f"{name}: stored to {int(clobbered.sum())} elements aiter leaves alone, first at flat "
        f"index {int(clobbered.nonzero()[0])} (value {int(got[clobbered][0])})"
    )


def assert_untouched(buffers: dict[str, torch.Tensor]) -> None:
    __tracebackhide__ = True
    for name, buf in buffers.items():
        assert bool((buf.reshape(-1).to(torch.int64) == CANARY).all()), f"{name} was written"


def check_case(module: object, case: VersionCase) -> None:
    """``module`` reproduces ``case``: outputs and written masks, or aiter's failure.

    The rules of the e4048607 tests: an error record must raise AiterCheckError
    with aiter's message (and source, where recorded); a record that writes past
    a buffer's end must raise BufferTooSmallError naming the first such buffer;
    a record with undefined elements must raise UndefinedResultError and, under
    ``allow_undefined()``, return the defined elements with the placeholder in
    the undefined ones (nothing but the pointers when the whole record is
    undefined). Nothing is written when the call raises.
    """
    __tracebackhide__ = True

    expected_side = case.expected
    buffers = alloc_buffers(expected_side["buffers"], CANARY)
    if expected_side["result"] == "error":
        with pytest.raises(AiterCheckError) as info:
            replay(module, case, buffers)
        assert info.value.message == expected_side["error"]["message"]
        if "source" in expected_side["error"]:
            assert info.value.source == expected_side["error"]["source"]
        assert_untouched(buffers)
        return

    expected = expected_outputs(expected_side["outputs"])
    order = buffer_names(case.op)
    beyond = [name for name in order if expected[name].beyond_end]
    if beyond:
        with pytest.raises(BufferTooSmallError) as too_small:
            replay(module, case, buffers)
        first = expected[beyond[0]]
        assert too_small.value.buffer == beyond[0]
        assert too_small.value.numel == first.written.numel()
        assert too_small.value.needed == max(end for _, end in first.beyond_end)
        assert_untouched(buffers)
        return

    whole_record = bool(expected_side.get("indeterminate_record"))
    undefined = whole_record or any(e.indeterminate.any() for e in expected.values())
    refused = False
    if undefined or case.refusal_ok:
        try:
            replay(module, case, buffers)
        except UndefinedResultError:
            refused = True
        assert refused or not undefined, "aiter's result is undefined here: the reference must refuse"
    if refused:
        assert_untouched(buffers)
        with allow_undefined():
            replay(module, case, buffers)
    elif not case.refusal_ok:
        replay(module, case, buffers)

    placeholders = {
        name: buffers[name].reshape(-1).to(torch.int64) == UNDEFINED_PLACEHOLDER for name in order[1:]
    }
    if refused and case.refusal_ok:
        # rough detection missed these: elements the reference calls undefined are not compared
        if all(not (buffers[name].reshape(-1).to(torch.int64) != CANARY).any() for name in order[1:]):
            return  # the whole plan is undefined: only the pointers were written
        for name in order:
            check_buffer(name, buffers[name], expected[name], buffers, placeholders.get(name))
        return
    for name in order[1:]:
        if whole_record:
            assert_untouched({name: buffers[name]})  # nothing defined, not even where aiter stores
        elif refused:
            assert bool(placeholders[name][expected[name].indeterminate].all()), name
    for name in order:
        check_buffer(name, buffers[name], expected[name], buffers)
