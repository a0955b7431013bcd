"""The written set a capture learns is the two-canary design's, whichever shortcut computed it.

The design: an element is written when probe A (filled with canary A) or
probe B (canary B) moved it off its canary; written elements on which the
runs differ are named. The capture compares probe B only where probe A left
its canary, and checks buffers written whole through their zero tails: these
tests hold it to the design's plain formulas, planners that store a canary's
own value included (the case the second canary exists for).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np
import pytest
import torch
from helpers import standins
from hypothesis import given, settings
from hypothesis import strategies as st

import mla_golden
from mla_golden.capture.canary import _WHOLE, CANARIES, _compare, replay

FIRST, SECOND = CANARIES[torch.int32]


def _design(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], theirs: np.ndarray[Any, Any]) -> tuple[Any, Any, Any]:
    """The two-canary design spelled out: written mask, flat indices of written elements that differ, kept values."""
    mask = (a != FIRST) | (b != SECOND)
    differ = mask & ((a != b) | (theirs != a))
    return mask, np.flatnonzero(differ), np.where(mask, theirs, 0)


#: A value a run leaves in an element: either canary's own value, zero, anything.
_ELEMENT = st.one_of(st.just(FIRST), st.just(SECOND), st.just(0), st.integers(-(2**31), 2**31 - 1))


@st.composite
def _runs(draw: Any) -> tuple[np.ndarray[Any, Any], ...]:
    """Probe A, probe B and the program's run of one int32 buffer: small, or large with a zero tail (prefill's)."""
    large = draw(st.booleans())
    size = _WHOLE + draw(st.integers(0, 3000)) if large else draw(st.integers(1, 300))
    head = draw(st.integers(0, min(size, 600)))
    values = np.zeros(size, dtype=np.int32)
    values[:head] = draw(st.lists(_ELEMENT, min_size=head, max_size=head)) if head else []
    a, b, theirs = values.copy(), values.copy(), values.copy()
    for _ in range(draw(st.integers(0, 6))):  # unwritten elements (canaries), or runs that disagree
        at = draw(st.integers(0, size - 1))
        which = draw(st.sampled_from(["unwritten", "a", "b", "theirs"]))
        if which == "unwritten":
            a[at], b[at] = FIRST, SECOND
        else:
            {"a": a, "b": b, "theirs": theirs}[which][at] = draw(_ELEMENT)
    if not large and draw(st.booleans()):  # a planner that writes a prefix only, as decode's does
        start = draw(st.integers(0, size))
        a[start:], b[start:] = FIRST, SECOND
    return a, b, theirs


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(runs=_runs())
def test_the_capture_learns_the_designs_written_set_differences_and_values(runs: tuple[np.ndarray[Any, Any], ...]) -> None:
    a, b, theirs = runs
    want_mask, want_differ, want_kept = _design(a, b, theirs)
    shape = (a.size // 2, 2) if a.size % 2 == 0 else (a.size,)  # a 2-D buffer now and then, as work_info_set is
    got = _compare(
        {"work_indptr": torch.from_numpy(a.copy().reshape(shape))},
        {"work_indptr": torch.from_numpy(b.copy().reshape(shape))},
        {"work_indptr": torch.from_numpy(theirs.copy().reshape(shape))},
    )
    assert np.array_equal(got.masks["work_indptr"].numpy().reshape(-1), want_mask)
    assert np.array_equal(got.found["work_indptr"].numpy() if "work_indptr" in got.found else np.empty(0), want_differ)
    assert np.array_equal(got.kept["work_indptr"].numpy().reshape(-1), want_kept)


def _writing_canaries(arguments: Any) -> None:
    """The toy plan, then elements that hold a canary's own value after it: each canary alone, and both."""
    standins.mla_e4048607(**arguments)
    info, partial = arguments["work_info_set"], arguments["reduce_partial_map"]
    info[0, 0], info[0, 1], info[1, 0:2] = FIRST, SECOND, torch.tensor([FIRST, SECOND], dtype=torch.int32)
    partial[-1], partial[-2] = FIRST, SECOND  # far past the toy plan's prefix: both canaries, written
    arguments["work_indptr"].fill_(FIRST)  # a whole buffer of canary A's value


QO = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
KV = torch.tensor([0, 50, 200, 210], dtype=torch.int32)


def _written_by_hand(bufs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the toy plan plus :func:`_writing_canaries` writes, found by running it on two other fills."""
    runs = []
    for fill in (7, -7):
        scratch = {n: torch.full_like(t, fill) for n, t in bufs.items()}
        bound = inspect.signature(standins.mla_e4048607).bind(QO, KV, torch.ones(3, dtype=torch.int32), 16, 1, True, **scratch)
        bound.apply_defaults()
        _writing_canaries(dict(bound.arguments))
        runs.append(scratch)
    return {n: (runs[0][n] != 7) | (runs[1][n] != -7) for n in bufs}


def test_planners_that_store_a_canarys_value_are_seen_to_write_it_in_a_capture_and_a_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    aiter: Any = standins.fake_aiter(standins.with_signature(standins.mla_e4048607, _writing_canaries))
    monkeypatch.setitem(sys.modules, "aiter", aiter)
    bufs = standins.toy_buffers(3, 200)
    with mla_golden.spy() as spy:
        aiter.get_mla_metadata_v1(QO, KV, torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values(), max_seqlen_qo=1)
    call = spy.calls.one()
    again = replay(call, aiter.get_mla_metadata_v1)
    want = _written_by_hand(bufs)
    for name in ("work_info_set", "work_indptr", "reduce_partial_map", "reduce_indptr", "reduce_final_map"):
        assert torch.equal(call.written[name], want[name]), name
        assert torch.equal(again.written[name], want[name]), name
    assert bool(call.written["work_info_set"][0, 0]) and bool(call.written["work_info_set"][0, 1])
    assert bool(call.written["work_indptr"].all()) and call.outputs["work_indptr"].eq(FIRST).all()
    assert call.facts["deterministic"] is True and mla_golden.diff(call, again).equal


def _plain(a: int, b: int, c: int = 3, d: int = 4) -> None:
    """A signature of plain parameters: bound without inspect."""


def _mixed(a: int, /, b: int, *, c: int = 3) -> None:
    """A signature bound through inspect."""


@settings(max_examples=200, deadline=None)
@given(
    fn=st.sampled_from([_plain, _mixed]),
    args=st.lists(st.integers(0, 9), max_size=5),
    kwargs=st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 9), max_size=3),
)
def test_a_call_is_bound_as_inspect_binds_it_or_refused_as_inspect_refuses_it(fn: Any, args: list[int], kwargs: dict[str, int]) -> None:
    from mla_golden.binding import bound_arguments

    sig = inspect.signature(fn)
    try:
        want = sig.bind(*args, **kwargs)
    except TypeError:
        with pytest.raises(TypeError):
            bound_arguments(sig, tuple(args), kwargs)
        return
    want.apply_defaults()
    got = bound_arguments(sig, tuple(args), kwargs)
    assert list(got.items()) == list(want.arguments.items())
