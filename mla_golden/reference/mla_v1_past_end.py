"""Running aiter's MLA decode planner where it reads its inputs past their end.

With head folding aiter indexes ``seqlens_qo_indptr`` (variable query
lengths) and ``kv_last_page_lens`` (``page_size > 1``) by folded batch, which
runs past the end of those tensors: the GPU then reads whatever memory follows
them. The kernels here index plain lists, so such a read raises
``IndexError``; :func:`run_planner` then reruns the kernel over inputs that
answer past-end reads with different garbage, and reports as indeterminate
every output element that changes with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mla_golden.reference.errors import UndefinedResultError
from mla_golden.reference.mla_v1_comm import WORK_INFO_DWORDS, MlaV12Outputs
from mla_golden.reference.mla_v1_dispatch import MlaV12Dispatch
from mla_golden.schema import MLA

#: Output fields a kernel stores (``work_metadata_ptrs`` never depends on the inputs).
FIELDS = ("work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")
#: What the planner finds ``k`` elements past an input's end, one run per pattern: two negative bases and
#: a positive one, so that a min() or max() in the planner cannot hide a dependence; odd and even, and
#: apart in their low bits (1, 83, 170 modulo 256), so that neither can a value taken modulo a page or
#: tile size (a power of two) or its quotient by one; climbing, falling and alternating, so that no one
#: step between elements hides it.
PATTERNS: tuple[Callable[[int], int], ...] = (
    lambda k: -(1 << 24) + 1 + 7 * k,
    lambda k: -(1 << 25) + 83 - 13 * k,
    lambda k: (1 << 26) + 170 + 11 * k * (-1) ** k,
)


class _PastEnd(list[int]):
    """An input that answers reads past its end with garbage, and notes that it did."""

    def __init__(self, values: list[int], name: str, garbage: Callable[[int], int], touched: set[str]) -> None:
        super().__init__(values)
        self.name = name
        self.garbage = garbage
        self.touched = touched

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and index >= len(self):
            self.touched.add(self.name)
            return self.garbage(index - len(self))
        return super().__getitem__(index)


def _defect(name: str, dispatch: MlaV12Dispatch, uni_seqlen_qo: int) -> str:
    """Which aiter defect reads ``name`` past its end, in terms of the caller's arguments."""
    ratio = dispatch.params.qk_batch_ratio
    if ratio > 1 and name == "seqlens_qo_indptr":
        return (
            f"head folding (qk_batch_ratio={ratio}) with variable query lengths "
            f"(uni_seqlen_qo={uni_seqlen_qo}) makes aiter index seqlens_qo_indptr by folded "
            "batch, past its end"
        )
    if ratio > 1 and name == "kv_last_page_lens":
        return (
            f"head folding (qk_batch_ratio={ratio}) with page_size={dispatch.params.page_size} "
            "makes aiter index kv_last_page_lens by folded batch, past its end"
        )
    return f"aiter reads {name} past its end"


def _describe(field: str, indices: list[int]) -> str:
    """Where undefined elements lie, in the buffer's own terms."""
    if field == "work_info_set":
        rows = sorted({index // WORK_INFO_DWORDS for index in indices})
        columns = sorted({index % WORK_INFO_DWORDS for index in indices})
        names = ", ".join(MLA.work_columns[column] for column in columns)
        return f"work_info_set {names} of {len(rows)} works (rows {rows[0]}..{rows[-1]})"
    if field == "reduce_final_map":
        tiles = sorted({index // 2 for index in indices})
        return f"reduce_final_map of {len(tiles)} reduce tiles ({tiles[0]}..{tiles[-1]})"
    return f"{len(indices)} elements of {field} ({indices[0]}..{indices[-1]})"


def run_planner(
    dispatch: MlaV12Dispatch, inputs: dict[str, list[int]], uni_seqlen_qo: int
) -> tuple[MlaV12Outputs, dict[str, list[int]], str]:
    """Run the chosen kernel; find the outputs that depend on reads past an input's end.

    ``inputs`` are seqlens_qo_indptr, seqlens_kv_indptr and kv_last_page_lens,
    in that order. Returns the outputs, per field the indeterminate flat
    indices, and a message naming the defect and the undefined elements (empty
    when there are none). Raises :class:`UndefinedResultError` when even which
    elements aiter stores to depends on that memory.
    """
    args = (dispatch.params, dispatch.traits)
    try:
        return dispatch.kernel(*args, *inputs.values()), {}, ""
    except IndexError:
        pass  # a read past the end of an input: compare runs over different garbage
    touched: set[str] = set()
    runs = []
    for garbage in PATTERNS:
        padded = (_PastEnd(values, name, garbage, touched) for name, values in inputs.items())
        try:
            runs.append(dispatch.kernel(*args, *padded))
        except UndefinedResultError as error:
            defects = "; ".join(_defect(name, dispatch, uni_seqlen_qo) for name in sorted(touched))
            raise UndefinedResultError(f"{defects}, and then: {error}") from error
    defects = "; ".join(_defect(name, dispatch, uni_seqlen_qo) for name in sorted(touched))

    indeterminate: dict[str, list[int]] = {}
    for field in FIELDS:
        first, *others = (getattr(run, field) for run in runs)
        stored = [value is not None for value in first]
        if any([value is not None for value in other] != stored for other in others):
            raise UndefinedResultError(
                f"{defects}; which elements of {field} aiter then stores to depends on the "
                "memory it finds there, so its whole plan is undefined"
            )
        differing = [i for i, values in enumerate(zip(first, *others)) if len(set(values)) > 1]
        if differing:
            indeterminate[field] = differing
    where = "; ".join(_describe(field, indices) for field, indices in indeterminate.items())
    message = (
        f"{defects}, so these outputs are undefined: {where}. Inside "
        "mla_golden.reference._undefined.allow_undefined() the reference returns the defined "
        "elements and a placeholder in these"
        if indeterminate
        else ""
    )
    return runs[0], indeterminate, message
