"""A sparse (topk) decode plan proved clean in whole-tensor passes, as :mod:`.decode_fast` proves a dense one.

The same rule holds: :func:`clean_sparse_plan` only ever says "nothing to
report"; wherever the walk of :mod:`.decode` would flag, raise or take a branch
not ported here it answers None and the walk runs. What differs from a dense
plan is the layout (``DecodeLayout.batches`` for ``is_sparse``) and where the
walk puts a work (``_decode_tiles``):

- one planned batch (unit) per (folded batch, query token): ``num_batches *
  ori`` units, ``ori`` the first request's query length; unit ``u`` serves
  request ``u // ori // ratio`` (its works' batch_idx);
- each group of ``qk_batch_ratio`` units has its own ``topk`` kv slots:
  kv ``[(u // ratio) * topk, + min(request's kv length, topk))``;
- query ranges from aiter's ``QoState`` per unit (uniform: ``uniform * u``;
  else the indptr at ``u // ori``), the causal tail ``num_tiles - 1 - k``
  (no folded rule), and kv_offset at page size 1 adds the token's causal
  offset ``ori - 1 - u % ori`` without folding;
- a work goes to the first of its request's units whose query and kv windows
  hold its starts, else to the request's first unit.

Coverage, splits and reduce groups are :func:`.decode_fast.proved_clean`'s
passes over these tiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mla_golden.checks.common import Checker
from mla_golden.checks.decode_fast import (
    I64,
    CleanPlan,
    Placement,
    Tiles,
    expand_tiles,
    kv_fits,
    of_unit,
    proved_clean,
    spread,
    tile_of,
    tiles_per_unit,
    uniform_step,
    written_works,
)
from mla_golden.reference.layout import DecodeLayout
from mla_golden.schema import WORK_ROW
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import all_true, any_true, floor_divmod

#: Folding beyond this is walked (the placement below takes one pass per unit of a kv group).
_MAX_RATIO = 64


@dataclass
class SparseTiles:
    """Every tile of a sparse call, and what the walk reads of each unit besides."""

    tiles: Tiles
    #: Per unit: the request it serves (its works' batch_idx).
    request: torch.Tensor
    #: Per request: its kv length as the walk reads it (at most topk; the window of each of its groups).
    kv_len: torch.Tensor
    #: Per unit: added to the kv_offset aiter writes at page size 1 (None: 0 for every unit).
    offset_extra: torch.Tensor | None
    #: Query tokens per request as aiter counts them (the first request's), the units of a kv group, its kv slots.
    ori: int
    ratio: int
    topk: int


def clean_sparse_plan(
    c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int], indptr: list[int], num_works: int
) -> CleanPlan | None:
    """The report of a sparse decode plan with nothing to flag, or None where :mod:`.decode` must walk it."""
    call = c.call
    inputs = ("seqlens_kv_indptr", "kv_last_page_lens")
    if c.result.violations or not layout.is_sparse or not all(n in call.inputs for n in inputs):
        return None
    works = written_works(c, layout, qo, indptr, num_works)
    sparse = sparse_tiles(c, layout, qo, kv, last) if works is not None else None
    if works is None or sparse is None:
        return None
    placed = sparse_placement(c, layout, works, sparse)
    return proved_clean(c, works, sparse.tiles, placed) if all_true(placed.ok) else None


def _units(c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int]) -> tuple[int, int] | None:
    """(ori, units) as ``DecodeLayout.batches`` counts them, where the walk plans them without raising and
    ``_fits_its_buffer`` lets it; else None."""
    p = layout.dispatch.params
    rows = c.call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    if len(qo) < 2 or p.topk < 1 or not 1 <= p.qk_batch_ratio <= _MAX_RATIO:
        return None  # (topk 0: every kv group has the window [0, 1), and the walk's first match is not one pass)
    qo_t = c.input("seqlens_qo_indptr")
    ori = int(qo_t[1] - qo_t[0])  # (the tensor's: the list is made only if the walk runs)
    count = p.num_batches * ori
    if ori < 1 or count < 0 or count > 16 * (rows + len(qo)):
        return None
    requests = (count - 1) // ori // p.qk_batch_ratio + 1 if count else 0
    if requests + 1 > min(len(qo), len(kv)) or (p.page_size != 1 and requests > len(last)):
        return None  # an input read past its end: the walk raises, or reads None there
    return ori, count


def _sparse_qo(
    layout: DecodeLayout, qo: torch.Tensor, count: int, ori: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int] | None:
    """Per unit, aiter's ``QoState`` begin and end (``DecodeLayout.batches``), and its query length given per
    ``reps`` units (``(lengths, begins, ends, reps)``); None where it reads seqlens_qo_indptr past its end."""
    p, t = layout.dispatch.params, layout.dispatch.traits
    if t.is_unique:
        uniform = p.uni_seqlen_qo if t.uni_seqlen_qo == 0 else t.uni_seqlen_qo
        begin = torch.arange(0, uniform * count, uniform, dtype=I64) if uniform else torch.zeros(count, dtype=I64)
        return torch.tensor([uniform], dtype=I64), begin, begin + uniform, max(count, 1)
    tokens = -(-count // ori)  # QoState's bid is u // ori
    if count and tokens >= qo.numel():
        return None
    # lds_seqlens_qo[bid]: the length of the request of unit bid, request u // ori // ori // ratio
    reps = ori * ori * p.qk_batch_ratio
    requests = -(-count // reps)
    return qo[1 : requests + 1] - qo[:requests], spread(qo[:tokens], ori, count), spread(qo[1 : tokens + 1], ori, count), reps


def sparse_tiles(c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int]) -> SparseTiles | None:
    """Every unit and tile of a sparse call (``DecodeLayout.batches``, ``tile_tail``, ``_decode_tiles``), or None.

    What is the same for a run of units (a request's kv length, a query length) is computed once per run and
    spread: a million single-token units cost a few strided copies, not a division and gather each."""
    p = layout.dispatch.params
    counted = _units(c, layout, qo, kv, last)
    if counted is None:
        return None
    ori, count = counted
    ratio, rows = p.qk_batch_ratio, c.call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    unit = torch.arange(count, dtype=I64)
    request = of_unit(count, ori * ratio)  # u // ori // ratio, which is also the kv read at its group's start
    kv_t = c.input("seqlens_kv_indptr")
    requests = -(-count // (ori * ratio))
    kv_len = (kv_t[1 : requests + 1] - kv_t[:requests]).clamp(max=p.topk)
    kv_begin = of_unit(count, ratio) * p.topk
    kv_end = kv_begin + spread(kv_len, ori * ratio, count)
    ranges = _sparse_qo(layout, c.input("seqlens_qo_indptr"), count, ori)
    if ranges is None:
        return None
    lengths, qo_begin, qo_end, reps = ranges
    run_tiles = tiles_per_unit(layout, lengths)
    if any_true(run_tiles < 1) or any_true(lengths < 0) or any_true(qo_begin < 0):
        return None
    num_tiles = spread(run_tiles, reps, count)
    tile_size = spread((lengths + run_tiles - 1) // run_tiles, reps, count)
    total_tiles = int(num_tiles.sum())
    if total_tiles > 16 * (rows + len(qo)):
        return None
    tile_unit, first_tile, k, start, stop = expand_tiles(unit, num_tiles, tile_size, qo_begin, qo_end, total_tiles)
    kv_stop = kv_end  # one tile per unit: each is its unit's, with no causal tail (0 at k 0)
    if total_tiles != count:
        kv_stop = kv_end[tile_unit]
        if p.page_size == 1 and p.is_causal and not p.is_cp_round_robin:  # tile_tail, sparse
            kv_stop = kv_stop - (num_tiles[tile_unit] - 1 - k).clamp(min=0)
    step = uniform_step(layout, lengths, total_tiles, count)
    tiles = Tiles(
        count=count, num_tiles=num_tiles, tile_size=tile_size, qo_begin=qo_begin, qo_end=qo_end, kv_begin=kv_begin,
        kv_end=kv_end, unit=tile_unit, first=first_tile, k=k, start=start, stop=stop, kv_stop=kv_stop, step=step,
    )
    offset_extra = ori - 1 - unit % ori if ratio == 1 and ori > 1 else None
    return SparseTiles(tiles=tiles, request=request, kv_len=kv_len, offset_extra=offset_extra, ori=ori, ratio=ratio, topk=p.topk)


def _unit_of(works: torch.Tensor, sparse: SparseTiles, request: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """The unit the walk gives each work of a known request: the first of the request's units whose query window
    ``[qo_begin, max(qo_end, qo_begin + 1))`` holds qo_start and whose kv window holds kv_start, else its first.

    kv windows of different groups are disjoint (group ``g``'s lies in its ``topk`` slots from ``g * topk``), so
    only the group of kv_start can match, and in it the first unit whose query window matches. That group's
    window begins at or before kv_start, so it holds it when kv_start's slot in the group is below the window's
    length (the request's kv length, at most topk) or is its first (a window of length 0 or less is [b, b + 1))."""
    tiles, ori, ratio = sparse.tiles, sparse.ori, sparse.ratio
    qs, ks = works[:, C.QO_START], works[:, C.KV_START]
    group, slot = floor_divmod(ks, sparse.topk)
    lead = group * ratio if ratio != 1 else group
    of_request = group == request if ori == 1 else torch.div(group, ori, rounding_mode="floor") == request
    in_request = known & of_request & (lead < tiles.count)  # (request >= 0, so group and lead are too)
    in_kv = in_request & ((slot < sparse.kv_len[request]) | (slot == 0))
    lead = torch.where(in_kv, lead, 0)
    chosen, found = request * ori * ratio, torch.zeros_like(in_kv)  # no match: the request's first unit
    for r in range(ratio):  # the group's units in order: the first match wins
        u = lead + r if r else lead
        exists = in_kv & (u < tiles.count) if r else in_kv
        u = torch.where(exists, u, 0) if r else u
        q_begin = tiles.qo_begin[u] if tiles.step is None else u * tiles.step
        q_end = tiles.qo_end[u] if tiles.step is None else q_begin + tiles.step
        matches = exists & (q_begin <= qs) & ((qs < q_end) | (qs == q_begin))
        if ratio == 1:
            return torch.where(matches, u, chosen)
        chosen = torch.where(matches & ~found, u, chosen)
        found |= matches
    return chosen


def sparse_placement(c: Checker, layout: DecodeLayout, works: torch.Tensor, sparse: SparseTiles) -> Placement:
    """Each work's unit and tile as ``_decode_tiles`` picks them, and whether ``_check_decode_work`` lets it pass."""
    p, tiles = layout.dispatch.params, sparse.tiles
    b = works[:, C.BATCH_IDX]
    if tiles.count == 0:
        nothing = torch.zeros(works.shape[0], dtype=torch.bool)
        return Placement(nothing, nothing, torch.zeros(works.shape[0], dtype=I64), nothing)
    known = (b >= 0) & (b <= sparse.request[-1])
    unit = _unit_of(works, sparse, torch.where(known, b, 0), known)
    tile, placed = tile_of(works, tiles, unit, known)
    ke, u_end = works[:, C.KV_END], tiles.kv_end[unit]
    kv_ok = kv_fits(works, tiles, unit, tile, u_end)
    if p.page_size == 1:
        wanted = u_end - ke if sparse.offset_extra is None else u_end - ke + sparse.offset_extra[unit]
    else:  # every request has its last_page_len (_units checked it)
        last_page = c.input("kv_last_page_lens")[sparse.request[unit]]
        wanted = torch.where(ke == u_end, 0, (u_end - ke - 1) * p.page_size + last_page)
    return Placement(known, placed, tile, placed & kv_ok & (works[:, C.KV_OFFSET] == wanted))
