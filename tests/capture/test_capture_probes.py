"""The probes behind a capture: they never change what the program sees, and disagreement is recorded, not hidden."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
import torch
from helpers import standins
from hypothesis import given, settings
from hypothesis import strategies as st

import mla_golden
from mla_golden.capture.buffer_bytes import ZERO_SPAN, lean_copy
from mla_golden.capture.canary import replay
from mla_golden.render.report import render_text

QO = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
KV = torch.tensor([0, 50, 200, 210], dtype=torch.int32)


def _plan(aiter: Any, last: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    bufs = standins.toy_buffers(3, 200)
    last = torch.ones(3, dtype=torch.int32) if last is None else last
    aiter.get_mla_metadata_v1(QO, KV, last, 16, 1, True, *bufs.values(), max_seqlen_qo=1)
    return bufs


def _aiter(monkeypatch: pytest.MonkeyPatch, body: Any) -> object:
    aiter = standins.fake_aiter(standins.with_signature(standins.mla_e4048607, body))
    monkeypatch.setitem(sys.modules, "aiter", aiter)
    return aiter


def _counted(change: Any) -> Any:
    """A planner that runs the toy plan, then ``change(arguments, run)`` (run 0 is the caller's)."""
    runs = iter(range(100))

    def body(arguments: Any) -> None:
        standins.mla_e4048607(**arguments)
        change(arguments, next(runs))

    return body


def _flag_second_probe(arguments: Any, run: Any) -> None:
    if run == 2:
        arguments["work_info_set"][0, 4] += 1


def _flag_callers_run(arguments: Any, run: Any) -> None:
    if run == 0:
        arguments["work_info_set"][1, 5] += 1


@pytest.mark.parametrize(
    "change, where", [(_flag_second_probe, (0, 4)), (_flag_callers_run, (1, 5))], ids=["probes-differ", "caller-differs"]
)
def test_outputs_that_differ_between_runs_are_written_nondeterministic_and_named(monkeypatch: pytest.MonkeyPatch, change: Any, where: Any) -> None:
    aiter = _aiter(monkeypatch, _counted(change))
    with mla_golden.spy() as spy:
        _plan(aiter)
    call = spy.calls.one()
    assert call.facts["deterministic"] is False
    assert bool(call.written["work_info_set"][where])  # written, whatever value each run left there
    flat = where[0] * 8 + where[1]
    assert call.facts["nondeterministic"] == {"work_info_set": {"count": 1, "at": [flat]}}
    named = f"work_info_set[{where[0]}, {where[1]}]"
    assert any(named in note for note in call.facts["notes"])
    found = mla_golden.diff(call, call)
    assert any("different values when re-run" in h for h in found.hazards)
    assert named in render_text(found)


def _writes_every_element(change: Any) -> Any:
    """A planner that fills all of a large work_info_set (as prefill's does), then ``change(arguments, run)``."""
    runs = iter(range(100))

    def body(arguments: Any) -> None:
        info = arguments["work_info_set"]
        info.copy_(torch.arange(info.numel(), dtype=torch.int32).reshape(info.shape))
        change(arguments, next(runs))

    return body


@pytest.mark.parametrize(
    "change, where", [(_flag_second_probe, (0, 4)), (_flag_callers_run, (1, 5))], ids=["probes-differ", "caller-differs"]
)
def test_a_buffer_written_whole_names_the_elements_that_differ_and_keeps_the_callers_run(
    monkeypatch: pytest.MonkeyPatch, change: Any, where: Any
) -> None:
    aiter: Any = _aiter(monkeypatch, _writes_every_element(change))
    bufs = standins.toy_buffers(3, 200)
    bufs["work_info_set"] = torch.empty(9000, 8, dtype=torch.int32)  # 72,000 elements: the whole-buffer path
    with mla_golden.spy() as spy:
        aiter.get_mla_metadata_v1(QO, KV, torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values(), max_seqlen_qo=1)
    call = spy.calls.one()
    flat = where[0] * 8 + where[1]
    assert call.facts["deterministic"] is False
    assert call.facts["nondeterministic"] == {"work_info_set": {"count": 1, "at": [flat]}}
    assert bool(call.written["work_info_set"].all())
    assert torch.equal(call.outputs["work_info_set"], bufs["work_info_set"])  # the program's own run, copied
    assert call.outputs["work_info_set"].data_ptr() != bufs["work_info_set"].data_ptr()


def test_a_deterministic_planner_names_no_element(monkeypatch: pytest.MonkeyPatch) -> None:
    aiter = _aiter(monkeypatch, _counted(lambda arguments, run: None))
    with mla_golden.spy() as spy:
        _plan(aiter)
    facts = spy.calls.one().facts
    assert facts["deterministic"] is True and "nondeterministic" not in facts


def _bump_last_page_lens(arguments: Any, run: Any) -> None:
    arguments["kv_last_page_lens"].add_(1)


def test_a_planner_that_changes_its_inputs_is_recorded_so_and_the_program_sees_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    aiter = _aiter(monkeypatch, _counted(_bump_last_page_lens))
    plain = torch.ones(3, dtype=torch.int32)
    plain_bufs = _plan(aiter, plain)
    spied = torch.ones(3, dtype=torch.int32)
    with mla_golden.spy() as spy:
        spied_bufs = _plan(aiter, spied)
    assert spied.tolist() == plain.tolist() == [2, 2, 2]  # one call's effect, watched or not
    call = spy.calls.one()
    assert call.inputs["kv_last_page_lens"].tolist() == [1, 1, 1]  # what the planner was given
    assert call.facts["mutated_inputs"] == ["kv_last_page_lens"]
    assert any("changed its input kv_last_page_lens in place" in note for note in call.facts["notes"])
    assert call.facts["deterministic"] is True
    mask = call.written["work_info_set"]
    assert torch.equal(plain_bufs["work_info_set"][mask], spied_bufs["work_info_set"][mask])


def test_the_probes_run_on_copies_of_the_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def body(arguments: Any) -> None:
        standins.mla_e4048607(**arguments)
        seen.append(arguments["seqlens_kv_indptr"].data_ptr())

    aiter = _aiter(monkeypatch, body)
    with mla_golden.spy() as spy:
        _plan(aiter)
    spy.calls.one()
    assert len(seen) == 3 and seen[0] not in seen[1:]


def test_a_replay_runs_the_planner_on_copies_of_the_goldens_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    aiter = _aiter(monkeypatch, _counted(lambda arguments, run: None))
    with mla_golden.spy() as spy:
        _plan(aiter)
    call = spy.calls.one()
    kept = {n: t.clone() for n, t in call.inputs.items()}
    mutating = standins.with_signature(standins.mla_e4048607, _counted(_bump_last_page_lens))
    again = replay(call, mutating)
    assert all(torch.equal(call.inputs[n], kept[n]) for n in kept)  # the golden's own inputs are untouched
    assert again.facts["deterministic"] is True and mla_golden.diff(call, again).equal


def _rows_then_zeros(arguments: Any) -> None:
    """Fills as many rows of a large work_info_set as kv_last_page_lens[0] says, and zeroes the rest (as prefill's
    planner zeroes what a batch leaves over of buffers sized for the longest)."""
    info = arguments["work_info_set"]
    rows = int(arguments["kv_last_page_lens"][0])
    info.zero_()
    info[:rows] = torch.arange(rows * 8, dtype=torch.int32).reshape(rows, 8) + rows


def test_calls_captured_one_after_another_each_keep_their_own_values(monkeypatch: pytest.MonkeyPatch) -> None:
    # Few rows leave most of the buffer zero (the kept values are a lean copy and the probe's buffer is reused);
    # many rows do not (the probe's buffer itself is kept and leaves the pool). Either way a later capture of
    # the same shapes must not touch what an earlier one kept.
    aiter: Any = _aiter(monkeypatch, _rows_then_zeros)
    bufs = standins.toy_buffers(3, 200)
    bufs["work_info_set"] = torch.empty(9000, 8, dtype=torch.int32)  # 72,000 elements: the whole-buffer path
    seen = []
    with mla_golden.spy() as spy:
        for rows in (10, 8000, 11, 5000, 12):
            aiter.get_mla_metadata_v1(QO, KV, torch.full((3,), rows, dtype=torch.int32), 16, 1, True, *bufs.values(), max_seqlen_qo=1)
            seen.append(bufs["work_info_set"].clone())
    assert len(spy.calls) == 5
    for call, values in zip(spy.calls, seen):
        assert bool(call.written["work_info_set"].all()) and call.facts["deterministic"] is True
        assert torch.equal(call.outputs["work_info_set"], values)
    replayed = [replay(call, standins.with_signature(standins.mla_e4048607, _rows_then_zeros)) for call in spy.calls]
    for call, again in zip(spy.calls, replayed):
        assert mla_golden.diff(call, again).equal


@settings(max_examples=300, deadline=None)
@given(
    size=st.sampled_from([1, 2, 7, ZERO_SPAN - 1, ZERO_SPAN, 3 * ZERO_SPAN + 5, 70_000]),
    rows=st.sampled_from([None, 8]),
    dtype=st.sampled_from([np.int32, np.int64, np.uint64]),
    data=st.data(),
)
def test_lean_kept_values_equal_the_values_whatever_their_zero_tail(size: int, rows: int | None, dtype: Any, data: Any) -> None:
    values = np.zeros(size if rows is None else (size, rows), dtype=dtype)
    flat, limits = values.reshape(-1), np.iinfo(dtype)
    for at in data.draw(st.lists(st.integers(0, flat.size - 1), max_size=5)):
        flat[at] = data.draw(st.integers(int(limits.min), int(limits.max)).filter(bool))
    kept = lean_copy(values)
    assert np.array_equal(kept, values) and kept.dtype == values.dtype and kept.shape == values.shape
    tail_is_half = not flat[flat.size // 2 :].any()
    assert (kept is values) != tail_is_half  # a copy exactly when the second half is zeros


def test_a_replay_through_a_spied_planner_neither_changes_nor_shares_what_the_spy_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    # The replay's probes call the spy's wrapper (Backend.planner looks the planner up "so a spy's wrapper is
    # seen"): each is captured, on this thread, with the replay's stand-ins as its buffers.
    aiter: Any = _aiter(monkeypatch, lambda arguments: standins.mla_e4048607(**arguments))
    with mla_golden.spy() as first:
        _plan(aiter)
    golden = first.calls.one()
    with mla_golden.spy() as spy:
        again = replay(golden, aiter.get_mla_metadata_v1)
    assert again.facts["deterministic"] is True and mla_golden.diff(golden, again).equal
    for call in spy.calls:
        assert mla_golden.diff(golden, call).equal
        assert not any(call.outputs[n].numel() and call.outputs[n].data_ptr() == again.outputs[n].data_ptr() for n in call.outputs)
