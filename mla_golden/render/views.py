"""What a schedule picture shows: the works marked and why, and the CU parts worth enlarging.

Independent of the drawing (the SVG in :mod:`mla_golden.render.svg`, the PNG in
:mod:`mla_golden.render.plot`). Every loop here is bounded by the size of a buffer,
never by a value read from one: a corrupt golden makes a wrong picture, not a
hang.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import torch

from mla_golden.call import Call
from mla_golden.geometry import Work, works_by_cu, written_prefix
from mla_golden.schema import WORK_ROW, format_cell, schema_for

#: Work index -> what to say about it, one short fact each (``"kv_end 50 -> 51"``).
Marks = dict[int, list[str]]

#: Neighbours drawn on each side of an enlarged CU part.
CONTEXT = 2
#: Marked CU parts enlarged at most (the full schedule shows the rest).
FOCUS_LIMIT = 6


def _padded_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    if t.shape[0] >= rows:
        return t
    return torch.cat([t, torch.zeros((rows - t.shape[0], *t.shape[1:]), dtype=t.dtype)])


def diff_marks(expected: Call, actual: Call) -> Marks:
    """Every work_info_set row written or valued differently on the two sides, and what changed in it.

    All of them, not a sample: ``["kv_end 50 -> 51"]``, ``["only in expected"]``.
    """
    if expected.error is not None or actual.error is not None:
        return {}
    columns = schema_for(expected.op).work_columns
    ve, va = expected.outputs["work_info_set"], actual.outputs["work_info_set"]
    we, wa = expected.written["work_info_set"], actual.written["work_info_set"]
    if any(t.dim() != 2 or t.shape[1] != WORK_ROW for t in (ve, va)):
        return {}  # not rows of works (the diff reports the shape)
    rows = max(ve.shape[0], va.shape[0])
    ve, va, we, wa = (_padded_rows(t, rows) for t in (ve, va, we, wa))
    bad = (we != wa) | (we & wa & (ve != va))
    marks: Marks = {}
    for row in bad.any(dim=1).nonzero().reshape(-1).tolist():
        e_row, a_row = bool(we[row].any()), bool(wa[row].any())
        if not a_row:
            marks[row] = ["only in expected"]
        elif not e_row:
            marks[row] = ["only in actual"]
        else:
            changed = bad[row].nonzero().reshape(-1).tolist()
            marks[row] = [
                f"{columns[c]} {format_cell(columns[c], int(ve[row, c]))} -> {format_cell(columns[c], int(va[row, c]))}"
                for c in changed
            ]
    return marks


def parts_of(per_cu: list[list[Work]], works: Iterable[int]) -> set[int]:
    """The CU parts that hold any of ``works``."""
    wanted = set(works)
    return {cu for cu, items in enumerate(per_cu) if any(w.index in wanted for w in items)}


def focus(marked: Iterable[int], cu_parts: int, *, context: int = CONTEXT, limit: int = FOCUS_LIMIT) -> tuple[list[int], int]:
    """The CU parts to enlarge: the first ``limit`` marked ones with ``context`` neighbours each, in order.

    Returns them and how many marked parts were left out.
    """
    chosen = sorted(p for p in set(marked) if 0 <= p < cu_parts)
    shown: set[int] = set()
    for part in chosen[:limit]:
        shown.update(range(max(part - context, 0), min(part + context + 1, cu_parts)))
    return sorted(shown), max(len(chosen) - limit, 0)


def schedule(call: Call) -> list[list[Work]]:
    """Each CU part's works (none for a call whose planner raised).

    A range that reaches back before the previous CU part's end starts there,
    so a corrupt work_indptr cannot draw more works than the buffer has rows.
    """
    if call.error is not None:
        return []
    indptr = written_prefix(call.outputs["work_indptr"], call.written["work_indptr"])
    return works_by_cu(call, list(itertools.accumulate(indptr, max)))
