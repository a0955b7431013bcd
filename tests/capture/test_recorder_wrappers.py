"""The recorder records the arguments the planner received, whatever wrapper the program called it through.

A wrapper that takes ``**kwargs`` or renames aiter's parameters forwards values
its own signature does not show. The recorder binds the call where aiter's
signature applies (the planner the wrapper reaches); when it cannot see that
call, it says so loudly instead of writing the defaults.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from helpers import standins
from helpers.repo import TESTS

import mla_golden
from mla_golden import reference as ref
from mla_golden.call import CallNotFound
from mla_golden.reference.dtypes import FP8_BY_ARCH

#: The fp8 of the device the calls here plan for (gfx950).
FP8 = FP8_BY_ARCH["gfx950"]
QO = torch.tensor([0, 1, 2, 3], dtype=torch.int32)
KV_PAGES = torch.tensor([0, 4, 13, 14], dtype=torch.int32)
LAST = torch.tensor([16, 5, 1], dtype=torch.int32)
#: What the program passes beyond the twelve positional arguments; none of it is aiter's default.
PASSED = {"page_size": 16, "max_seqlen_qo": 1, "dtype_q": FP8, "dtype_kv": FP8}


def _buffers() -> list[torch.Tensor]:
    """In aiter's positional order: ptrs, work_info_set, work_indptr, reduce_indptr, final map, partial map."""
    info = ref.get_mla_metadata_info_v1(3, 1, 16, FP8, FP8, False)
    ptrs, indptr, info_set, *reduce = (torch.empty(shape, dtype=dtype) for shape, dtype in info)
    return [ptrs, info_set, indptr, *reduce]


def kwargs_wrapper(planner: Any) -> Any:
    """aiter's twelve positional names plus ``**kwargs`` (a common pattern)."""

    def get_mla_metadata_v1(seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, kv_last_page_lens: torch.Tensor, num_heads_per_head_k: int,
                            num_heads_k: int, is_causal: bool, work_metadata_ptrs: torch.Tensor, work_info_set: torch.Tensor, work_indptr: torch.Tensor, reduce_indptr: torch.Tensor,
                            reduce_final_map: torch.Tensor, reduce_partial_map: torch.Tensor, **kwargs: Any) -> Any:  # fmt: skip
        return planner()(seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k,
                         is_causal, work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
                         reduce_partial_map, **kwargs)  # fmt: skip

    return get_mla_metadata_v1


def renaming_wrapper(planner: Any) -> Any:
    """Renamed parameters (``last_page_lens``, ``block_size``, ``q_dtype`` / ``kv_dtype``, ``max_splits``)."""

    def get_mla_metadata_v1(seqlens_qo_indptr: torch.Tensor, seqlens_kv_indptr: torch.Tensor, last_page_lens: Any, num_heads_per_head_k: int, num_heads_k: int,
                            is_causal: bool, work_metadata_ptrs: torch.Tensor, work_info_set: torch.Tensor, work_indptr: torch.Tensor, reduce_indptr: torch.Tensor, reduce_final_map: torch.Tensor,
                            reduce_partial_map: torch.Tensor, block_size: Any = 1, max_seqlen_qo: int = -1, q_dtype: Any = None, kv_dtype: Any = None,
                            max_splits: Any = -1) -> Any:  # fmt: skip
        return planner()(seqlens_qo_indptr, seqlens_kv_indptr, last_page_lens, num_heads_per_head_k, num_heads_k,
                         is_causal, work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
                         reduce_partial_map, page_size=block_size, max_seqlen_qo=max_seqlen_qo, dtype_q=q_dtype,
                         dtype_kv=kv_dtype, max_split_per_batch=max_splits)  # fmt: skip

    return get_mla_metadata_v1


def _call(fn: Any, bufs: Any, renamed: bool) -> None:
    passed = dict(PASSED)
    if renamed:
        passed = {"block_size": 16, "max_seqlen_qo": 1, "q_dtype": FP8, "kv_dtype": FP8}
    fn(QO, KV_PAGES, LAST, 16, 1, True, *bufs, **passed)


@pytest.fixture
def truth() -> Any:
    """The call made straight to the planner, and the buffers it filled."""
    with ref.device("gfx950", 256), mla_golden.spy(ref) as spy:
        bufs = _buffers()
        ref.get_mla_metadata_v1(QO, KV_PAGES, LAST, 16, 1, True, *bufs, **PASSED)
    return spy.calls.one(), bufs


def _module(fn: Any) -> types.ModuleType:
    module: Any = types.ModuleType("my_wrappers")
    module.get_mla_metadata_v1 = fn
    return cast(types.ModuleType, module)


@pytest.mark.parametrize("make", [kwargs_wrapper, renaming_wrapper], ids=["kwargs", "renamed"])
def test_a_wrapper_call_is_recorded_with_what_the_planner_received(make: Any, truth: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    direct, _ = truth
    assert direct.params["page_size"] == 16 and direct.params["dtype_q_nope"] == str(FP8)
    module = _module(make(lambda: ref.get_mla_metadata_v1))  # looked up at call time, as a module's code does
    monkeypatch.setitem(sys.modules, "my_wrappers", module)
    with ref.device("gfx950", 256), mla_golden.spy(module) as spy:
        _call(module.get_mla_metadata_v1, _buffers(), make is renaming_wrapper)
    call = spy.calls.one()
    assert spy.missed == []
    assert call.params == direct.params
    assert torch.equal(call.inputs["kv_last_page_lens"], LAST)
    assert mla_golden.diff(direct, call).equal
    assert not any("taken as" in note or "implied" in note for note in call.facts["notes"])


@pytest.mark.parametrize("make", [kwargs_wrapper, renaming_wrapper], ids=["kwargs", "renamed"])
def test_a_wrapper_whose_forwarded_call_cannot_be_seen_is_missed_loudly(make: Any, truth: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, want = truth
    hidden = ref.get_mla_metadata_v1  # held in a closure: no spy can replace it
    module = _module(make(lambda: hidden))
    monkeypatch.setitem(sys.modules, "my_wrappers", module)
    with ref.device("gfx950", 256), mla_golden.spy(module) as spy:
        bufs = _buffers()
        with pytest.warns(UserWarning, match="not recorded"):
            _call(module.get_mla_metadata_v1, bufs, make is renaming_wrapper)
    assert len(spy.calls) == 0 and len(spy.missed) == 1
    with pytest.raises(CallNotFound, match="made but not recorded: .*cannot tell"):
        spy.calls.one()
    # The program saw exactly the planner's own effect.
    assert torch.equal(bufs[2], want[2])


def test_a_direct_call_through_aiters_signature_notes_only_parameters_it_lacks() -> None:
    """An older planner signature (no page_size) cannot be passed page_size: its note says what aiter assumed."""
    with ref.device("gfx950", 256), mla_golden.spy(ref) as spy:
        ref.get_mla_metadata_v1(QO, KV_PAGES, LAST, 16, 1, True, *_buffers(), **PASSED)
    assert spy.calls.one().facts["notes"] == []


KWARGS_AITER = '''\
"""A stand-in aiter whose planner was replaced by the program's wrapper (defined in its own module, shim)."""
from shim import get_mla_metadata_v1  # noqa: F401
'''

SHIM = '''\
"""The program's wrapper: aiter's twelve positional names plus **kwargs, calling the kernel directly."""
from helpers.standins import toy_plan, _is_fp8


def get_mla_metadata_v1(seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k,
                        is_causal, work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
                        reduce_partial_map, **kwargs):
    toy_plan(seqlens_qo_indptr, seqlens_kv_indptr, _is_fp8(kwargs.get("dtype_q"), kwargs.get("dtype_kv")),
             work_metadata_ptrs, work_indptr, work_info_set, reduce_indptr, reduce_final_map, reduce_partial_map)
'''

PROGRAM = '''\
import torch
from helpers import standins
import aiter

bufs = standins.toy_buffers(2, 400)
aiter.get_mla_metadata_v1(torch.tensor([0, 1, 2], dtype=torch.int32), torch.tensor([0, 50, 200], dtype=torch.int32),
                          torch.ones(2, dtype=torch.int32), 16, 1, True, *bufs.values(), page_size=16,
                          dtype_q=torch.float8_e4m3fn, dtype_kv=torch.float8_e4m3fn)
'''


@pytest.mark.slow
def test_record_command_exits_non_zero_when_it_cannot_tell_what_the_planner_received(tmp_path: Path) -> None:
    import json
    import os
    import subprocess

    site = tmp_path / "site" / "aiter"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(KWARGS_AITER)
    (site.parent / "shim.py").write_text(SHIM)
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site.parent), str(TESTS)]))
    out = tmp_path / "goldens"
    cmd = [sys.executable, "-m", "mla_golden.cli", "record", "--out", str(out), "--format", "json", "--", sys.executable, str(script)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    report = json.loads(run.stdout)
    assert report["summary"] == {"missed": 1}
    assert "**kwargs" in report["results"][0]["message"]
    assert not out.exists() or not any(out.rglob("*.safetensors"))  # no golden with defaults the program never used


def test_aiters_compiled_op_behind_an_opaque_signature_is_bound_on_aiters_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    """compile_ops hands out a (*args, **kwargs) function without __wrapped__: aiter's own planner, aiter's names."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("future_flag", None)  # a parameter of a newer aiter than mla-golden knows
        return standins.mla_e4048607(*args, **kwargs)

    wrapper.__module__ = "aiter.jit.utils.torch_guard"
    aiter = standins.fake_aiter(wrapper)
    monkeypatch.setitem(sys.modules, "aiter", aiter)
    bufs = standins.toy_buffers(3, 200)
    with mla_golden.spy("aiter") as spy:
        aiter.get_mla_metadata_v1(QO, KV_PAGES, LAST, 16, 1, True, *bufs.values(), **PASSED)
    call = spy.calls.one()
    assert call.params["page_size"] == 16 and call.params["max_seqlen_qo"] == 1
    assert call.params["dtype_kv_rope"] == str(FP8) and call.params["kv_granularity"] == 16
    with mla_golden.spy("aiter") as spy, pytest.warns(UserWarning, match="not recorded"):
        aiter.get_mla_metadata_v1(QO, KV_PAGES, LAST, 16, 1, True, *bufs.values(), future_flag=True)
    assert len(spy.calls) == 0 and "does not fit aiter's get_mla_metadata_v1" in spy.missed[0]


def test_a_wrapper_with_aiters_signature_is_recorded_once_where_it_reaches_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its call and the planner's are both intercepted: one call recorded (the planner's), the planner run three times."""
    runs = []

    def forward(arguments: Any) -> Any:
        runs.append(1)
        return ref.get_mla_metadata_v1(**arguments)

    module = _module(standins.with_signature(standins.mla_e4048607, forward))
    monkeypatch.setitem(sys.modules, "my_wrappers", module)
    with ref.device("gfx950", 256), mla_golden.spy(module, ref) as spy:
        module.get_mla_metadata_v1(QO, KV_PAGES, LAST, 16, 1, True, *_buffers(), **PASSED)
    call = spy.calls.one()
    assert len(runs) == 1  # the wrapper ran once: the probes ran the planner itself
    assert call.provenance["function"].startswith("mla_golden.reference")
    assert call.params["page_size"] == 16
