"""The shape of a schedule: how work and splits are spread, decoded from a call's outputs.

A kernel engineer reads a divergence as "CU part 17 now gets three works
instead of two" or "twice as many split tiles", not as flat indices; the
differ, the report and the HTML view all take these numbers from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mla_golden.call import Call
from mla_golden.schema import WORK_ROW, WorkColumn, schema_for
from mla_golden.tensors import NARROW_INTS, all_true, count_true, leading_true, running_difference


@dataclass
class Work:
    """One work_info_set row, decoded: its values in :class:`WorkColumn` order and the CU part that runs it.

    ``written[c]`` is False where the planner did not write column ``c`` (its
    value is then meaningless). Every reader of work_info_set (show, diff,
    check, the pictures) takes its rows from here.
    """

    index: int
    #: None where the row lies in no CU part's work range.
    cu_part: int | None
    values: list[int]
    written: list[bool]

    def __getitem__(self, column: WorkColumn) -> int:
        return self.values[column]

    def has(self, *columns: WorkColumn) -> bool:
        """All of ``columns`` were written."""
        written = self.written
        for c in columns:  # a loop, not all(...): check calls this a few times per work
            if not written[c]:
                return False
        return True

    @property
    def whole(self) -> bool:
        return all(self.written)

    @property
    def batch_idx(self) -> int:
        return self.values[WorkColumn.BATCH_IDX]

    @property
    def partial_qo_loc(self) -> int:
        return self.values[WorkColumn.PARTIAL_QO_LOC]

    @property
    def qo_start(self) -> int:
        return self.values[WorkColumn.QO_START]

    @property
    def qo_end(self) -> int:
        return self.values[WorkColumn.QO_END]

    @property
    def kv_start(self) -> int:
        return self.values[WorkColumn.KV_START]

    @property
    def kv_end(self) -> int:
        return self.values[WorkColumn.KV_END]

    @property
    def kv_offset(self) -> int:
        return self.values[WorkColumn.KV_OFFSET]

    @property
    def extra(self) -> int:
        """``pad`` (decode) or ``q_head_range`` (prefill)."""
        return self.values[WorkColumn.EXTRA]

    @property
    def kv_len(self) -> int:
        return self.kv_end - self.kv_start

    @property
    def split(self) -> bool:
        return self.partial_qo_loc >= 0

    @property
    def where(self) -> str:
        return f"work {self.index} (CU part {self.cu_part})"

    def columns(self, op: str) -> dict[str, int]:
        """The row by column name (``op``'s names: the last column differs between decode and prefill)."""
        return dict(zip(schema_for(op).work_columns, self.values))


@dataclass
class Geometry:
    """Counts that summarise a schedule."""

    cu_parts: int = 0
    works: int = 0
    #: (min, mean, max) over CU parts
    works_per_cu: tuple[int, float, int] = (0, 0.0, 0)
    kv_per_cu: tuple[int, float, int] = (0, 0.0, 0)
    idle_cu_parts: int = 0
    split_works: int = 0
    #: Reduce groups that merge at least one partial (split q tiles).
    reduce_groups: int = 0
    #: Partial results those groups merge.
    partial_tiles: int = 0


def written_prefix(values: torch.Tensor, mask: torch.Tensor) -> list[int]:
    """The leading written run of a buffer, flat (the part the planner filled)."""
    return written_run(values, mask).tolist()


def written_run(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """:func:`written_prefix` as a tensor (a view: no copy)."""
    return values.reshape(-1)[: leading_true(mask.reshape(-1))]


#: Each CSR index buffer and the buffer whose first dimension it indexes.
INDPTRS = {"work_indptr": "work_info_set", "reduce_indptr": "reduce_partial_map"}


def indptr_problem(call: Call, name: str) -> str | None:
    """What is wrong with CSR index ``name`` of ``call`` (negative, decreasing, past its buffer), or None.

    Every index read from a golden is checked against the buffer it points
    into before anything iterates over it: one wild value must not cost work.
    """
    values = torch.tensor(written_prefix(call.outputs[name], call.written[name]), dtype=torch.int64)
    limit = call.outputs[INDPTRS[name]].shape[0]
    bad = ((values < 0) | (values > limit)).nonzero()
    if bad.numel():
        i = int(bad[0])
        return f"{name}[{i}] = {int(values[i])} points outside {INDPTRS[name]}'s {limit} rows"
    falls = (values[1:] < values[:-1]).nonzero()
    if falls.numel():
        i = int(falls[0]) + 1
        return f"{name}[{i}] = {int(values[i])} is below {name}[{i - 1}] = {int(values[i - 1])} (must not decrease)"
    return None


def clamped(indptr: list[int], limit: int) -> list[int]:
    """``indptr`` made non-decreasing and clamped to ``[0, limit]``: equal to it when it is a sane CSR.

    For a corrupt or wrong plan the ranges it gives never overlap, so walking
    them costs at most the buffer's size.
    """
    if not indptr:
        return []
    return clamped_run(torch.tensor(indptr, dtype=torch.int64), limit).tolist()


def clamped_run(indptr: torch.Tensor, limit: int) -> torch.Tensor:
    """:func:`clamped` on a tensor (int64)."""
    if not indptr.numel():
        return indptr.to(torch.int64)
    # floor_i = min(max(v_i, floor_i-1), limit) from 0 is the running max of max(v, 0), capped at limit
    if indptr.device.type != "cpu" or indptr.dtype not in (*NARROW_INTS, torch.int64):
        return torch.cummax(indptr.to(torch.int64).clamp(min=0), 0).values.clamp(max=limit)
    run = np.maximum(indptr.numpy(), 0).astype(np.int64, copy=False)  # numpy's running max: torch's cummax also
    np.maximum.accumulate(run, out=run)  # makes the indices, about half its time on a million entries
    return torch.from_numpy(np.minimum(run, limit, out=run))


def bounded_indptr(call: Call, name: str) -> list[int]:
    """The written prefix of CSR index ``name``, :func:`clamped` to the buffer it indexes."""
    limit = call.outputs[INDPTRS[name]].shape[0]
    return clamped(written_prefix(call.outputs[name], call.written[name]), limit)


@dataclass
class ReduceGroup:
    """One reduce group: where its merged result goes and which partials it merges."""

    qo_range: list[int] | None  # None where reduce_final_map was not written
    partials: list[int]


def reduce_group(call: Call, group: int, indptr: list[int] | None = None) -> ReduceGroup | None:
    """Reduce group ``group`` of ``call`` (None past the written reduce_indptr); pass ``indptr`` to reuse it."""
    if indptr is None:
        indptr = bounded_indptr(call, "reduce_indptr")
    if group + 1 >= len(indptr):
        return None
    final, fmask = call.outputs["reduce_final_map"], call.written["reduce_final_map"]
    qo = final[group].tolist() if group < final.shape[0] and bool(fmask[group].all()) else None
    partial, pmask = call.outputs["reduce_partial_map"], call.written["reduce_partial_map"]
    start, end = indptr[group], indptr[group + 1]
    partials = [int(v) for v, w in zip(partial[start:end].tolist(), pmask[start:end].tolist()) if w]
    return ReduceGroup(qo_range=qo, partials=partials)


def moved_parts(expected: Call, actual: Call) -> set[int]:
    """CU parts whose work range (work_indptr[i], work_indptr[i + 1]) differs between the sides."""
    if expected.error is not None or actual.error is not None:
        return set()
    e = written_prefix(expected.outputs["work_indptr"], expected.written["work_indptr"])
    a = written_prefix(actual.outputs["work_indptr"], actual.written["work_indptr"])
    parts = max(len(e), len(a)) - 1
    return {p for p in range(max(parts, 0)) if e[p : p + 2] != a[p : p + 2]}


def cu_part_of(indptr: list[int], row: int) -> int | None:
    """The CU part whose ``[indptr[i], indptr[i+1])`` holds work ``row`` (None when none does)."""
    lo, hi = 0, len(indptr) - 1
    if hi < 1 or not indptr[0] <= row < indptr[-1]:
        return None
    while hi - lo > 1:  # binary search on the monotone CSR
        mid = (lo + hi) // 2
        if indptr[mid] <= row:
            lo = mid
        else:
            hi = mid
    return lo


def _rows(call: Call) -> tuple[list[list[int]], list[list[bool]]]:
    """work_info_set as rows of values and of written flags (none for a buffer of another shape)."""
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    if info.dim() != 2 or info.shape[1] != WORK_ROW:
        return [], []
    return info.tolist(), mask.tolist()


def work_at(call: Call, row: int, indptr: list[int] | None = None) -> Work | None:
    """Row ``row`` of ``call``'s work_info_set (None past its end or where nothing of it was written)."""
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    if info.dim() != 2 or row >= info.shape[0] or not bool(mask[row].any()):
        return None
    if indptr is None:
        indptr = bounded_indptr(call, "work_indptr")
    return Work(row, cu_part_of(indptr, row), info[row].tolist(), mask[row].tolist())


def works_by_cu(call: Call, indptr: list[int] | None = None, *, whole_only: bool = True) -> list[list[Work]]:
    """Each CU part's works in order, following work_indptr (its written prefix unless ``indptr`` is given).

    ``whole_only`` keeps only rows written in full (what the pictures draw);
    the checker takes every row in range and reads ``Work.written`` itself.
    """
    if indptr is None:
        indptr = written_prefix(call.outputs["work_indptr"], call.written["work_indptr"])
    values, written = _rows(call)
    indptr = clamped(indptr, len(values))  # each row walked at most once, whatever the indptr holds
    per_cu: list[list[Work]] = []
    for cu in range(len(indptr) - 1):
        works = []
        for row in range(indptr[cu], indptr[cu + 1]):
            if not whole_only or all(written[row]):
                works.append(Work(row, cu, values[row], written[row]))
        per_cu.append(works)
    return per_cu


@dataclass(frozen=True)
class Shown:
    """Which of ``total`` entries a summary shows: the first and the last ``limit`` (all of them when no more)."""

    total: int
    limit: int | None

    @property
    def omitted(self) -> int:
        return 0 if self.limit is None else max(self.total - 2 * self.limit, 0)

    def picks(self, index: int) -> bool:
        return self.omitted == 0 or index < self.limit or index >= self.total - self.limit  # type: ignore[operator]

    def chosen(self) -> list[int]:
        """The indices shown, in order (bounded by ``2 * limit``, whatever ``total`` is)."""
        if self.omitted == 0:
            return list(range(self.total))
        assert self.limit is not None
        return [*range(self.limit), *range(self.total - self.limit, self.total)]


def whole_work_columns(call: Call, *columns: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``columns`` of the rows :func:`works_by_cu` gives, as stored (one tensor per column, in order, of the rows
    written in full: widen what arithmetic could overflow), and how many of those rows each CU part holds (int64;
    they come part by part). A summary of a million works reads two or three of the eight columns, and sign
    tests need no widening."""
    indptr = written_prefix(call.outputs["work_indptr"], call.written["work_indptr"])
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    rows = info.shape[0] if info.dim() == 2 and info.shape[1] == WORK_ROW else 0
    bounds = torch.tensor(clamped(indptr, rows), dtype=torch.int64)
    parts = max(bounds.numel() - 1, 0)
    if parts == 0 or rows == 0:
        return [torch.zeros(0, dtype=torch.int64) for _ in columns], torch.zeros(parts, dtype=torch.int64)
    lo, hi = int(bounds[0]), int(bounds[-1])
    sizes = bounds[1:] - bounds[:-1]
    if all_true(mask[lo:hi]):  # every row written in full (the usual case): slices, no gather
        return [info[lo:hi, column] for column in columns], sizes
    whole = mask[lo:hi].all(dim=1)
    kept = info[lo:hi][whole]
    cu = torch.repeat_interleave(torch.arange(parts), sizes)
    return [kept[:, column] for column in columns], torch.bincount(cu[whole], minlength=parts)


def describe_schedule(call: Call, cu: int | None = None, work: int | None = None, *, limit: int | None = None) -> dict[str, Any]:
    """A call's schedule as plain data (what ``mla-golden show`` prints): work items by CU part, split reduce groups.

    ``cu`` / ``work`` narrow it to one CU part / one work item (reduce groups
    are then left out). Rows not written in full show as ``columns: None``.
    ``limit``: keep only the first and last ``limit`` work items (and split
    reduce groups) of those selected; ``work_items`` / ``reduce_group_count``
    say how many there are, so a golden of a million works is read in seconds.
    Whole tensors are read at once: a row at a time cost about a millisecond each.
    """
    indptr = bounded_indptr(call, "work_indptr")
    selected = []  # (part, lo, hi) of the CU parts selected, each with its rows
    for part in range(max(len(indptr) - 1, 0)):
        lo, hi = indptr[part], indptr[part + 1]
        if (cu is not None and part != cu) or (work is not None and not lo <= work < hi):
            continue
        selected.append((part, lo, hi) if work is None else (part, work, work + 1))
    items = Shown(sum(hi - lo for _part, lo, hi in selected), limit)
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    rows = info.shape[0] if info.dim() == 2 else 0
    parts, seen = [], 0
    for part, lo, hi in selected:
        wanted = [row for i, row in enumerate(range(lo, hi), seen) if items.picks(i)]
        seen += hi - lo
        kept = [row for row in wanted if row < rows]
        values = info[kept].tolist() if kept else []
        written = mask[kept].tolist() if kept else []
        found = {row: (v, w) for row, v, w in zip(kept, values, written) if any(w)}
        described = []
        for row in wanted:
            work_row = found.get(row)
            whole = work_row is not None and all(work_row[1])
            columns = Work(row, part, *work_row).columns(call.op) if whole and work_row is not None else None
            described.append({"work": row, "columns": columns})
        parts.append(
            {"cu_part": part, "works": [lo, hi] if work is None else [indptr[part], indptr[part + 1]], "items": described}
        )
    groups = []
    group_count = 0
    if cu is None and work is None:
        reduce_indptr = bounded_indptr(call, "reduce_indptr")
        split = _split_groups(call, reduce_indptr)
        group_count = len(split)
        for i in Shown(group_count, limit).chosen():
            group = split[i]
            found_group = reduce_group(call, group, reduce_indptr)
            if found_group is not None:
                groups.append({"group": group, "qo_range": found_group.qo_range, "partials": found_group.partials})
    return {"cu_parts": parts, "reduce_groups": groups, "work_items": items.total, "reduce_group_count": group_count}


def _split_groups(call: Call, indptr: list[int]) -> list[int]:
    """The reduce groups that merge at least one written partial (the tiles that were split), in order."""
    if len(indptr) < 2:
        return []
    pmask = call.written["reduce_partial_map"].reshape(-1)
    counts = torch.cat([torch.zeros(1, dtype=torch.int64), pmask.to(torch.int64).cumsum(0)])
    bounds = torch.tensor(indptr, dtype=torch.int64).clamp(max=pmask.numel())
    written = counts[bounds[1:]] - counts[bounds[:-1]]
    return (written > 0).nonzero().reshape(-1).tolist()


def batch_colour(batch: int) -> tuple[float, float, float]:
    """(hue in degrees, saturation, lightness) of a batch in the schedule pictures (HTML and PNG alike).

    Golden-angle hue steps keep neighbouring batches far apart on the wheel.
    """
    return ((batch * 137.508) % 360, 0.55, 0.62)


def _stats(values: torch.Tensor) -> tuple[int, float, int]:
    if not values.numel():
        return (0, 0.0, 0)
    return (int(values.min()), round(int(values.sum()) / values.numel(), 2), int(values.max()))


def geometry(call: Call) -> Geometry:
    """Summarise ``call``'s schedule (an errored call has none); whole-tensor passes, whatever its size."""
    if call.error is not None or not call.outputs:
        return Geometry()
    (kv_start, kv_end, partial), per_cu = whole_work_columns(
        call, WorkColumn.KV_START, WorkColumn.KV_END, WorkColumn.PARTIAL_QO_LOC
    )
    parts = per_cu.numel()
    # each part's kv: a difference of running sums at its bounds (the rows come part by part)
    running = running_difference(kv_end, kv_start)
    ends = torch.cumsum(per_cu, 0)
    kv_per_cu = running[ends] - running[ends - per_cu]
    reduce_indptr = written_run(call.outputs["reduce_indptr"], call.written["reduce_indptr"]).to(torch.int64)
    merged = clamped_run(reduce_indptr, call.outputs[INDPTRS["reduce_indptr"]].shape[0])
    return Geometry(
        cu_parts=parts,
        works=int(per_cu.sum()),
        works_per_cu=_stats(per_cu),
        kv_per_cu=_stats(kv_per_cu),
        idle_cu_parts=int((per_cu == 0).sum()),
        split_works=count_true(partial >= 0),
        reduce_groups=count_true(reduce_indptr[1:] > reduce_indptr[:-1]),
        # Partials the reduce groups merge, not written elements: prefill's planner writes its whole buffer.
        partial_tiles=int(merged[-1] - merged[0]) if merged.numel() else 0,
    )
