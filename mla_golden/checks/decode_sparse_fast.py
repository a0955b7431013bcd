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
    proved_clean,
    tile_of,
    tiles_per_unit,
    written_works,
)
from mla_golden.reference.layout import DecodeLayout
from mla_golden.schema import WORK_ROW
from mla_golden.schema import WorkColumn as C

#: Folding beyond this is walked (the placement below takes one pass per unit of a kv group).
_MAX_RATIO = 64


@dataclass
class SparseTiles:
    """Every tile of a sparse call, and what the walk reads of each unit besides."""

    tiles: Tiles
    #: Per unit: the request it serves (its works' batch_idx).
    request: torch.Tensor
    #: Per unit: added to the kv_offset aiter writes at page size 1.
    offset_extra: torch.Tensor
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
    return proved_clean(c, works, sparse.tiles, placed) if bool(placed.ok.all()) else None


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
    layout: DecodeLayout, qo: torch.Tensor, unit: torch.Tensor, ori: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """Per unit, aiter's ``QoState`` query length, begin and end (``DecodeLayout.batches``), or None where it
    reads seqlens_qo_indptr past its end."""
    p, t = layout.dispatch.params, layout.dispatch.traits
    if t.is_unique:
        uniform = p.uni_seqlen_qo if t.uni_seqlen_qo == 0 else t.uni_seqlen_qo
        return torch.full_like(unit, uniform), uniform * unit, uniform * (unit + 1)
    token = unit // ori  # QoState's bid
    if unit.numel() and int(token[-1]) + 1 >= qo.numel():
        return None
    values = qo
    request = token // ori // p.qk_batch_ratio  # lds_seqlens_qo[bid]: the length of the request of unit ``bid``
    return values[request + 1] - values[request], values[token], values[token + 1]


def sparse_tiles(c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int]) -> SparseTiles | None:
    """Every unit and tile of a sparse call (``DecodeLayout.batches``, ``tile_tail``, ``_decode_tiles``), or None."""
    p = layout.dispatch.params
    counted = _units(c, layout, qo, kv, last)
    if counted is None:
        return None
    ori, count = counted
    ratio, rows = p.qk_batch_ratio, c.call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    unit = torch.arange(count, dtype=I64)
    request, group = unit // ori // ratio, unit // ratio
    kv_t = c.input("seqlens_kv_indptr")
    kv_request = request[group * ratio]  # the kv length is read when a group starts (u % ratio == 0)
    kv_begin = group * p.topk
    kv_end = kv_begin + (kv_t[kv_request + 1] - kv_t[kv_request]).clamp(max=p.topk)
    ranges = _sparse_qo(layout, c.input("seqlens_qo_indptr"), unit, ori)
    if ranges is None:
        return None
    seqlen, qo_begin, qo_end = ranges
    num_tiles = tiles_per_unit(layout, seqlen)
    if bool((num_tiles < 1).any()) or bool((seqlen < 0).any()) or bool((qo_begin < 0).any()):
        return None
    total_tiles = int(num_tiles.sum())
    if total_tiles > 16 * (rows + len(qo)):
        return None
    tile_size = (seqlen + num_tiles - 1) // num_tiles
    tile_unit, first_tile, k, start, stop = expand_tiles(unit, num_tiles, tile_size, qo_begin, qo_end, total_tiles)
    tail = torch.zeros(total_tiles, dtype=I64)
    if p.page_size == 1 and p.is_causal and not p.is_cp_round_robin and total_tiles != count:  # tile_tail, sparse (0 at k 0)
        tail = (num_tiles[tile_unit] - 1 - k).clamp(min=0)
    tiles = Tiles(count, num_tiles, tile_size, qo_begin, qo_end, kv_begin, kv_end, tile_unit, first_tile, k, start, stop,
                  kv_end[tile_unit] - tail)  # fmt: skip
    offset_extra = ori - 1 - unit % ori if ratio == 1 else torch.zeros(count, dtype=I64)
    return SparseTiles(tiles, request, offset_extra, ori, ratio, p.topk)


def _unit_of(works: torch.Tensor, sparse: SparseTiles, request: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """The unit the walk gives each work of a known request: the first of the request's units whose query window
    ``[qo_begin, max(qo_end, qo_begin + 1))`` holds qo_start and whose kv window holds kv_start, else its first.

    kv windows of different groups are disjoint (each lies in its group's ``topk`` slots), so only the group of
    kv_start can match, and in it the first unit whose query window matches."""
    tiles, ori, ratio = sparse.tiles, sparse.ori, sparse.ratio
    qs, ks = works[:, C.QO_START], works[:, C.KV_START]
    group = torch.div(ks, sparse.topk, rounding_mode="floor")
    in_request = known & (group >= request * ori) & (group < (request + 1) * ori) & (group * ratio < tiles.count)
    lead = torch.where(in_request, group * ratio, 0)
    begin = tiles.kv_begin[lead]
    in_kv = in_request & (begin <= ks) & (ks < torch.maximum(tiles.kv_end[lead], begin + 1))
    chosen = torch.full_like(ks, -1)
    for r in range(ratio):  # the group's units in order: the first match wins
        exists = in_kv & (lead + r < tiles.count)
        u = torch.where(exists, lead + r, 0)
        q_begin = tiles.qo_begin[u]
        in_qo = (q_begin <= qs) & (qs < torch.maximum(tiles.qo_end[u], q_begin + 1))
        chosen = torch.where((chosen < 0) & exists & in_qo, u, chosen)
    return torch.where(chosen >= 0, chosen, request * ori * ratio)


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
    kv_ok = kv_fits(works, tiles, unit, tile)
    if p.page_size == 1:
        wanted = u_end - ke + sparse.offset_extra[unit]
    else:  # every request has its last_page_len (_units checked it)
        last_page = c.input("kv_last_page_lens")[sparse.request[unit]]
        wanted = torch.where(ke == u_end, 0, (u_end - ke - 1) * p.page_size + last_page)
    return Placement(known, placed, tile, placed & kv_ok & (works[:, C.KV_OFFSET] == wanted))
