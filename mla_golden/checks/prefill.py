"""Checks of ``get_ps_metadata_v1`` (prefill) plans against the tiles aiter's host planner makes.

The layout follows aiter e4048607's ``csrc/kernels/mla/metadata/v1_2_host.cuh``
(``kn_generate_ps_metadata``): query tiles of ``qlen_granularity`` rows, each
causally trimmed to the kv pages it may see, one copy of the plan per KV head.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import torch

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
)
from mla_golden.checks.prefill_fast import clean_plan, integer_inputs
from mla_golden.context import plan_for
from mla_golden.geometry import Work
from mla_golden.reference import get_ps_metadata_info_v1
from mla_golden.schema import WORK_ROW, format_cell, pack_head_range
from mla_golden.schema import WorkColumn as C


def _check_call(c: Checker, qo: Sequence[int], kv: Sequence[int], ctx: Sequence[int]) -> None:
    p = c.call.params
    batches = check_indptrs(c, qo, kv, "pages_kv_indptr")
    block = p.get("block_size", 16)
    if len(ctx) != batches:
        c.flag("call.kv_pages", "context_lens", f"has {len(ctx)} entries for {batches} batches")
    for b in _suspect_batches(c, min(batches, len(ctx), len(kv) - 1)):
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


def _suspect_batches(c: Checker, count: int) -> Iterable[int]:
    """The first ``count`` batches that :func:`_check_call` may flag, found in whole-tensor passes (all of them
    where the inputs or block_size are not integers those passes hold): its loop then costs a step per flag."""
    p, names = c.call.params, ("seqlens_qo_indptr", "pages_kv_indptr", "context_lens")
    block = p.get("block_size", 16)
    if count <= 0 or not integer_inputs(c, names) or type(block) is not int or abs(block) >= 2**31:
        return range(max(count, 0))
    qo, kv, ctx = (c.input(name) for name in names)
    suspect = torch.zeros(count, dtype=torch.bool)
    if block > 0:
        suspect |= kv[1 : count + 1] - kv[:count] != -torch.div(-ctx[:count], block, rounding_mode="floor")
    if p.get("is_causal", True):
        suspect |= ctx[:count] < qo[1 : count + 1] - qo[:count]
    return suspect.nonzero().reshape(-1).tolist()


def _ps_tiles(c: Checker, qo: Sequence[int], kv: Sequence[int], ctx: Sequence[int], plane: str) -> list[Tile]:
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
            tiles.append(Tile(b, k, qo_range, kv[b], min(kv[b] + blocks, kv[b + 1]), plane=plane))
    return tiles


def _fits_its_buffer(c: Checker, qo: Sequence[int]) -> bool:
    """Every (query tile, KV head) needs a work: inputs asking for more than work_info_set has rows cannot be covered;
    nor can granularities the planner refuses or never finishes with have given a plan.

    Checked first, in O(batches), so a wild length or head count in a golden
    costs nothing: the per-tile checks below run only on a plan that could exist.
    """
    p = c.call.params
    sizes = {name: p.get(name) for name in ("kvlen_granularity", "block_size")}
    odd = [name for name, value in sizes.items() if not (isinstance(value, int) and value > 0)]
    for name in odd:  # the per-tile checks divide by each (as aiter does: its plan is undefined then)
        c.flag("call.precondition", name, f"must be a positive int, got {sizes[name]!r}")
    if odd:
        return False
    q_gran, heads, kv_gran = p.get("qlen_granularity"), p.get("num_heads_k"), p["kvlen_granularity"]
    if kv_gran & (kv_gran - 1):  # metadata.cu's AITER_CHECK (aiter e4048607): the planner aborts, no plan returns
        c.flag("call.precondition", "kvlen_granularity", f"is {kv_gran}; aiter's planner refuses one that is no power of 2")
        return False
    has_queries, tiles = _query_tiles(c, qo, q_gran)
    if has_queries and not (isinstance(q_gran, int) and q_gran > 0):
        c.flag(
            "call.precondition",
            "qlen_granularity",
            f"is {q_gran!r}: aiter's query tiling loop never ends on a batch with queries, so no plan returns",
        )
        return False
    if not (isinstance(q_gran, int) and isinstance(heads, int) and q_gran > 0 and heads > 0):
        return True  # no tiles, or no head planes: nothing to walk
    rows = c.call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    if tiles * heads <= rows:
        return True
    c.flag(
        "coverage",
        "work_info_set",
        f"the inputs ask for {tiles} query tile(s) x {heads} KV head(s) = {tiles * heads} works, but work_info_set "
        f"holds {rows} rows: they cannot all be covered",
    )
    return False


def _query_tiles(c: Checker, qo: Sequence[int], q_gran: Any) -> tuple[bool, int]:
    """Whether a batch has queries, and (``q_gran`` a positive int) the query tiles of ``q_gran`` rows they make;
    in tensor passes where seqlens_qo_indptr is an integer tensor, not a Python step per batch."""
    positive = isinstance(q_gran, int) and q_gran > 0
    if integer_inputs(c, ("seqlens_qo_indptr",)) and type(q_gran) is int:
        steps = torch.diff(c.input("seqlens_qo_indptr"))
        lengths = steps[steps > 0]
        tiles = int(torch.div(lengths + q_gran - 1, q_gran, rounding_mode="floor").sum()) if positive else 0
        return bool(lengths.numel()), tiles
    queries = [b - a for a, b in zip(qo, qo[1:]) if b > a]
    return bool(queries), sum(-(-n // q_gran) for n in queries) if positive else 0


def check_prefill(c: Checker) -> None:
    call, p = c.call, c.call.params
    # listed only if the walk runs (or a message names a value), as check_decode reads them
    qo, kv, ctx = (c.listed(n) for n in ("seqlens_qo_indptr", "pages_kv_indptr", "context_lens"))
    _check_call(c, qo, kv, ctx)
    if call.error is not None or not call.outputs:
        c.result.skipped.append("the call raised: no metadata" if call.error is not None else "no outputs recorded")
        return
    check_pointers(c)
    c.result.kernel = "prefill"
    if not _fits_its_buffer(c, qo):
        return
    cu_num = call.device.get("cu_num")
    indptr = _cu_indptr(c, cu_num)
    # a work always has a non-empty head range, so its q_head_range is never 0 (the fill is)
    info = call.outputs["work_info_set"].reshape(-1, WORK_ROW)
    fill = (info[:, C.EXTRA] == 0).nonzero()
    num_works = int(fill[0]) if fill.numel() else info.shape[0]
    if clean_plan(c, indptr, num_works):  # the walk below would flag nothing: its report, from whole-tensor passes
        return
    works = decoded_works(c, indptr, num_works)
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
        check_coverage(c, tiles)
        _check_ps_offsets(c, tiles, ctx, p.get("block_size", 16))
        owner = check_splits(c, tiles)
        slots = {t.qo: sorted(w[C.PARTIAL_QO_LOC] for w in t.works) for t in tiles if not t.excused}
        if first is None:
            first = (plane, slots)
            check_reduce(c, owner, None)
            continue
        mismatch = next((tile_qo for tile_qo, locs in slots.items() if first[1].get(tile_qo, locs) != locs), None)
        if mismatch is not None:
            c.flag(
                "reduce.group",
                f"qo [{mismatch[0]}, {mismatch[1]}){plane}",
                f"partial slots {slots[mismatch]} differ from {first[1][mismatch]}{first[0]}; the heads share one "
                "set of reduce groups",
            )
    if c.result.ok:
        # The host planner fills vectors sized by the caller's buffers and copies them back whole
        # (kn_generate_ps_metadata, v1_2_host.cuh at aiter e4048607): a plan found complete above
        # fits its buffers, however much more aiter's helper would allocate. Only a plan cut short
        # (works or reduce groups missing) can have been written past a buffer's end.
        return
    longest = max([b - a for a, b in zip(qo, qo[1:])] or [0])
    check_sizing(c, _ps_helper(c, longest), _ps_used(c, num_works, cu_num))


def _cu_indptr(c: Checker, cu_num: int | None) -> list[int]:
    """work_indptr as far as the CU parts go, flagged where it has fewer entries than one per CU plus one, or
    nonzero ones past them (the planner fills zeros there, and aiter takes the work count from the last)."""
    indptr = c.prefix("work_indptr")
    if cu_num is None:
        return indptr
    if cu_num + 1 > len(indptr):
        c.flag("work_indptr", "work_indptr", f"{len(indptr)} entries written; the planner fills one per CU ({cu_num}) plus one")
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
    return indptr[: cu_num + 1]


def _assign_ps(c: Checker, tiles: list[Tile], works: list[Work]) -> None:
    """Each work belongs to the tile with its batch and query range; its kv pages lie inside the batch."""
    by_key = {(t.unit, t.qo): t for t in tiles}
    batches = {t.unit: t for t in tiles}
    for w in works:
        tile = by_key.get((w[C.BATCH_IDX], (w[C.QO_START], w[C.QO_END])))
        if tile is None:
            invariant = "work.qo_range" if w[C.BATCH_IDX] in batches else "work.batch"
            c.flag(
                invariant,
                w,
                f"batch {w[C.BATCH_IDX]} qo [{w[C.QO_START]}, {w[C.QO_END]}) is not a query tile the planner makes",
            )
            c.unplaced.append(w)
            continue
        kv_end = c.call.inputs["pages_kv_indptr"][tile.unit + 1].item()
        if not tile.kv_begin <= w[C.KV_START] < w[C.KV_END] <= kv_end:
            c.flag(
                "work.kv_range",
                w,
                f"kv pages [{w[C.KV_START]}, {w[C.KV_END]}) empty or outside batch {tile.unit}'s "
                f"[{tile.kv_begin}, {kv_end})",
            )
            c.bad_kv.add(w.index)
        tile.works.append(w)


def _check_ps_offsets(c: Checker, tiles: list[Tile], ctx: Sequence[int], block: int) -> None:
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
                c.flag("work.kv_offset", w, f"kv_offset {w[C.KV_OFFSET]}, but {why}")


def _ps_used(c: Checker, num_works: int, cu_num: int | None) -> dict[str, int]:
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


def _ps_helper(c: Checker, longest_qo: int) -> dict[str, int]:
    """Buffer sizes aiter's own helper gives for the query lengths actually passed (none, said why, when it cannot)."""
    call, p = c.call, c.call.params
    if p.get("qlen_granularity", 256) <= 0:
        c.skip("buffer.undersized", f"aiter's sizing helper divides by qlen_granularity={p.get('qlen_granularity')}")
        return {}
    with plan_for(call.device):
        sizes = get_ps_metadata_info_v1(
            len(call.inputs["seqlens_qo_indptr"]) - 1, p["num_heads_k"], longest_qo, p.get("qlen_granularity", 256)
        )
    return helper_numels(sizes)
