"""A prefill plan proved clean in whole-tensor passes, so a golden of a million works is checked in about a second.

:func:`clean_plan` answers the question :mod:`.prefill` answers work by work
(one copy of the query tiles per KV head plane, coverage, kv offsets, splits,
the slots the planes share, reduce groups) for the common case: a plan whose
works were all written in full. It only ever says "nothing to report" (a clean
prefill report holds nothing more: no prefill tile is skipped); wherever the
walk would flag, raise or take a branch not ported here it answers False, and
:mod:`.prefill` walks the plan as before, so every message is the walk's own.
Each tensor expression below names the function of :mod:`.prefill` /
:mod:`.common` it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mla_golden.checks.common import Checker
from mla_golden.geometry import written_run
from mla_golden.schema import WORK_ROW, pack_head_range
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import all_true, any_true, flat_nonzero, floor_divmod, same, stable_order, widened_columns

I64 = torch.int64
#: int32 values shifted by this are non-negative and below 2**32: a sort key of (group, value) in one int64.
_SHIFT = 2**31
#: Input dtypes whose values int64 arithmetic holds without overflow (aiter's are int32).
_INTEGER = (torch.int8, torch.int16, torch.int32, torch.uint8)
#: A plan's works, one int64 tensor per work_info_set column (index by :class:`WorkColumn`).
Columns = list[torch.Tensor]


def _order(key: torch.Tensor) -> torch.Tensor | None:
    """:func:`.tensors.stable_order` of ``key``, or None where it is ascending already (as a plan's rows usually are): no
    permutation to apply, where gathering each column by one took a pass apiece."""
    return None if not any_true(key[1:] < key[:-1]) else stable_order(key)


@dataclass
class Tiles:
    """Every query tile of the call, as the walk's ``_ps_tiles`` makes them (one plane's worth; all planes share it)."""

    batches: int
    num_tiles: torch.Tensor  # per batch
    first: torch.Tensor  # per batch: its first tile
    qo_begin: torch.Tensor  # per batch
    unit: torch.Tensor  # per tile: its batch
    start: torch.Tensor  # per tile: qo start
    stop: torch.Tensor  # per tile: qo end
    kv_begin: torch.Tensor  # per tile
    kv_end: torch.Tensor  # per tile: the causally trimmed end its works must reach

    @property
    def total(self) -> int:
        return int(self.unit.numel())


def _small_int(value: Any) -> bool:
    """A positive int the tensor arithmetic below holds without overflow."""
    return type(value) is int and 0 < value < _SHIFT


def _ascending(values: torch.Tensor) -> bool:
    """Starts at 0 and never decreases (:func:`.common.monotone` finds nothing)."""
    return values.numel() == 0 or (int(values[0]) == 0 and not any_true(values[1:] < values[:-1]))


def integer_inputs(c: Checker, names: tuple[str, ...]) -> bool:
    """Each input is present, 1-D and integer-valued: its int64 tensor holds what the walk lists
    (:meth:`.common.Checker.listed`), and indexing it gives what the walk's indexing gives."""
    inputs = c.call.inputs
    return all(name in inputs and inputs[name].dim() == 1 and inputs[name].dtype in _INTEGER for name in names)


def clean_plan(c: Checker, indptr: list[int], num_works: int) -> bool:
    """True when the walk of :func:`.prefill.check_prefill` from its works on would flag nothing; False where it
    must walk the plan (it may flag, raise, or go where this pass does not follow)."""
    p = c.call.params
    q_gran, kv_gran = p.get("qlen_granularity", 256), p.get("kvlen_granularity", 16)
    block, heads = p.get("block_size", 16), p.get("num_heads_k", 0)
    if c.result.violations or not all(_small_int(v) for v in (q_gran, kv_gran, block, heads)):
        return False
    if type(p.get("qhead_granularity", 1)) is not int or not 0 < num_works < _SHIFT or heads > num_works:
        return False
    if not integer_inputs(c, ("seqlens_qo_indptr", "pages_kv_indptr", "context_lens")):
        return False
    if not _written_whole(c, indptr, num_works):
        return False
    tiles = _all_tiles(c, q_gran, kv_gran, block)
    if tiles is None or tiles.total == 0:
        return False
    plane: torch.Tensor | None
    one = _one_plane(c, num_works, heads)
    if one is not None:  # the planes are copies of the first: what the passes find in it they find in each
        works, plane, planes = one, torch.zeros(one[0].numel(), dtype=I64), 1
    else:
        works = _columns(c, num_works)
        plane, planes = _planes(c, works, heads)
    tile = _placed(c, works, tiles, q_gran)
    if plane is None or tile is None or planes * tiles.total > works[0].numel():
        return False
    group = plane * tiles.total + tile  # (head plane, query tile): the walk's tile of that plane
    per_group = torch.bincount(group, minlength=planes * tiles.total)
    if any_true(per_group == 0):
        return False  # check_coverage: "no work covers this query tile"
    if not _chained(c, works, tiles, tile, group, block):
        return False
    split = _slots(works, tiles, tile, plane, per_group[group] > 1, planes)
    if split is None:
        return False
    slot_loc, slot_tile = split
    return _reduce_is_clean(c, slot_loc, slot_tile, tiles)


def _written_whole(c: Checker, indptr: list[int], num_works: int) -> bool:
    """work_indptr is a sane CSR ending at the works written (``decoded_works`` flags nothing and hands them over in
    row order), each row written in full (every column the walk reads)."""
    call = c.call
    info, mask = call.outputs["work_info_set"], call.written["work_info_set"]
    if not indptr or indptr[-1] != num_works or num_works > info.shape[0] or info.dtype != torch.int32:
        return False
    return _ascending(torch.tensor(indptr, dtype=I64)) and all_true(mask[:num_works])


def _columns(c: Checker, rows: int) -> Columns:
    """The first ``rows`` works as int64 columns, each contiguous."""
    table = widened_columns(c.call.outputs["work_info_set"][:rows])
    return [table[:, column] for column in range(WORK_ROW)]


def _one_plane(c: Checker, num_works: int, heads: int) -> Columns | None:
    """The first head plane's works as int64 columns, when the works are ``heads`` runs of one length, each run one
    plane (its q_head_range, one of the ranges :func:`_planes` wants, each once) and otherwise a copy of the first
    run: as the planner lays every plan out. Then each plane's tiles, coverage, chains and slots are the first's,
    and the passes read one run instead of all (the walk's comparison of planes finds them equal); else None."""
    info = c.call.outputs["work_info_set"]
    if heads < 2 or num_works % heads or info.device.type != "cpu":
        return None
    wanted = _wanted(c, heads)
    runs = info[:num_works].numpy().reshape(heads, num_works // heads, WORK_ROW)
    extra = runs[:, :, C.EXTRA]
    if sorted(extra[:, 0].tolist()) != wanted or not (extra == extra[:, :1]).all():
        return None
    rest = runs[:, :, : C.EXTRA]
    if not all(np.array_equal(rest[k], rest[0]) for k in range(1, heads)):
        return None
    return _columns(c, num_works // heads)


def _wanted(c: Checker, heads: int) -> list[int]:
    """Each head plane's q_head_range (packed), ascending: one per KV head of ``qhead_granularity`` heads."""
    qhg = c.call.params.get("qhead_granularity", 1)
    return sorted({pack_head_range(k * qhg, (k + 1) * qhg) for k in range(heads)})


def _all_tiles(c: Checker, q_gran: int, kv_gran: int, block: int) -> Tiles | None:
    """``_ps_tiles``: query tiles of ``q_gran`` rows per batch, each seeing the kv pages its causal end allows."""
    call = c.call
    qo, kv, ctx = (c.input(n) for n in ("seqlens_qo_indptr", "pages_kv_indptr", "context_lens"))
    batches = qo.numel() - 1
    if batches < 0 or kv.numel() != batches + 1 or ctx.numel() != batches:
        return None
    qo_len = qo[1:] - qo[:-1]
    num_tiles = torch.where(qo_len > 0, torch.div(qo_len + q_gran - 1, q_gran, rounding_mode="floor"), 0)
    unit = torch.repeat_interleave(torch.arange(batches, dtype=I64), num_tiles)
    first = torch.cumsum(num_tiles, 0) - num_tiles
    k = torch.arange(unit.numel(), dtype=I64) - first[unit]
    length, kv_len = qo_len[unit], ctx[unit]
    local_end = torch.minimum((k + 1) * q_gran, length)
    if call.params.get("is_causal", True):
        effective = torch.minimum(kv_len - length + local_end, kv_len)
    else:
        effective = kv_len
    blocks = -torch.div(-effective, kv_gran, rounding_mode="floor") * (kv_gran // block)
    base = qo[unit]
    kv_end = torch.minimum(kv[unit] + blocks, kv[unit + 1])
    return Tiles(
        batches=batches, num_tiles=num_tiles, first=first, qo_begin=qo[:-1], unit=unit, start=base + k * q_gran,
        stop=base + local_end, kv_begin=kv[unit], kv_end=kv_end,
    )


def _planes(c: Checker, works: Columns, heads: int) -> tuple[torch.Tensor | None, int]:
    """Each work's head plane (its rank among the q_head_range values, as the walk's ``sorted(planes)``) and how
    many there are, when they are exactly one per KV head (else the walk flags work.head_range)."""
    wanted = _wanted(c, heads)
    if wanted[0] < -_SHIFT or wanted[-1] >= _SHIFT:
        return None, 0  # no int32 q_head_range holds it
    values, extra = torch.tensor(wanted, dtype=I64), works[C.EXTRA]
    plane = torch.searchsorted(values, extra).clamp(max=len(wanted) - 1)
    if not same(values[plane], extra) or any_true(torch.bincount(plane, minlength=len(wanted)) == 0):
        return None, 0
    return plane, len(wanted)


def _placed(c: Checker, works: Columns, tiles: Tiles, q_gran: int) -> torch.Tensor | None:
    """Each work's tile, when every work names a query tile of its batch and kv pages inside that batch
    (``_assign_ps`` flags nothing)."""
    b = works[C.BATCH_IDX]
    known = (b >= 0) & (b < tiles.batches)
    b = torch.where(known, b, 0)
    k = floor_divmod(works[C.QO_START] - tiles.qo_begin[b], q_gran)[0]
    in_batch = known & (k >= 0) & (k < tiles.num_tiles[b])
    tile = torch.where(in_batch, tiles.first[b] + k, 0)
    placed = in_batch & (works[C.QO_START] == tiles.start[tile]) & (works[C.QO_END] == tiles.stop[tile])
    kv = c.input("pages_kv_indptr")
    ks, ke = works[C.KV_START], works[C.KV_END]
    inside = (tiles.kv_begin[tile] <= ks) & (ks < ke) & (ke <= kv[b + 1])
    return tile if all_true(placed & inside) else None


def _chained(c: Checker, works: Columns, tiles: Tiles, tile: torch.Tensor, group: torch.Tensor, block: int) -> bool:
    """``check_coverage``: each group's works, by kv_start, chain from its tile's kv_begin to its kv_end; and
    ``_check_ps_offsets``: the last piece has kv_offset 0, each earlier one the kv tokens after its end."""
    num_works = group.numel()
    # kv_start ties in a group always break the chain (pieces are non-empty): kv_end need not break them
    order = _order(group * 2 * _SHIFT + (works[C.KV_START] + _SHIFT))
    s_group, s_tile, s_start, s_end, s_offset = (
        (v if order is None else v[order]) for v in (group, tile, works[C.KV_START], works[C.KV_END], works[C.KV_OFFSET])
    )
    opens = torch.ones(num_works, dtype=torch.bool)
    opens[1:] = s_group[1:] != s_group[:-1]
    begin = tiles.kv_begin[s_tile]
    covered_to = torch.where(opens, begin, torch.roll(s_end, 1))
    closes = torch.ones(num_works, dtype=torch.bool)
    closes[:-1] = opens[1:]
    if not all_true(s_start == covered_to) or not all_true((s_end == tiles.kv_end[s_tile]) | ~closes):
        return False
    ctx = c.input("context_lens")[tiles.unit][s_tile]  # (per tile, then per work)
    used = s_end - begin if block == 1 else (s_end - begin) * block
    return same(s_offset, torch.where(closes, 0, ctx - used))


def _slots(
    works: Columns, tiles: Tiles, tile: torch.Tensor, plane: torch.Tensor, split: torch.Tensor, planes: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``check_splits`` per plane (-1 for an unsplit tile; slots of split ones non-negative and no two overlapping)
    and the walk's comparison of planes (every tile has the same slots in every plane): the first plane's slots,
    ascending, and their tiles."""
    loc = works[C.PARTIAL_QO_LOC]
    if not all_true((loc == -1) | split) or any_true((loc < 0) & split):
        return None
    at = flat_nonzero(split)
    order = _order(plane[at] * 2 * _SHIFT + loc[at])
    s_plane, s_loc, s_tile = ((v[at] if order is None else v[at][order]) for v in (plane, loc, tile))
    rows = (tiles.stop - tiles.start)[s_tile]
    same_plane = s_plane[1:] == s_plane[:-1]
    if any_true(same_plane & (s_loc[:-1] + rows[:-1] > s_loc[1:])):
        return None  # a slot used twice in a plane, or overlapping the next: check_splits flags it
    if at.numel() % planes:
        return None
    per_plane = at.numel() // planes
    if not same(torch.bincount(s_plane, minlength=planes), torch.full((planes,), per_plane, dtype=I64)):
        return None
    # locs are distinct within a plane: equal (loc, tile) rows mean equal sorted slots per tile in every plane
    locs, owners = s_loc.reshape(planes, per_plane), s_tile.reshape(planes, per_plane)
    if not all_true(locs == locs[0]) or not all_true(owners == owners[0]):
        return None  # "partial slots ... differ": the heads share one set of reduce groups
    return locs[0], owners[0]


def _reduce_is_clean(c: Checker, slot_loc: torch.Tensor, slot_tile: torch.Tensor, tiles: Tiles) -> bool:
    """``check_reduce`` on the first plane's slots finds nothing: reduce_indptr a CSR over its split works'
    partials, one group per split tile listing exactly its slots, its final map (where written) its query range."""
    call = c.call
    indptr = written_run(call.outputs["reduce_indptr"], call.written["reduce_indptr"]).to(I64)
    if not _ascending(indptr):
        return False
    last = int(indptr[-1]) if indptr.numel() else 0
    if last != slot_loc.numel():
        return False  # "ends at ... but the split tiles have ... partials"
    if last == 0:
        return True  # no group merges anything, and no tile is split
    pmap, pwritten = call.outputs["reduce_partial_map"].reshape(-1).to(I64), call.written["reduce_partial_map"].reshape(-1)
    if last > pmap.numel():
        return False
    lo, hi = indptr[:-1], indptr[1:]
    groups = flat_nonzero(hi > lo)
    sizes = (hi - lo)[groups]
    offsets = torch.cumsum(sizes, 0) - sizes
    element = torch.repeat_interleave(lo[groups] - offsets, sizes) + torch.arange(last, dtype=I64)
    if not all_true(pwritten[element]):
        return False
    locs = pmap[element]
    at = torch.searchsorted(slot_loc, locs).clamp(max=slot_loc.numel() - 1)
    if not same(slot_loc[at], locs):
        return False  # a partial of no split work
    if torch.unique(locs).numel() != locs.numel():
        return False  # a partial listed twice (so, as many as the slots: each slot listed once)
    owner = slot_tile[at]
    first_owner = owner[offsets]
    if not same(owner, torch.repeat_interleave(first_owner, sizes)):
        return False  # a group listing partials of other tiles
    if torch.unique(first_owner).numel() != first_owner.numel():
        return False  # a tile with two groups (so each split tile has one, listing all its slots)
    fmap, fwritten = call.outputs["reduce_final_map"].reshape(-1).to(I64), call.written["reduce_final_map"].reshape(-1)
    has_final = 2 * groups + 1 < fmap.numel()
    g, owners = groups[has_final], first_owner[has_final]
    both = fwritten[2 * g] & fwritten[2 * g + 1]
    g, owners = g[both], owners[both]
    return same(fmap[2 * g], tiles.start[owners]) and same(fmap[2 * g + 1], tiles.stop[owners])
