"""check's whole-tensor pass over a clean prefill plan reports what the work-by-work walk of the plan reports, on
real plans, on planted violations and on random single-element corruptions of random plans.

The walk (``clean_plan`` answering False) is the documented behaviour: each result is compared with it, field by
field, and the planted ones are also checked against the violation they must raise.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.calls import prefill_call
from helpers.conformance import record_call, record_params
from helpers.repo import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mla_golden.call import Call
from mla_golden.checks import CheckResult, check, prefill, prefill_fast
from mla_golden.golden.store import GoldenStore, load
from mla_golden.schema import PS_OP, pack_head_range
from mla_golden.schema import WorkColumn as C
from mla_golden.tensors import stable_order

SHIPPED = ROOT / "goldens"


def _walked(call: Call, monkeypatch: pytest.MonkeyPatch) -> CheckResult:
    with monkeypatch.context() as patch:
        patch.setattr(prefill, "clean_plan", lambda *args: False)
        return check(call)


def _taken(call: Call, monkeypatch: pytest.MonkeyPatch) -> tuple[CheckResult, bool]:
    """check's result, and whether the whole-tensor pass gave it."""
    answers: list[bool] = []

    def spy(*args: Any) -> bool:
        answers.append(prefill_fast.clean_plan(*args))
        return answers[-1]

    with monkeypatch.context() as patch:
        patch.setattr(prefill, "clean_plan", spy)
        result = check(call)
    return result, answers == [True]


def _same(fast: CheckResult, walked: CheckResult) -> None:
    assert fast.to_dict() == walked.to_dict()
    assert fast.folding == walked.folding


def _prefill_goldens() -> list[Path]:
    return sorted(p for p in GoldenStore(SHIPPED).paths() if load(p).call.op == PS_OP)


def test_every_shipped_prefill_golden_reads_the_same_and_takes_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _prefill_goldens()
    assert paths, "goldens/prefill ships prefill goldens"
    taken = 0
    for path in paths:
        call = load(path).call
        fast, used = _taken(call, monkeypatch)
        _same(fast, _walked(call, monkeypatch))
        taken += used
    assert taken == len(paths), f"the pass answered {taken} of {len(paths)}"


PS_RECORDS = record_params("ps_v1-e4048607")


def test_prefill_conformance_records_read_the_same_and_take_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = 0
    for record in PS_RECORDS:
        call = record_call(record.values[0])
        fast, used = _taken(call, monkeypatch)
        _same(fast, _walked(call, monkeypatch))
        taken += used
    assert taken >= len(PS_RECORDS) * 9 // 10, f"the pass answered {taken} of {len(PS_RECORDS)}"


def _split(call: Call) -> list[int]:
    info = call.outputs["work_info_set"]
    return (info[: int(call.outputs["work_indptr"][-1]), C.PARTIAL_QO_LOC] >= 0).nonzero().reshape(-1).tolist()


def _unsplit(call: Call) -> int:
    info = call.outputs["work_info_set"]
    return int((info[: int(call.outputs["work_indptr"][-1]), C.PARTIAL_QO_LOC] < 0).nonzero()[-1])


#: Calls as callers make them: each must take the pass and read as the walk does (those marked True split tiles).
VARIED: dict[str, tuple[dict[str, Any], bool]] = {
    "ragged, causal": ({"seq_lens": [100, 700, 3000, 1, 256, 257]}, True),
    "chunked, not causal, pages of 16": (
        {"seq_lens": [300, 50, 1000], "context": [900, 50, 4000], "causal": False, "block_size": 16}, True
    ),
    "chunked, causal, kv granularity 16": (
        {"seq_lens": [513, 64, 2000], "context": [1500, 64, 2100], "block_size": 16, "kvlen_granularity": 16}, True
    ),
    "3 KV heads in one cluster (planes interleaved)": ({"seq_lens": [900, 40, 1700], "heads": 3}, True),
    "8 KV heads of 8 q heads each": ({"seq_lens": [2048, 333], "heads": 8, "qhead_granularity": 8}, True),
    "one head, 64-row tiles, gfx942/80": (
        {"seq_lens": [2000, 3000, 5], "heads": 1, "qlen_granularity": 64, "kvlen_granularity": 16,
         "device": ("gfx942", 80)}, True,
    ),  # fmt: skip
    "many short requests": ({"seq_lens": [1 + i % 97 for i in range(400)], "heads": 2}, False),
}


@pytest.mark.parametrize("name", sorted(VARIED))
def test_varied_prefill_calls_take_the_pass_and_read_the_same(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs, splits = VARIED[name]
    call = prefill_call(**kwargs)
    fast, used = _taken(call, monkeypatch)
    assert used and fast.ok, fast.to_dict()["violations"]
    _same(fast, _walked(call, monkeypatch))
    assert bool(_split(call)) == splits


def _set(column: C, value: Callable[[int], int], row: Callable[[Call], int] = _unsplit) -> Callable[[Call], None]:
    def plant(call: Call) -> None:
        at = row(call)
        call.outputs["work_info_set"][at, column] = value(int(call.outputs["work_info_set"][at, column]))

    return plant


def _first_split(call: Call) -> int:
    return _split(call)[0]


def _duplicate_slot(call: Call) -> None:
    """Two split works of one plane, in different tiles, given one slot."""
    info = call.outputs["work_info_set"]
    a, *others = _split(call)

    def tile(w: int) -> tuple[int, int, int]:
        return int(info[w, C.EXTRA]), int(info[w, C.BATCH_IDX]), int(info[w, C.QO_START])

    b = next(w for w in others if tile(w)[0] == tile(a)[0] and tile(w) != tile(a))
    info[b, C.PARTIAL_QO_LOC] = int(info[a, C.PARTIAL_QO_LOC])


def _overlapping_slots(call: Call) -> None:
    """One tile's slot moved (in every plane, and in its reduce group) to just past another tile's: the reduce
    groups still agree with the works, but the two slots' partial rows overlap."""
    info, pmap = call.outputs["work_info_set"], call.outputs["reduce_partial_map"]
    split = _split(call)
    a = split[0]
    moved, tile = int(info[a, C.PARTIAL_QO_LOC]), (int(info[a, C.BATCH_IDX]), int(info[a, C.QO_START]))
    other = next(w for w in split if (int(info[w, C.BATCH_IDX]), int(info[w, C.QO_START])) != tile)
    to = int(info[other, C.PARTIAL_QO_LOC]) + 1
    same = (info[:, C.BATCH_IDX] == tile[0]) & (info[:, C.QO_START] == tile[1]) & (info[:, C.PARTIAL_QO_LOC] == moved)
    info[same.nonzero().reshape(-1), C.PARTIAL_QO_LOC] = to
    pmap[int((pmap[: int(call.outputs["reduce_indptr"][-1])] == moved).nonzero()[0])] = to


def _uncovered(call: Call) -> None:
    """The last work (of the last plane's last CU part) dropped: its tile, which it covered alone, has no work
    in that plane."""
    info, indptr = call.outputs["work_info_set"], call.outputs["work_indptr"]
    last = int(indptr[-1]) - 1
    assert int(info[last, C.PARTIAL_QO_LOC]) == -1, "the last work is a tile of its own"
    info[last] = 0
    indptr[indptr > last] = last


def _unwrite_partial(call: Call) -> None:
    call.written["reduce_partial_map"][0] = False


def _groups(call: Call) -> list[tuple[int, int]]:
    """The reduce groups that merge something, as [lo, hi) into reduce_partial_map."""
    bounds = call.outputs["reduce_indptr"].tolist()
    return [(lo, hi) for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def _swap_partials(call: Call) -> None:
    """The second partials of two groups swapped: every slot is listed once, but two groups mix two tiles."""
    pmap = call.outputs["reduce_partial_map"]
    (a, _), (b, _) = [group for group in _groups(call) if group[1] - group[0] >= 2][:2]
    pmap[a + 1], pmap[b + 1] = int(pmap[b + 1]), int(pmap[a + 1])


def _listed_twice(call: Call) -> None:
    """A group's second partial replaced by its first."""
    pmap = call.outputs["reduce_partial_map"]
    lo, _hi = next(group for group in _groups(call) if group[1] - group[0] >= 2)
    pmap[lo + 1] = int(pmap[lo])


def _group_split(call: Call) -> None:
    """The last group cut in two, at the first of the fill entries after it (the planner repeats the end there)."""
    indptr = call.outputs["reduce_indptr"]
    lo, hi = _groups(call)[-1]
    assert hi - lo >= 2 and int(indptr[-1]) == hi, "the last group merges two partials and the fill follows it"
    indptr[int((indptr == hi).nonzero()[0])] = lo + 1


def _partial_map(call: Call) -> None:
    call.outputs["reduce_partial_map"][0] += 1


def _final_map(call: Call) -> None:
    call.outputs["reduce_final_map"][0, 1] += 1


def _unwrite(call: Call) -> None:
    call.written["work_info_set"][_unsplit(call), C.KV_START] = False


def _context(call: Call) -> None:
    call.inputs["context_lens"][1] += 1


def _head_range(call: Call) -> None:
    call.outputs["work_info_set"][_unsplit(call), C.EXTRA] = pack_head_range(300, 301)


#: A planting and the invariant the walk reports for it (None: nothing, as for a cell the planner did not write,
#: which check never reads).
PLANTED: dict[str, tuple[Callable[[Call], None], str | None]] = {
    "kv range past the batch": (_set(C.KV_END, lambda v: v + 10**6), "work.kv_range"),
    "kv start gap": (_set(C.KV_START, lambda v: v + 1, _first_split), "coverage"),
    "kv_offset": (_set(C.KV_OFFSET, lambda v: v + 1, _first_split), "work.kv_offset"),
    "qo range": (_set(C.QO_END, lambda v: v + 1), "work.qo_range"),
    "batch": (_set(C.BATCH_IDX, lambda v: 1 << 20), "work.batch"),
    "unsplit with a slot": (_set(C.PARTIAL_QO_LOC, lambda v: 1 << 20), "split.partial"),
    "split without a slot": (_set(C.PARTIAL_QO_LOC, lambda v: -1, _first_split), "split.partial"),
    "slot used twice": (_duplicate_slot, "partial.overlap"),
    "slots overlapping, reduce map following": (_overlapping_slots, "partial.overlap"),
    "reduce partial map entry": (_partial_map, "reduce.group"),
    "partials swapped between groups": (_swap_partials, "reduce.group"),
    "a partial listed twice": (_listed_twice, "reduce.group"),
    "a reduce group split in two": (_group_split, "reduce.group"),
    "reduce partial map entry not written": (_unwrite_partial, "reduce.group"),
    "a tile no work covers": (_uncovered, "coverage"),
    "reduce final map": (_final_map, "reduce.group"),
    "head range": (_head_range, "work.head_range"),
    "context lens": (_context, "call.kv_pages"),
    "a cell not written": (_unwrite, None),
}


@pytest.fixture(scope="module")
def mid_size() -> Call:
    """A clean prefill plan of 80 requests, 4 KV heads, split tiles (so every part of the check has work to do)."""
    call: Call = prefill_call([300, 1000, 77, 2500] * 20, heads=4, context=[300, 1500, 77, 2600] * 20)
    assert _split(call), "the plan splits some tiles"
    return call


def test_the_mid_size_plan_takes_the_pass_and_reads_the_same(mid_size: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, used = _taken(mid_size, monkeypatch)
    assert used and fast.ok
    _same(fast, _walked(mid_size, monkeypatch))


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violations_make_the_pass_step_aside_and_read_as_the_walk_says(
    name: str, mid_size: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = copy.deepcopy(mid_size)
    plant, invariant = PLANTED[name]
    plant(call)
    fast, used = _taken(call, monkeypatch)
    assert not used, "the pass never answers for a plan with something to flag, nor for one not written whole"
    _same(fast, _walked(call, monkeypatch))
    assert fast.invariants == set() if invariant is None else invariant in fast.invariants, fast.to_dict()["violations"]


def _short_indptr(call: Call) -> None:
    call.outputs["reduce_indptr"][-1] -= 1


def _short_partial_map(call: Call) -> None:
    """reduce_partial_map one entry shorter than the partials it must list (as a caller's buffer can be)."""
    for side in (call.outputs, call.written):
        side["reduce_partial_map"] = side["reduce_partial_map"][:-1].clone()
    call.buffers["reduce_partial_map"] = {**call.buffers["reduce_partial_map"], "shape": [call.outputs["reduce_partial_map"].numel()]}


#: Plantings on a plan in buffers sized to it (no fill past the reduce groups), and the invariant the walk reports.
PLANTED_EXACT: dict[str, tuple[Callable[[Call], None], str]] = {
    "reduce_indptr ends short": (_short_indptr, "reduce_indptr"),
    "reduce_partial_map too short": (_short_partial_map, "reduce.group"),
}


@pytest.mark.parametrize("name", sorted(PLANTED_EXACT))
def test_planted_violations_of_an_exactly_sized_plan_read_as_the_walk_says(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    call = prefill_call([300, 1000, 77, 2500] * 5, heads=2, exact=True)
    clean, used = _taken(call, monkeypatch)
    assert used and clean.ok
    plant, invariant = PLANTED_EXACT[name]
    plant(call)
    fast, used = _taken(call, monkeypatch)
    assert not used
    _same(fast, _walked(call, monkeypatch))
    assert invariant in fast.invariants, fast.to_dict()["violations"]


DEVICES = (("gfx942", 304), ("gfx942", 80), ("gfx950", 256))
#: Where a corruption lands: an output or input buffer, or (``mask``) the written flag of a work_info_set cell.
TARGETS = ("work_info_set", "work_indptr", "reduce_indptr", "reduce_final_map", "reduce_partial_map",
           "seqlens_qo_indptr", "pages_kv_indptr", "context_lens", "mask")  # fmt: skip


@st.composite
def small_calls(draw: st.DrawFn) -> Call:
    """A random small prefill call (chunked when context > query), planned by the reference on a random device
    into buffers its helper sizes or (``exact``) sized to the plan."""
    batch = draw(st.integers(1, 4))
    seq_lens = draw(st.lists(st.integers(1, 700), min_size=batch, max_size=batch))
    extra = draw(st.lists(st.sampled_from([0, 0, 1, 15, 130, 600]), min_size=batch, max_size=batch))
    call: Call = prefill_call(
        seq_lens, context=[q + e for q, e in zip(seq_lens, extra)], heads=draw(st.sampled_from([1, 2, 3, 4, 8])),
        causal=draw(st.booleans()), qlen_granularity=draw(st.sampled_from([64, 128, 256])),
        kvlen_granularity=draw(st.sampled_from([16, 128])), block_size=draw(st.sampled_from([1, 16])),
        qhead_granularity=draw(st.sampled_from([1, 2])), device=draw(st.sampled_from(DEVICES)), exact=draw(st.booleans()),
    )  # fmt: skip
    return call


#: The output buffers a corruption of the written flags lands in (work_info_set most often).
MASKED = ("work_info_set",) * 4 + ("work_indptr", "reduce_indptr", "reduce_final_map", "reduce_partial_map")


@dataclass
class Corruption:
    """One element of one buffer changed by ``delta`` (``mask``: unwritten; ``buffer`` names the output)."""

    target: str
    buffer: str
    index: int
    delta: int

    def apply(self, call: Call) -> None:
        if self.target == "mask":
            call.written[self.buffer].reshape(-1)[self.index] = False
            return
        tensor = (call.inputs if self.buffer in call.inputs else call.outputs)[self.buffer].reshape(-1)
        tensor[self.index] = int(tensor[self.index]) + self.delta


def corruption(call: Call, seed: int) -> Corruption:
    """A change to one element the plan uses (or just past them), drawn uniformly from ``seed`` (hypothesis's own
    draws crowd at the first choices): half of them in work_info_set's rows, uniformly over the columns, half of
    those in the split works (where the slots and reduce groups are)."""
    rng = random.Random(seed)
    sides = {**call.inputs, **call.outputs}
    target = rng.choice([t for t in ("work_info_set",) * 8 + TARGETS if t == "mask" or sides[t].numel()])
    buffer = rng.choice([name for name in MASKED if sides[name].numel()]) if target == "mask" else target
    delta = rng.choice([1, -1, 2, 16, 64, -256, 1 << 16, -(1 << 20)])
    works = int(call.outputs["work_indptr"][-1])
    if buffer == "work_info_set":
        split = _split(call)
        rows = split if split and rng.random() < 0.5 else range(works + 1)
        row = min(rng.choice(rows), call.outputs[buffer].shape[0] - 1)
        return Corruption(target, buffer, row * 8 + rng.randrange(8), delta)
    tensor = sides[buffer].reshape(-1)
    nonzero = tensor.nonzero()
    used = int(nonzero[-1]) + 2 if nonzero.numel() else 1
    return Corruption(target, buffer, rng.randrange(min(used, tensor.numel())), delta)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_calls(), st.booleans(), st.integers(0, 2**32 - 1))
def test_random_plans_and_single_corruptions_read_as_the_walk_says(call: Call, corrupt: bool, seed: int) -> None:
    if corrupt:
        corruption(call, seed).apply(call)
    with pytest.MonkeyPatch.context() as patch:
        fast, used = _taken(call, patch)
        walked = _walked(call, patch)
    _same(fast, walked)
    if not corrupt:
        assert used and fast.ok, "every plan the reference makes takes the pass"


def test_the_column_sort_is_stable() -> None:
    """Ties keep their row order (the walk's sorted() does), so a tie the walk resolves one way is resolved alike."""
    key = torch.tensor([3, 1, 3, 1, 2], dtype=torch.int64)
    assert stable_order(key).tolist() == [1, 3, 4, 0, 2]


INPUTS = ("seqlens_qo_indptr", "pages_kv_indptr", "context_lens")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    small_calls(), st.lists(st.tuples(st.sampled_from(INPUTS), st.integers(0, 4), st.integers(-300, 300)), max_size=3),
    st.sampled_from([None, 0, -16, 1, 7, 16]),
)  # fmt: skip
def test_the_per_batch_call_checks_flag_as_their_loop_over_every_batch_does(
    call: Call, changes: list[tuple[str, int, int]], block: int | None
) -> None:
    """_check_call's and _fits_its_buffer's tensor passes (integer inputs) flag what their Python loops flag."""
    for name, at, delta in changes:
        tensor = call.inputs[name]
        tensor[at % tensor.numel()] += delta
    if block is not None:
        call.params["block_size"] = block
    with pytest.MonkeyPatch.context() as patch:
        passes = check(call)
        patch.setattr(prefill, "integer_inputs", lambda *args: False)  # the loops over every batch, as before
        looped = check(call)
    _same(passes, looped)
    if not changes and block is None:
        assert passes.ok


def _passes_and_loops(call: Call) -> CheckResult:
    """check's result, after checking that the loops over every batch give the same."""
    passes = check(call)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(prefill, "integer_inputs", lambda *args: False)
        _same(passes, check(call))
    return passes


def test_page_counts_are_checked_against_the_ceiling_of_each_context() -> None:
    """Pages of 16 for 16, 17, 32 and 1 tokens are 1, 2, 2, 1: 17 tokens are one page short (the floor, 1, would
    pass it), 16 one too many, 33 one short, 0 one too many; and a causal query cannot see 0 keys."""
    call = prefill_call([5, 4, 11, 1], context=[16, 17, 32, 1], block_size=16, kvlen_granularity=16)
    assert _passes_and_loops(call).ok
    call.inputs["context_lens"][:] = torch.tensor([17, 16, 33, 0], dtype=torch.int32)
    flagged = [v.where for v in _passes_and_loops(call).violations if v.invariant == "call.kv_pages"]
    assert flagged == [*(f"pages_kv_indptr batch {b}" for b in range(4)), "context_lens[3]"]


def test_one_token_queries_count_as_tiles_against_the_rows() -> None:
    """Four one-token requests are four query tiles: with two KV heads they need 8 works, and 4 rows cannot hold them."""
    call = prefill_call([1, 1, 1, 1], heads=1, qlen_granularity=64, exact=True)
    assert _passes_and_loops(call).ok
    call.params["num_heads_k"] = 2
    result = _passes_and_loops(call)
    assert [v.where for v in result.violations if v.invariant == "coverage"] == ["work_info_set"]


@pytest.mark.parametrize(("name", "runs"), [("ragged, causal", 16), ("many short requests", 2), ("3 KV heads in one cluster (planes interleaved)", None)])
def test_planes_laid_out_as_copies_of_the_first_are_passed_over_one(name: str, runs: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the works are one run per head plane, each a copy of the first but for its q_head_range, the pass reads
    the first run alone; interleaved planes, or a later plane that differs anywhere, are read whole: each answer is
    the walk's."""
    from mla_golden.checks.common import Checker

    call = prefill_call(**VARIED[name][0])
    works = int(call.outputs["work_indptr"][-1])
    one = prefill_fast._one_plane(Checker(call), works, call.params["num_heads_k"])
    assert (None if one is None else works // one[0].numel()) == runs
    fast, used = _taken(call, monkeypatch)
    assert used and fast.ok
    _same(fast, _walked(call, monkeypatch))
    if runs is None:
        return
    for column in (C.QO_END, C.KV_OFFSET, C.EXTRA):  # the last plane's last work, changed in one column
        broken = copy.deepcopy(call)
        broken.outputs["work_info_set"][works - 1, column] += 1
        assert prefill_fast._one_plane(Checker(broken), works, call.params["num_heads_k"]) is None
        fast, used = _taken(broken, monkeypatch)
        assert not used and not fast.ok
        _same(fast, _walked(broken, monkeypatch))
