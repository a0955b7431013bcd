"""check's whole-tensor pass over a clean decode plan, and its walk of only the region where something is to
flag, report what the work-by-work walk of the whole plan reports, on real plans and on planted violations.

The whole walk (``clean_plan`` and ``region`` answering None) is the documented behaviour: each result is compared
with it, field by field, and the planted ones are also checked against the violation they must raise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.calls import decode_call, many_requests
from helpers.conformance import record_call, record_params
from helpers.repo import ROOT

from mla_golden.call import Call
from mla_golden.checks import CheckResult, check, decode, decode_fast, decode_region
from mla_golden.golden.store import GoldenStore, load
from mla_golden.schema import WorkColumn as C

SHIPPED = ROOT / "goldens"


def _walked(call: Call, monkeypatch: pytest.MonkeyPatch) -> CheckResult:
    with monkeypatch.context() as patch:
        patch.setattr(decode, "clean_plan", lambda *args: None)
        patch.setattr(decode, "clean_sparse_plan", lambda *args: None)
        patch.setattr(decode, "region", lambda *args: None)
        return check(call)


def _path(
    call: Call, monkeypatch: pytest.MonkeyPatch, whole_pass: bool = True
) -> tuple[CheckResult, str, decode_region.Region | None]:
    """check's result, which path gave it ("pass", "region" or "walk"), and the region walked; ``whole_pass``
    False: with the whole-tensor pass off, so a plan it would prove clean takes the region walk."""
    answers: dict[str, Any] = {}

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def answer(*args: Any) -> Any:
            answers[name] = real(*args)
            return answers[name]

        return answer

    with monkeypatch.context() as patch:
        patch.setattr(decode, "clean_plan", spy("pass", decode_fast.clean_plan if whole_pass else lambda *args: None))
        patch.setattr(decode, "region", spy("region", decode_region.region))
        result = check(call)
    path = next((name for name in ("pass", "region") if answers.get(name) is not None), "walk")
    return result, path, answers.get("region")


def _taken(call: Call, monkeypatch: pytest.MonkeyPatch) -> tuple[CheckResult, bool]:
    """check's result, and whether the whole-tensor pass gave it."""
    result, path, _region = _path(call, monkeypatch)
    return result, path == "pass"


def _by_region(call: Call, monkeypatch: pytest.MonkeyPatch) -> tuple[CheckResult, bool]:
    """check with the whole-tensor pass off (see :func:`_path`), and whether the region walk answered."""
    result, path, _region = _path(call, monkeypatch, whole_pass=False)
    return result, path == "region"


def _same(fast: CheckResult, walked: CheckResult) -> None:
    assert fast.to_dict() == walked.to_dict()
    assert fast.folding == walked.folding


def _decode_goldens() -> list[Path]:
    return sorted(p for p in GoldenStore(SHIPPED).paths() if load(p).call.op == "get_mla_metadata_v1")


@pytest.mark.slow
def test_every_shipped_decode_golden_reads_the_same_and_most_take_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = by_region = 0
    paths = _decode_goldens()
    for path in paths:
        call = load(path).call
        fast, used = _taken(call, monkeypatch)
        walked = _walked(call, monkeypatch)
        _same(fast, walked)
        regional, in_region = _by_region(call, monkeypatch)
        _same(regional, walked)
        taken += used
        by_region += in_region
    assert taken >= len(paths) // 2, f"the pass answered {taken} of {len(paths)}"
    assert by_region >= taken, f"the region walk answered {by_region} of {len(paths)}"


DECODE_RECORDS = record_params("mla_v1-e4048607")[::7]


@pytest.mark.parametrize("record", DECODE_RECORDS)
def test_conformance_records_read_the_same(record: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    call = record_call(record)
    walked = _walked(call, monkeypatch)
    _same(_taken(call, monkeypatch)[0], walked)
    _same(_by_region(call, monkeypatch)[0], walked)


def test_empty_batches_are_skipped_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    call = decode_call([100, 0, 0, 250, 0, 17] * 40)
    fast, used = _taken(call, monkeypatch)
    assert used and any("tile(s) of batches with no kv tokens" in s for s in fast.skipped)
    _same(fast, _walked(call, monkeypatch))


def _unsplit(call: Call) -> int:
    info = call.outputs["work_info_set"]
    return int((info[: int(call.outputs["work_indptr"][-1]), C.PARTIAL_QO_LOC] < 0).nonzero()[-1])


def _split(call: Call) -> list[int]:
    info = call.outputs["work_info_set"]
    return (info[: int(call.outputs["work_indptr"][-1]), C.PARTIAL_QO_LOC] >= 0).nonzero().reshape(-1).tolist()


def _set(column: C, value: Callable[[int], int], row: Callable[[Call], int] = _unsplit) -> Callable[[Call], None]:
    def plant(call: Call) -> None:
        at = row(call)
        call.outputs["work_info_set"][at, column] = value(int(call.outputs["work_info_set"][at, column]))

    return plant


def _swap_partials(call: Call) -> None:
    pmap = call.outputs["reduce_partial_map"]
    pmap[0], pmap[2] = int(pmap[2]), int(pmap[0])


def _final_map(call: Call) -> None:
    group = int((call.outputs["reduce_indptr"][1:] > call.outputs["reduce_indptr"][:-1]).nonzero()[0])
    call.outputs["reduce_final_map"][group, 1] += 1


def _unwrite(call: Call) -> None:
    call.written["work_info_set"][_unsplit(call), C.KV_OFFSET] = False


def _duplicate_slot(call: Call) -> None:
    a, b = _split(call)[:3:2]
    call.outputs["work_info_set"][b, C.PARTIAL_QO_LOC] = int(call.outputs["work_info_set"][a, C.PARTIAL_QO_LOC])


def _last_page(call: Call) -> None:
    call.inputs["kv_last_page_lens"][3] = 0


#: A planting and the invariant the walk reports for it (None: nothing, as for a cell the planner did not write,
#: which check never reads).
PLANTED: dict[str, tuple[Callable[[Call], None], str | None]] = {
    "kv_offset": (_set(C.KV_OFFSET, lambda v: v + 1), "work.kv_offset"),
    "kv_end past the batch": (_set(C.KV_END, lambda v: v + 1), "work.kv_range"),
    "kv_start gap": (_set(C.KV_START, lambda v: v + 1), "coverage"),
    "batch_idx": (_set(C.BATCH_IDX, lambda v: 1 << 22), "work.batch"),
    "qo_end": (_set(C.QO_END, lambda v: v + 1), "work.qo_range"),
    "unsplit with a slot": (_set(C.PARTIAL_QO_LOC, lambda v: 1 << 20), "split.partial"),
    "split without a slot": (_set(C.PARTIAL_QO_LOC, lambda v: -1, lambda call: _split(call)[0]), "split.partial"),
    "slot used twice": (_duplicate_slot, "partial.overlap"),
    "partials swapped between groups": (_swap_partials, "reduce.group"),
    "final map": (_final_map, "reduce.group"),
    "a cell not written": (_unwrite, None),
    "last page": (_last_page, "call.kv_pages"),
}


@pytest.fixture(scope="module")
def mid_size() -> Call:
    """A clean decode plan of 3000 requests with split tiles (so every part of the check has work to do)."""
    call: Call = many_requests(3000)
    assert _split(call), "the plan splits some tiles"
    return call


def test_the_mid_size_plan_takes_the_pass_and_reads_the_same(mid_size: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, used = _taken(mid_size, monkeypatch)
    assert used and fast.ok
    _same(fast, _walked(mid_size, monkeypatch))


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violations_walk_their_region_only_and_read_as_the_whole_walk_says(
    name: str, mid_size: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = copy.deepcopy(mid_size)
    plant, invariant = PLANTED[name]
    plant(call)
    fast, path, walked = _path(call, monkeypatch)
    if name == "a cell not written":  # a work not written whole: the plan is not one the passes read
        assert path == "walk"
    else:
        assert path == "region", "the pass never answers for a plan with something to flag"
        assert walked is not None and len(walked.works) < int(call.outputs["work_indptr"][-1]) // 10
    _same(fast, _walked(call, monkeypatch))
    assert fast.invariants == set() if invariant is None else invariant in fast.invariants, fast.to_dict()["violations"]


FOLDED = SHIPPED / "decode/dsv3-mtp-bf16/gfx942-cu304/h128-bf16-q4-b8-jitter32768-p1.safetensors"


@pytest.mark.parametrize("plant", ["none", "kv_offset", "batch_idx"])
def test_a_folded_multi_token_plan_reads_the_same(plant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Head folding x8 over 4-token queries: tiles, causal tails and kv_offset as the folded walk has them."""
    call = load(FOLDED).call
    if plant == "kv_offset":
        call.outputs["work_info_set"][5, C.KV_OFFSET] += 1
    elif plant == "batch_idx":
        call.outputs["work_info_set"][5, C.BATCH_IDX] += 1
    fast, used = _taken(call, monkeypatch)
    assert used == (plant == "none") and fast.folding == 8
    _same(fast, _walked(call, monkeypatch))
    assert fast.ok == (plant == "none")


@pytest.mark.parametrize("name", ["partials swapped between groups", "final map", "kv_offset"])
def test_reduce_maps_read_entry_by_entry_say_what_listed_ones_say(name: str, mid_size: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.checks import common

    call = copy.deepcopy(mid_size)
    PLANTED[name][0](call)
    real, results = common.Checker.flat, []
    for reads in (0, 10**12):  # read entry by entry (as a few groups of a million-group plan are), then listed
        with monkeypatch.context() as patch:
            patch.setattr(common.Checker, "flat", lambda self, buffer, _reads, reads=reads: real(self, buffer, reads))
            results.append(check(call).to_dict())
    assert results[0] == results[1]
    assert name == "kv_offset" or any(v["invariant"] == "reduce.group" for v in results[0]["violations"])


def test_a_peek_reads_as_the_list_would() -> None:
    import torch

    from mla_golden.checks.common import Peek

    values = torch.tensor([5, -1, 7, 2**31 - 1], dtype=torch.int32)
    flags = torch.tensor([True, False, True, True])
    for tensor in (values, flags):
        listed, peek = tensor.tolist(), Peek(tensor)
        assert len(peek) == len(listed)
        assert [peek[i] for i in range(-len(listed), len(listed))] == listed[-len(listed) :] + listed
        assert all(peek[a:b] == listed[a:b] for a in range(-5, 6) for b in range(-5, 6))
        assert [type(peek[i]) for i in range(len(listed))] == [type(v) for v in listed]


def test_ints_read_at_indices_as_listed_whether_or_not_listed_yet() -> None:
    import torch

    from mla_golden.checks.common import Ints, values_at

    source = torch.tensor([3, -7, 2**31 - 1, 0], dtype=torch.int32)
    indices = [2, 0, 3, 2]
    fresh, listed = Ints(source.to(torch.int64), source), Ints(source.to(torch.int64), source)
    assert listed[1] == -7  # listed now
    wanted = [source.tolist()[i] for i in indices]
    assert values_at(fresh, indices) == values_at(listed, indices) == values_at(source.tolist(), indices) == wanted
    assert fresh._listed is None, "reading a few values does not list them all"
