"""Checks of ``get_mla_metadata_v1`` (decode) plans against aiter's layout for the call.

The layout (which query tiles and kv ranges each planned batch has) comes from
:func:`mla_golden.reference.layout.decode_layout`, aiter's
``csrc/kernels/mla/metadata/v1_2_device.cuh`` as the reference ports it, at the
version that recorded the call when it is a ported one (else the newest).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence

from mla_golden import reference
from mla_golden.checks.common import (
    Checker,
    Tile,
    check_coverage,
    check_indptrs,
    check_pointers,
    check_reduce,
    check_sizing,
    check_splits,
    decoded_works,
    helper_numels,
    numel,
    skip_empty_tiles,
    written_extent,
)
from mla_golden.checks.decode_fast import clean_plan
from mla_golden.checks.decode_region import Region, region
from mla_golden.checks.decode_sparse_fast import clean_sparse_plan
from mla_golden.checks.results import HAZARDS
from mla_golden.context import as_recorded
from mla_golden.errors import AiterCheckError, UndefinedResultError
from mla_golden.geometry import Work
from mla_golden.planner_id import recorded_planner, reference_version, rules_version
from mla_golden.reference.layout import DecodeBatch, DecodeLayout, decode_layout
from mla_golden.schema import WORK_ROW, to_dtype
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import leading_true, rows_written

#: Hazards under which aiter's metadata is not defined by the inputs.
_UNDEFINED = ("lds_read_before_write", "aborts", "undefined")


def _check_call(c: Checker, qo: Sequence[int], kv: Sequence[int], last: Sequence[int]) -> None:
    p = c.call.params
    batches = check_indptrs(c, qo, kv, "seqlens_kv_indptr")
    page_size = p.get("page_size", 1)
    if len(last) != batches:
        c.flag("call.kv_pages", "kv_last_page_lens", f"has {len(last)} entries for {batches} batches")
    lens = c.input("kv_last_page_lens")[:batches]
    bad = (lens < 1) | (lens > page_size)
    with_pages = min(len(lens), len(kv) - 1)
    if with_pages > 0:  # an empty batch has no last page
        kv_t = c.input("seqlens_kv_indptr")[: with_pages + 1]
        bad[:with_pages] &= kv_t[1:] != kv_t[:-1]
    for b in bad.nonzero().reshape(-1).tolist():
        c.flag("call.kv_pages", f"kv_last_page_lens[{b}]", f"is {last[b]}; a last page holds 1..page_size={page_size} tokens")
    _check_seqlen_qo(c, qo, p.get("max_seqlen_qo", -1), p.get("uni_seqlen_qo", -1))


def _check_seqlen_qo(c: Checker, qo: Sequence[int], max_seqlen_qo: int, uni_seqlen_qo: int) -> None:
    """aiter picks kernels, tiles and buffer sizes from the declared lengths, not from the indptr."""
    indptr = c.input("seqlens_qo_indptr")
    lens = indptr[1:] - indptr[:-1]
    if not lens.numel():
        return
    longest = int(lens.max())
    if longest > max_seqlen_qo:
        c.flag(
            "call.seqlen_qo",
            f"seqlens_qo_indptr batch {int((lens == longest).nonzero()[0])}",
            f"query length {longest} exceeds the declared max_seqlen_qo={max_seqlen_qo} "
            "(e.g. MTP verification sized as qlen 1): aiter tiles and sizes for the declared length",
        )
    if uni_seqlen_qo > 0:
        odd = (lens != uni_seqlen_qo).nonzero().reshape(-1).tolist()
        if odd:
            c.flag(
                "call.seqlen_qo",
                f"seqlens_qo_indptr batch {odd[0]}",
                f"query length {int(lens[odd[0]])} but uni_seqlen_qo={uni_seqlen_qo} declares every batch "
                f"that long ({len(odd)} batch(es) differ)",
            )


def _decode_layout(c: Checker) -> DecodeLayout | None:
    """aiter's host decision (folding, tiles, clusters) for this call, or None when aiter refuses the call.

    A refusal (a head count, granularity or page size its checks fail, a dtype its wrapper cannot pass) is a
    ``call.precondition`` violation when the call returned and the version that refused it is the one that
    recorded it: that planner never returns for these arguments, so the outputs are not its plan. Judged by
    the newest version instead (a planner no ported version is), it is a hazard only: a later aiter may take them.
    """
    call = c.call
    version = rules_version(call.provenance)
    try:
        with as_recorded(call):
            return decode_layout(call.inputs, call.params, numel(call, "reduce_indptr"), version.features)
    except (AiterCheckError, AssertionError) as error:
        recorder = reference_version(recorded_planner(call.provenance))
        if call.error is None and recorder is not None:
            c.flag(
                "call.precondition",
                "params",
                f"aiter {version.name}, which recorded this call, refuses these arguments ({error}): "
                "it never returns a plan for them",
            )
        elif isinstance(error, AiterCheckError):
            c.hazard("aborts", f"{HAZARDS['aborts']}: {error}")
    except UndefinedResultError as error:
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
    return None


def _decode_hazards(c: Checker, layout: DecodeLayout, batches: int) -> None:
    ratio = layout.qk_batch_ratio
    if ratio > 1 and not layout.uniform_qo and batches > 0:
        c.hazard(
            "fold_qo_indptr_past_end",
            f"{HAZARDS['fold_qo_indptr_past_end']} (qk_batch_ratio={ratio}, uni_seqlen_qo={layout.uni_seqlen_qo})",
        )
    if ratio > 1 and layout.page_size > 1 and batches > 0:
        c.hazard(
            "fold_last_page_lens_past_end",
            f"{HAZARDS['fold_last_page_lens_past_end']} (qk_batch_ratio={ratio}, page_size={layout.page_size})",
        )
    if layout.qo_splits and not layout.uniform_qo and batches > 0:
        c.hazard(
            "lds_read_before_write", f"{HAZARDS['lds_read_before_write']} (packed q tile {layout.packed_qo_len_per_wg} rows)"
        )
    if layout.is_sparse and c.call.params.get("max_seqlen_qo", -1) > 1:
        c.hazard("sparse_writes_past_buffer", HAZARDS["sparse_writes_past_buffer"])


def _observed_folding(c: Checker, layout: DecodeLayout, works: list[Work], batches: int) -> DecodeLayout:
    """The head folding the works were planned with, flagged when it is not the one aiter plans.

    A folded plan has works for every one of ``batches * qk_batch_ratio`` batches,
    an unfolded one never names a batch past ``batches``: the largest batch_idx
    tells which (dense calls; folding is always into 16-head batches). A plan
    folded differently from what the kernel for these heads / dtypes / arch
    expects (an older aiter, a builder passing other dtypes than the kernel
    runs) is reported once, and the rest is checked under its own folding.
    """
    heads = layout.num_heads * layout.qk_batch_ratio
    seen = max((w[C.BATCH_IDX] for w in works if w.has(C.BATCH_IDX)), default=-1)
    if layout.is_sparse or batches <= 0 or seen < 0:
        return layout
    if layout.qk_batch_ratio == 1 and heads > 16 and heads % 16 == 0 and batches <= seen < batches * (heads // 16):
        ratio = heads // 16
    elif layout.qk_batch_ratio > 1 and seen < batches:
        ratio = 1
    else:
        return layout
    c.flag(
        "work.folding",
        "work_info_set batch_idx",
        f"works are planned with qk_batch_ratio={ratio} ({batches * ratio} batches of {heads // ratio} heads) "
        f"but aiter {rules_version(c.call.provenance).name} runs {heads} heads with these dtypes on {c.call.device.get('arch')} as "
        f"qk_batch_ratio={layout.qk_batch_ratio}: the kernel would read the batches differently",
    )
    return layout.refolded(ratio, batches)


def _decode_tiles(
    c: Checker, layout: DecodeLayout, units: list[DecodeBatch], works: list[Work], planned: int | None = None
) -> list[Tile]:
    """Assign each work to its (planned batch, query tile); flag works that fit none. ``planned``: how many batches
    aiter plans, where ``units`` are only some of them (a region)."""
    tiles: dict[tuple[int, int], Tile] = {}
    for unit in units:
        if unit.qo_begin is None or unit.qo_end is None:
            continue
        for k in range(unit.num_tiles):
            start = unit.qo_begin + k * unit.tile_size
            tail = layout.tile_tail(unit, k, start)
            tiles[(unit.index, k)] = Tile(
                unit.index, k, (start, min(start + unit.tile_size, unit.qo_end)), unit.kv_begin, unit.kv_end - tail,
                no_kv=unit.kv_end == unit.kv_begin,
            )
    by_batch: dict[int, list[DecodeBatch]] = defaultdict(list)
    for unit in units:
        by_batch[unit.batch_idx].append(unit)
    sparse = layout.is_sparse
    folded = f" (qk_batch_ratio {layout.qk_batch_ratio})" if layout.qk_batch_ratio > 1 else ""
    for w in works:
        if not w.has(C.BATCH_IDX):
            c.unplaced.append(w)
            continue
        candidates = by_batch.get(w[C.BATCH_IDX], [])
        if not candidates:
            c.flag(
                "work.batch",
                w,
                f"batch_idx {w[C.BATCH_IDX]} is not one of the {len(units) if planned is None else planned} batches "
                f"aiter plans{folded}",
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
                    and u.qo_end is not None
                    and u.qo_begin <= w[C.QO_START] < max(u.qo_end, u.qo_begin + 1)
                    and u.kv_begin <= w[C.KV_START] < max(u.kv_end, u.kv_begin + 1)
                ),
                unit,
            )
        if unit.qo_begin is None or not w.has(C.QO_START, C.QO_END):
            c.unplaced.append(w)
            _check_decode_work(c, layout, unit, w, None)
            continue
        k = (w[C.QO_START] - unit.qo_begin) // unit.tile_size if unit.tile_size else 0
        tile = tiles.get((unit.index, k))
        if tile is None or (w[C.QO_START], w[C.QO_END]) != tile.qo:
            c.flag(
                "work.qo_range",
                w,
                f"qo [{w[C.QO_START]}, {w[C.QO_END]}) is not a query tile of batch {unit.index} "
                f"(qo [{unit.qo_begin}, {unit.qo_end}), {unit.num_tiles} tile(s) of {unit.tile_size})",
            )
            c.unplaced.append(w)
            _check_decode_work(c, layout, unit, w, None)
            continue
        _check_decode_work(c, layout, unit, w, tile)
        tile.works.append(w)
    return list(tiles.values())


def _check_kv_in_some_batch(c: Checker, units: list[DecodeBatch], w: Work) -> None:
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
            w,
            f"kv [{start}, {end}){offset} runs past the end {unit.kv_end} of the batch it starts in",
        )


def _check_decode_work(c: Checker, layout: DecodeLayout, unit: DecodeBatch, w: Work, tile: Tile | None) -> None:
    """kv range inside the batch; kv_offset as v1_2_device.cuh computes it.

    A tile whose causal trim leaves no kv (a batch with fewer kv tokens than
    query tiles) gets one work ``[kv_begin, kv_end - tail)`` from aiter, empty or
    reversed; the kernel computes nothing for it, so that is accepted.
    """
    if not w.has(C.KV_START, C.KV_END):
        return
    start, end = w[C.KV_START], w[C.KV_END]
    if tile is not None and tile.kv_end is not None and tile.kv_end <= tile.kv_begin:  # nothing to see
        if (start, end) != (tile.kv_begin, tile.kv_end):
            c.flag(
                "work.kv_range",
                w,
                f"kv [{start}, {end}) but {tile.where} sees no kv: aiter plans [{tile.kv_begin}, {tile.kv_end})",
            )
    elif not unit.kv_begin <= start < end <= unit.kv_end and not (start == end == unit.kv_end == unit.kv_begin):
        offset = f" (kv_offset {w[C.KV_OFFSET]})" if w.has(C.KV_OFFSET) and w[C.KV_OFFSET] < 0 else ""
        c.flag(
            "work.kv_range",
            w,
            f"kv [{start}, {end}){offset} is empty or outside batch {unit.index}'s kv [{unit.kv_begin}, {unit.kv_end})",
        )
        c.bad_kv.add(w.index)
        return
    if not w.has(C.KV_OFFSET):
        return
    kv_offset = w[C.KV_OFFSET]
    page_size = layout.page_size
    if page_size == 1:
        wanted: int | None = unit.kv_end - end + unit.offset_extra
    elif end == unit.kv_end:
        wanted = 0
    else:
        wanted = None if unit.last_page_len is None else (unit.kv_end - end - 1) * page_size + unit.last_page_len
    if wanted is not None and kv_offset != wanted:
        c.flag(
            "work.kv_offset",
            w,
            f"kv_offset {kv_offset}, but kv_end {end} and the batch kv end {unit.kv_end} give {wanted}",
        )


def _fits_its_buffer(c: Checker, layout: DecodeLayout, qo: Sequence[int], tiles: int | None = None) -> bool:
    """Batches (or query tiles) aiter would plan, against what work_info_set could hold; a wild count is one violation.

    The walks below cost one step per planned batch and per query tile: a wild
    head count, query length or ``uni_seqlen_qo`` in a golden must not make
    them walk billions. A real plan has at most a few per row (empty batches
    get no work).
    """
    p, t = layout.dispatch.params, layout.dispatch.traits
    what = "query tiles" if tiles is not None else "batches"
    count = tiles if tiles is not None else p.num_batches * (qo[1] - qo[0] if t.is_sparse and len(qo) > 1 else 1)
    rows = c.call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    if count <= 16 * (rows + len(qo)):
        return True
    c.flag(
        "coverage",
        "work_info_set",
        f"aiter would plan {count} {what} for these inputs and params, more than work_info_set's {rows} rows could cover",
    )
    return False


def check_decode(c: Checker) -> None:
    call = c.call
    # listed only if the walk runs (or a message names a value): the whole-tensor pass reads the tensors
    qo, kv, last = (c.listed(n) for n in ("seqlens_qo_indptr", "seqlens_kv_indptr", "kv_last_page_lens"))
    _check_call(c, qo, kv, last)
    layout = _decode_layout(c)
    if layout is not None:
        _decode_hazards(c, layout, len(qo) - 1)
    if call.error is not None or not call.outputs:
        c.result.skipped.append("the call raised: no metadata" if call.error is not None else "no outputs recorded")
        return
    check_pointers(c)
    indptr = c.prefix("work_indptr")
    num_works = leading_true(rows_written(call.written["work_info_set"]))
    undefined = c.result.hazard_names & set(_UNDEFINED)
    if not indptr:
        if undefined:
            c.result.skipped.append(f"no defined metadata ({', '.join(sorted(undefined))})")
        else:
            c.flag("written", "work_indptr", "the planner wrote no work_indptr")
        return
    if layout is not None and len(indptr) != layout.num_cu + 1:
        c.flag(
            "work_indptr",
            "work_indptr",
            f"{len(indptr)} entries written; aiter plans {layout.num_cu} CU parts "
            f"(needs {layout.num_cu + 1})",
        )
    if layout is not None and call.params.get("fast_mode", True) and not call.params.get("intra_batch_mode", False):
        clean = (clean_sparse_plan if layout.is_sparse else clean_plan)(c, layout, qo, kv, last, indptr, num_works)
        if clean is not None:  # the walk below would flag nothing: its report, from whole-tensor passes
            c.result.folding = 1 if layout.is_sparse else layout.qk_batch_ratio
            c.result.kernel = _kernel(layout)
            if clean.empty_tiles and clean.first_empty is not None:
                skip_empty_tiles(c, clean.empty_tiles, clean.first_empty)
            check_sizing(c, _decode_helper(c, _longest(c)), written_extent(call))
            return
        part = region(c, layout, qo, kv, last, indptr, num_works)
        if part is not None:  # the walk below, on the batches where something is to flag
            _walk_region(c, layout, part)
            check_sizing(c, _decode_helper(c, _longest(c)), written_extent(call))
            return
    works = decoded_works(c, indptr, num_works)
    if layout is None:
        c.result.skipped.append(f"per-batch invariants: aiter {rules_version(call.provenance).name} has no plan for these inputs")
        return
    if not call.params.get("fast_mode", True) or call.params.get("intra_batch_mode", False):
        c.result.skipped.append("per-batch invariants: only the fast_mode v1_2 planner's layout is known")
        return
    if layout.num_cu + 1 > call.outputs["work_indptr"].numel():
        c.flag(
            "work_indptr",
            "work_indptr",
            f"holds {call.outputs['work_indptr'].numel()} entries; aiter fills {layout.num_cu + 1}",
        )
    layout = _observed_folding(c, layout, works, len(qo) - 1)
    c.result.folding = 1 if layout.is_sparse else layout.qk_batch_ratio  # sparse works name the request itself
    c.result.kernel = _kernel(layout)
    if not _fits_its_buffer(c, layout, qo):
        return
    try:
        units = layout.batches(qo.values, kv.values, last.values)
    except (UndefinedResultError, IndexError) as error:
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
        return
    if not _fits_its_buffer(c, layout, qo, sum(max(unit.num_tiles, 0) for unit in units)):
        return
    try:
        tiles = _decode_tiles(c, layout, units, works)
    except UndefinedResultError as error:  # aiter's per-tile arithmetic divides by a zero the params gave it
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
        return
    check_coverage(c, tiles)
    owner = check_splits(c, tiles)
    check_reduce(c, owner, sum(call.written["reduce_partial_map"].reshape(-1).tolist()))
    check_sizing(c, _decode_helper(c, _longest(c)), written_extent(call))


def _walk_region(c: Checker, layout: DecodeLayout, part: Region) -> None:
    """What the walk of check_decode does from its tiles on, on the region only (see :mod:`.decode_region`)."""
    c.result.folding = layout.qk_batch_ratio
    c.result.kernel = _kernel(layout)
    try:
        tiles = _decode_tiles(c, layout, part.units, part.works, part.planned)
    except UndefinedResultError as error:
        c.hazard("undefined", f"{HAZARDS['undefined']}: {error}")
        return
    check_coverage(c, tiles, (part.empty_elsewhere, part.first_empty))
    owner = check_splits(c, tiles)
    check_reduce(c, owner, int(c.call.written["reduce_partial_map"].sum()))


def _kernel(layout: DecodeLayout) -> str:
    path = "parallel" if layout.dispatch.kernel_name.endswith("parallel") else "serial"
    return f"{path}/" + (f"folded x{layout.qk_batch_ratio}" if layout.qk_batch_ratio > 1 else "native")


def _longest(c: Checker) -> int:
    """The longest query length seqlens_qo_indptr gives (0 for none)."""
    lengths = c.input("seqlens_qo_indptr")
    return max(int((lengths[1:] - lengths[:-1]).max()), 0) if lengths.numel() > 1 else 0


def _decode_helper(c: Checker, longest_qo: int) -> dict[str, int]:
    """Buffer sizes aiter's own helper gives for the query lengths actually passed (none, said why, when it refuses)."""
    call, p = c.call, c.call.params
    try:
        with as_recorded(call):
            sizes = reference.get_mla_metadata_info_v1(
                len(call.inputs["seqlens_kv_indptr"]) - 1,
                max(p.get("max_seqlen_qo", -1), longest_qo),
                p["num_heads_per_head_k"] * p["num_heads_k"],
                to_dtype(p.get("dtype_q_nope")),
                to_dtype(p.get("dtype_kv_nope")),
                p.get("topk", -1) >= 0,
                max_split_per_batch=p.get("max_split_per_batch", -1),
            )
    except (AssertionError, ValueError) as error:
        c.skip("buffer.undersized", f"aiter's sizing helper refuses these arguments ({type(error).__name__}: {error})")
        return {}
    return helper_numels(sizes)
