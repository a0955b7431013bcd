"""Compare two calls field by field and say where, in planner terms, they part.

Only what matters is compared (docs/cli.md, "What is compared"): params, device, env, error
status, inputs, written masks, and values inside the written region. Tensor
comparison is vectorised; deepdiff handles only the small structured parts.
Divergent elements are decoded: work_info_set rows into named columns with
their CU part, reduce map entries into reduce groups.
"""

from __future__ import annotations

import bisect
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.diff_data import (
    Cause,
    Change,
    CuPartDiff,
    Diff,
    ElementDiff,
    FieldDiff,
    FieldStatus,
    PlannerChange,
    ReduceGroupDiff,
    WorkItem,
    WorkItemDiff,
)
from mla_golden.geometry import (
    Geometry,
    ReduceGroup,
    bounded_indptr,
    geometry,
    moved_parts,
    reduce_group,
    work_at,
    written_prefix,
)
from mla_golden.planner_id import planner_label
from mla_golden.schema import OUTPUTS, POINTER_OUTPUT, schema_for
from mla_golden.tensors import all_true, count_true, flat_nonzero, same, widened

#: Decoded work items / reduce groups / samples kept per diff.
DEFAULT_MAX_ITEMS = 20
#: The device fields that are part of a call's content (:func:`same_content`): what the planner reads, not the GPU's name.
CONTENT_DEVICE = ("arch", "cu_num", "warp_size", "lds_bytes")


# ---------------------------------------------------------------- structured parts


def _changes(expected: dict[str, Any], actual: dict[str, Any]) -> list[Change]:
    """Changed keys of two flat-ish dicts, via deepdiff (so None vs dtype reads as such)."""
    if expected == actual and all(type(expected[k]) is type(actual[k]) for k in expected):
        return []  # the common case; deepdiff costs milliseconds even on equal dicts
    from deepdiff import DeepDiff

    result = DeepDiff(expected, actual, verbose_level=2, ignore_order=False)
    changes: list[Change] = []
    for kind in ("values_changed", "type_changes"):
        for path, change in result.get(kind, {}).items():
            changes.append(Change(_path(path), change.get("old_value"), change.get("new_value")))
    for path, value in result.get("dictionary_item_removed", {}).items():
        changes.append(Change(_path(path), value, None))
    for path, value in result.get("dictionary_item_added", {}).items():
        changes.append(Change(_path(path), None, value))
    for kind, (old, new) in (("iterable_item_removed", (True, False)), ("iterable_item_added", (False, True))):
        for path, value in result.get(kind, {}).items():
            changes.append(Change(_path(path), value if old else None, value if new else None))
    return sorted(changes, key=lambda c: c.path)


def _path(deepdiff_path: str) -> str:
    """"root['dtype_kv_nope']" -> 'dtype_kv_nope'; "root['a'][0]" -> 'a[0]'."""
    out = deepdiff_path.removeprefix("root")
    parts = []
    for piece in out.replace("]", "").split("["):
        if piece:
            parts.append(piece.strip("'\""))
    return ".".join(p if not p.isdigit() else f"[{p}]" for p in parts).replace(".[", "[")


# ---------------------------------------------------------------- tensors


def _unravel(flat: int, shape: list[int]) -> list[int]:
    index = []
    for dim in reversed(shape or [1]):
        index.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return list(reversed(index)) if shape else []


def _compare(
    name: str,
    expected: torch.Tensor,
    actual: torch.Tensor,
    mask_e: torch.Tensor | None,
    mask_a: torch.Tensor | None,
    max_items: int,
    values_matter: bool = True,
) -> tuple[FieldDiff, torch.Tensor]:
    """Compare by flat index over the common length; returns the diff and the divergent flat indices."""
    fd = FieldDiff(
        name=name,
        status=FieldStatus.EQUAL,
        numel=max(expected.numel(), actual.numel()),
        expected_shape=list(expected.shape),
        actual_shape=list(actual.shape),
        expected_dtype=str(expected.dtype),
        actual_dtype=str(actual.dtype),
    )
    same_layout = expected.shape == actual.shape and expected.dtype == actual.dtype
    same_masks = same_layout and (
        mask_e is None and mask_a is None or mask_e is not None and mask_a is not None and same(mask_e, mask_a)
    )
    if same_masks and (not values_matter or same(expected, actual)):
        return fd, torch.empty(0, dtype=torch.int64)  # equal: values outside the written region are 0 on both sides
    e, a = expected.reshape(-1), actual.reshape(-1)
    n = max(e.numel(), a.numel())
    we = _padded(mask_e.reshape(-1) if mask_e is not None else torch.ones_like(e, dtype=torch.bool), n)
    wa = _padded(mask_a.reshape(-1) if mask_a is not None else torch.ones_like(a, dtype=torch.bool), n)
    if e.dtype == a.dtype != torch.uint64:  # as stored: widening two 8-million-element tensors cost more than comparing
        ev, av = _padded(e, n), _padded(a, n)
    else:
        ev = _padded(widened(e) if e.dtype != torch.uint64 else e.view(torch.int64), n)
        av = _padded(widened(a) if a.dtype != torch.uint64 else a.view(torch.int64), n)
    if same_masks:  # values alone differ (a diverged plan's usual case): no element is written on one side only
        divergent = value_diff = ev != av
        if not all_true(we):  # (a plan written whole, the usual case, needs no mask)
            value_diff &= we
        fd.value_diffs = fd.count = count_true(value_diff)
    else:
        both = we & wa
        value_diff = both & (ev != av) if values_matter else torch.zeros_like(both)
        only_e, only_a = we & ~wa, wa & ~we
        divergent = value_diff | only_e | only_a
        fd.value_diffs = count_true(value_diff)
        fd.written_only_expected = count_true(only_e)
        fd.written_only_actual = count_true(only_a)
        fd.count = count_true(divergent)
    idx = flat_nonzero(divergent)
    shape = list(actual.shape) if actual.numel() >= expected.numel() else list(expected.shape)
    for flat in idx[:max_items].tolist():
        fd.samples.append(
            ElementDiff(
                index=_unravel(flat, shape),
                flat=flat,
                expected=int(ev[flat]) if we[flat] and values_matter else None,
                actual=int(av[flat]) if wa[flat] and values_matter else None,
            )
        )
    fd.first = fd.samples[0] if fd.samples else None
    shape_changed = expected.shape != actual.shape or expected.dtype != actual.dtype
    if shape_changed and _only_resized(expected, actual, we, wa, ev, av, values_matter):
        fd.status = FieldStatus.RESIZED
        return fd, torch.empty(0, dtype=torch.int64)  # nothing to decode: the schedule is the same
    if shape_changed:
        fd.status = FieldStatus.SHAPE
    elif fd.value_diffs:
        fd.status = FieldStatus.VALUES
    elif fd.count:
        fd.status = FieldStatus.WRITTEN
    return fd, idx


def _only_resized(
    expected: torch.Tensor,
    actual: torch.Tensor,
    we: torch.Tensor,
    wa: torch.Tensor,
    ev: torch.Tensor,
    av: torch.Tensor,
    values_matter: bool,
) -> bool:
    """Same dtype and row width, same written contents over the common length, and the larger buffer's
    extra elements unwritten or all one fill value: 0, -1 or the last value before them (planners pad
    the rest of a buffer they were given: empty work rows, the final reduce_indptr repeated)."""
    if expected.dtype != actual.dtype or expected.shape[1:] != actual.shape[1:]:
        return False
    common = min(expected.numel(), actual.numel())
    if not same(we[:common], wa[:common]):
        return False
    if values_matter and not same(ev[:common][we[:common]], av[:common][wa[:common]]):
        return False
    tail_written, tail_values = (wa, av) if actual.numel() > expected.numel() else (we, ev)
    fill = tail_values[common:][tail_written[common:]]
    if not values_matter or fill.numel() == 0:
        return True
    before = tail_values[:common][tail_written[:common]]
    allowed = {0, -1} | ({int(before[-1])} if before.numel() else set())
    return int(fill[0]) in allowed and bool((fill == fill[0]).all())


def _padded(t: torch.Tensor, n: int) -> torch.Tensor:
    if t.numel() == n:
        return t
    return torch.cat([t, torch.zeros(n - t.numel(), dtype=t.dtype)])


# ---------------------------------------------------------------- decoding


def _work_item(call: Call, row: int, indptr: list[int]) -> WorkItem | None:
    work = work_at(call, row, indptr)
    return None if work is None else WorkItem(cu_part=work.cu_part, columns=work.columns(call.op))


def _groups_of(call: Call, name: str, flat: list[int]) -> set[int]:
    """Reduce groups touched by divergent flat indices of reduce buffer ``name``."""
    if name == "reduce_final_map":
        return {i // 2 for i in flat}
    if name == "reduce_indptr":
        return {g for i in flat for g in (i - 1, i) if g >= 0}
    indptr = bounded_indptr(call, "reduce_indptr")
    groups = set()
    for i in flat:
        g = bisect.bisect_right(indptr, i) - 1
        if 0 <= g < len(indptr) - 1 and i < indptr[g + 1]:
            groups.add(g)
    return groups


# ---------------------------------------------------------------- the diff


def diff(
    expected: Call,
    actual: Call,
    *,
    expected_name: str = "expected",
    actual_name: str = "actual",
    max_items: int = DEFAULT_MAX_ITEMS,
    judge: bool = True,
) -> Diff:
    """Compare ``actual`` against ``expected`` (a golden's call, usually).

    ``judge``: when the two differ, judge each side with ``check`` (:attr:`Diff.soundness`).
    """
    if expected.op != actual.op:
        raise ValueError(f"cannot diff a {expected.op} call against a {actual.op} call")
    schema = schema_for(expected.op)
    result = Diff(op=expected.op, expected_name=expected_name, actual_name=actual_name)
    result.params = _changes(expected.params, actual.params)
    result.device = _changes({k: expected.device.get(k) for k in CONTENT_DEVICE}, {k: actual.device.get(k) for k in CONTENT_DEVICE})
    result.env = _changes(expected.env, actual.env)
    if expected.error != actual.error:
        result.error = Change("error", expected.error, actual.error)
    for name in schema.inputs:
        fd, _ = _compare(f"input.{name}", expected.inputs[name], actual.inputs[name], None, None, max_items)
        result.inputs.append(fd)
    _provenance_notes(result, expected, actual)
    if expected.error is not None or actual.error is not None:
        raised = " and ".join(side for side, call in (("expected", expected), ("actual", actual)) if call.error is not None)
        result.notes.append(f"output buffers not compared: the {raised} call raised (a call that raised keeps no outputs)")
        _attribute(result)
        if judge:
            _judge(result, expected, actual)
        return result
    divergent: dict[str, list[int]] = {}
    for name in OUTPUTS:
        fd, idx = _compare(
            name,
            expected.outputs[name],
            actual.outputs[name],
            expected.written[name],
            actual.written[name],
            max_items,
            values_matter=name != POINTER_OUTPUT,
        )
        result.fields.append(fd)
        divergent[name] = idx.tolist()
    _decode_work(result, expected, actual, divergent, schema.work_columns, max_items)
    _decode_reduce(result, expected, actual, divergent, max_items)
    shapes = _judge(result, expected, actual) if judge else None
    if not all(f.equal for f in result.fields):
        # each side's geometry, made where that side was judged (a big pair's two sides on two threads) when it was
        shapes = shapes or (geometry(expected), geometry(actual))
        result.geometry = {"expected": shapes[0], "actual": shapes[1]}
    _attribute(result)
    return result


def _judge(result: Diff, expected: Call, actual: Call) -> tuple[Geometry, Geometry] | None:
    """Judge both sides of a pair whose content differs (is each a plan the kernels can run?): each side's geometry,
    or None when the two hold the same content and nothing is judged."""
    if result.same_content:
        return None
    from mla_golden.soundness import shaped_pair

    result.soundness, shapes = shaped_pair(expected, actual)
    return shapes


def same_content(a: Call, b: Call) -> bool:
    """``a`` and ``b`` are the same call (see :attr:`Diff.same_content`); calls of two ops never are.

    The one definition of "the same golden": the store keeps an existing golden
    exactly when this holds, and ``mla_golden.golden.store.content_key`` is it as
    a key (for finding copies among many goldens without diffing every pair).
    Compared: op, params, the device's :data:`CONTENT_DEVICE` fields, env,
    error, inputs and, for a call that returned, its buffers and written
    outputs. Inputs passed with other strides are another call too (aiter may
    reject one and not the other).
    """
    return a.op == b.op and a.strides == b.strides and diff(a, b, max_items=1, judge=False).same_content


def _attribute(result: Diff) -> None:
    """Lead with the likeliest cause: what the caller changed first, then what the planner did."""
    if result.equal:
        return
    changed_inputs = [f.name for f in result.inputs if not f.equal]
    for cause, changes in ((Cause.PARAMS, result.params), (Cause.DEVICE, result.device), (Cause.ENV, result.env)):
        if changes:
            result.cause = cause
            result.cause_detail = "; ".join(f"{c.path}: {c.expected!r} -> {c.actual!r}" for c in changes)
            return
    if changed_inputs:
        result.cause, result.cause_detail = Cause.INPUTS, ", ".join(changed_inputs)
        return
    if result.error:
        result.cause = Cause.PLANNER_ERROR if result.planner_changes else Cause.ERROR
        result.cause_detail = f"{result.error.expected!r} -> {result.error.actual!r}"
        return
    if result.hazards:
        result.cause, result.cause_detail = Cause.HAZARD, "; ".join(result.hazards)
        return
    divergent = [f for f in result.fields if not f.equal]
    if all(f.status is FieldStatus.RESIZED for f in divergent):
        result.cause = Cause.RESIZED
        result.cause_detail = ", ".join(f"{f.name} buffer {f.expected_shape} -> {f.actual_shape}" for f in divergent)
        return
    geometry_moved = any(
        f.status in (FieldStatus.SHAPE, FieldStatus.WRITTEN) or f.written_only_expected or f.written_only_actual
        for f in divergent
    )
    if result.planner_changes:
        result.cause = Cause.PLANNER_GEOMETRY if geometry_moved else Cause.PLANNER_VALUES
        what = (Cause.GEOMETRY if geometry_moved else Cause.VALUES).value
        result.cause_detail = f"{what}: {', '.join(f.name for f in divergent)}"
    else:
        result.cause = Cause.GEOMETRY if geometry_moved else Cause.VALUES
        result.cause_detail = ", ".join(f.name for f in divergent)


def _provenance_notes(result: Diff, expected: Call, actual: Call) -> None:
    pe, pa = expected.provenance, actual.provenance
    old, new = planner_label(pe), planner_label(pa)
    if old != new:  # backend, aiter version or reference version
        result.planner_changes.append(f"planner: {old} -> {new}")
    if pe.get("signature") and pa.get("signature") and pe["signature"] != pa["signature"]:
        gone = [n for n in pe["signature"] if n not in pa["signature"]]
        added = [n for n in pa["signature"] if n not in pe["signature"]]
        result.planner_changes.append(
            f"planner signature changed (removed {gone or 'none'}, added {added or 'none'}); params compared by canonical name"
        )
    if result.planner_changes:
        result.planner = PlannerChange(old, new)
    result.notes.extend(result.planner_changes)
    for side, call in (("expected", expected), ("actual", actual)):
        facts = call.facts
        for note in facts.get("notes", []):
            result.notes.append(f"{side}: {note}")
        if facts.get("ptrs_ok") is False:
            result.hazards.append(f"{side}: work_metadata_ptrs did not point at the work_indptr/work_info_set buffers passed in")
        if facts.get("deterministic") is False:
            result.hazards.append(f"{side}: the planner gave different values when re-run on the same inputs")


def _decode_work(
    result: Diff, expected: Call, actual: Call, divergent: dict[str, list[int]], columns: tuple[str, ...], max_items: int
) -> None:
    if not divergent["work_indptr"] and not divergent["work_info_set"]:
        return  # nothing to decode (the usual case in a tree diff): the CU parts are not walked
    indptr_e = written_prefix(expected.outputs["work_indptr"], expected.written["work_indptr"])
    indptr_a = written_prefix(actual.outputs["work_indptr"], actual.written["work_indptr"])
    bounded_e, bounded_a = bounded_indptr(expected, "work_indptr"), bounded_indptr(actual, "work_indptr")
    parts = sorted(moved_parts(expected, actual))  # work_indptr[i] ends part i - 1 and starts part i
    result.cu_parts_differing = len(parts)
    for part in parts[:max_items]:
        result.cu_parts.append(
            CuPartDiff(
                cu_part=part,
                expected=indptr_e[part : part + 2] if part + 1 < len(indptr_e) else None,
                actual=indptr_a[part : part + 2] if part + 1 < len(indptr_a) else None,
            )
        )
    rows: dict[int, set[str]] = {}
    width = len(columns)
    for flat in divergent["work_info_set"]:
        rows.setdefault(flat // width, set()).add(columns[flat % width])
    result.work_items_differing = len(rows)
    for row in sorted(rows)[:max_items]:
        result.work_items.append(
            WorkItemDiff(
                index=row,
                expected=_work_item(expected, row, bounded_e),
                actual=_work_item(actual, row, bounded_a),
                changed=[c for c in columns if c in rows[row]],
            )
        )


def _decode_reduce(result: Diff, expected: Call, actual: Call, divergent: dict[str, list[int]], max_items: int) -> None:
    groups: set[int] = set()
    if not any(divergent[name] for name in ("reduce_indptr", "reduce_final_map", "reduce_partial_map")):
        return
    for name in ("reduce_indptr", "reduce_final_map", "reduce_partial_map"):
        groups |= _groups_of(expected, name, divergent[name]) | _groups_of(actual, name, divergent[name])
    indptr_e, indptr_a = bounded_indptr(expected, "reduce_indptr"), bounded_indptr(actual, "reduce_indptr")
    for group in sorted(groups):
        e, a = _non_empty(reduce_group(expected, group, indptr_e)), _non_empty(reduce_group(actual, group, indptr_a))
        if e == a:  # decoded alike on both sides (padding past the real groups): not a divergence
            continue
        result.reduce_groups_differing += 1
        if len(result.reduce_groups) < max_items:
            result.reduce_groups.append(ReduceGroupDiff(group=group, expected=e, actual=a))


def _non_empty(group: ReduceGroup | None) -> ReduceGroup | None:
    """None for a group that merges nothing into nothing (a planner's padding past the real groups)."""
    if group is None or group.partials:
        return group
    if group.qo_range is None or group.qo_range[0] == group.qo_range[1]:
        return None
    return group
