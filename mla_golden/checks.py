"""Semantic invariants of planner metadata, checked without a golden.

A diff needs a known-good golden; :func:`check` needs only the call. It asserts
what aiter's persistent MLA kernels rely on to compute correct attention, so a
planner defect (an aiter upgrade, a builder passing the wrong arguments) shows
up even on the first recording. It reads only elements the planner wrote.

Where a value is "as aiter defines it" (head folding, the causal KV trim per
query tile, ``kv_offset``), the definition is aiter e4048607's:
``csrc/kernels/mla/metadata/v1_2_device.cuh`` (decode, ``get_mla_metadata_v1``,
via the dispatch of :mod:`mla_golden.reference.mla_v1_dispatch`) and
``csrc/kernels/mla/metadata/v1_2_host.cuh`` (prefill, ``get_ps_metadata_v1``).
The *layout* (which ranges each planned batch and query tile must cover) comes
from those definitions; everything the scheduler decides (work placement, split
points, partial slots, reduce groups) is checked against it.

Violations say the metadata is wrong; hazards say the inputs have a shape that
aiter e4048607 mishandles (reads past an input, reads LDS before writing it,
writes past a helper-sized buffer, aborts), whatever the outputs look like.

Each defect is reported once, where it is: a work that fits no tile is reported
as such and the gap it leaves in its tile is not; a plan folded differently
from what e4048607 runs (an older aiter) is reported once and then checked
under its own folding, so a real defect inside it still shows. Elements not
written (``indeterminate`` in conformance records) are never read.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.capture import planner_env
from mla_golden.context import plan_for
from mla_golden.geometry import Work, works_by_cu, written_prefix
from mla_golden.reference._cint import c_div, c_mod, integer_divide_ceil
from mla_golden.reference.errors import AiterCheckError, UndefinedResultError
from mla_golden.reference.mla_v1 import (
    FP8_DTYPES,
    get_mla_metadata_info_v1,
    plan_mla_metadata_v1,
)
from mla_golden.reference.mla_v1_comm import QoState, mla_v12_num_qo_tiles
from mla_golden.reference.mla_v1_dispatch import (
    AITER_DTYPE_BF16,
    AITER_DTYPE_FP8,
    MlaV12Dispatch,
)
from mla_golden.reference.ps_v1 import get_ps_metadata_info_v1
from mla_golden.schema import MLA_OP, OUTPUTS, POINTER_OUTPUT, PS_OP, WORK_ROW, format_cell, pack_head_range, to_dtype
from mla_golden.schema import WorkColumn as C

#: Every invariant :func:`check` knows, with what it asserts.
INVARIANTS: dict[str, str] = {
    "call.indptr": "input indptrs start at 0, never decrease, have batch+1 entries",
    "call.kv_pages": "kv page counts agree with kv_last_page_lens / context_lens and the page size",
    "call.seqlen_qo": "declared max_seqlen_qo / uni_seqlen_qo agree with seqlens_qo_indptr",
    "buffer.undersized": "no written region reaches the end of a buffer smaller than the planner's own sizing",
    "pointers": "work_metadata_ptrs point at the work_indptr / work_info_set buffers passed in",
    "written": "the planner wrote the metadata the kernels read",
    "work_indptr": "work_indptr starts at 0, never decreases, ends at the number of works, fits its buffer",
    "work.batch": "batch_idx names a batch the kernel plans (folded or sparse space as aiter plans it)",
    "work.qo_range": "[qo_start, qo_end) is one of its batch's query tiles",
    "work.kv_range": "[kv_start, kv_end) is non-empty and lies inside its batch's kv range",
    "work.kv_offset": "kv_offset agrees with kv_end and the batch end as aiter defines it",
    "work.head_range": "q_head_range tiles the query heads, one plan per KV head (prefill)",
    "coverage": "the works of every (batch, query tile) tile its required kv range exactly once",
    "split.partial": "a tile split k ways has k distinct partial locations; unsplit tiles use -1",
    "partial.overlap": "partial locations never overlap",
    "reduce_indptr": "reduce_indptr starts at 0, never decreases, ends at the number of partial entries",
    "reduce.group": (
        "each split tile's partials are listed once in one reduce group whose final map is its query range"
    ),
}

#: Every hazard :func:`check` reports, with why it matters.
HAZARDS: dict[str, str] = {
    "fold_qo_indptr_past_end": "head folding with variable query lengths: aiter reads seqlens_qo_indptr past its end",
    "fold_last_page_lens_past_end": (
        "head folding with page_size > 1: aiter reads kv_last_page_lens by folded batch, past its end"
    ),
    "lds_read_before_write": "variable query lengths with query-tile splitting: aiter reads LDS before writing it",
    "sparse_writes_past_buffer": "sparse topk with max_seqlen_qo > 1: aiter can write past buffers its own helper sized",
    "aborts": "aiter rejects these inputs with a failed AITER_CHECK and aborts the process",
    "undefined": "aiter's result for these inputs is undefined (division by zero, out-of-range LDS)",
    "nondeterministic": "the planner gave different values when re-run on the same inputs",
}

#: Violations the text renderer lists per invariant.
TEXT_PER_INVARIANT = 5

_DECODE_HAZARDS_UNDEFINED = ("lds_read_before_write", "aborts", "undefined")


@dataclass
class Violation:
    """One broken invariant, and where in the metadata it broke."""

    invariant: str
    #: Work item / CU part / reduce group / index, in planner terms.
    where: str
    message: str


@dataclass
class Hazard:
    """An input shape aiter mishandles; its outputs may be wrong even when they look right."""

    hazard: str
    message: str


@dataclass
class CheckResult:
    """What :func:`check` found for one call."""

    op: str
    violations: list[Violation] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    #: What could not be checked, and why.
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def invariants(self) -> set[str]:
        """Names of the invariants violated."""
        return {v.invariant for v in self.violations}

    @property
    def hazard_names(self) -> set[str]:
        return {h.hazard for h in self.hazards}

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "ok": self.ok,
            "violations": [asdict(v) for v in self.violations],
            "hazards": [asdict(h) for h in self.hazards],
            "skipped": list(self.skipped),
        }


def render_check_text(result: CheckResult, *, per_invariant: int = TEXT_PER_INVARIANT) -> str:
    """A short report for people: verdict, hazards, then violations grouped by invariant."""
    lines = [f"{result.op}: {'ok' if result.ok else f'{len(result.violations)} violation(s)'}"]
    for hazard in result.hazards:
        lines.append(f"  hazard {hazard.hazard}: {hazard.message}")
    grouped: dict[str, list[Violation]] = defaultdict(list)
    for violation in result.violations:
        grouped[violation.invariant].append(violation)
    for name, items in grouped.items():
        lines.append(f"  {name} ({INVARIANTS.get(name, '')}): {len(items)}")
        for item in items[:per_invariant]:
            lines.append(f"    {item.where}: {item.message}")
        if len(items) > per_invariant:
            lines.append(f"    ... {len(items) - per_invariant} more")
    for note in result.skipped:
        lines.append(f"  not checked: {note}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Decoded outputs
# ---------------------------------------------------------------------------

@dataclass
class _Tile:
    """One (planned batch, query tile) and the kv range its works must tile."""

    unit: int
    tile: int
    qo: tuple[int, int]
    kv_begin: int
    #: None where aiter's own value depends on memory past an input's end.
    kv_end: int | None
    works: list[Work] = field(default_factory=list)
    #: Left out of the split / reduce checks: a piece may be a work reported as fitting no tile.
    excused: bool = False
    #: Which copy of the plan (prefill: the q head range), for messages.
    plane: str = ""

    @property
    def where(self) -> str:
        return f"batch {self.unit} q tile {self.tile} qo [{self.qo[0]}, {self.qo[1]}){self.plane}"


class _Checker:
    """What one check has found so far, and which works and tiles it has already reported."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.result = CheckResult(call.op)
        #: Works that fit no tile (misplaced, or aiter's value is undefined there).
        self.unplaced: list[Work] = []
        #: Rows already reported for a kv range outside their batch (coverage would repeat it).
        self.bad_kv: set[int] = set()

    def flag(self, invariant: str, where: str, message: str) -> None:
        self.result.violations.append(Violation(invariant, where, message))

    def hazard(self, name: str, message: str) -> None:
        if name not in self.result.hazard_names:
            self.result.hazards.append(Hazard(name, message))

    def prefix(self, name: str) -> list[int]:
        """A buffer's leading written run (what the planner filled)."""
        return written_prefix(self.call.outputs[name], self.call.written[name])

    def flat(self, name: str) -> tuple[list[int], list[bool]]:
        """A buffer's values and written flags, flat."""
        return (
            self.call.outputs[name].reshape(-1).tolist(),
            self.call.written[name].reshape(-1).tolist(),
        )


def _ints(tensor: torch.Tensor | None) -> list[int]:
    return [] if tensor is None else tensor.reshape(-1).tolist()


def _monotone(c: _Checker, invariant: str, name: str, values: Sequence[int]) -> bool:
    """values[0] == 0 and never decreasing; flags the first break."""
    if values and values[0] != 0:
        c.flag(invariant, f"{name}[0]", f"starts at {values[0]}, not 0")
        return False
    for i in range(1, len(values)):
        if values[i] < values[i - 1]:
            c.flag(invariant, f"{name}[{i}]", f"decreases from {values[i - 1]} to {values[i]}")
            return False
    return True


# ---------------------------------------------------------------------------
# The call's own coherence
# ---------------------------------------------------------------------------


def _check_indptrs(c: _Checker, qo: list[int], kv: list[int], kv_name: str) -> int:
    """Both input indptrs start at 0, never decrease, describe the same batches; returns the batch count."""
    batches = len(qo) - 1
    if len(kv) != len(qo):
        c.flag("call.indptr", kv_name, f"has {len(kv)} entries, seqlens_qo_indptr {len(qo)}")
    _monotone(c, "call.indptr", "seqlens_qo_indptr", qo)
    _monotone(c, "call.indptr", kv_name, kv)
    return batches


def _check_decode_call(c: _Checker, qo: list[int], kv: list[int], last: list[int]) -> None:
    p = c.call.params
    batches = _check_indptrs(c, qo, kv, "seqlens_kv_indptr")
    page_size = p.get("page_size", 1)
    if len(last) != batches:
        c.flag("call.kv_pages", "kv_last_page_lens", f"has {len(last)} entries for {batches} batches")
    for b, n in enumerate(last[:batches]):
        pages = kv[b + 1] - kv[b] if b + 1 < len(kv) else None
        if pages == 0:
            continue  # an empty batch has no last page
        if not 1 <= n <= page_size:
            c.flag(
                "call.kv_pages", f"kv_last_page_lens[{b}]", f"is {n}; a last page holds 1..page_size={page_size} tokens"
            )
    _check_seqlen_qo(c, qo, p.get("max_seqlen_qo", -1), p.get("uni_seqlen_qo", -1))


def _check_seqlen_qo(c: _Checker, qo: list[int], max_seqlen_qo: int, uni_seqlen_qo: int) -> None:
    """aiter picks kernels, tiles and buffer sizes from the declared lengths, not from the indptr."""
    lens = [b - a for a, b in zip(qo, qo[1:])]
    if not lens:
        return
    longest = max(lens)
    if longest > max_seqlen_qo:
        c.flag(
            "call.seqlen_qo",
            f"seqlens_qo_indptr batch {lens.index(longest)}",
            f"query length {longest} exceeds the declared max_seqlen_qo={max_seqlen_qo} "
            "(e.g. MTP verification sized as qlen 1): aiter tiles and sizes for the declared length",
        )
    if uni_seqlen_qo > 0:
        odd = [b for b, n in enumerate(lens) if n != uni_seqlen_qo]
        if odd:
            c.flag(
                "call.seqlen_qo",
                f"seqlens_qo_indptr batch {odd[0]}",
                f"query length {lens[odd[0]]} but uni_seqlen_qo={uni_seqlen_qo} declares every batch "
                f"that long ({len(odd)} batch(es) differ)",
            )


def _check_ps_call(c: _Checker, qo: list[int], kv: list[int], ctx: list[int]) -> None:
    p = c.call.params
    batches = _check_indptrs(c, qo, kv, "pages_kv_indptr")
    block = p.get("block_size", 16)
    if len(ctx) != batches:
        c.flag("call.kv_pages", "context_lens", f"has {len(ctx)} entries for {batches} batches")
    for b in range(min(batches, len(ctx), len(kv) - 1)):
        pages = kv[b + 1] - kv[b]
        if block > 0 and pages != -(-ctx[b] // block):
            c.flag(
                "call.kv_pages",
                f"pages_kv_indptr batch {b}",
                f"{pages} pages for context_lens {ctx[b]} at block_size {block} (needs {-(-ctx[b] // block)})",
            )
        if p.get("is_causal", True) and ctx[b] < qo[b + 1] - qo[b]:
            c.flag(
                "call.kv_pages",
                f"context_lens[{b}]",
                f"{ctx[b]} kv tokens for {qo[b + 1] - qo[b]} queries: a causal query cannot see fewer keys than queries",
            )


def _check_pointers(c: _Checker) -> None:
    if c.call.facts.get("ptrs_ok") is False:
        c.flag("pointers", POINTER_OUTPUT, "did not point at the work_indptr / work_info_set buffers passed in")
    if c.call.facts.get("deterministic") is False:
        c.hazard("nondeterministic", HAZARDS["nondeterministic"])


def _check_sizing(c: _Checker, helper: dict[str, int], used: dict[str, int]) -> None:
    """A buffer filled to its last element while the planner's helper wanted more was (likely) overrun."""
    for name, needed in helper.items():
        spec = c.call.buffers.get(name)
        if spec is None:
            continue
        numel = math.prod(spec["shape"])
        if numel < needed and used.get(name, 0) >= numel > 0:
            c.flag(
                "buffer.undersized",
                name,
                f"filled to its last element ({numel}) but the planner's sizing helper asks for {needed}: "
                "the planner probably wrote past its end",
            )


def _helper_numels(sizes: Sequence[tuple[Any, torch.dtype]]) -> dict[str, int]:
    names = OUTPUTS  # the order get_*_info_v1 returns them in
    return {
        name: math.prod(shape) if isinstance(shape, tuple) else shape
        for name, (shape, _dtype) in zip(names, sizes)
        if name != POINTER_OUTPUT
    }


# ---------------------------------------------------------------------------
# Works, CU parts, coverage and split bookkeeping (both ops)
# ---------------------------------------------------------------------------


def _works(c: _Checker, indptr: list[int], num_works: int) -> list[Work]:
    """The works of every CU part, following work_indptr; flags a malformed work_indptr."""
    info = c.call.outputs["work_info_set"]
    rows = info.shape[0] if info.dim() == 2 else 0
    _monotone(c, "work_indptr", "work_indptr", indptr)
    if indptr and indptr[-1] != num_works:
        c.flag(
            "work_indptr",
            f"work_indptr[{len(indptr) - 1}]",
            f"ends at {indptr[-1]} but the planner wrote {num_works} works",
        )
    if indptr and indptr[-1] > rows:
        c.flag(
            "work_indptr",
            f"work_indptr[{len(indptr) - 1}]",
            f"ends at {indptr[-1]}, past the {rows} rows of work_info_set",
        )
    return [w for part in works_by_cu(c.call, indptr, whole_only=False) for w in part]


def _check_coverage(c: _Checker, tiles: list[_Tile]) -> None:
    """The works of each tile cover its [kv_begin, kv_end) in order, with no gap and no overlap.

    When some works fit no tile (reported on their own), a tile with a gap or
    missing its end may be missing exactly those: it is excused, not flagged.
    A tile holding a work already reported outside its batch is not re-reported.
    """
    for tile in tiles:
        if any(w.index in c.bad_kv for w in tile.works):
            tile.excused = True
            continue
        if not tile.works:
            tile.excused = True
            if not c.unplaced:
                c.flag("coverage", tile.where, "no work covers this query tile")
            continue
        if tile.kv_end is None or not all(w.has(C.KV_START, C.KV_END) for w in tile.works):
            tile.excused = True
            continue
        pieces = sorted(tile.works, key=lambda w: (w[C.KV_START], w[C.KV_END]))
        at = tile.kv_begin
        problem = None
        for w in pieces:
            start, end = w[C.KV_START], w[C.KV_END]
            if start != at:
                problem = (
                    "gap" if start > at else "overlap",
                    f"kv {'gap' if start > at else 'overlap'}: {w.where} starts at {start}, covered up to {at}",
                )
                break
            at = end
        else:
            if at != tile.kv_end:
                short = "gap" if at < tile.kv_end else "overlap"
                problem = (
                    short,
                    f"works cover kv [{tile.kv_begin}, {at}) but the tile needs [{tile.kv_begin}, {tile.kv_end})",
                )
        if problem is None:
            continue
        tile.excused = True
        if problem[0] == "overlap" or not c.unplaced:
            c.flag("coverage", tile.where, problem[1])


def _check_splits(c: _Checker, tiles: list[_Tile]) -> dict[int, _Tile]:
    """-1 for unsplit tiles, k distinct locations for tiles split k ways, no overlapping slots.

    Returns partial location -> its tile.
    """
    owner: dict[int, _Tile] = {}
    slots: list[tuple[int, int, Work]] = []
    for tile in tiles:
        if not all(w.has(C.PARTIAL_QO_LOC) for w in tile.works):
            tile.excused = True
            continue
        locs = [w[C.PARTIAL_QO_LOC] for w in tile.works]
        if tile.excused:
            owner.update((loc, tile) for loc in locs if loc >= 0)
            continue
        if len(locs) == 1:
            if locs[0] != -1:
                c.flag("split.partial", tile.works[0].where, f"unsplit tile has partial_qo_loc {locs[0]}, not -1")
                tile.excused = True
            continue
        if any(loc < 0 for loc in locs) or len(set(locs)) != len(locs):
            c.flag(
                "split.partial",
                tile.where,
                f"split {len(locs)} ways with partial_qo_loc {sorted(locs)}; needs {len(locs)} distinct slots",
            )
            tile.excused = True
            owner.update((loc, tile) for loc in locs if loc >= 0)
            continue
        for w in tile.works:
            owner[w[C.PARTIAL_QO_LOC]] = tile
            slots.append((w[C.PARTIAL_QO_LOC], tile.qo[1] - tile.qo[0], w))
    slots.sort(key=lambda s: s[0])
    for (loc, rows, w), (next_loc, _rows, other) in zip(slots, slots[1:]):
        if loc + rows > next_loc:
            c.flag(
                "partial.overlap",
                w.where,
                f"partial rows [{loc}, {loc + rows}) overlap {other.where}'s slot at {next_loc}",
            )
    return owner


def _check_reduce(c: _Checker, owner: dict[int, _Tile], partial_entries: int | None) -> None:
    """reduce_indptr is a CSR over reduce_partial_map; each split tile owns exactly one group."""
    indptr = c.prefix("reduce_indptr")
    pmap, pwritten = c.flat("reduce_partial_map")
    fmap, fwritten = c.flat("reduce_final_map")
    split_tiles = {id(t): t for t in owner.values() if not t.excused}
    expected_entries = sum(len(t.works) for t in split_tiles.values())
    excused = any(t.excused for t in owner.values())
    if not _monotone(c, "reduce_indptr", "reduce_indptr", indptr):
        return
    last = indptr[-1] if indptr else 0
    unplaced = {w[C.PARTIAL_QO_LOC] for w in c.unplaced if w.has(C.PARTIAL_QO_LOC)}
    if last != expected_entries and not c.unplaced and not excused:
        c.flag(
            "reduce_indptr",
            f"reduce_indptr[{len(indptr) - 1}]",
            f"ends at {last} but the split tiles have {expected_entries} partials",
        )
    if partial_entries is not None and last != partial_entries:
        c.flag(
            "reduce_indptr",
            f"reduce_indptr[{len(indptr) - 1}]",
            f"ends at {last} but {partial_entries} reduce_partial_map entries were written",
        )
    grouped: dict[int, int] = {}
    for g in range(len(indptr) - 1):
        lo, hi = indptr[g], indptr[g + 1]
        if lo == hi:
            continue
        where = f"reduce group {g}"
        if hi > len(pmap) or not all(pwritten[lo:hi]):
            c.flag("reduce.group", where, f"reduce_partial_map[{lo}:{hi}] lies outside its written region")
            continue
        locs = pmap[lo:hi]
        tile = owner.get(locs[0])
        if tile is None:
            if locs[0] not in unplaced:
                c.flag("reduce.group", where, f"partial location {locs[0]} belongs to no split work")
            continue
        if tile.excused:
            continue
        wanted = sorted(w[C.PARTIAL_QO_LOC] for w in tile.works)
        if sorted(locs) != wanted:
            c.flag("reduce.group", where, f"lists partials {sorted(locs)} but {tile.where} wrote {wanted}")
        if id(tile) in grouped:
            c.flag("reduce.group", where, f"{tile.where} already has reduce group {grouped[id(tile)]}")
        grouped[id(tile)] = g
        if 2 * g + 1 < len(fmap) and fwritten[2 * g] and fwritten[2 * g + 1]:
            final = (fmap[2 * g], fmap[2 * g + 1])
            if final != tile.qo:
                c.flag(
                    "reduce.group",
                    where,
                    f"reduce_final_map is [{final[0]}, {final[1]}) but its tile is qo [{tile.qo[0]}, {tile.qo[1]})",
                )
    for key, tile in split_tiles.items():
        if key not in grouped:
            c.flag("reduce.group", tile.where, f"split {len(tile.works)} ways but no reduce group merges it")


# ---------------------------------------------------------------------------
# get_mla_metadata_v1 (decode)
# ---------------------------------------------------------------------------


class _PastEnd(list):  # type: ignore[type-arg]
    """An input as aiter indexes it: None past its end, where the GPU reads someone else's memory."""

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and index >= len(self):
            return None
        return super().__getitem__(index)


def _dtype_id(name: str | None) -> int | None:
    """AiterDtype id as the decode planner tells dtypes apart (fp8, bf16, anything else)."""
    if name is None:
        return None
    dtype = to_dtype(name)
    if dtype in FP8_DTYPES:
        return AITER_DTYPE_FP8
    return AITER_DTYPE_BF16 if dtype == torch.bfloat16 else -1


def _numel(call: Call, name: str) -> int:
    """Elements of the caller's buffer ``name`` (from its spec, else from the recorded output)."""
    spec = call.buffers.get(name)
    if spec is not None:
        return math.prod(spec["shape"])
    return call.outputs[name].numel() if name in call.outputs else 0


def _decode_dispatch(c: _Checker) -> MlaV12Dispatch | None:
    """aiter's host decision (folding, tiles, clusters) for this call, or None when aiter aborts."""
    call, p = c.call, c.call.params
    try:
        with planner_env(call.env), plan_for(call.device):
            return plan_mla_metadata_v1(
                call.inputs["seqlens_qo_indptr"].to(torch.int32).contiguous(),
                call.inputs["seqlens_kv_indptr"].to(torch.int32).contiguous(),
                call.inputs["kv_last_page_lens"].to(torch.int32).contiguous(),
                p["num_heads_per_head_k"],
                p["num_heads_k"],
                bool(p["is_causal"]),
                _numel(call, "reduce_indptr"),
                page_size=p.get("page_size", 1),
                kv_granularity=p.get("kv_granularity", 16),
                max_seqlen_qo=p.get("max_seqlen_qo", -1),
                uni_seqlen_qo=p.get("uni_seqlen_qo", -1),
                topk=p.get("topk", -1),
                max_split_per_batch=p.get("max_split_per_batch", -1),
                is_cp_round_robin=bool(p.get("is_cp_round_robin", False)),
                mla_version=p.get("mla_version", 0),
                dtype_q_nope=_dtype_id(p.get("dtype_q_nope")),
                dtype_q_rope=_dtype_id(p.get("dtype_q_rope")),
                dtype_kv_nope=_dtype_id(p.get("dtype_kv_nope")),
                dtype_kv_rope=_dtype_id(p.get("dtype_kv_rope")),
            )
    except AiterCheckError as error:
        c.hazard("aborts", f"{HAZARDS['aborts']}: {error}")
    except UndefinedResultError as error:
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
    return None


def _decode_hazards(c: _Checker, dispatch: MlaV12Dispatch, batches: int) -> None:
    p, t = dispatch.params, dispatch.traits
    ratio = p.qk_batch_ratio
    if ratio > 1 and not t.is_unique and batches > 0:
        c.hazard(
            "fold_qo_indptr_past_end",
            f"{HAZARDS['fold_qo_indptr_past_end']} (qk_batch_ratio={ratio}, uni_seqlen_qo={p.uni_seqlen_qo})",
        )
    if ratio > 1 and p.page_size > 1 and batches > 0:
        c.hazard(
            "fold_last_page_lens_past_end",
            f"{HAZARDS['fold_last_page_lens_past_end']} (qk_batch_ratio={ratio}, page_size={p.page_size})",
        )
    if t.qo_splits and not t.is_unique and batches > 0:
        c.hazard(
            "lds_read_before_write", f"{HAZARDS['lds_read_before_write']} (packed q tile {t.packed_qo_len_per_wg} rows)"
        )
    if t.is_sparse and c.call.params.get("max_seqlen_qo", -1) > 1:
        c.hazard("sparse_writes_past_buffer", HAZARDS["sparse_writes_past_buffer"])


@dataclass
class _Unit:
    """One batch as the decode planner plans it (after head folding / sparse expansion)."""

    index: int
    batch_idx: int
    qo_begin: int | None
    qo_end: int | None
    kv_begin: int
    kv_end: int
    num_tiles: int
    tile_size: int
    #: Added to kv_offset: sparse without folding stores the token's causal offset there.
    offset_extra: int
    #: kv_last_page_lens as aiter indexes it (None past its end).
    last_page_len: int | None


def _decode_units(dispatch: MlaV12Dispatch, qo: list[int], kv: list[int], last: list[int]) -> list[_Unit]:
    """Per planned batch: aiter's query range, tiling and kv range (v1_2_device.cuh state machine).

    Head folding plans ``qk_batch_ratio`` 16-head batches per batch that share
    its kv range; sparse calls plan one batch per (batch, query token) with
    ``topk`` kv slots each. Query ranges come from aiter's ``QoState``, which
    under folding with variable lengths indexes seqlens_qo_indptr by folded
    batch (None past its end).
    """
    p, t = dispatch.params, dispatch.traits
    ratio = p.qk_batch_ratio
    if t.is_sparse:
        ori_seqlen_qo = qo[1] - qo[0]
        count = p.num_batches * ori_seqlen_qo
    else:
        ori_seqlen_qo = p.ori_seqlen_qo
        count = p.num_batches

    def batch_of(unit: int) -> int:
        return c_div(c_div(unit, ori_seqlen_qo), ratio) if t.is_sparse else unit // ratio

    lds_seqlens_qo = [] if t.is_unique else [qo[batch_of(u) + 1] - qo[batch_of(u)] for u in range(count)]
    state = QoState(t, p.uni_seqlen_qo, ori_seqlen_qo, lds_seqlens_qo, _PastEnd(qo))
    seqlens, begins, ends = state.get_seqlens(count), state.get_begins(count), state.get_ends(count)
    units = []
    kv_begin = kv_end = 0
    for u in range(count):
        if u % ratio == 0:  # aiter's curr_sub_head_idx wraps: a new kv batch
            seqlen_kv = kv[batch_of(u) + 1] - kv[batch_of(u)]
            if t.is_sparse:
                seqlen_kv = min(seqlen_kv, p.topk)
            kv_begin = (kv_begin + p.topk if t.is_sparse else kv_end) if u else 0
            kv_end = kv_begin + seqlen_kv
        tiles = mla_v12_num_qo_tiles(p, t, seqlens[u])
        batch_idx = batch_of(u) if t.is_sparse else u
        units.append(
            _Unit(
                index=u,
                batch_idx=batch_idx,
                qo_begin=begins[u],
                qo_end=ends[u],
                kv_begin=kv_begin,
                kv_end=kv_end,
                num_tiles=tiles,
                tile_size=integer_divide_ceil(seqlens[u], tiles),
                offset_extra=ori_seqlen_qo - 1 - c_mod(u, ori_seqlen_qo) if t.is_sparse and ratio == 1 else 0,
                last_page_len=_PastEnd(last)[batch_idx],
            )
        )
    return units


def _observed_folding(c: _Checker, dispatch: MlaV12Dispatch, works: list[Work], batches: int) -> MlaV12Dispatch:
    """The head folding the works were planned with, flagged when it is not the one aiter plans.

    A folded plan has works for every one of ``batches * qk_batch_ratio`` batches,
    an unfolded one never names a batch past ``batches``: the largest batch_idx
    tells which (dense calls; folding is always into 16-head batches). A plan
    folded differently from what the kernel for these heads / dtypes / arch
    expects (an older aiter, a builder passing other dtypes than the kernel
    runs) is reported once, and the rest is checked under its own folding.
    """
    p = dispatch.params
    heads = p.num_heads * p.qk_batch_ratio
    seen = max((w[C.BATCH_IDX] for w in works if w.has(C.BATCH_IDX)), default=-1)
    if dispatch.traits.is_sparse or batches <= 0 or seen < 0:
        return dispatch
    if p.qk_batch_ratio == 1 and heads > 16 and heads % 16 == 0 and batches <= seen < batches * (heads // 16):
        ratio = heads // 16
    elif p.qk_batch_ratio > 1 and seen < batches:
        ratio = 1
    else:
        return dispatch
    c.flag(
        "work.batch",
        "work_info_set batch_idx",
        f"works are planned with qk_batch_ratio={ratio} ({batches * ratio} batches of {heads // ratio} heads) "
        f"but aiter e4048607 runs {heads} heads with these dtypes on {c.call.device.get('arch')} as "
        f"qk_batch_ratio={p.qk_batch_ratio}: the kernel would read the batches differently",
    )
    params = dataclasses.replace(p, num_batches=batches * ratio, num_heads=heads // ratio, qk_batch_ratio=ratio)
    return dataclasses.replace(dispatch, params=params)


def _decode_tail(dispatch: MlaV12Dispatch, unit: _Unit, tile: int, qo_start: int) -> int:
    """KV tokens a query tile must not see: aiter's per-tile causal ``batch_tail`` (page_size 1 only)."""
    p = dispatch.params
    if p.page_size != 1 or not p.is_causal:
        return 0
    tail = 0 if p.is_cp_round_robin else unit.num_tiles - 1 - tile
    if not dispatch.traits.is_sparse and p.qk_batch_ratio != 1:
        # folded rows interleave heads: the token is (row / ratio) mod the query length
        tail = unit.num_tiles - c_mod(c_div(qo_start, p.qk_batch_ratio), p.ori_seqlen_qo) - 1
    return max(tail, 0)


def _decode_tiles(c: _Checker, dispatch: MlaV12Dispatch, units: list[_Unit], works: list[Work]) -> list[_Tile]:
    """Assign each work to its (planned batch, query tile); flag works that fit none."""
    tiles: dict[tuple[int, int], _Tile] = {}
    for unit in units:
        if unit.qo_begin is None or unit.qo_end is None:
            continue
        for k in range(unit.num_tiles):
            start = unit.qo_begin + k * unit.tile_size
            tail = _decode_tail(dispatch, unit, k, start)
            tiles[(unit.index, k)] = _Tile(
                unit.index, k, (start, min(start + unit.tile_size, unit.qo_end)), unit.kv_begin, unit.kv_end - tail
            )
    by_batch: dict[int, list[_Unit]] = defaultdict(list)
    for unit in units:
        by_batch[unit.batch_idx].append(unit)
    sparse = dispatch.traits.is_sparse
    folded = f" (qk_batch_ratio {dispatch.params.qk_batch_ratio})" if dispatch.params.qk_batch_ratio > 1 else ""
    for w in works:
        if not w.has(C.BATCH_IDX):
            c.unplaced.append(w)
            continue
        candidates = by_batch.get(w[C.BATCH_IDX], [])
        if not candidates:
            c.flag(
                "work.batch",
                w.where,
                f"batch_idx {w[C.BATCH_IDX]} is not one of the {len(units)} batches aiter plans{folded}",
            )
            c.unplaced.append(w)
            if not sparse:
                _check_kv_in_some_batch(c, units, w)
            continue
        unit = candidates[0]
        if sparse and w.has(C.QO_START, C.KV_START):
            unit = next(
                (
                    u
                    for u in candidates
                    if u.qo_begin is not None
                    and u.qo_begin <= w[C.QO_START] < max(u.qo_end, u.qo_begin + 1)
                    and u.kv_begin <= w[C.KV_START] < max(u.kv_end, u.kv_begin + 1)
                ),
                unit,
            )
        if unit.qo_begin is None or not w.has(C.QO_START, C.QO_END):
            c.unplaced.append(w)
            _check_decode_work(c, dispatch, unit, w, None)
            continue
        k = (w[C.QO_START] - unit.qo_begin) // unit.tile_size if unit.tile_size else 0
        tile = tiles.get((unit.index, k))
        if tile is None or (w[C.QO_START], w[C.QO_END]) != tile.qo:
            c.flag(
                "work.qo_range",
                w.where,
                f"qo [{w[C.QO_START]}, {w[C.QO_END]}) is not a query tile of batch {unit.index} "
                f"(qo [{unit.qo_begin}, {unit.qo_end}), {unit.num_tiles} tile(s) of {unit.tile_size})",
            )
            c.unplaced.append(w)
            _check_decode_work(c, dispatch, unit, w, None)
            continue
        _check_decode_work(c, dispatch, unit, w, tile)
        tile.works.append(w)
    return list(tiles.values())


def _check_kv_in_some_batch(c: _Checker, units: list[_Unit], w: Work) -> None:
    """Whatever batch a misplaced work was meant for, its kv range must stay inside the batch it starts in."""
    if not w.has(C.KV_START, C.KV_END):
        return
    start, end = w[C.KV_START], w[C.KV_END]
    at = bisect.bisect_right([u.kv_begin for u in units], start) - 1
    unit = units[at] if at >= 0 and start < units[at].kv_end else None
    if unit is not None and end > unit.kv_end:
        offset = f" (kv_offset {w[C.KV_OFFSET]})" if w.has(C.KV_OFFSET) and w[C.KV_OFFSET] < 0 else ""
        c.flag(
            "work.kv_range",
            w.where,
            f"kv [{start}, {end}){offset} runs past the end {unit.kv_end} of the batch it starts in",
        )


def _check_decode_work(c: _Checker, dispatch: MlaV12Dispatch, unit: _Unit, w: Work, tile: _Tile | None) -> None:
    """kv range inside the batch; kv_offset as v1_2_device.cuh computes it.

    A tile whose causal trim leaves no kv (a batch with fewer kv tokens than
    query tiles) gets one work ``[kv_begin, kv_end - tail)`` from aiter, empty or
    reversed; the kernel computes nothing for it, so that is accepted.
    """
    if not w.has(C.KV_START, C.KV_END):
        return
    start, end = w[C.KV_START], w[C.KV_END]
    nothing_to_see = tile is not None and tile.kv_end is not None and tile.kv_end <= tile.kv_begin
    if nothing_to_see:
        if (start, end) != (tile.kv_begin, tile.kv_end):
            c.flag(
                "work.kv_range",
                w.where,
                f"kv [{start}, {end}) but {tile.where} sees no kv: aiter plans [{tile.kv_begin}, {tile.kv_end})",
            )
    elif not unit.kv_begin <= start < end <= unit.kv_end and not (start == end == unit.kv_end == unit.kv_begin):
        offset = f" (kv_offset {w[C.KV_OFFSET]})" if w.has(C.KV_OFFSET) and w[C.KV_OFFSET] < 0 else ""
        c.flag(
            "work.kv_range",
            w.where,
            f"kv [{start}, {end}){offset} is empty or outside batch {unit.index}'s kv [{unit.kv_begin}, {unit.kv_end})",
        )
        c.bad_kv.add(w.index)
        return
    if not w.has(C.KV_OFFSET):
        return
    offset = w[C.KV_OFFSET]
    page_size = dispatch.params.page_size
    if page_size == 1:
        wanted: int | None = unit.kv_end - end + unit.offset_extra
    elif end == unit.kv_end:
        wanted = 0
    else:
        wanted = None if unit.last_page_len is None else (unit.kv_end - end - 1) * page_size + unit.last_page_len
    if wanted is not None and offset != wanted:
        c.flag(
            "work.kv_offset",
            w.where,
            f"kv_offset {offset}, but kv_end {end} and the batch kv end {unit.kv_end} give {wanted}",
        )


def _check_decode(c: _Checker) -> None:
    call = c.call
    qo, kv = _ints(call.inputs.get("seqlens_qo_indptr")), _ints(call.inputs.get("seqlens_kv_indptr"))
    last = _ints(call.inputs.get("kv_last_page_lens"))
    _check_decode_call(c, qo, kv, last)
    dispatch = _decode_dispatch(c)
    if dispatch is not None:
        _decode_hazards(c, dispatch, len(qo) - 1)
    if call.error is not None or not call.outputs:
        c.result.skipped.append("the call raised: no metadata" if call.error is not None else "no outputs recorded")
        return
    _check_pointers(c)
    indptr = c.prefix("work_indptr")
    rows_written = call.written["work_info_set"].reshape(-1, WORK_ROW).any(dim=1).tolist()
    num_works = rows_written.index(False) if False in rows_written else len(rows_written)
    undefined = c.result.hazard_names & set(_DECODE_HAZARDS_UNDEFINED)
    if not indptr:
        if undefined:
            c.result.skipped.append(f"no defined metadata ({', '.join(sorted(undefined))})")
        else:
            c.flag("written", "work_indptr", "the planner wrote no work_indptr")
        return
    if dispatch is not None and len(indptr) != dispatch.params.num_cu + 1:
        c.flag(
            "work_indptr",
            "work_indptr",
            f"{len(indptr)} entries written; aiter plans {dispatch.params.num_cu} CU parts "
            f"(needs {dispatch.params.num_cu + 1})",
        )
    works = _works(c, indptr, num_works)
    if dispatch is None:
        c.result.skipped.append("per-batch invariants: aiter e4048607 has no plan for these inputs")
        return
    if not call.params.get("fast_mode", True) or call.params.get("intra_batch_mode", False):
        c.result.skipped.append("per-batch invariants: only the fast_mode v1_2 planner's layout is known")
        return
    if dispatch.params.num_cu + 1 > call.outputs["work_indptr"].numel():
        c.flag(
            "work_indptr",
            "work_indptr",
            f"holds {call.outputs['work_indptr'].numel()} entries; aiter fills {dispatch.params.num_cu + 1}",
        )
    dispatch = _observed_folding(c, dispatch, works, len(qo) - 1)
    try:
        units = _decode_units(dispatch, qo, kv, last)
    except (UndefinedResultError, IndexError) as error:
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
        return
    tiles = _decode_tiles(c, dispatch, units, works)
    _check_coverage(c, tiles)
    owner = _check_splits(c, tiles)
    _check_reduce(c, owner, sum(call.written["reduce_partial_map"].reshape(-1).tolist()))
    longest = max([b - a for a, b in zip(qo, qo[1:])] or [0])
    _check_sizing(c, _decode_helper(call, longest), _written_extent(call))


def _written_extent(call: Call) -> dict[str, int]:
    """Per buffer: one past the last element the planner wrote."""
    extent = {}
    for name, mask in call.written.items():
        hits = mask.reshape(-1).nonzero()
        extent[name] = int(hits[-1]) + 1 if hits.numel() else 0
    return extent


def _decode_helper(call: Call, longest_qo: int) -> dict[str, int]:
    """Buffer sizes aiter's own helper gives for the query lengths actually passed."""
    p = call.params
    try:
        with planner_env(call.env), plan_for(call.device):
            sizes = get_mla_metadata_info_v1(
                len(call.inputs["seqlens_kv_indptr"]) - 1,
                max(p.get("max_seqlen_qo", -1), longest_qo),
                p["num_heads_per_head_k"] * p["num_heads_k"],
                to_dtype(p.get("dtype_q_nope")),
                to_dtype(p.get("dtype_kv_nope")),
                p.get("topk", -1) >= 0,
                max_split_per_batch=p.get("max_split_per_batch", -1),
            )
    except (AssertionError, ValueError):
        return {}
    return _helper_numels(sizes)


# ---------------------------------------------------------------------------
# get_ps_metadata_v1 (prefill)
# ---------------------------------------------------------------------------


def _ps_tiles(c: _Checker, qo: list[int], kv: list[int], ctx: list[int], plane: str) -> list[_Tile]:
    """Query tiles and their causally trimmed kv page ranges (v1_2_host.cuh ``kn_generate_ps_metadata``)."""
    p = c.call.params
    q_gran, kv_gran, block = p.get("qlen_granularity", 256), p.get("kvlen_granularity", 16), p.get("block_size", 16)
    blocks_per_unit = kv_gran // block if block else 0
    tiles = []
    for b in range(min(len(qo) - 1, len(ctx), len(kv) - 1)):
        qo_len, kv_len = qo[b + 1] - qo[b], ctx[b]
        for k in range(-(-qo_len // q_gran) if q_gran > 0 and qo_len > 0 else 0):
            local_end = min((k + 1) * q_gran, qo_len)
            effective = min(kv_len - qo_len + local_end, kv_len) if p.get("is_causal", True) else kv_len
            blocks = -(-effective // kv_gran) * blocks_per_unit
            qo_range = (qo[b] + k * q_gran, qo[b] + local_end)
            tiles.append(_Tile(b, k, qo_range, kv[b], min(kv[b] + blocks, kv[b + 1]), plane=plane))
    return tiles


def _check_ps(c: _Checker) -> None:
    call, p = c.call, c.call.params
    qo, kv = _ints(call.inputs.get("seqlens_qo_indptr")), _ints(call.inputs.get("pages_kv_indptr"))
    ctx = _ints(call.inputs.get("context_lens"))
    _check_ps_call(c, qo, kv, ctx)
    if call.error is not None or not call.outputs:
        c.result.skipped.append("the call raised: no metadata" if call.error is not None else "no outputs recorded")
        return
    _check_pointers(c)
    cu_num = call.device.get("cu_num")
    indptr = c.prefix("work_indptr")
    if cu_num is not None:
        if cu_num + 1 > len(indptr):
            c.flag(
                "work_indptr",
                "work_indptr",
                f"{len(indptr)} entries written; the planner fills one per CU ({cu_num}) plus one",
            )
        # past its CU parts the planner fills zeros; aiter then takes the work count from the last one
        tail = indptr[cu_num + 1 :]
        if any(tail):
            c.flag("work_indptr", f"work_indptr[{cu_num + 1}]", "entries past the CU parts are not 0")
        elif tail and indptr[cu_num]:
            c.flag(
                "work_indptr",
                f"work_indptr[{len(indptr) - 1}]",
                f"work_indptr is longer than {cu_num + 1}: aiter reads the work count (0) from its last "
                "entry and plans no reduction",
            )
        indptr = indptr[: cu_num + 1]
    # a work always has a non-empty head range, so its q_head_range is never 0 (the fill is)
    info = call.outputs["work_info_set"].reshape(-1, WORK_ROW)
    used = (info[:, C.EXTRA] != 0).tolist()
    num_works = used.index(False) if False in used else len(used)
    works = _works(c, indptr, num_works)
    heads = p.get("num_heads_k", 0)
    q_head_gran = p.get("qhead_granularity", 1)
    planes: dict[int, list[Work]] = defaultdict(list)
    for w in works:
        planes[w[C.EXTRA]].append(w)
    wanted = {pack_head_range(k * q_head_gran, (k + 1) * q_head_gran) for k in range(heads)}
    if works and set(planes) != wanted:
        odd = sorted(set(planes) ^ wanted)[:4]
        c.flag(
            "work.head_range",
            "work_info_set q_head_range",
            f"head ranges {[format_cell('q_head_range', r) for r in odd]} missing or unexpected: every KV head needs "
            "its own copy of the plan",
        )
    # every head runs the same plan and the reduce maps are shared: check them against the first head's slots
    first: tuple[str, dict[tuple[int, int], list[int]]] | None = None
    for head_range in sorted(planes):
        plane = f" (q heads {format_cell('q_head_range', head_range)})"
        tiles = _ps_tiles(c, qo, kv, ctx, plane)
        _assign_ps(c, tiles, planes[head_range])
        _check_coverage(c, tiles)
        _check_ps_offsets(c, tiles, ctx, p.get("block_size", 16))
        owner = _check_splits(c, tiles)
        slots = {t.qo: sorted(w[C.PARTIAL_QO_LOC] for w in t.works) for t in tiles if not t.excused}
        if first is None:
            first = (plane, slots)
            _check_reduce(c, owner, None)
            continue
        odd = next((qo for qo, locs in slots.items() if first[1].get(qo, locs) != locs), None)
        if odd is not None:
            c.flag(
                "reduce.group",
                f"qo [{odd[0]}, {odd[1]}){plane}",
                f"partial slots {slots[odd]} differ from {first[1][odd]}{first[0]}; the heads share one "
                "set of reduce groups",
            )
    longest = max([b - a for a, b in zip(qo, qo[1:])] or [0])
    _check_sizing(c, _ps_helper(call, longest), _ps_used(c, num_works, cu_num))


def _assign_ps(c: _Checker, tiles: list[_Tile], works: list[Work]) -> None:
    """Each work belongs to the tile with its batch and query range; its kv pages lie inside the batch."""
    by_key = {(t.unit, t.qo): t for t in tiles}
    batches = {t.unit: t for t in tiles}
    for w in works:
        tile = by_key.get((w[C.BATCH_IDX], (w[C.QO_START], w[C.QO_END])))
        if tile is None:
            invariant = "work.qo_range" if w[C.BATCH_IDX] in batches else "work.batch"
            c.flag(
                invariant,
                w.where,
                f"batch {w[C.BATCH_IDX]} qo [{w[C.QO_START]}, {w[C.QO_END]}) is not a query tile the planner makes",
            )
            c.unplaced.append(w)
            continue
        kv_end = c.call.inputs["pages_kv_indptr"][tile.unit + 1].item()
        if not tile.kv_begin <= w[C.KV_START] < w[C.KV_END] <= kv_end:
            c.flag(
                "work.kv_range",
                w.where,
                f"kv pages [{w[C.KV_START]}, {w[C.KV_END]}) empty or outside batch {tile.unit}'s "
                f"[{tile.kv_begin}, {kv_end})",
            )
            c.bad_kv.add(w.index)
        tile.works.append(w)


def _check_ps_offsets(c: _Checker, tiles: list[_Tile], ctx: list[int], block: int) -> None:
    """The last piece of a tile has kv_offset 0; an earlier piece, the kv tokens after its end."""
    for tile in tiles:
        if not tile.works:
            continue
        last = max(tile.works, key=lambda w: w[C.KV_START])
        for w in tile.works:
            if w is last:
                wanted, why = 0, "the last piece of a tile has 0"
            else:
                wanted = ctx[tile.unit] - (w[C.KV_END] - tile.kv_begin) * block
                why = f"context_lens {ctx[tile.unit]} and kv_end {w[C.KV_END]} give {wanted}"
            if w[C.KV_OFFSET] != wanted:
                c.flag("work.kv_offset", w.where, f"kv_offset {w[C.KV_OFFSET]}, but {why}")


def _ps_used(c: _Checker, num_works: int, cu_num: int | None) -> dict[str, int]:
    """How much of each buffer holds plan rather than the planner's zero fill."""
    reduce = c.prefix("reduce_indptr")
    groups = next((g for g in range(len(reduce) - 1, 0, -1) if reduce[g] != reduce[g - 1]), 0)
    return {
        "work_indptr": (cu_num or 0) + 1,
        "work_info_set": num_works * WORK_ROW,
        "reduce_indptr": groups + 1 if groups else 0,
        "reduce_final_map": 2 * groups,
        "reduce_partial_map": reduce[-1] if reduce else 0,
    }


def _ps_helper(call: Call, longest_qo: int) -> dict[str, int]:
    """Buffer sizes aiter's own helper gives for the query lengths actually passed."""
    p = call.params
    if p.get("qlen_granularity", 256) <= 0:
        return {}
    with plan_for(call.device):
        sizes = get_ps_metadata_info_v1(
            len(call.inputs["seqlens_qo_indptr"]) - 1, p["num_heads_k"], longest_qo, p.get("qlen_granularity", 256)
        )
    return _helper_numels(sizes)


def check(call: Call) -> CheckResult:
    """Check ``call``'s metadata against what the kernels need; no golden involved.

    Only elements the planner wrote are read. ``result.ok`` is False when any
    invariant is violated; hazards never make a call fail.
    """
    checker = _Checker(call)
    if call.op == MLA_OP:
        _check_decode(checker)
    elif call.op == PS_OP:
        _check_ps(checker)
    else:
        raise ValueError(f"check: unknown op {call.op!r}")
    return checker.result
