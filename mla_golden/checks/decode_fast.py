"""A decode plan proved clean in whole-tensor passes, so a golden of a million works is checked in seconds.

:func:`clean_plan` answers the question :mod:`.decode` answers work by work
(tiles, coverage, splits, reduce groups), for the common case: a dense call
whose works were all written in full. It only ever says "nothing to report"
(and what the report then holds: the folding, and the tiles of empty batches
that coverage skips); wherever the walk would flag, raise or take a branch not
ported here it answers None, and :mod:`.decode` walks the plan as before, so
every message is the walk's own. Each tensor expression below names the line
of :mod:`.decode` / :mod:`.common` it stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch

from mla_golden.checks.common import Checker, Tile
from mla_golden.geometry import written_run
from mla_golden.reference.layout import DecodeLayout
from mla_golden.schema import WORK_ROW
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import all_true, any_true, flat_nonzero, same, stable_order, widened_columns

I64 = torch.int64


@dataclass
class CleanPlan:
    """What a clean plan's report holds beyond "no violation"."""

    #: Tiles of batches with no kv tokens that got no work (check_coverage skips them), and the first of them.
    empty_tiles: int
    first_empty: Tile | None


def _ascending(values: torch.Tensor) -> bool:
    """Starts at 0 and never decreases (:func:`.common.monotone` finds nothing)."""
    return values.numel() == 0 or (int(values[0]) == 0 and not any_true(values[1:] < values[:-1]))


def sorted_by(*keys: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``keys`` with their rows sorted by ``keys[0]``, then ``keys[1]``, ... (stable, as Python's sort of tuples):
    ``keys`` themselves when their rows are in that order already (the usual case: works come in tile order), so
    nothing is gathered, and each key gathered once otherwise."""
    if _in_order(keys):
        return keys
    order = stable_order(keys[0])
    by_first = tuple(key[order] for key in keys)
    if _in_order(by_first):
        return by_first  # a few works out of tile order (a diverged plan): one sort, the same permutation as all keys'
    order = torch.arange(keys[0].numel())
    for key in reversed(keys):
        order = order[stable_order(key[order])]
    return tuple(key[order] for key in keys)


def _in_order(keys: tuple[torch.Tensor, ...]) -> bool:
    """The rows are already sorted by ``keys`` (each row's tuple no less than the one before): each later key is
    compared only where the keys before it tie, one pass over the first key when none do."""
    tied = torch.arange(max(keys[0].numel() - 1, 0))  # rows i (against i + 1) not yet decided by an earlier key
    for key in keys:
        step = key[tied + 1] - key[tied] if tied.numel() < key.numel() - 1 else key[1:] - key[:-1]
        if any_true(step < 0):
            return False
        tied = tied[step == 0]
        if not tied.numel():
            return True
    return True


@dataclass
class Tiles:
    """Every (unit, k) tile of a dense decode call, as the walk's ``_decode_tiles`` makes them, one entry each."""

    count: int  # planned batches (units)
    num_tiles: torch.Tensor  # per unit
    tile_size: torch.Tensor  # per unit
    qo_begin: torch.Tensor  # per unit
    qo_end: torch.Tensor  # per unit
    kv_begin: torch.Tensor  # per unit
    kv_end: torch.Tensor  # per unit
    unit: torch.Tensor  # per tile: its unit
    first: torch.Tensor  # per unit: its first tile
    k: torch.Tensor  # per tile: its index within its unit
    start: torch.Tensor  # per tile: qo start
    stop: torch.Tensor  # per tile: qo end
    kv_stop: torch.Tensor  # per tile: the kv end it sees
    #: Where unit u's one tile is [u * step, (u + 1) * step) (a uniform query length, one tile each), that step:
    #: a work's tile is then checked by arithmetic, not by gathering its range.
    step: int | None = None

    @property
    def total(self) -> int:
        return int(self.unit.numel())


def clean_plan(
    c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int], indptr: list[int], num_works: int
) -> CleanPlan | None:
    """The report of a dense decode plan with nothing to flag, or None where :mod:`.decode` must walk it."""
    call, t = c.call, layout.dispatch.traits
    inputs = ("seqlens_kv_indptr", "kv_last_page_lens")
    if c.result.violations or t.is_sparse or layout.qk_batch_ratio < 1 or not all(n in call.inputs for n in inputs):
        return None
    start = basis(c, layout, qo, kv, last, indptr, num_works)
    if start is None or not all_true(start.placed.ok):
        return None
    return proved_clean(c, start.works, start.tiles, start.placed)


def proved_clean(c: Checker, works: torch.Tensor, tiles: Tiles, placed: Placement) -> CleanPlan | None:
    """The report of a plan whose works all sit in their tiles with nothing to flag (``placed.ok``), when coverage,
    splits and reduce find nothing either; else None."""
    tile = placed.tile
    per_tile = torch.bincount(tile, minlength=tiles.total)
    no_kv = tiles.kv_end == tiles.kv_begin
    no_kv = no_kv if tiles.total == tiles.count else no_kv[tiles.unit]  # (tile u is unit u's)
    if not _covered(works, tiles, tile, per_tile, no_kv) or not _split_cleanly(c, works, tiles, tile, per_tile):
        return None
    empty = flat_nonzero((per_tile == 0) & no_kv)
    first = None
    if empty.numel():
        at = int(empty[0])
        u = int(tiles.unit[at])
        first = Tile(u, int(tiles.k[at]), (int(tiles.start[at]), int(tiles.stop[at])), int(tiles.kv_begin[u]), int(tiles.kv_stop[at]))
    return CleanPlan(empty.numel(), first)


@dataclass
class Basis:
    """What the passes over a dense plan start from: its works, every tile, and where each work sits."""

    works: torch.Tensor
    tiles: Tiles
    placed: Placement


def basis(
    c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int], indptr: list[int], num_works: int
) -> Basis | None:
    """The plan's works, tiles and placement, or None where :func:`written_works` or :func:`all_tiles` refuse; made
    once per check (a plan the pass does not prove clean is walked in its region, from the same start)."""
    if "decode_basis" not in c.memo:
        works = written_works(c, layout, qo, indptr, num_works)
        tiles = all_tiles(c, layout, qo, kv, last) if works is not None else None
        made = None if works is None or tiles is None else Basis(works, tiles, placement(c, layout, works, tiles))
        c.memo["decode_basis"] = made
    return cast(Basis | None, c.memo["decode_basis"])


def written_works(c: Checker, layout: DecodeLayout, qo: Sequence[int], indptr: list[int], num_works: int) -> torch.Tensor | None:
    """The works as int64 columns, when work_indptr is a sane CSR over exactly the works written, each written
    whole (``decoded_works``), naming the batches of the folding aiter plans (``_observed_folding``)."""
    call = c.call
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    rows = info.shape[0] if info.dim() == 2 else 0
    work_indptr = torch.tensor(indptr, dtype=I64)
    if not _ascending(work_indptr) or int(work_indptr[-1]) != num_works or num_works > rows:
        return None
    if layout.num_cu + 1 > call.outputs["work_indptr"].numel() or info.dim() != 2 or info.shape[1] != WORK_ROW:
        return None
    works = widened_columns(info[:num_works].cpu())  # column-major int64: each column read below is contiguous
    if not all_true(mask[:num_works]):
        return None
    batches = len(qo) - 1
    ratio, heads = layout.qk_batch_ratio, layout.num_heads * layout.qk_batch_ratio
    seen = int(works[:, C.BATCH_IDX].max()) if num_works else -1
    if batches > 0 and seen >= 0 and not layout.is_sparse:  # sparse works name the request: no folding to tell
        if ratio == 1 and heads > 16 and heads % 16 == 0 and batches <= seen < batches * (heads // 16):
            return None
        if ratio > 1 and seen < batches:
            return None
    return works


def spread(values: torch.Tensor, reps: int, count: int) -> torch.Tensor:
    """``values[u // reps]`` for each unit ``u < count`` (every value used): a strided copy, not a gather."""
    if reps == 1:
        return values[:count]
    return values.unsqueeze(1).expand(-1, reps).reshape(-1)[:count]


def of_unit(count: int, reps: int) -> torch.Tensor:
    """``u // reps`` for each unit ``u < count``, without a division per unit."""
    return spread(torch.arange(-(-count // reps), dtype=I64), reps, count)


def all_tiles(c: Checker, layout: DecodeLayout, qo: Sequence[int], kv: Sequence[int], last: Sequence[int]) -> Tiles | None:
    """Every tile of the call (``_fits_its_buffer``, ``DecodeLayout.batches`` and ``_decode_tiles``), or None.

    What is the same for a run of units (a kv batch's range, a query length and its tiles) is computed once
    per run and spread: a million single-token units cost a few strided copies, not a division and gather each."""
    call, p = c.call, layout.dispatch.params
    rows = call.outputs["work_info_set"].reshape(-1, WORK_ROW).shape[0]
    ratio, count = layout.qk_batch_ratio, p.num_batches
    if count > 16 * (rows + len(qo)) or count < 0:
        return None
    unit = torch.arange(count, dtype=I64)
    batches = -(-count // ratio)  # unit u is kv batch u // ratio
    if count and batches >= len(kv):
        return None  # the walk raises IndexError there (an 'undefined' hazard)
    kv_t = c.input("seqlens_kv_indptr")  # kv[0] is 0: the walk's running sum of kv lengths
    kv_begin, kv_end = spread(kv_t[:batches], ratio, count), spread(kv_t[1 : batches + 1], ratio, count)
    ranges = layout.dense_qo(c.input("seqlens_qo_indptr"))
    if ranges is None:
        return None
    lengths, reps, qo_begin, qo_end = ranges
    run_tiles = tiles_per_unit(layout, lengths)
    if any_true(run_tiles < 1) or any_true(lengths < 0) or any_true(qo_begin < 0):
        return None
    num_tiles, tile_size = spread(run_tiles, reps, count), spread((lengths + run_tiles - 1) // run_tiles, reps, count)
    if not p.page_size == 1 and count > len(last):
        return None  # last_page_len None past its end: the walk skips those kv_offset checks
    total_tiles = int(num_tiles.sum())
    if total_tiles > 16 * (rows + len(qo)):
        return None
    tile_unit, first_tile, k, start, stop = expand_tiles(unit, num_tiles, tile_size, qo_begin, qo_end, total_tiles)
    causal = p.page_size == 1 and p.is_causal  # DecodeLayout.tile_tail
    if causal and ratio != 1 and p.ori_seqlen_qo <= 0:
        return None  # c_mod by zero: an 'undefined' hazard in the walk
    kv_stop = kv_end  # one tile per unit: each is its unit's, and its tail (at most num_tiles - 1 - k) is 0
    if total_tiles != count:
        kv_stop = kv_end[tile_unit]
        if causal and ratio != 1:
            kv_stop = kv_stop - (num_tiles[tile_unit] - (start // ratio) % p.ori_seqlen_qo - 1).clamp(min=0)
        elif causal and not p.is_cp_round_robin:
            kv_stop = kv_stop - (num_tiles[tile_unit] - 1 - k).clamp(min=0)
    step = uniform_step(layout, lengths, total_tiles, count)
    return Tiles(
        count=count, num_tiles=num_tiles, tile_size=tile_size, qo_begin=qo_begin, qo_end=qo_end, kv_begin=kv_begin,
        kv_end=kv_end, unit=tile_unit, first=first_tile, k=k, start=start, stop=stop, kv_stop=kv_stop, step=step,
    )


def uniform_step(layout: DecodeLayout, lengths: torch.Tensor, total: int, count: int) -> int | None:
    """:attr:`Tiles.step` of a call whose query ranges ``QoState`` makes uniform (``lengths`` holding the one
    length), when each unit has one tile; else None."""
    return int(lengths[0]) if layout.dispatch.traits.is_unique and total == count and lengths.numel() == 1 else None


def tiles_per_unit(layout: DecodeLayout, seqlen: torch.Tensor) -> torch.Tensor:
    """Query tiles of each unit of ``seqlen`` query tokens, as ``_decode_tiles`` counts them."""
    p, t = layout.dispatch.params, layout.dispatch.traits
    if not t.qo_splits:
        return torch.ones(seqlen.numel(), dtype=I64)
    if t.features.per_token_qo_tiles and p.num_heads * 2 > t.packed_qo_len_per_wg:
        return seqlen.clone()
    return (seqlen * p.num_heads + t.packed_qo_len_per_wg - 1) >> t.packed_qo_len_per_wg_log2


def expand_tiles(
    unit: torch.Tensor, num_tiles: torch.Tensor, tile_size: torch.Tensor, qo_begin: torch.Tensor, qo_end: torch.Tensor,
    total: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per tile (``total`` of them): its unit, and per unit its first tile; per tile its index k in its unit and its
    qo range. One tile per unit (single-token decode) is each unit's own, at k 0: no repeat or gathers."""
    if total == unit.numel():
        return unit, unit, torch.zeros(total, dtype=I64), qo_begin, torch.minimum(qo_begin + tile_size, qo_end)
    tile_unit = torch.repeat_interleave(unit, num_tiles)
    first_tile = torch.cumsum(num_tiles, 0) - num_tiles
    k = torch.arange(total, dtype=I64) - first_tile[tile_unit]
    start = qo_begin[tile_unit] + k * tile_size[tile_unit]
    return tile_unit, first_tile, k, start, torch.minimum(start + tile_size[tile_unit], qo_end[tile_unit])


@dataclass
class Placement:
    """Where the walk's ``_decode_tiles`` puts each work, and whether ``_check_decode_work`` lets it pass."""

    #: batch_idx names a planned batch.
    known: torch.Tensor
    #: [qo_start, qo_end) is one of that batch's tiles (the walk appends the work to it).
    placed: torch.Tensor
    #: Its tile (0 where not placed).
    tile: torch.Tensor
    #: Placed, its kv range inside its batch (or its tile's own empty range) and its kv_offset aiter's: nothing to flag.
    ok: torch.Tensor


def placement(c: Checker, layout: DecodeLayout, works: torch.Tensor, tiles: Tiles) -> Placement:
    """Each work's tile (batch_idx a planned batch, [qo_start, qo_end) one of its tiles), and whether its kv range
    is inside its batch (or is the tile's own empty range) and its kv_offset is aiter's (``_check_decode_work``)."""
    p = layout.dispatch.params
    b = works[:, C.BATCH_IDX]
    if tiles.count == 0:
        nothing = torch.zeros(works.shape[0], dtype=torch.bool)
        return Placement(nothing, nothing, torch.zeros(works.shape[0], dtype=I64), nothing)
    if b.numel() and int(b.min()) >= 0 and int(b.max()) < tiles.count:  # every batch_idx planned (the usual case):
        known = torch.ones((), dtype=torch.bool).expand(b.shape)  # two reductions, no mask and no gather index made
    else:
        known = (b >= 0) & (b < tiles.count)
        b = torch.where(known, b, 0)
    tile, placed = tile_of(works, tiles, b, known)
    ke, u_end = works[:, C.KV_END], tiles.kv_end[b]
    if p.page_size == 1:
        wanted = u_end - ke
    else:  # every batch has its last_page_len (all_tiles checked it)
        last_page = c.input("kv_last_page_lens")[: tiles.count][b]
        wanted = torch.where(ke == u_end, 0, (u_end - ke - 1) * p.page_size + last_page)
    ok = kv_fits(works, tiles, b, tile, u_end)
    ok &= placed
    ok &= works[:, C.KV_OFFSET] == wanted
    return Placement(known, placed, tile, ok)


def tile_of(works: torch.Tensor, tiles: Tiles, unit: torch.Tensor, known: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each work's tile in its ``unit`` (where ``known``), and whether [qo_start, qo_end) is that tile (placed), as
    ``_decode_tiles`` appends it. One tile per unit: placed when its qo range is the unit's one tile."""
    if tiles.total == tiles.count:
        tile, in_unit = unit, known
    else:
        size = tiles.tile_size[unit]
        w_k = torch.where(size > 0, torch.div(works[:, C.QO_START] - tiles.qo_begin[unit], size.clamp(min=1), rounding_mode="floor"), 0)
        in_unit = known & (w_k >= 0) & (w_k < tiles.num_tiles[unit])
        tile = torch.where(in_unit, tiles.first[unit] + w_k, 0)
    qs, qe = works[:, C.QO_START], works[:, C.QO_END]
    if tiles.step is not None:
        placed = qs == tile * tiles.step
        placed &= qe == qs + tiles.step
    else:
        placed = qs == tiles.start[tile]
        placed &= qe == tiles.stop[tile]
    return tile, placed & in_unit


def kv_fits(works: torch.Tensor, tiles: Tiles, unit: torch.Tensor, tile: torch.Tensor, u_end: torch.Tensor) -> torch.Tensor:
    """The kv range is inside its unit's (ending at ``u_end``, its kv end, which the caller has gathered), or is
    its tile's own empty range where the tile sees no kv (``_check_decode_work``)."""
    ks, ke, u_begin = works[:, C.KV_START], works[:, C.KV_END], tiles.kv_begin[unit]
    own_tiles = tiles.kv_stop is tiles.kv_end and tile is unit  # one tile per unit, with its unit's kv end
    stop = u_end if own_tiles else tiles.kv_stop[tile]
    inside = u_begin <= ks
    inside &= ks < ke
    inside &= ke <= u_end
    sees_no_kv = stop <= u_begin
    if all_true(inside) and not any_true(sees_no_kv):
        return inside  # what the expression below gives where every tile sees kv and every range is inside
    inside |= (ks == ke) & (ke == u_end) & (u_end == u_begin)
    return torch.where(sees_no_kv, (ks == u_begin) & (ke == stop), inside)


@dataclass
class Chain:
    """Works sorted by (tile, kv_start, kv_end), and where each tile's chain must be: what check_coverage walks."""

    tile: torch.Tensor
    kv_start: torch.Tensor
    kv_end: torch.Tensor
    #: Where each work must start: its tile's kv_begin for the first, the previous work's kv_end for the others.
    covered_to: torch.Tensor
    #: The last work of its tile.
    closes: torch.Tensor


def chain(tiles: Tiles, tile: torch.Tensor, kv_start: torch.Tensor, kv_end: torch.Tensor) -> Chain:
    tile, kv_start, kv_end = sorted_by(tile, kv_start, kv_end)
    opens = torch.ones(tile.numel(), dtype=torch.bool)
    opens[1:] = tile[1:] != tile[:-1]
    tile_begin = tiles.kv_begin if tiles.total == tiles.count else tiles.kv_begin[tiles.unit]  # (tile u is unit u's)
    covered_to = torch.where(opens, tile_begin[tile], torch.roll(kv_end, 1))
    closes = torch.ones(tile.numel(), dtype=torch.bool)
    closes[:-1] = opens[1:]
    return Chain(tile, kv_start, kv_end, covered_to, closes)


def _covered(works: torch.Tensor, tiles: Tiles, tile: torch.Tensor, per_tile: torch.Tensor, no_kv: torch.Tensor) -> bool:
    """``check_coverage``: each tile's works, sorted by (kv_start, kv_end), chain from kv_begin to its kv end."""
    if any_true((per_tile == 0) & ~no_kv):
        return False
    s = chain(tiles, tile, works[:, C.KV_START], works[:, C.KV_END])
    return all_true(s.kv_start == s.covered_to) and all_true((s.kv_end == tiles.kv_stop[s.tile]) | ~s.closes)


def _split_cleanly(c: Checker, works: torch.Tensor, tiles: Tiles, tile: torch.Tensor, per_tile: torch.Tensor) -> bool:
    """``check_splits``: -1 for an unsplit tile, distinct slots for a split one, no two slots overlapping; and
    the reduce groups as the walk checks them."""
    loc = works[:, C.PARTIAL_QO_LOC]
    split = per_tile[tile] > 1
    if not all_true((loc == -1) | split) or any_true((loc < 0) & split):
        return False
    slots = flat_nonzero(split)
    slot_order = torch.sort(loc[slots], stable=True).indices
    slot_loc, slot_tile = loc[slots][slot_order], tile[slots][slot_order]
    slot_rows = (tiles.stop - tiles.start)[slot_tile]
    if any_true(slot_loc[1:] <= slot_loc[:-1]) or any_true(slot_loc[:-1] + slot_rows[:-1] > slot_loc[1:]):
        return False  # a slot used twice (or overlapping the next): the walk flags it (or lets a later tile own it)
    return _reduce_is_clean(c, slot_loc, slot_tile, per_tile, tiles.start, tiles.stop)


def _reduce_is_clean(
    c: Checker, slot_loc: torch.Tensor, slot_tile: torch.Tensor, per_tile: torch.Tensor, start: torch.Tensor, stop: torch.Tensor
) -> bool:
    """check_reduce finds nothing: reduce_indptr a CSR over the written partials, one group per split tile."""
    call = c.call
    indptr = written_run(call.outputs["reduce_indptr"], call.written["reduce_indptr"]).to(I64)
    if not _ascending(indptr):
        return False
    last = int(indptr[-1]) if indptr.numel() else 0
    split_tiles = torch.unique(slot_tile)
    if last != slot_tile.numel():
        return False  # entries of the split tiles' partials
    pmap, pwritten = call.outputs["reduce_partial_map"].reshape(-1).to(I64), call.written["reduce_partial_map"].reshape(-1)
    if last != int(pwritten.sum()) or last > pmap.numel():
        return False
    lo, hi = indptr[:-1], indptr[1:]
    groups = flat_nonzero(hi > lo)
    sizes = (hi - lo)[groups]
    element = (
        torch.repeat_interleave(lo[groups], sizes)
        + torch.arange(last, dtype=I64)
        - torch.repeat_interleave(torch.cumsum(sizes, 0) - sizes, sizes)
    )
    if not all_true(pwritten[element]):
        return False
    locs = pmap[element]
    at = torch.searchsorted(slot_loc, locs).clamp(max=max(slot_loc.numel() - 1, 0))
    if slot_loc.numel() == 0 or not same(slot_loc[at], locs):
        return last == 0  # a partial of no split work
    owner = slot_tile[at]
    group_of = torch.repeat_interleave(torch.arange(groups.numel()), sizes)
    first_owner = owner[torch.cumsum(sizes, 0) - sizes]
    if not same(owner, first_owner[group_of]) or not same(sizes, per_tile[first_owner]):
        return False  # a group listing partials of other tiles, or not all of its tile's
    if torch.unique(locs).numel() != locs.numel():
        return False  # a partial listed twice
    if torch.unique(first_owner).numel() != first_owner.numel() or first_owner.numel() != split_tiles.numel():
        return False  # a tile with two groups, or a split tile with none
    fmap, fwritten = call.outputs["reduce_final_map"].reshape(-1).to(I64), call.written["reduce_final_map"].reshape(-1)
    has_final = 2 * groups + 1 < fmap.numel()
    g, tiles = groups[has_final], first_owner[has_final]
    both = fwritten[2 * g] & fwritten[2 * g + 1]
    g, tiles = g[both], tiles[both]
    return same(fmap[2 * g], start[tiles]) and same(fmap[2 * g + 1], stop[tiles])
