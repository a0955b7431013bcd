"""The shape of a schedule: how work and splits are spread, decoded from a call's outputs.

A kernel engineer reads a divergence as "CU part 17 now gets three works
instead of two" or "twice as many split tiles", not as flat indices; the
differ, the report and the HTML view all take these numbers from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mla_golden.call import Call


@dataclass
class Work:
    """One decoded work_info_set row and the CU part that runs it."""

    index: int
    cu_part: int
    batch_idx: int
    partial_qo_loc: int
    qo_start: int
    qo_end: int
    kv_start: int
    kv_end: int
    kv_offset: int
    extra: int  # pad (decode) or q_head_range (prefill)

    @property
    def kv_len(self) -> int:
        return self.kv_end - self.kv_start

    @property
    def split(self) -> bool:
        return self.partial_qo_loc >= 0


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
    partial_tiles: int = 0


def written_prefix(values: torch.Tensor, mask: torch.Tensor) -> list[int]:
    """The leading written run of a buffer, flat (the part the planner filled)."""
    flat_mask = mask.reshape(-1)
    unwritten = (~flat_mask).nonzero()
    end = int(unwritten[0]) if unwritten.numel() else flat_mask.numel()
    return values.reshape(-1)[:end].tolist()


@dataclass
class ReduceGroup:
    """One reduce group: where its merged result goes and which partials it merges."""

    qo_range: list[int] | None  # None where reduce_final_map was not written
    partials: list[int]


def reduce_group(call: Call, group: int, indptr: list[int] | None = None) -> ReduceGroup | None:
    """Reduce group ``group`` of ``call`` (None past the written reduce_indptr); pass ``indptr`` to reuse it."""
    if indptr is None:
        indptr = written_prefix(call.outputs["reduce_indptr"], call.written["reduce_indptr"])
    if group + 1 >= len(indptr):
        return None
    final, fmask = call.outputs["reduce_final_map"], call.written["reduce_final_map"]
    qo = final[group].tolist() if group < final.shape[0] and bool(fmask[group].all()) else None
    partial, pmask = call.outputs["reduce_partial_map"], call.written["reduce_partial_map"]
    start, end = indptr[group], indptr[group + 1]
    partials = [int(v) for v, w in zip(partial[start:end].tolist(), pmask[start:end].tolist()) if w]
    return ReduceGroup(qo_range=qo, partials=partials)


def works_by_cu(call: Call) -> list[list[Work]]:
    """Each CU part's works in order, following work_indptr over written work_info_set rows."""
    indptr = written_prefix(call.outputs["work_indptr"], call.written["work_indptr"])
    info = call.outputs["work_info_set"]
    rows_written = call.written["work_info_set"].all(dim=1).tolist()
    table = info.tolist()
    per_cu: list[list[Work]] = []
    for cu in range(len(indptr) - 1):
        works = []
        for row in range(max(indptr[cu], 0), min(indptr[cu + 1], len(table))):
            if rows_written[row]:
                works.append(Work(row, cu, *table[row]))
        per_cu.append(works)
    return per_cu


def batch_colour(batch: int) -> tuple[float, float, float]:
    """(hue in degrees, saturation, lightness) of a batch in the schedule pictures (HTML and PNG alike).

    Golden-angle hue steps keep neighbouring batches far apart on the wheel.
    """
    return ((batch * 137.508) % 360, 0.55, 0.62)


def _stats(values: list[int]) -> tuple[int, float, int]:
    if not values:
        return (0, 0.0, 0)
    return (min(values), round(sum(values) / len(values), 2), max(values))


def geometry(call: Call) -> Geometry:
    """Summarise ``call``'s schedule (an errored call has none)."""
    if call.error is not None or not call.outputs:
        return Geometry()
    per_cu = works_by_cu(call)
    reduce_indptr = written_prefix(call.outputs["reduce_indptr"], call.written["reduce_indptr"])
    return Geometry(
        cu_parts=len(per_cu),
        works=sum(len(w) for w in per_cu),
        works_per_cu=_stats([len(w) for w in per_cu]),
        kv_per_cu=_stats([sum(x.kv_len for x in w) for w in per_cu]),
        idle_cu_parts=sum(1 for w in per_cu if not w),
        split_works=sum(1 for w in per_cu for x in w if x.split),
        reduce_groups=sum(1 for a, b in zip(reduce_indptr, reduce_indptr[1:]) if b > a),
        partial_tiles=int(call.written["reduce_partial_map"].sum()),
    )
