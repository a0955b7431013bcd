"""The part of a decode plan the walk must see to report a violation: the batches where something is to flag.

A golden of a million works with one bad work took the whole walk (about 35 us
a work, in Python). :func:`region` finds, in whole-tensor passes, the planned
batches whose works or tiles the walk of :mod:`.decode` would flag, plus every
batch with a split tile (the split and reduce checks relate tiles through
their slots and groups); everything outside them is proved to be what
:mod:`.decode_fast` proves of a clean plan: each work in its tile, its kv range
and kv_offset aiter's, each tile covered exactly, unsplit with partial_qo_loc
-1. The walk then runs on those batches and their works only, and its report is
the whole walk's: nothing outside them flags, is excused or goes unplaced, and
what the walk reads across batches (how many batches are planned, the batch a
misplaced work starts in, the empty tiles coverage skips) is handed to it.
None where the plan is not one :mod:`.decode_fast` can read (then the whole
walk runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from mla_golden.checks.common import Checker, Tile, values_at
from mla_golden.checks.decode_fast import I64, Tiles, basis, chain
from mla_golden.geometry import Work
from mla_golden.reference.layout import DecodeBatch, DecodeLayout
from mla_golden.schema import WORK_ROW
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import all_true, any_true, flat_nonzero


@dataclass
class Region:
    """The batches the walk must see, their works (and those of no planned batch), in the walk's order."""

    units: list[DecodeBatch]
    works: list[Work]
    #: Batches aiter plans in all (the walk's messages count them).
    planned: int
    #: Tiles of empty batches outside ``units`` that got no work (coverage skips them), and the first of them.
    empty_elsewhere: int
    first_empty: Tile | None


def region(
    c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int], indptr: list[int], num_works: int
) -> Region | None:
    """The region of a dense decode plan that the walk must see (see the module), or None for the whole walk."""
    call, t = c.call, layout.dispatch.traits
    if t.is_sparse or layout.qk_batch_ratio < 1 or not all(n in call.inputs for n in ("seqlens_kv_indptr", "kv_last_page_lens")):
        return None
    start = basis(c, layout, qo, kv, last, indptr, num_works)
    if start is None or start.tiles.count == 0 or any_true(start.tiles.kv_begin[1:] < start.tiles.kv_begin[:-1]):
        return None  # (the walk bisects the batches' kv starts for a work of no planned batch: they must be sorted)
    works, tiles, at = start.works, start.tiles, start.placed
    hit = torch.zeros(tiles.count, dtype=torch.bool)
    hit[works[:, C.BATCH_IDX][~at.ok & at.known]] = True
    stray = works[~at.known]  # the walk looks for the batch each starts in (_check_kv_in_some_batch)
    starts_in = torch.searchsorted(tiles.kv_begin, stray[:, C.KV_START], right=True) - 1
    hit[starts_in[starts_in >= 0]] = True
    per_tile = torch.bincount(at.tile[at.placed], minlength=tiles.total)
    hit[tiles.unit[_tiles_to_walk(works, tiles, at.tile, at.placed, per_tile)]] = True
    chosen = flat_nonzero(hit)
    rows = flat_nonzero(~at.known | hit[torch.where(at.known, works[:, C.BATCH_IDX], 0)])
    walked = hit if tiles.total == tiles.count else hit[tiles.unit]
    empty = flat_nonzero((per_tile == 0) & _no_kv(tiles) & ~walked)
    first = _tile(tiles, int(empty[0])) if empty.numel() else None
    return Region(_units(tiles, chosen, last), _works(works, rows, indptr), tiles.count, int(empty.numel()), first)


def _tiles_to_walk(
    works: torch.Tensor, tiles: Tiles, tile: torch.Tensor, placed: torch.Tensor, per_tile: torch.Tensor
) -> torch.Tensor:
    """Tiles (as a mask) the walk's coverage and split checks must see: not covered exactly by their placed works
    (``check_coverage``), split, or unsplit with a partial slot (``check_splits``)."""
    walk = ((per_tile == 0) & ~_no_kv(tiles)) | (per_tile > 1)
    if all_true(placed):  # (as in a plan with one bad value): every row, no gathers
        mine, ks, ke, loc = tile, works[:, C.KV_START], works[:, C.KV_END], works[:, C.PARTIAL_QO_LOC]
    else:
        rows = flat_nonzero(placed)
        mine, ks, ke, loc = tile[rows], works[rows, C.KV_START], works[rows, C.KV_END], works[rows, C.PARTIAL_QO_LOC]
    s = chain(tiles, mine, ks, ke)
    walk[s.tile[s.kv_start != s.covered_to]] = True
    walk[s.tile[s.closes & (s.kv_end != tiles.kv_stop[s.tile])]] = True
    walk[mine[loc != -1]] = True  # a slot: the tile is split or flagged
    return walk


def _no_kv(tiles: Tiles) -> torch.Tensor:
    """Per tile, whether its unit has an empty kv range."""
    no_kv = tiles.kv_end == tiles.kv_begin
    return no_kv if tiles.total == tiles.count else no_kv[tiles.unit]  # (tile u is unit u's)


def _tile(tiles: Tiles, at: int) -> Tile:
    u = int(tiles.unit[at])
    return Tile(u, int(tiles.k[at]), (int(tiles.start[at]), int(tiles.stop[at])), int(tiles.kv_begin[u]), int(tiles.kv_stop[at]))


def _units(tiles: Tiles, chosen: torch.Tensor, last: Sequence[int]) -> list[DecodeBatch]:
    """The chosen planned batches as ``DecodeLayout.batches`` gives them (dense: batch_idx is the unit)."""
    columns = [tiles.qo_begin, tiles.qo_end, tiles.kv_begin, tiles.kv_end, tiles.num_tiles, tiles.tile_size]
    rows = torch.stack([column[chosen] for column in columns], dim=1).tolist()
    inside = chosen[chosen < len(last)].tolist()  # (last_page_len None past its end, as aiter reads it)
    lasts = dict(zip(inside, values_at(last, inside)))  # read where chosen: a big plan's region is a few batches
    return [
        DecodeBatch(
            index=u, batch_idx=u, qo_begin=qo_begin, qo_end=qo_end, kv_begin=kv_begin, kv_end=kv_end, num_tiles=num,
            tile_size=size, offset_extra=0, last_page_len=lasts.get(u),
        )
        for u, (qo_begin, qo_end, kv_begin, kv_end, num, size) in zip(chosen.tolist(), rows)
    ]


def _works(works: torch.Tensor, rows: torch.Tensor, indptr: list[int]) -> list[Work]:
    """Rows ``rows`` as ``decoded_works`` gives them (written whole, each in its CU part)."""
    parts = torch.searchsorted(torch.tensor(indptr, dtype=I64), rows, right=True) - 1
    whole = [True] * WORK_ROW
    return [Work(row, part, values, whole) for row, part, values in zip(rows.tolist(), parts.tolist(), works[rows].tolist())]
