"""Cross-version goldens on real aiter data: ``mla-golden diff OLD --against NEW`` flags exactly what changed.

Each ``tests/data/conformance/cross_version-*`` record holds the same
inputs run through an older aiter commit and through e4048607. Both sides
become golden trees by recording calls through the recorder (``spy``): a
stand-in planner with that commit's own Python signature writes the outputs
that commit produced into buffers shaped as that commit's sizing helper made
them (or raises that commit's error). The old side is called as an old caller
did: with ``call_old`` where the record has it (33d168a0 had no
``kv_last_page_lens`` / ``page_size``), with e4048607's signature otherwise.
The new side's outputs are the record with the same ``case_id`` in
``mla_v1-*.jsonl`` / ``ps_v1-*.jsonl``.

Indeterminate elements: aiter stored to them, but their value depends on
memory past an input's end or on uninitialised LDS, so their values must not
be compared. Each side's stand-in writes them with one fixed placeholder
(``INDETERMINATE``, a value no planner produces), the same on both sides:
an element indeterminate in both commits then compares equal whatever aiter
left there, so it is in effect excluded. Marking them unwritten on both sides
would exclude them too, but would hide what the data's ``differs`` flag
counts (``indeterminate_changed``): a change in *which* elements are
indeterminate. Ten records of the 33d168a0 file differ in nothing else, e.g.
the old planner read LDS before writing it and stored 96 more (undefined)
work_info_set elements than the new one. With the placeholder such an element
is written on one side only (or placeholder vs a defined value) and flagged;
so a field's expected count is ``num_diff_elements`` plus its
``indeterminate_changed`` elements, and its first divergent index the smaller
of ``first_diffs[0]`` and the first such element.

The diff must flag exactly the records marked ``differs`` (buffer shape
changes from the sizing helpers included), at the first divergent flat index
each field's ``first_diffs`` lists, with the old and new values there, and
nothing else: the signature change alone only adds a note.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from helpers import standins
from helpers.conformance import (
    RecordedOn,
    buffer_names,
    call_arguments,
    conformance_files,
    expected_outputs,
    file_stem,
    records,
    torch_dtype,
)
from typer.testing import CliRunner

import mla_golden
from mla_golden.cli import app
from mla_golden.context import as_recorded
from mla_golden.golden.store import Golden, GoldenStore
from mla_golden.schema import OUTPUTS

#: What the stand-in planners write on the next call: set per record and side.
_PLAN: dict[str, Any] = {}
#: Written at indeterminate elements on both sides (int32 minimum: no planner writes it).
INDETERMINATE = -(2**31)


def _emit(buffers: dict[str, torch.Tensor]) -> None:
    """Write the planned outputs into the caller's buffers (the placeholder at indeterminate elements), or raise."""
    if _PLAN["error"] is not None:
        raise RuntimeError(_PLAN["error"])
    for name, expected in _PLAN["outputs"].items():
        canonical = "work_info_set" if name == "work_info" else name
        flat = buffers[canonical].view(-1)
        if expected.skipped:
            if bool(expected.written.any()):
                flat[0] = buffers["work_indptr"].data_ptr()
                flat[1] = buffers["work_info_set"].data_ptr()
            continue
        flat[expected.written] = expected.values[expected.written].to(flat.dtype)
        flat[expected.indeterminate] = INDETERMINATE


def _emit_named(arguments: dict[str, Any]) -> None:
    """A stand-in's body: its bound arguments by name -> the output buffers by canonical name."""
    _emit({n: arguments["work_info" if n == "work_info_set" and "work_info" in arguments else n] for n in OUTPUTS})


# The planners' Python signatures at the two commits, from tests/helpers/standins.py.
mla_33d168a0 = standins.with_signature(standins.mla_33d168a0, _emit_named)
mla_e4048607 = standins.with_signature(standins.mla_e4048607, _emit_named)


def ps_v1(
    seqlens_qo_indptr: torch.Tensor, pages_kv_indptr: Any, context_lens: Any, gqa_ratio: Any, num_heads_k: int,
    work_metadata_ptrs: torch.Tensor, work_indptr: torch.Tensor, work_info: Any, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor,
    qhead_granularity: Any = 1, qlen_granularity: Any = 256, kvlen_granularity: Any = 16, block_size: Any = 16, is_causal: bool = True,
) -> None:  # fmt: skip
    _emit(dict(work_metadata_ptrs=work_metadata_ptrs, work_indptr=work_indptr, work_info_set=work_info,
               reduce_indptr=reduce_indptr, reduce_final_map=reduce_final_map, reduce_partial_map=reduce_partial_map))  # fmt: skip


def _module(name: str, mla: Any) -> types.ModuleType:
    module: Any = types.ModuleType(name)
    module.get_mla_metadata_v1 = mla
    module.get_ps_metadata_v1 = ps_v1
    return cast(types.ModuleType, module)


#: The e4048607 record of every case_id.
_NEW = {rec["case_id"]: rec for prefix in ("mla_v1-e4048607", "ps_v1-e4048607") for rec in records(prefix)}


def _flat(runs: list[list[int]]) -> set[int]:
    return {i for start, end in runs for i in range(start, end)}


def _record_side(
    spied: types.ModuleType, rec: dict[str, Any], call: dict[str, Any], buffers: dict[str, Any], outputs: dict[str, Any] | None, error: str | None
) -> None:
    """One call of the stand-in through the spy, as ``call`` describes it, planning ``outputs``."""
    _PLAN.update(outputs=expected_outputs(outputs) if outputs else {}, error=error)
    args, kwargs = call_arguments(call)
    names = [n for n in buffers if n in OUTPUTS or n == "work_info"]
    bufs = {n: torch.empty(buffers[n]["shape"], dtype=torch_dtype(buffers[n]["dtype"])) for n in names}
    planner = getattr(spied, rec["op"])
    with as_recorded(RecordedOn.of(rec)):
        try:
            planner(*args, *(bufs[n] for n in buffer_names(rec["op"])), **kwargs)
        except RuntimeError:
            assert error is not None


def _trees(filename: str, tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    """Record both sides of every record of ``filename`` into OLD and NEW golden trees."""
    recs = [rec for rec in records(filename) if rec["case_id"] in _NEW]
    old_root, new_root = tmp_path / "old", tmp_path / "new"
    old_module = _module("aiter_old", mla_33d168a0 if "33d168a0" in filename else mla_e4048607)
    new_module = _module("aiter_new", mla_e4048607)
    for side, module, root in (("old", old_module, old_root), ("new", new_module, new_root)):
        store = GoldenStore(root)
        with mla_golden.spy(module) as spy:
            for rec in recs:
                new = _NEW[rec["case_id"]]
                old = rec.get("old", new)  # absent: the old commit agreed with the new one
                chosen = old if side == "old" else new
                call = rec.get("call_old", rec["call"]) if side == "old" else new["call"]
                error = chosen.get("error", {}).get("message") if chosen["result"] == "error" else None
                _record_side(module, rec, call, chosen["buffers"], chosen.get("outputs"), error)
                golden = Golden(rec["case_id"], spy.calls[len(spy.calls) - 1])
                assert store.write(golden).value == "written"
        assert len(spy.calls) == len(recs)
    return old_root, new_root, recs


CROSS_FILES = [file_stem(path) for path in conformance_files("cross_version-")]


@pytest.mark.slow
@pytest.mark.parametrize("filename", CROSS_FILES)
def test_diff_against_flags_exactly_the_records_that_differ(filename: Any, tmp_path: Path) -> None:
    old_root, new_root, recs = _trees(filename, tmp_path)
    run = CliRunner().invoke(app, ["diff", str(old_root), "--against", str(new_root), "--format", "json", "--max-items", "8"])
    report = json.loads(run.stdout)
    results = {r["key"]: r for r in report["results"]}
    assert set(results) == {rec["case_id"] for rec in recs}, "every call paired by key, none one-sided"
    flagged = {key for key, r in results.items() if r["status"] != "equal"}
    differs = {rec["case_id"] for rec in recs if rec["differs"]}
    assert flagged == differs, (sorted(flagged - differs)[:5], sorted(differs - flagged)[:5])
    assert run.exit_code == (1 if differs else 0)
    for rec in recs:
        result = results[rec["case_id"]]
        if "call_old" in rec:
            assert any(n.startswith("planner signature changed") for n in result["notes"])
        if not rec["differs"]:
            continue
        diff, want = result["diff"], rec["diff"]
        assert diff["params"] == [] and diff["device"] == [] and diff["env"] == [], "the signature change alone is no divergence"
        flagged_fields = {f["name"]: f for f in diff["fields"] if f["status"] != "equal"}
        expected_fields = set(want.get("buffer_shapes", {}))
        for name, field in want.get("fields", {}).items():
            name = "work_info_set" if name == "work_info" else name
            moved = _flat(field.get("indeterminate_changed", []))  # indeterminate in one commit only
            if field["num_diff_elements"] or moved:
                expected_fields.add(name)
            if name not in flagged_fields:
                continue
            mine = flagged_fields[name]
            assert mine["count"] == field["num_diff_elements"] + len(moved), (rec["case_id"], name)
            firsts = [field["first_diffs"][0]["index"]] if field["first_diffs"] else []
            assert mine["first"]["flat"] == min(firsts + sorted(moved)[:1]), (rec["case_id"], name)
            if firsts and mine["first"]["flat"] == firsts[0]:
                first = field["first_diffs"][0]
                # expected = the --against tree (new), actual = the tree diffed (old)
                assert (mine["first"]["expected"], mine["first"]["actual"]) == (first["new"], first["old"])
        assert set(flagged_fields) == expected_fields, rec["case_id"]
        for name, shapes in want.get("buffer_shapes", {}).items():
            mine = flagged_fields[name]
            assert (mine["expected_shape"], mine["actual_shape"]) == (shapes["new_shape"], shapes["old_shape"])
