"""spy(): interception of every alias, restore, nesting, threads, and what a captured Call holds."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import standins

import mla_golden
import mla_golden.capture.recorder
import mla_golden.errors
from mla_golden.call import CallNotFound

QO = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
KV = torch.tensor([0, 50, 200, 210], dtype=torch.int32)


def builder(fn: Any, dtype: Any = torch.float8_e4m3fn, bufs: Any = None) -> Any:
    """Size, allocate and plan like a real builder (torch.empty garbage included)."""
    bufs = bufs or standins.toy_buffers(3, 200)
    fn(QO, KV, torch.ones(3, dtype=torch.int32), 16, 1, True,
       bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"],
       bufs["reduce_indptr"], bufs["reduce_final_map"], bufs["reduce_partial_map"],
       max_seqlen_qo=1, dtype_q=dtype, dtype_kv=dtype)  # fmt: skip
    return bufs


@pytest.fixture
def fake_aiter(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A stand-in aiter module, plus a builder module that bound the planner at import time."""
    aiter = standins.fake_aiter()
    monkeypatch.setitem(sys.modules, "aiter", aiter)
    user: Any = types.ModuleType("my_builder")
    user.get_mla_metadata_v1 = aiter.get_mla_metadata_v1  # from aiter import get_mla_metadata_v1
    monkeypatch.setitem(sys.modules, "my_builder", user)
    return aiter, user


def test_spy_intercepts_the_module_and_every_alias_then_restores(fake_aiter: Any) -> None:
    aiter, user = fake_aiter
    original = aiter.get_mla_metadata_v1
    with mla_golden.spy() as spy:
        assert aiter.get_mla_metadata_v1 is not original
        assert user.get_mla_metadata_v1 is aiter.get_mla_metadata_v1
        builder(aiter.get_mla_metadata_v1)
        builder(user.get_mla_metadata_v1)
    assert aiter.get_mla_metadata_v1 is original and user.get_mla_metadata_v1 is original
    assert len(spy.calls.all("get_mla_metadata_v1")) == 2


def test_spy_restores_on_exception(fake_aiter: Any) -> None:
    aiter, user = fake_aiter
    original = aiter.get_mla_metadata_v1
    with pytest.raises(KeyError):
        with mla_golden.spy():
            raise KeyError("builder blew up")
    assert aiter.get_mla_metadata_v1 is original and user.get_mla_metadata_v1 is original


def test_alias_made_while_spying_is_restored_too(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    original = aiter.get_mla_metadata_v1
    late: Any = types.ModuleType("late_importer")
    sys.modules["late_importer"] = late
    try:
        with mla_golden.spy():
            late.plan = aiter.get_mla_metadata_v1  # imported while the spy was on
        assert late.plan is original
    finally:
        del sys.modules["late_importer"]


def test_nested_spies_both_see_calls_and_unwind(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    original = aiter.get_mla_metadata_v1
    with mla_golden.spy() as outer:
        builder(aiter.get_mla_metadata_v1)
        with mla_golden.spy() as inner:
            builder(aiter.get_mla_metadata_v1)
        assert aiter.get_mla_metadata_v1 is not original  # outer still active
        builder(aiter.get_mla_metadata_v1)
    assert aiter.get_mla_metadata_v1 is original
    assert (len(outer.calls), len(inner.calls)) == (3, 1)


def test_spy_as_decorator(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    spy = mla_golden.spy()

    @spy
    def run() -> None:
        builder(aiter.get_mla_metadata_v1)

    run()
    assert len(spy.calls) == 1 and aiter.get_mla_metadata_v1 is standins.mla_e4048607


def test_concurrent_calls_are_all_captured(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    with mla_golden.spy() as spy:
        threads = [threading.Thread(target=builder, args=(aiter.get_mla_metadata_v1,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(spy.calls) == 8


def test_calls_one_names_what_it_found(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    with mla_golden.spy() as spy:
        with pytest.raises(CallNotFound, match="captured 0"):
            spy.calls.one("get_mla_metadata_v1")
        builder(aiter.get_mla_metadata_v1)
        builder(aiter.get_mla_metadata_v1)
    with pytest.raises(CallNotFound, match="captured 2"):
        spy.calls.one("get_mla_metadata_v1")
    assert spy.calls.all("get_ps_metadata_v1") == []


def test_captured_call_holds_inputs_masks_and_facts(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    with mla_golden.spy() as spy:
        bufs = builder(aiter.get_mla_metadata_v1)
    call = spy.calls.one()
    assert call.provenance["backend"] == "helpers.standins" and call.error is None
    assert torch.equal(call.inputs["seqlens_kv_indptr"], KV)
    # fp8 chunks of 64: batch 0 one work, batch 1 three, batch 2 one -> 5 works, 8 CU parts
    assert call.written["work_info_set"].sum().item() == 5 * 8
    assert call.written["work_info_set"][:5].all() and not call.written["work_info_set"][5:].any()
    assert call.written["work_indptr"].sum().item() == standins.TOY_CU_PARTS + 1
    assert torch.equal(call.outputs["work_info_set"][:5], bufs["work_info_set"][:5])
    assert not call.outputs["work_info_set"][5:].any()  # garbage is not kept
    assert call.facts == {"notes": [], "deterministic": True, "ptrs_ok": True}
    assert call.env == {"AITER_ENABLE_EXPERIMENTAL": None, "AITER_MLA_META_USE_PARALLEL": None}
    assert call.buffers["work_info_set"] == {"shape": list(bufs["work_info_set"].shape), "dtype": "torch.int32"}


def test_planner_error_is_captured_and_reraised_unchanged(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aiter, _ = fake_aiter
    boom = RuntimeError("get_mla_metadata_v1_2_device: only supports #heads in [16, 64, 128]")

    def failing(arguments: Any) -> None:
        raise boom

    monkeypatch.setattr(aiter, "get_mla_metadata_v1", standins.with_signature(standins.mla_e4048607, failing))
    with mla_golden.spy() as spy:
        with pytest.raises(RuntimeError) as info:
            builder(aiter.get_mla_metadata_v1)
    assert info.value is boom
    assert spy.calls.one().error == str(boom) and spy.calls.one().outputs == {}


def test_pointers_aimed_elsewhere_are_a_recorded_fact(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aiter, _ = fake_aiter

    def stray(arguments: Any) -> None:
        standins.mla_e4048607(**arguments)
        arguments["work_metadata_ptrs"][0] = 12345  # no longer at work_indptr

    monkeypatch.setattr(aiter, "get_mla_metadata_v1", standins.with_signature(standins.mla_e4048607, stray))
    with mla_golden.spy() as spy:
        builder(aiter.get_mla_metadata_v1)
    assert spy.calls.one().facts["ptrs_ok"] is False


def test_nondeterministic_planner_is_flagged(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aiter, _ = fake_aiter
    runs = iter(range(100))

    def flaky(arguments: Any) -> None:
        standins.mla_e4048607(**arguments)
        if next(runs) == 0:  # the caller's run differs from the probe runs
            arguments["work_info_set"][0, 4] += 1

    monkeypatch.setattr(aiter, "get_mla_metadata_v1", standins.with_signature(standins.mla_e4048607, flaky))
    with mla_golden.spy() as spy:
        builder(aiter.get_mla_metadata_v1)
    assert spy.calls.one().facts["deterministic"] is False


def test_reentering_one_spy_unwinds_fully_and_records_each_call_once(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    original = aiter.get_mla_metadata_v1
    spy = mla_golden.spy()
    with spy:
        with spy:
            builder(aiter.get_mla_metadata_v1)
        assert aiter.get_mla_metadata_v1 is not original  # the outer entry still spies
        builder(aiter.get_mla_metadata_v1)
    assert aiter.get_mla_metadata_v1 is original
    assert len(spy.calls) == 2 and spy.calls[0] is not spy.calls[1]


def test_decorated_recursive_function_records_every_call_once(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    spy = mla_golden.spy()

    @spy
    def plan(depth: Any) -> None:
        builder(aiter.get_mla_metadata_v1)
        if depth:
            plan(depth - 1)

    plan(2)
    assert len(spy.calls) == 3 and len({id(c) for c in spy.calls}) == 3
    assert aiter.get_mla_metadata_v1 is standins.mla_e4048607


def test_numpy_and_tensor_scalars_are_recorded_as_plain_values(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    np = pytest.importorskip("numpy")
    bufs = standins.toy_buffers(3, 200)
    with mla_golden.spy() as spy:
        aiter.get_mla_metadata_v1(QO, KV, torch.ones(3, dtype=torch.int32), torch.tensor(16), 1, True, *bufs.values(),
                                  max_seqlen_qo=np.int64(1))  # fmt: skip
    params = spy.calls.one().params
    assert (params["num_heads_per_head_k"], params["max_seqlen_qo"]) == (16, 1)
    assert type(params["max_seqlen_qo"]) is int


def test_a_call_that_cannot_be_recorded_is_warned_about_not_dropped_silently(fake_aiter: Any) -> None:
    aiter, _ = fake_aiter
    bufs = standins.toy_buffers(3, 200)
    with mla_golden.spy() as spy, pytest.warns(UserWarning, match="not recorded"):
        aiter.get_mla_metadata_v1(QO, KV, torch.ones(3, dtype=torch.int32), torch.tensor([16, 16]), 1, True, *bufs.values())
    assert len(spy.calls) == 0 and spy.missed == [spy.missed[0]] and "expected a scalar argument" in spy.missed[0]


def test_an_alias_kept_outside_modules_stops_capturing_after_the_spy(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aiter, _ = fake_aiter
    holder = {}
    with mla_golden.spy():
        holder["plan"] = aiter.get_mla_metadata_v1  # e.g. stored on a builder object
    probes = []
    monkeypatch.setattr("mla_golden.capture.recorder.LiveCapture", lambda *a, **k: probes.append(a))
    builder(holder["plan"])  # still the wrapper, but no spy listens: straight to the planner
    assert probes == []


def test_nothing_to_intercept_is_an_error_not_a_silent_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    with pytest.raises(mla_golden.errors.NothingToIntercept, match="is aiter importable"):
        with mla_golden.spy():
            pass
    with pytest.raises(mla_golden.errors.NothingToIntercept):
        with mla_golden.spy(types.ModuleType("empty")):
            pass


def test_lazily_loaded_modules_are_not_imported_by_a_spy(fake_aiter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    (tmp_path / "lazy_probe.py").write_text("import sys\nsys.modules['lazy_probe_ran'] = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.find_spec("lazy_probe")
    assert spec is not None and spec.loader is not None
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "lazy_probe", module)
    spec.loader.exec_module(module)
    with mla_golden.spy():
        pass
    assert "lazy_probe_ran" not in sys.modules


# --- the alias index: unchanged modules are not rescanned, changed ones always are -------------


def test_the_alias_index_uses_the_dict_version_tag_here() -> None:
    """CI runs CPython: the fast path must be the one tested (else every spy scans every module)."""
    from mla_golden.capture.aliases import INDEX

    assert INDEX.cached


@pytest.mark.parametrize("cached", [True, False], ids=["version-tag", "full-scan"])
def test_an_alias_assigned_later_over_an_existing_global_is_found(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch, cached: bool) -> None:
    """Same dict size, one value replaced: only a version tag (or a full scan) notices."""
    from mla_golden.capture import aliases

    index = aliases.AliasIndex(cached and aliases._tag_works())
    monkeypatch.setattr(mla_golden.capture.recorder, "INDEX", index)
    aiter, _ = fake_aiter
    original = aiter.get_mla_metadata_v1
    lazy: Any = types.ModuleType("lazy_binder")
    lazy.plan = None  # `_plan = None` at import, `global _plan; _plan = aiter.get_mla_metadata_v1` later
    monkeypatch.setitem(sys.modules, "lazy_binder", lazy)
    with mla_golden.spy():
        pass  # the index has now seen lazy_binder without an alias
    size = len(lazy.__dict__)
    lazy.plan = original
    assert len(lazy.__dict__) == size
    with mla_golden.spy() as spy:
        builder(lazy.plan)
    assert len(spy.calls) == 1 and lazy.plan is original


def test_a_module_imported_between_spies_is_scanned(fake_aiter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    aiter, _ = fake_aiter
    with mla_golden.spy():
        pass
    newcomer: Any = types.ModuleType("newcomer")
    newcomer.plan = aiter.get_mla_metadata_v1
    monkeypatch.setitem(sys.modules, "newcomer", newcomer)
    with mla_golden.spy() as spy:
        builder(newcomer.plan)
    assert len(spy.calls) == 1 and newcomer.plan is aiter.get_mla_metadata_v1
