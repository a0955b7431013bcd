"""check's whole-tensor pass over a clean sparse (topk) decode plan reports what the work-by-work walk reports, on
aiter's own records, on plans of many shapes and on planted and random violations.

The whole walk (``clean_plan``, ``clean_sparse_plan`` and ``region`` answering None) is the documented behaviour:
each result is compared with it, field by field; the planted violations are also checked against the one they raise.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from helpers.calls import decode_call
from helpers.conformance import record_call, records
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from mla_golden.call import Call
from mla_golden.checks import CheckResult, check, decode, decode_sparse_fast
from mla_golden.errors import AiterCheckError, BufferTooSmallError, UndefinedResultError
from mla_golden.schema import WorkColumn as C


def _walked(call: Call, monkeypatch: pytest.MonkeyPatch) -> CheckResult:
    with monkeypatch.context() as patch:
        for name in ("clean_plan", "clean_sparse_plan", "region"):
            patch.setattr(decode, name, lambda *args: None)
        return check(call)


def _taken(call: Call, monkeypatch: pytest.MonkeyPatch) -> tuple[CheckResult, bool]:
    """check's result, and whether the sparse whole-tensor pass gave it."""
    answers: list[Any] = []

    def spy(*args: Any) -> Any:
        answers.append(decode_sparse_fast.clean_sparse_plan(*args))
        return answers[-1]

    with monkeypatch.context() as patch:
        patch.setattr(decode, "clean_sparse_plan", spy)
        result = check(call)
    return result, any(answer is not None for answer in answers)


def _same(call: Call, monkeypatch: pytest.MonkeyPatch) -> tuple[CheckResult, bool]:
    """check's result (as the walk's, field by field), and whether the pass gave it."""
    fast, used = _taken(call, monkeypatch)
    walked = _walked(call, monkeypatch)
    assert fast.to_dict() == walked.to_dict()
    assert fast.folding == walked.folding == 1  # sparse works name the request itself
    return fast, used


def _sparse_records() -> list[Any]:
    return [
        pytest.param(r, id=f"{prefix}-{r['case_id']}")
        for prefix in ("mla_v1-e4048607", "mla_v1-v0.1.16")
        for r in records(prefix)
        if r["op"] == "get_mla_metadata_v1" and record_call(r).params.get("topk", -1) >= 0
    ]


def test_sparse_conformance_records_read_the_same_and_the_clean_ones_take_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [record_call(p.values[0]) for p in _sparse_records()]
    assert len(cases) >= 20, "aiter's records hold sparse calls"
    clean = taken = 0
    for call in cases:
        result, used = _same(call, monkeypatch)
        assert not used or result.ok
        clean += result.ok
        taken += used
    assert taken == clean >= len(cases) // 2, f"the pass answered {taken} of {clean} clean records ({len(cases)} in all)"


@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp8", "bf16"])
def test_sparse_decode_calls_read_the_same_and_take_the_pass(heads: int, dtype: torch.dtype | None, monkeypatch: pytest.MonkeyPatch) -> None:
    call = decode_call([100, 0, 3000, 0, 0, 17, 2048, 2049] * 30, heads, dtype=dtype, topk=2048)
    result, used = _same(call, monkeypatch)
    assert used and result.ok
    works = call.outputs["work_info_set"][: int(call.outputs["work_indptr"][-1])]
    assert bool((works[:, C.KV_START] == works[:, C.KV_END]).any()), "an empty request gets a work of no kv"


#: (heads, query lengths, page size, causal, bf16, device, uniform query lengths, topk, folding): folded (gfx942, 32
#: heads x2, 128 bf16 heads x8), MTP, paged, not causal, variable query lengths, split query tiles (128 heads x 4 tokens).
SHAPES = [
    (16, [1] * 5, 1, True, False, ("gfx942", 304), True, 64, 1),
    (32, [3] * 5, 1, False, True, ("gfx942", 304), True, 2048, 2),
    (32, [4] * 5, 64, True, False, ("gfx942", 304), True, 100, 2),
    (64, [2] * 7, 64, False, False, ("gfx950", 256), True, 64, 1),
    (64, [2, 1, 2, 2, 1, 2], 64, False, False, ("gfx950", 256), False, 2048, 1),
    (16, [1, 3, 2, 4, 1], 1, False, False, ("gfx942", 304), False, 100, 1),
    (128, [1] * 7, 64, False, False, ("gfx942", 304), True, 64, 1),
    (128, [2] * 4, 64, False, True, ("gfx942", 304), True, 2048, 8),
    (128, [4] * 3, 1, False, False, ("gfx942", 304), True, 2048, 1),
    (16, [4] * 6, 16, True, True, ("gfx950", 256), True, 2048, 1),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"h{s[0]}-q{max(s[1])}-p{s[2]}-{'c' if s[3] else 'nc'}-{s[5][0]}")
def test_sparse_calls_of_many_shapes_read_the_same_and_take_the_pass(shape: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    heads, qo_lens, page_size, causal, bf16, device, uniform, topk, folding = shape
    kv_lens = [[3000, 0, 100, 5, 2048, 0, 4097][i % 7] for i in range(len(qo_lens))]
    call = decode_call(kv_lens, heads, qo_lens=qo_lens, page_size=page_size, causal=causal, topk=topk, device=device,
                       dtype=torch.bfloat16 if bf16 else None, uniform=uniform)  # fmt: skip
    result, used = _same(call, monkeypatch)
    assert used and result.ok, result.to_dict()
    assert (result.kernel or "").endswith(f"folded x{folding}" if folding > 1 else "native")


def _rows(call: Call, split: bool) -> list[int]:
    """The works of split tiles (or of unsplit ones), of some kv each."""
    works = call.outputs["work_info_set"][: int(call.outputs["work_indptr"][-1])]
    locs, seen = works[:, C.PARTIAL_QO_LOC], works[:, C.KV_END] > works[:, C.KV_START]
    return (((locs >= 0) if split else (locs < 0)) & seen).nonzero().reshape(-1).tolist()


def _set(column: C, value: Callable[[int], int], split: bool = False) -> Callable[[Call], None]:
    def plant(call: Call) -> None:
        at = _rows(call, split)[-1]
        call.outputs["work_info_set"][at, column] = value(int(call.outputs["work_info_set"][at, column]))

    return plant


def _duplicate_slot(call: Call) -> None:
    """A split work takes the slot of one of another tile."""
    info = call.outputs["work_info_set"]
    a, *others = _rows(call, True)
    b = next(r for r in others if (info[r, C.BATCH_IDX], info[r, C.QO_START]) != (info[a, C.BATCH_IDX], info[a, C.QO_START]))
    call.outputs["work_info_set"][b, C.PARTIAL_QO_LOC] = int(call.outputs["work_info_set"][a, C.PARTIAL_QO_LOC])


def _swap_partials(call: Call) -> None:
    pmap, indptr = call.outputs["reduce_partial_map"], call.outputs["reduce_indptr"]
    a, b = int(indptr[0]), int(indptr[1])  # the first entries of the first two groups
    pmap[a], pmap[b] = int(pmap[b]), int(pmap[a])


def _final_map(call: Call) -> None:
    group = int((call.outputs["reduce_indptr"][1:] > call.outputs["reduce_indptr"][:-1]).nonzero()[0])
    call.outputs["reduce_final_map"][group, 1] += 1


def _unwrite(call: Call) -> None:
    call.written["work_info_set"][_rows(call, False)[0], C.KV_OFFSET] = False


#: A planting and the invariant the walk reports for it (None: nothing, a cell the planner did not write).
PLANTED: dict[str, tuple[Callable[[Call], None], str | None]] = {
    "kv_offset": (_set(C.KV_OFFSET, lambda v: v + 1), "work.kv_offset"),
    "kv_offset of a split work": (_set(C.KV_OFFSET, lambda v: v - 1, split=True), "work.kv_offset"),
    "kv_end past the batch": (_set(C.KV_END, lambda v: v + 1), "work.kv_range"),
    "kv_start gap": (_set(C.KV_START, lambda v: v + 1), "coverage"),
    "kv_start in the next batch": (_set(C.KV_START, lambda v: v + 2048), "work.kv_range"),
    "batch_idx": (_set(C.BATCH_IDX, lambda v: 1 << 22), "work.batch"),
    "batch_idx of a neighbour": (_set(C.BATCH_IDX, lambda v: v - 1), "work.kv_range"),
    "qo_end": (_set(C.QO_END, lambda v: v + 1), "work.qo_range"),
    "unsplit with a slot": (_set(C.PARTIAL_QO_LOC, lambda v: 1 << 20), "split.partial"),
    "split without a slot": (_set(C.PARTIAL_QO_LOC, lambda v: -1, split=True), "split.partial"),
    "slot used twice": (_duplicate_slot, "partial.overlap"),
    "partials swapped between groups": (_swap_partials, "reduce.group"),
    "final map": (_final_map, "reduce.group"),
    "a cell not written": (_unwrite, None),
}


@pytest.fixture(scope="module")
def mid_size() -> Call:
    """A clean sparse MTP plan (2 tokens, topk 2048) of 320 requests, some empty, some split."""
    call = decode_call([3000] * 20 + [100, 0] * 150, qo_lens=[2] * 320, topk=2048)
    assert len(_rows(call, True)) > 100 and len(_rows(call, False)) > 100
    return call


def test_the_mid_size_plan_takes_the_pass(mid_size: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    result, used = _same(mid_size, monkeypatch)
    assert used and result.ok


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violations_are_walked_and_read_as_the_walk_says(name: str, mid_size: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    call = copy.deepcopy(mid_size)
    plant, invariant = PLANTED[name]
    plant(call)
    result, used = _same(call, monkeypatch)
    assert not used, "the pass never answers for a plan with something to flag"
    assert result.invariants == set() if invariant is None else invariant in result.invariants, result.to_dict()["violations"]


def test_a_paged_plan_with_a_bad_last_page_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    call = decode_call([3000, 100, 0, 5] * 10, 128, page_size=64, topk=2048)
    assert _same(call, monkeypatch)[1]
    call.inputs["kv_last_page_lens"][1] = 65
    result, used = _same(call, monkeypatch)
    assert not used and "call.kv_pages" in result.invariants


_ERRORS = (AiterCheckError, BufferTooSmallError, UndefinedResultError)


@st.composite
def _calls(draw: st.DrawFn) -> Call:
    """A small random sparse call (some shapes aiter refuses or leaves undefined are drawn again)."""
    batch, qlen, uniform = draw(st.integers(1, 6)), draw(st.integers(1, 4)), draw(st.booleans())
    qo_lens = [qlen] * batch if uniform else draw(st.lists(st.integers(1, qlen), min_size=batch, max_size=batch))
    kv_lens = draw(st.lists(st.sampled_from([0, 1, 15, 64, 100, 700, 2048, 3000]), min_size=batch, max_size=batch))
    try:
        return decode_call(
            kv_lens, draw(st.sampled_from([16, 32, 64, 128])), qo_lens=qo_lens, page_size=draw(st.sampled_from([1, 1, 16, 64])),
            causal=draw(st.booleans()), dtype=torch.bfloat16 if draw(st.booleans()) else None,
            topk=draw(st.sampled_from([16, 64, 100, 2048])),
            device=draw(st.sampled_from([("gfx942", 304), ("gfx950", 256), ("gfx942", 80)])), uniform=uniform,
        )  # fmt: skip
    except _ERRORS:
        assume(False)
        raise


def _corrupt(data: st.DataObject, call: Call) -> str:
    """Change one written element of an output (or unwrite one), or one of an input, or none; says which."""
    name = data.draw(st.sampled_from(["none", "work_info_set", "work_info_set", "work_info_set", "work_indptr",
                                      "reduce_indptr", "reduce_final_map", "reduce_partial_map", "written",
                                      "kv_last_page_lens", "seqlens_kv_indptr"]))  # fmt: skip
    if name == "none":
        return name
    target = "work_info_set" if name == "written" else name
    if target in call.inputs:
        flat, written = call.inputs[target].reshape(-1), torch.ones(call.inputs[target].numel(), dtype=torch.bool)
    else:
        flat, written = call.outputs[target].reshape(-1), call.written[target].reshape(-1)
    hits = written.nonzero().reshape(-1)
    assume(hits.numel() > 0)
    at = int(hits[data.draw(st.integers(0, hits.numel() - 1))])
    if name == "written":
        written[at] = False
        return name
    old = int(flat[at])
    flat[at] = data.draw(st.sampled_from([old + 1, old - 1, -1, 0, old + 64, old + 2048]))
    return name


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(call=_calls(), data=st.data())
def test_random_sparse_calls_and_single_corruptions_read_as_the_walk(call: Call, data: st.DataObject) -> None:
    name = _corrupt(data, call)
    with pytest.MonkeyPatch.context() as monkeypatch:
        result, used = _same(call, monkeypatch)
    event(f"{name}: {'pass' if used else 'walk'}{'' if result.ok else ', flagged'}")
    assert used == result.ok if name == "none" else not used or result.ok  # aiter's own clean plans take the pass
