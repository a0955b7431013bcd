"""Checks every planner op shares: the CSR indptrs, coverage of each tile's kv range, splits, reduce groups, sizing.

The op modules (:mod:`.decode`, :mod:`.prefill`) work out which tiles a plan
must cover (aiter's layout) and hand them here; nothing here knows an op.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import torch

from mla_golden.call import Call
from mla_golden.checks.results import HAZARDS, CheckResult, Hazard, Violation
from mla_golden.geometry import Work, works_by_cu, written_prefix, written_run
from mla_golden.schema import MLA_OP, OUTPUTS, POINTER_OUTPUT, PS_OP, WORK_ROW
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import widened


@dataclass
class Tile:
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
    #: Its batch has no kv tokens at all: aiter may plan no work for it (the kernel then writes none of its rows).
    no_kv: bool = False

    @property
    def where(self) -> str:
        return f"batch {self.unit} q tile {self.tile} qo [{self.qo[0]}, {self.qo[1]}){self.plane}"


class Checker:
    """What one check has found so far, and which works and tiles it has already reported."""

    def __init__(self, call: Call) -> None:
        self.call = _rows_of_eight(call)
        self.result = CheckResult(call.op)
        #: Works that fit no tile (misplaced, or aiter's value is undefined there).
        self.unplaced: list[Work] = []
        #: Rows already reported for a kv range outside their batch (coverage would repeat it).
        self.bad_kv: set[int] = set()
        self._inputs: dict[str, torch.Tensor] = {}
        #: What one pass over the plan computed for the next (by name): the whole-tensor pass and the region walk
        #: start from the same works, tiles and placement.
        self.memo: dict[str, object] = {}

    def input(self, name: str) -> torch.Tensor:
        """Input ``name`` flat as int64 (empty when absent), converted once per check: a million-batch indptr
        is read by a dozen passes."""
        if name not in self._inputs:
            tensor = self.call.inputs.get(name)
            self._inputs[name] = torch.zeros(0, dtype=torch.int64) if tensor is None else widened(tensor.reshape(-1))
        return self._inputs[name]

    def listed(self, name: str) -> Ints:
        """Input ``name`` as a sequence (empty when absent), listed only when a value is read."""
        return Ints(self.input(name), self.call.inputs.get(name))

    def flag(self, invariant: str, where: str | Work | Tile, message: str, works: Sequence[Work] = ()) -> None:
        """Record a violation at ``where``; one about a work or a tile carries its work rows (what pictures mark)."""
        if isinstance(where, Work):
            works = [where, *works]
        elif isinstance(where, Tile):
            works = [*where.works, *works]
        text = where if isinstance(where, str) else where.where
        self.result.violations.append(Violation(invariant, text, message, tuple(dict.fromkeys(w.index for w in works))))

    def skip(self, check: str, why: str) -> None:
        """Say that ``check`` did not run, and why (a skipped check is never silent)."""
        self.result.skipped.append(f"{check}: {why}")

    def hazard(self, name: str, message: str) -> None:
        if name not in self.result.hazard_names:
            self.result.hazards.append(Hazard(name, message))

    def prefix(self, name: str) -> list[int]:
        """A buffer's leading written run (what the planner filled)."""
        return written_prefix(self.call.outputs[name], self.call.written[name])

    def flat(self, name: str, reads: int) -> tuple[Sequence[int], Sequence[int]]:
        """A buffer's values and written flags, flat: listed, or (where the walk reads about ``reads`` entries,
        far fewer than it holds, as a region walk of a million-group plan does) read one at a time."""
        values, written = self.call.outputs[name].reshape(-1), self.call.written[name].reshape(-1)
        if reads * 64 < values.numel():
            return Peek(values), Peek(written)
        return values.tolist(), written.tolist()


class Peek(Sequence[int]):
    """A tensor's entries read one at a time, never listed (a bool tensor's as bools)."""

    def __init__(self, flat: torch.Tensor) -> None:
        self._flat = flat

    def __len__(self) -> int:
        return self._flat.numel()

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        return self._flat[index].tolist()


def _rows_of_eight(call: Call) -> Call:
    """``call`` with its work_info_set seen as the rows of 8 int32 the planner and kernels make of it.

    aiter takes work_info_set as a raw pointer (``p_work_info_set_raw`` in
    csrc/kernels/mla/metadata/v1_2_device.cuh, aiter e4048607) and checks no
    shape: a flat buffer (or one of other rows) is planned and read alike, and
    a part row at its end holds no work (:func:`refused_buffers` flags one the
    planner wrote into).
    """
    info = call.outputs.get("work_info_set")
    if info is None or (info.dim() == 2 and info.shape[1] == WORK_ROW):
        return call
    whole = info.numel() - info.numel() % WORK_ROW

    def rows(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.reshape(-1)[:whole].reshape(-1, WORK_ROW)

    outputs = {**call.outputs, "work_info_set": rows(info)}
    written = {**call.written, "work_info_set": rows(call.written["work_info_set"])}
    return dataclasses.replace(call, outputs=outputs, written=written)


#: Elements per row the prefill planner copies back whole (work_info_set, reduce_final_map).
_PS_ROWS = {"work_info_set": WORK_ROW, "reduce_final_map": 2}


def refused_buffers(call: Call) -> list[tuple[str, str]]:
    """(buffer, problem) for each output buffer a call that returned cannot have had: the planner refuses it
    (the reference raises, as aiter fails or writes past it).

    work_metadata_ptrs holds the two pointers the decode planner writes; a work_info_set whose part row at its
    end was written held a work cut short (the planner writes whole rows, and refuses a buffer its plan overruns);
    the prefill planner copies back whole host rows of work_info_set and reduce_final_map (8 and 2 int32s,
    ``v1_2_host.cuh`` at aiter e4048607), so those must hold whole rows.
    """
    if call.error is not None or not call.outputs:
        return []
    found = []
    if call.op == MLA_OP and math.prod(call.buffers[POINTER_OUTPUT]["shape"]) < 2:
        found.append((POINTER_OUTPUT, "holds fewer than the 2 pointers the planner writes (work_indptr's, work_info_set's)"))
    rows = _PS_ROWS if call.op == PS_OP else {}
    for name, width in rows.items():
        size = call.outputs[name].numel()
        if size % width:
            problem = f"holds {size} int32s, not whole rows of {width}: the planner copies whole rows back, past its end"
            found.append((name, problem))
    written = call.written["work_info_set"].reshape(-1)
    part = written.numel() % WORK_ROW
    if not rows and part and bool(written[written.numel() - part :].any()):
        problem = f"a part row at its end ({part} of {WORK_ROW} int32s) was written: the planner writes whole rows"
        found.append(("work_info_set", problem + " and refuses a buffer its plan overruns"))
    return found


class Ints(Sequence[int]):
    """A tensor's values as a sequence, listed (once) only when one is read: a whole-tensor pass needs the length
    and the int64 tensor alone, and a million-batch indptr as a Python list costs more than the pass."""

    def __init__(self, tensor: torch.Tensor, source: torch.Tensor | None) -> None:
        #: The values, flat int64 (:meth:`Checker.input`).
        self.tensor = tensor
        self._source = source  # what is listed: the values as stored, of whatever dtype (as the walk always read them)
        self._listed: list[int] | None = None

    @property
    def values(self) -> list[int]:
        if self._listed is None:
            self._listed = [] if self._source is None else self._source.reshape(-1).tolist()
        return self._listed

    def __len__(self) -> int:
        return self.tensor.numel()

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        return self.values[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self.values)

    def at(self, indices: list[int]) -> list[int]:
        """The values at ``indices`` (each in range), read from the tensor unless they are listed already."""
        if self._listed is not None or self._source is None:
            return [self.values[i] for i in indices]
        return self._source.reshape(-1)[torch.tensor(indices, dtype=torch.int64)].tolist()


def values_at(values: Sequence[int], indices: list[int]) -> list[int]:
    """``values[i]`` for each of ``indices`` (in range): an unlisted :class:`Ints` reads them without listing."""
    return values.at(indices) if isinstance(values, Ints) else [values[i] for i in indices]


def monotone(c: Checker, invariant: str, name: str, values: Sequence[int], as_tensor: torch.Tensor | None = None) -> bool:
    """values[0] == 0 and never decreasing; flags the first break. ``as_tensor``: the same values, as a tensor
    (then ``values`` is never read: an :class:`Ints` stays unlisted)."""
    if as_tensor is None:
        as_tensor = torch.tensor(values, dtype=torch.int64)  # one pass, not a Python step per entry
    if as_tensor.numel() and int(as_tensor[0]) != 0:
        c.flag(invariant, f"{name}[0]", f"starts at {int(as_tensor[0])}, not 0")
        return False
    falls = (as_tensor[1:] < as_tensor[:-1]).nonzero()
    if falls.numel():
        i = int(falls[0]) + 1
        c.flag(invariant, f"{name}[{i}]", f"decreases from {int(as_tensor[i - 1])} to {int(as_tensor[i])}")
        return False
    return True


def check_indptrs(c: Checker, qo: Sequence[int], kv: Sequence[int], kv_name: str) -> int:
    """Both input indptrs start at 0, never decrease, describe the same batches; returns the batch count."""
    batches = len(qo) - 1
    if len(kv) != len(qo):
        c.flag("call.indptr", kv_name, f"has {len(kv)} entries, seqlens_qo_indptr {len(qo)}")
    monotone(c, "call.indptr", "seqlens_qo_indptr", qo, c.input("seqlens_qo_indptr"))
    monotone(c, "call.indptr", kv_name, kv, c.input(kv_name))
    return batches


def check_pointers(c: Checker) -> None:
    if c.call.facts.get("ptrs_ok") is False:
        c.flag("pointers", POINTER_OUTPUT, "did not point at the work_indptr / work_info_set buffers passed in")
    if c.call.facts.get("deterministic") is False:
        c.hazard("nondeterministic", HAZARDS["nondeterministic"])


def check_sizing(c: Checker, helper: dict[str, int], used: dict[str, int]) -> None:
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


def helper_numels(sizes: Sequence[tuple[Any, torch.dtype]]) -> dict[str, int]:
    names = OUTPUTS  # the order get_*_info_v1 returns them in
    return {
        name: math.prod(shape) if isinstance(shape, tuple) else shape
        for name, (shape, _dtype) in zip(names, sizes)
        if name != POINTER_OUTPUT
    }


# ---------------------------------------------------------------------------
# Works, CU parts, coverage and split bookkeeping (both ops)
# ---------------------------------------------------------------------------


def decoded_works(c: Checker, indptr: list[int], num_works: int) -> list[Work]:
    """The works of every CU part, following work_indptr; flags a malformed work_indptr."""
    info = c.call.outputs["work_info_set"]
    rows = info.shape[0] if info.dim() == 2 else 0
    monotone(c, "work_indptr", "work_indptr", indptr)
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


def check_coverage(c: Checker, tiles: list[Tile], empty_elsewhere: tuple[int, Tile | None] = (0, None)) -> None:
    """The works of each tile cover its [kv_begin, kv_end) in order, with no gap and no overlap.

    When some works fit no tile (reported on their own), a tile with a gap or
    missing its end may be missing exactly those: it is excused, not flagged.
    A tile holding a work already reported outside its batch is not re-reported.
    ``empty_elsewhere``: how many tiles of empty batches not in ``tiles`` got no work, and the first (a region's
    walk: they are skipped with these).
    """
    empty = []
    for tile in tiles:
        if any(w.index in c.bad_kv for w in tile.works):
            tile.excused = True
            continue
        if not tile.works and tile.no_kv:
            tile.excused = True
            empty.append(tile)
            continue
        if not tile.works:
            tile.excused = True
            if not c.unplaced:
                c.flag("coverage", tile, "no work covers this query tile")
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
            c.flag("coverage", tile, problem[1])
    count, other = empty_elsewhere
    if other is not None and (not empty or (other.unit, other.tile) < (empty[0].unit, empty[0].tile)):
        empty.insert(0, other)
        count -= 1
    if empty:
        skip_empty_tiles(c, len(empty) + count, empty[0])


def skip_empty_tiles(c: Checker, count: int, first: Tile) -> None:
    """Say that coverage skipped the ``count`` tiles of batches with no kv tokens that have no work."""
    c.skip(
        "coverage",
        f"{count} tile(s) of batches with no kv tokens (first: {first.where}) have no work: aiter plans "
        "none for an empty batch, so the kernel leaves those output rows as they were",
    )


def check_splits(c: Checker, tiles: list[Tile]) -> dict[int, Tile]:
    """-1 for unsplit tiles, k distinct locations for tiles split k ways, no overlapping slots.

    Returns partial location -> its tile.
    """
    owner: dict[int, Tile] = {}
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
                c.flag("split.partial", tile.works[0], f"unsplit tile has partial_qo_loc {locs[0]}, not -1")
                tile.excused = True
            continue
        if any(loc < 0 for loc in locs) or len(set(locs)) != len(locs):
            c.flag(
                "split.partial",
                tile,
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
                w,
                f"partial rows [{loc}, {loc + rows}) overlap {other.where}'s slot at {next_loc}",
            )
    return owner


def check_reduce(c: Checker, owner: dict[int, Tile], partial_entries: int | None) -> None:
    """reduce_indptr is a CSR over reduce_partial_map; each split tile owns exactly one group."""
    run = written_run(c.call.outputs["reduce_indptr"], c.call.written["reduce_indptr"])
    bounds = widened(run)
    indptr = Ints(bounds, run)  # never listed here: messages read its length, and the groups come from the tensor
    split_tiles = {id(t): t for t in owner.values() if not t.excused}
    expected_entries = sum(len(t.works) for t in split_tiles.values())
    excused = any(t.excused for t in owner.values())
    if not monotone(c, "reduce_indptr", "reduce_indptr", indptr, bounds):
        return
    last = int(bounds[-1]) if bounds.numel() else 0
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
    merging = (bounds[1:] != bounds[:-1]).nonzero().reshape(-1)  # the groups that merge something
    if merging.numel():
        pmap, pwritten = c.flat("reduce_partial_map", 2 * merging.numel())
        fmap, fwritten = c.flat("reduce_final_map", 4 * merging.numel())
    for g, lo, hi in zip(merging.tolist(), run[merging].tolist(), run[merging + 1].tolist()):
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
            c.flag("reduce.group", where, f"lists partials {sorted(locs)} but {tile.where} wrote {wanted}", tile.works)
        if id(tile) in grouped:
            c.flag("reduce.group", where, f"{tile.where} already has reduce group {grouped[id(tile)]}", tile.works)
        grouped[id(tile)] = g
        if 2 * g + 1 < len(fmap) and fwritten[2 * g] and fwritten[2 * g + 1]:
            final = (fmap[2 * g], fmap[2 * g + 1])
            if final != tile.qo:
                c.flag(
                    "reduce.group",
                    where,
                    f"reduce_final_map is [{final[0]}, {final[1]}) but its tile is qo [{tile.qo[0]}, {tile.qo[1]})",
                    tile.works,
                )
    for key, tile in split_tiles.items():
        if key not in grouped:
            c.flag("reduce.group", tile, f"split {len(tile.works)} ways but no reduce group merges it")


def numel(call: Call, name: str) -> int:
    """Elements of the caller's buffer ``name`` (from its spec, else from the recorded output)."""
    spec = call.buffers.get(name)
    if spec is not None:
        return math.prod(spec["shape"])
    return call.outputs[name].numel() if name in call.outputs else 0


def written_extent(call: Call) -> dict[str, int]:
    """Per buffer: one past the last element the planner wrote."""
    extent = {}
    for name, mask in call.written.items():
        flags = mask.reshape(-1).cpu().numpy()  # numpy's argmax stops at the first True; nonzero would list them all
        extent[name] = flags.size - int(flags[::-1].argmax()) if flags.any() else 0
    return extent
