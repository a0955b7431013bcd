"""The recorder never lies and never interferes: a call is recorded as made, or passed untouched and listed as missed."""

from __future__ import annotations

import sys
import types
import warnings
from pathlib import Path
from typing import Any, cast

import pytest
import torch

import mla_golden
from mla_golden import reference as ref
from mla_golden.call import CallNotFound
from mla_golden.capture.canary import replay
from mla_golden.golden.store import Golden, load, to_bytes
from mla_golden.schema import OUTPUTS

QO = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
KV = torch.tensor([0, 50, 200, 210], dtype=torch.int32)
LAST = torch.ones(3, dtype=torch.int32)


def _buffers(override: torch.dtype | None = None, device: str = "cpu", ptrs: int = 2) -> list[torch.Tensor]:
    info = ref.get_mla_metadata_info_v1(3, 1, 16, torch.bfloat16, torch.bfloat16, False)
    out = []
    for i, (shape, dtype) in enumerate(info):
        if i == 0:
            out.append(torch.empty(ptrs, dtype=dtype, device=device))
        else:
            out.append(torch.empty(shape, dtype=override or dtype, device=device))
    return out


def _plan(fn: Any, qo: Any = QO, kv: Any = KV, bufs: Any = None, **kw: Any) -> Any:
    wm, wi, wis, ri, rfm, rpm = bufs if bufs is not None else _buffers()
    return fn(qo, kv, LAST, 16, 1, True, wm, wis, wi, ri, rfm, rpm, uni_seqlen_qo=1, max_seqlen_qo=1,
              dtype_q=torch.bfloat16, dtype_kv=torch.bfloat16, **kw)  # fmt: skip


def _outcome(thunk: Any) -> Any:
    try:
        return ("returned", thunk())
    except Exception as exc:  # noqa: BLE001 - comparing what the program sees
        return ("raised", type(exc), str(exc))


@pytest.mark.parametrize(
    "bufs, reason",
    [(lambda: _buffers(torch.float32), "is torch.float32"), (lambda: _buffers(device="meta"), "meta device"),
     (lambda: _buffers(torch.int64), "is torch.int64")],
    ids=["float32", "meta", "int64"],
)  # fmt: skip
def test_an_unrecordable_call_behaves_as_without_the_recorder_and_is_listed(bufs: Any, reason: str) -> None:
    with ref.device("gfx942", 304):
        without = _outcome(lambda: _plan(ref.get_mla_metadata_v1, bufs=bufs()))
        with mla_golden.spy(ref) as spy, pytest.warns(UserWarning, match="not recorded"):
            with_spy = _outcome(lambda: _plan(ref.get_mla_metadata_v1, bufs=bufs()))
    assert with_spy[:2] == without[:2] and with_spy[2:] == without[2:] if without[0] == "raised" else with_spy[0] == "returned"
    assert len(spy.calls) == 0 and len(spy.missed) == 1 and reason in spy.missed[0]
    with pytest.raises(CallNotFound, match="made but not recorded: .*" + reason.replace(".", r"\.")):
        spy.calls.one()


def test_a_recordable_call_is_unchanged_by_the_recorder() -> None:
    with ref.device("gfx942", 304):
        plain = _buffers()
        _plan(ref.get_mla_metadata_v1, bufs=plain)
        spied = _buffers()
        with mla_golden.spy(ref) as spy:
            _plan(ref.get_mla_metadata_v1, bufs=spied)
    call = spy.calls.one()
    assert spy.missed == []
    for name, a, b in zip(OUTPUTS[1:], plain[1:], spied[1:]):
        mask = call.written[name]
        assert bool(mask.any()) and torch.equal(a[mask], b[mask]), name


def test_a_non_contiguous_input_is_recorded_as_made_and_replays_to_aiters_verdict(tmp_path: Path) -> None:
    strided = torch.tensor([0, 9, 50, 9, 200, 9, 210, 9], dtype=torch.int32)[::2]
    with ref.device("gfx942", 304):
        with mla_golden.spy(ref) as spy, pytest.raises(mla_golden.reference.AiterCheckError, match="should be continuous!"):
            _plan(ref.get_mla_metadata_v1, kv=strided)
    call = spy.calls.one()
    assert call.strides == {"seqlens_kv_indptr": [2]} and "should be continuous!" in call.error
    path = tmp_path / "g.safetensors"
    path.write_bytes(to_bytes(Golden("g", call)))
    back = load(path).call
    assert back.strides == {"seqlens_kv_indptr": [2]} and torch.equal(back.inputs["seqlens_kv_indptr"], KV)
    again = replay(back, ref.get_mla_metadata_v1)
    assert again.error == call.error
    assert mla_golden.diff(back, again).equal


def test_a_longer_pointer_buffer_is_no_pointer_hazard() -> None:
    with ref.device("gfx942", 304), mla_golden.spy(ref) as spy:
        _plan(ref.get_mla_metadata_v1, bufs=_buffers(ptrs=4))
    call = spy.calls.one()
    assert call.facts["ptrs_ok"] is not False
    assert not any("work_metadata_ptrs" in h for h in mla_golden.diff(call, call).hazards)


def _planner_module(fn: Any) -> types.ModuleType:
    module: Any = types.ModuleType("my_planners")
    module.get_mla_metadata_v1 = fn
    return cast(types.ModuleType, module)


def test_a_wrapper_with_other_parameter_names_is_recorded_where_it_forwards(monkeypatch: pytest.MonkeyPatch) -> None:
    def planner(qo: Any, kv: Any, last: Any, heads: Any, heads_k: Any, causal: Any, ptrs: Any, info: Any, indptr: Any, r_indptr: Any, r_final: Any, r_partial: Any, **rest: Any) -> Any:
        return ref.get_mla_metadata_v1(qo, kv, last, heads, heads_k, causal, ptrs, info, indptr, r_indptr, r_final,
                                       r_partial, **rest)  # fmt: skip

    module = _planner_module(planner)
    monkeypatch.setitem(sys.modules, "my_planners", module)
    with ref.device("gfx942", 304), mla_golden.spy(module) as spy:
        _plan(module.get_mla_metadata_v1)
    call = spy.calls.one()
    with ref.device("gfx942", 304), mla_golden.spy(ref) as direct:
        _plan(ref.get_mla_metadata_v1)
    assert mla_golden.diff(direct.calls.one(), call).equal


@pytest.mark.parametrize("hidden", [False, True], ids=["forwards-visibly", "forwards-to-a-hidden-planner"])
def test_a_wrapper_whose_arity_does_not_fit_is_recorded_where_it_forwards_or_missed_loudly(monkeypatch: pytest.MonkeyPatch, hidden: bool) -> None:
    held = ref.get_mla_metadata_v1  # in a closure: no spy can replace it

    def planner(qo: Any, kv: Any, last: Any, heads: Any, buffers: Any, **rest: Any) -> Any:
        target = held if hidden else ref.get_mla_metadata_v1
        return target(qo, kv, last, heads, 1, True, *buffers, **rest)

    module = _planner_module(planner)
    monkeypatch.setitem(sys.modules, "my_planners", module)
    wm, wi, wis, ri, rfm, rpm = _buffers()
    with ref.device("gfx942", 304), mla_golden.spy(module) as spy:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            module.get_mla_metadata_v1(QO, KV, LAST, 16, (wm, wis, wi, ri, rfm, rpm), uni_seqlen_qo=1, max_seqlen_qo=1)
    assert int(wi[-1]) > 0  # the planner ran, untouched
    if hidden:
        assert len(spy.calls) == 0 and "takes **rest" in spy.missed[0] and "cannot tell" in spy.missed[0]
        assert any("not recorded" in str(w.message) for w in warned)
    else:
        assert spy.missed == [] and spy.calls.one().params["max_seqlen_qo"] == 1


def test_without_takers_the_wrapper_costs_nothing_and_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ref.device("gfx942", 304):
            _plan(ref.get_mla_metadata_v1)


def test_a_wrapper_with_some_of_aiters_names_is_recorded_where_it_forwards_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def planner(seqlens_qo_indptr: torch.Tensor, kv: Any, last: Any, heads: Any, heads_k: Any, causal: Any, ptrs: Any, info: Any, indptr: Any, r_indptr: Any, r_final: Any, r_partial: Any, **rest: Any) -> Any:
        return ref.get_mla_metadata_v1(seqlens_qo_indptr, kv, last, heads, heads_k, causal, ptrs, info, indptr, r_indptr,
                                       r_final, r_partial, **rest)  # fmt: skip

    module = _planner_module(planner)
    monkeypatch.setitem(sys.modules, "my_planners", module)
    with ref.device("gfx942", 304), mla_golden.spy(module) as spy:
        _plan(module.get_mla_metadata_v1)
    assert spy.missed == [] and spy.calls.one().inputs["seqlens_kv_indptr"].tolist() == KV.tolist()


def test_a_call_that_does_not_fit_the_planner_is_its_own_error_not_a_miss() -> None:
    with ref.device("gfx942", 304), mla_golden.spy(ref) as spy, pytest.raises(TypeError):
        ref.get_mla_metadata_v1(QO, KV)
    assert spy.missed == [] and len(spy.calls) == 0
