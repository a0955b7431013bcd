"""The differ: only the written region counts, and a divergence is pinpointed in planner terms."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import torch
from helpers import standins
from helpers.repo import ROOT

import mla_golden
from mla_golden.diff_data import Cause, PlannerChange


def _capture(kv: Any = (0, 50, 200, 210), dtype: Any = torch.float8_e4m3fn, garbage_seed: Any = None) -> Any:
    aiter = standins.fake_aiter()
    bufs = standins.toy_buffers(3, 200)
    if garbage_seed is not None:
        gen = torch.Generator().manual_seed(garbage_seed)
        for buf in bufs.values():
            if buf.dtype == torch.int32:
                buf.copy_(torch.randint(-(2**31), 2**31 - 1, buf.shape, generator=gen, dtype=torch.int32))
    with mla_golden.spy(aiter) as spy:
        aiter.get_mla_metadata_v1(
            torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor(kv, dtype=torch.int32),
            torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values(), dtype_q=dtype, dtype_kv=dtype,
        )  # fmt: skip
    return spy.calls.one()


def _with_garbage(call: Any, seed: Any) -> Any:
    """The same call with random values outside the written region."""
    garbled = copy.deepcopy(call)
    gen = torch.Generator().manual_seed(seed)
    for name, values in garbled.outputs.items():
        if values.dtype == torch.int32:
            noise = torch.randint(-(2**31), 2**31 - 1, values.shape, generator=gen, dtype=torch.int32)
            garbled.outputs[name] = torch.where(garbled.written[name], values, noise)
    return garbled


@pytest.mark.parametrize("seed", range(5))
def test_garbage_outside_the_written_region_never_differs(seed: Any) -> None:
    expected = _capture(garbage_seed=None)
    actual = _with_garbage(_capture(garbage_seed=seed), seed + 100)
    result = mla_golden.diff(expected, actual)
    assert result.equal, mla_golden.render_text(result)


def test_one_flipped_value_is_pinpointed_to_field_index_and_work_item() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"][2, 5] += 1  # kv_end of work 2
    result = mla_golden.diff(expected, actual)
    assert not result.equal
    divergent = [f for f in result.fields if not f.equal]
    assert [f.name for f in divergent] == ["work_info_set"]
    field = divergent[0]
    assert (field.count, field.value_diffs, field.first.index, field.first.flat) == (1, 1, [2, 5], 21)
    assert field.first.actual == field.first.expected + 1
    [item] = result.work_items
    assert item.index == 2 and item.changed == ["kv_end"]
    assert item.expected.cu_part == 2 and item.expected.columns["batch_idx"] == 1
    text = mla_golden.render_text(result)
    assert "work_info_set: 1 of" in text and "first at [2, 5]" in text and "*" in text


def test_written_mask_change_counts_even_with_equal_values() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.written["reduce_partial_map"][10] = True  # the planner now also writes element 10 (as 0)
    result = mla_golden.diff(expected, actual)
    [field] = [f for f in result.fields if not f.equal]
    assert field.name == "reduce_partial_map" and field.status == "written"
    assert field.written_only_actual == 1 and field.first.flat == 10


def test_dtype_change_reads_as_params_and_geometry() -> None:
    result = mla_golden.diff(_capture(dtype=torch.float8_e4m3fn), _capture(dtype=None))
    changed = {c.path: (c.expected, c.actual) for c in result.params}
    assert changed["dtype_kv_nope"] == ("torch.float8_e4m3fn", None)
    assert result.work_items and result.reduce_groups and result.cu_parts


def test_reduce_groups_are_decoded() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.outputs["reduce_partial_map"][1] = 7
    result = mla_golden.diff(expected, actual)
    [group] = result.reduce_groups
    assert group.group == 0
    assert group.expected.partials == [0, 1, 2] and group.actual.partials == [0, 7, 2]
    assert group.expected.qo_range == [1, 2]


def test_error_status_change_and_input_change() -> None:
    expected = _capture()
    failed = copy.deepcopy(expected)
    failed.error, failed.outputs, failed.written = "boom", {}, {}
    result = mla_golden.diff(expected, failed)
    assert result.error.expected is None and result.error.actual == "boom" and not result.equal
    other = _capture(kv=(0, 50, 201, 211))
    result = mla_golden.diff(expected, other)
    [inp] = [f for f in result.inputs if not f.equal]
    assert inp.name == "input.seqlens_kv_indptr" and inp.first.flat == 2


def test_pointer_values_are_never_compared_but_pointer_facts_are() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.outputs["work_metadata_ptrs"] = torch.tensor([1, 2], dtype=torch.uint64)
    assert mla_golden.diff(expected, actual).equal
    actual.provenance["capture"]["ptrs_ok"] = False
    result = mla_golden.diff(expected, actual)
    assert not result.equal and "work_metadata_ptrs" in result.hazards[0]


def test_json_report_is_stable_and_parses() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.outputs["work_indptr"][3] += 1
    data = json.loads(mla_golden.to_json(mla_golden.diff(expected, actual)))
    assert data["format"] == "mla-golden-diff/1" and data["equal"] is False
    assert set(data) >= {"op", "params", "device", "env", "error", "inputs", "fields", "cu_parts", "work_items",
                         "reduce_groups", "notes", "hazards"}  # fmt: skip
    [field] = [f for f in data["fields"] if f["status"] != "equal"]
    assert field["name"] == "work_indptr" and field["first"]["flat"] == 3
    assert data["cu_parts"][0]["cu_part"] == 2


def _grown(call: Any, name: str, rows: int, fill: int | None) -> None:
    """Give ``call``'s buffer ``name`` ``rows`` more rows, written with ``fill`` (None: unwritten)."""
    for table, value in ((call.outputs, fill or 0), (call.written, fill is not None)):
        old = table[name]
        table[name] = torch.cat([old, torch.full((rows, *old.shape[1:]), value, dtype=old.dtype)])


def test_a_buffer_size_only_change_says_so_in_the_headline() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    _grown(actual, "reduce_partial_map", 1, None)
    _grown(actual, "work_info_set", 3, 0)  # a planner padding the rest of a larger buffer with empty rows
    result = mla_golden.diff(expected, actual)
    assert [f.status for f in result.fields if not f.equal] == ["resized", "resized"]
    rows, width = expected.outputs["work_info_set"].shape
    partial = expected.outputs["reduce_partial_map"].shape[0]
    sizes = f"work_info_set buffer [{rows}, {width}] -> [{rows + 3}, {width}], reduce_partial_map buffer [{partial}] -> [{partial + 1}]"
    headline = f"{sizes}; written contents equal"
    assert result.cause == "buffer sizes changed; written contents equal" and result.cause_detail == sizes
    assert not result.equal
    text = mla_golden.render_text(result)
    assert text.startswith("RESIZED get_mla_metadata_v1: ")  # the verdict a run's result line gives it too
    assert text.splitlines()[1] == f"  likely cause: {headline}"
    assert "divergent work items" not in text and "schedule geometry" not in text


def test_a_larger_buffer_holding_real_values_is_a_shape_change_compared_by_flat_index() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    _grown(actual, "reduce_partial_map", 2, 7)
    actual.outputs["reduce_partial_map"][-1] = 8  # two different values past the end: not padding
    result = mla_golden.diff(expected, actual)
    [field] = [f for f in result.fields if not f.equal]
    assert field.status == "shape" and field.count == 2 and field.written_only_actual == 2
    assert "written contents equal" not in result.cause


def test_cause_leads_with_what_the_caller_changed() -> None:
    result = mla_golden.diff(_capture(dtype=torch.float8_e4m3fn), _capture(dtype=None))
    assert result.cause == "params changed" and "dtype_kv_nope: 'torch.float8_e4m3fn' -> None" in result.cause_detail
    assert mla_golden.render_text(result).splitlines()[1].startswith("  likely cause: params changed")


def test_cause_separates_geometry_changes_from_moved_values() -> None:
    expected = _capture()
    moved = copy.deepcopy(expected)
    moved.outputs["work_info_set"][1, 5] += 1
    assert mla_golden.diff(expected, moved).cause == "values only (the same elements written, other values)"
    grown = copy.deepcopy(expected)
    grown.written["work_info_set"][7] = True
    result = mla_golden.diff(expected, grown)
    assert result.cause.startswith("written region changed")
    assert result.geometry["expected"].works == 5 and result.geometry["actual"].works == 5
    assert result.geometry["expected"].reduce_groups == 1 and result.geometry["expected"].partial_tiles == 3


def test_cause_names_a_planner_change_when_params_are_equal() -> None:
    expected = _capture()
    other = copy.deepcopy(expected)
    other.outputs["work_indptr"][4] += 1
    other.provenance["planner"] = {"backend": "aiter", "version": "0.1.20", "commit": "e4048607a535ace3"}
    result = mla_golden.diff(expected, other)
    assert result.cause is Cause.PLANNER_VALUES and result.planner == PlannerChange("helpers.standins", "aiter 0.1.20 (e4048607a535)")
    assert result.cause_detail.startswith("values only") and "work_indptr" in result.cause_detail
    assert result.cause_label == "planner behaviour change helpers.standins -> aiter 0.1.20 (e4048607a535)"
    assert "planner: helpers.standins -> aiter 0.1.20 (e4048607a535)" in result.notes
    data = result.to_dict()
    assert data["cause_label"] == result.cause_label and data["planner"] == {"old": "helpers.standins", "new": "aiter 0.1.20 (e4048607a535)"}
    assert mla_golden.render_text(result).splitlines()[1] == f"  likely cause: {result.cause_label} ({result.cause_detail})"


def test_a_planner_that_rejects_what_the_other_accepted_is_a_planner_change_too() -> None:
    expected = _capture()
    other = copy.deepcopy(expected)
    other.error, other.outputs, other.written = "[AITER] planner says no", {}, {}
    other.provenance["planner"] = {"backend": "reference", "version": "33d168a0", "commit": None}
    result = mla_golden.diff(expected, other)
    assert result.cause is Cause.PLANNER_ERROR and result.cause_label == "planner behaviour change helpers.standins -> reference@33d168a0"
    other.provenance["planner"] = expected.provenance["planner"]
    assert mla_golden.diff(expected, other).cause is Cause.ERROR


def test_planner_change_is_found_from_provenance_not_from_the_wording_of_a_note() -> None:
    """The cause comes from structured provenance changes; notes are free text for people."""
    from mla_golden.diff_data import Cause

    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.provenance = {**actual.provenance, "planner": {"backend": "aiter", "version": None, "commit": None}}
    actual.outputs["work_indptr"][1] += 1
    result = mla_golden.diff(expected, actual)
    assert result.planner_changes == ["planner: helpers.standins -> aiter unknown version"]
    assert result.cause is Cause.PLANNER_VALUES and result.to_dict()["cause"].startswith("planner behaviour changed")
    assert mla_golden.diff(expected, copy.deepcopy(expected)).cause is Cause.EQUAL
    unchanged_planner = copy.deepcopy(actual)
    unchanged_planner.provenance = expected.provenance
    assert mla_golden.diff(expected, unchanged_planner).cause is Cause.VALUES


def test_padding_reduce_groups_are_not_listed() -> None:
    """The dropped-dtype scenario: a larger buffer's padding groups (merging nothing into nothing) made 20 empty report lines."""
    import importlib
    import sys

    from mla_golden import reference

    calls = []
    with reference.as_aiter(), reference.device("gfx942"):
        sys.modules.pop("helpers.vllm_builder", None)
        module = importlib.import_module("helpers.vllm_builder")
        for max_num_reqs in (16, 64):
            with mla_golden.spy("aiter") as spy:
                module.MlaMetadataBuilder(num_heads=16, max_num_reqs=max_num_reqs).build([700, 1900, 100, 3000], [1] * 4)
            calls.append(spy.calls.one())
    sys.modules.pop("helpers.vllm_builder", None)
    expected, actual = calls
    actual.outputs["reduce_indptr"][2] += 1  # a real change: a partial moves from group 2 to group 1
    result = mla_golden.diff(expected, actual)
    assert [g.group for g in result.reduce_groups] == [1, 2]
    text = mla_golden.render_text(result)
    assert "partials []" not in text and "(none)" not in text


def test_a_cut_list_says_how_many_it_leaves_out() -> None:
    expected, actual = _capture(dtype=torch.float8_e4m3fn), _capture(dtype=None)
    whole = mla_golden.diff(expected, actual, max_items=10_000)
    we, wa = expected.written["work_info_set"], actual.written["work_info_set"]
    differs = (we & wa & (expected.outputs["work_info_set"] != actual.outputs["work_info_set"])) | (we ^ wa)
    rows = sorted(set(differs.any(dim=1).nonzero().reshape(-1).tolist()))
    assert whole.work_items_differing == len(rows) == len(whole.work_items) > 1
    assert [w.index for w in whole.work_items] == rows
    assert whole.cu_parts_differing == len(whole.cu_parts) > 1
    assert whole.reduce_groups_differing == len(whole.reduce_groups) > 1
    assert "not shown" not in mla_golden.render_text(whole)

    cut = mla_golden.diff(expected, actual, max_items=1)
    assert (len(cut.work_items), len(cut.cu_parts), len(cut.reduce_groups)) == (1, 1, 1)
    totals = (cut.work_items_differing, cut.cu_parts_differing, cut.reduce_groups_differing)
    assert totals == (whole.work_items_differing, whole.cu_parts_differing, whole.reduce_groups_differing)
    text = mla_golden.render_text(cut)
    assert f"... and {len(rows) - 1} more divergent work item(s), not shown" in text
    assert f"... and {whole.cu_parts_differing - 1} more CU part(s) whose work range moved, not shown" in text
    assert f"... and {whole.reduce_groups_differing - 1} more divergent reduce group(s), not shown" in text
    assert json.loads(mla_golden.to_json(cut))["work_items_differing"] == len(rows)


def test_partial_tiles_count_what_the_reduce_groups_merge_not_the_elements_written() -> None:
    from mla_golden.geometry import geometry, reduce_group

    shipped = ROOT / "goldens/prefill/dsv3-fp8-prefill/gfx950-cu256"
    prefill = mla_golden.load(shipped / "h128-b10-t3560-cd827d37.safetensors").call  # ten requests, 128 heads
    decode = _capture()  # decode writes only the partials it plans; prefill's planner writes its whole buffer
    for call in (prefill, decode):
        geo = geometry(call)
        groups = [reduce_group(call, g) for g in range(geo.reduce_groups)]
        merged = [p for group in groups if group is not None for p in group.partials]
        assert geo.partial_tiles == len(merged) > 0
    assert geometry(decode).partial_tiles == int(decode.written["reduce_partial_map"].sum())
    assert geometry(prefill).partial_tiles < int(prefill.written["reduce_partial_map"].sum())


def test_a_callers_change_that_left_the_outputs_alike_says_so_in_the_headline() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    actual.params["num_heads_per_head_k"] = 32  # as recorded: the planner's outputs did not move
    text = mla_golden.render_text(mla_golden.diff(expected, actual))
    assert "likely cause: params changed (num_heads_per_head_k: 16 -> 32); outputs equal" in text
    actual.outputs["work_info_set"][2, 5] += 1
    text = mla_golden.render_text(mla_golden.diff(expected, actual))
    assert "likely cause: params changed" in text and "outputs equal" not in text


def test_a_moved_boundary_moves_both_cu_parts_it_separates() -> None:
    expected = _capture()
    actual = copy.deepcopy(expected)
    assert expected.outputs["work_indptr"][:3].tolist() == [0, 1, 2]
    actual.outputs["work_indptr"][1] = 0  # part 0 now holds no work and part 1 holds works 0 and 1
    result = mla_golden.diff(expected, actual)
    assert [(p.cu_part, p.expected, p.actual) for p in result.cu_parts] == [(0, [0, 1], [0, 0]), (1, [1, 2], [0, 2])]
    assert result.cu_parts_differing == 2


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
def test_extreme_values_of_every_integer_dtype_are_compared_and_reported_exactly(dtype: Any) -> None:
    from mla_golden.differ import _compare

    info = torch.iinfo(dtype)
    expected = torch.tensor([info.min, 0, info.max, info.max], dtype=dtype)
    actual = torch.tensor([info.min, 0, info.max, info.max - 1], dtype=dtype)
    field, flat = _compare("reduce_partial_map", expected, actual, None, None, 5)
    assert flat.tolist() == [3] and field.value_diffs == 1 and field.first is not None
    assert (field.first.expected, field.first.actual) == (info.max, info.max - 1)


def test_a_uint64_value_above_int64_is_found_without_overflow() -> None:
    from mla_golden.differ import _compare

    expected = torch.tensor([1, 2**63 + 5], dtype=torch.uint64)
    actual = torch.tensor([1, 2**63 + 6], dtype=torch.uint64)
    field, flat = _compare("work_metadata_ptrs", expected, actual, None, None, 5)
    assert flat.tolist() == [1] and field.value_diffs == 1


def test_the_same_values_in_a_wider_dtype_differ_in_dtype_only() -> None:
    from mla_golden.differ import _compare

    expected = torch.tensor([-(2**31), 7, 2**31 - 1], dtype=torch.int32)
    field, flat = _compare("reduce_indptr", expected, expected.to(torch.int64), None, None, 5)
    assert field.value_diffs == 0 and field.expected_dtype != field.actual_dtype
