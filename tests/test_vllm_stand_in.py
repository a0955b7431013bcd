"""reference.as_aiter() serves what vLLM's ROCm MLA backend imports; a builder written like vLLM's runs through it.

The names below were listed from vLLM's source (vllm/v1/attention/backends/mla/rocm_aiter_mla.py,
.../mla/prefill/aiter_flash_attn.py and vllm/_aiter_ops.py, releases 0.28.0 to 0.33.0), keeping
those aiter e4048607 has.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import mla_golden
from mla_golden import reference
from mla_golden.reference import dtypes

#: (module, name) vLLM imports from aiter, as `from module import name`.
VLLM_IMPORTS = [
    ("aiter", "dtypes"),
    ("aiter", "get_mla_metadata_info_v1"),
    ("aiter", "get_mla_metadata_v1"),
    ("aiter", "get_ps_metadata_info_v1"),
    ("aiter", "get_ps_metadata_v1"),
    ("aiter", "mla_prefill_ps_asm_fwd"),
    ("aiter", "mla_reduce_v1"),
    ("aiter", "flash_attn_varlen_func"),
    ("aiter.mla", "mla_decode_fwd"),
    ("aiter.ops.triton.attention.mla", "mla_decode_fwd"),
    ("aiter.ops.triton.gluon.mla_gluon", "mla_gluon"),
    ("aiter.jit.core", "AITER_CSRC_DIR"),
]
KERNELS = [(m, n) for m, n in VLLM_IMPORTS if n not in ("dtypes", "AITER_CSRC_DIR") and "metadata" not in n]


@pytest.mark.parametrize(("module", "name"), VLLM_IMPORTS)
def test_every_name_vllm_imports_from_aiter_is_served(module: Any, name: Any) -> None:
    with reference.as_aiter():
        assert getattr(importlib.import_module(module), name) is not None


@pytest.mark.parametrize(("module", "name"), KERNELS)
def test_kernels_raise_saying_the_reference_only_plans(module: Any, name: Any) -> None:
    with reference.as_aiter():
        kernel = getattr(importlib.import_module(module), name)
    with pytest.raises(NotImplementedError, match="only plans"):
        kernel(*[None] * len([p for p in inspect.signature(kernel).parameters.values() if p.default is p.empty]))


def test_find_spec_sees_the_stand_in_as_an_installed_package() -> None:
    """vLLM's is_aiter_found() asks importlib.util.find_spec("aiter"), which needs a __spec__."""
    import importlib.util

    with reference.as_aiter():
        for name in ("aiter", "aiter.mla", "aiter.jit.core"):
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.name == name


def test_kernel_signatures_answer_vllms_probes() -> None:
    with reference.as_aiter():
        from aiter.mla import mla_decode_fwd
    parameters = inspect.signature(mla_decode_fwd).parameters
    # vLLM's _aiter_ops: causal= is required (else a hard error), q_scale/kv_scale turn on its fp8 path
    assert {"causal", "q_scale", "kv_scale", "return_lse"} <= set(parameters)


def test_names_aiter_e4048607_lacks_stay_absent_so_vllms_fallbacks_run() -> None:
    with reference.as_aiter():
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("aiter.ops.triton.gluon.mla_decode_gluon")
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("aiter.ops.triton.fusions.fused_mla_prefill_qkv_fp8")
        from aiter.jit.core import AITER_CSRC_DIR
    with pytest.raises(OSError):
        (__import__("pathlib").Path(AITER_CSRC_DIR) / "kernels" / "mla" / "reduce.cu").read_text()


def test_as_aiter_hides_a_loaded_aiter_and_restores_it() -> None:
    real, real_sub = types.ModuleType("aiter"), types.ModuleType("aiter.ops.attention")
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == "aiter" or k.startswith("aiter.")}
    sys.modules.update({"aiter": real, "aiter.ops.attention": real_sub})
    try:
        with reference.as_aiter() as stand_in:
            import aiter

            assert aiter is stand_in and aiter.get_mla_metadata_v1 is reference.get_mla_metadata_v1
            with pytest.raises(ModuleNotFoundError):
                importlib.import_module("aiter.ops.attention")  # the real one's submodule does not mix in
        assert sys.modules["aiter"] is real and sys.modules["aiter.ops.attention"] is real_sub
        assert "aiter.mla" not in sys.modules
    finally:
        for k in [k for k in sys.modules if k == "aiter" or k.startswith("aiter.")]:
            del sys.modules[k]
        sys.modules.update(saved)


# --- dtypes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "fp8"),
    [("gfx942", torch.float8_e4m3fnuz), ("gfx950", torch.float8_e4m3fn), ("gfx1201", torch.float8_e4m3fn), ("gfx90a", torch.uint8)],
)
def test_fp8_follows_the_device_as_aiters_does(arch: str, fp8: torch.dtype) -> None:
    with reference.device(arch, cu_num=80):
        assert dtypes.fp8 is fp8
        assert dtypes.get_dtype_fp8() is fp8
        assert dtypes.d_dtypes["fp8"] is fp8


def test_the_other_dtype_names_and_the_aiter_enum() -> None:
    assert (dtypes.fp16, dtypes.bf16, dtypes.fp32) == (torch.float16, torch.bfloat16, torch.float32)
    assert (dtypes.i32, dtypes.u32, dtypes.i64, dtypes.u64, dtypes.i16, dtypes.i8, dtypes.u8) == (
        torch.int32, torch.uint32, torch.int64, torch.uint64, torch.int16, torch.int8, torch.uint8,
    )  # fmt: skip
    assert dtypes.fp8_e8m0 is torch.float8_e8m0fnu and dtypes.fp4x2 is torch.float4_e2m1fn_x2
    # the cache dtype strings vLLM looks up, in aiter's AiterDtype order
    assert list(dtypes.d_dtypes) == ["fp8", "fp8_e8m0", "fp16", "bf16", "fp32", "i4x2", "fp4x2", "u32", "i32", "i16", "i8", "u8", "i64", "u64"]
    assert dtypes.d_dtypes["bf16"] is torch.bfloat16
    assert (dtypes.AITER_DTYPE_fp8, dtypes.AITER_DTYPE_bf16, dtypes.AITER_DTYPE_u64) == (0, 3, 13)
    with pytest.raises(AttributeError):
        dtypes.fp6  # noqa: B018


# --- a builder written like vLLM's ----------------------------------------------------------------

SEQ_LENS = [700, 1900, 100, 3000, 300, 600]
QUERY_LENS = [1, 1, 1, 1, 300, 600]


def _import_builder(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Import tests/helpers/vllm_builder.py afresh (its module-level `from aiter import dtypes` must see the stand-in)."""
    monkeypatch.delitem(sys.modules, "helpers.vllm_builder", raising=False)
    return importlib.import_module("helpers.vllm_builder")


@pytest.mark.parametrize(("arch", "fp8"), [("gfx942", "torch.float8_e4m3fnuz"), ("gfx950", "torch.float8_e4m3fn")])
def test_vllm_shaped_builder_records_the_arch_fp8_and_matches_its_goldens(arch: str, fp8: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with reference.as_aiter(), reference.device(arch):
        module = _import_builder(monkeypatch)
        builder = module.MlaMetadataBuilder(num_heads=16)
        with mla_golden.expect("aiter", tmp_path, name=f"{arch}-step", update=True) as spy:
            builder.build(SEQ_LENS, QUERY_LENS)
        decode, prefill = spy.calls.all()
        assert (decode.op, prefill.op) == ("get_mla_metadata_v1", "get_ps_metadata_v1")
        for call in (decode, prefill):
            assert call.device["arch"] == arch and call.provenance["backend"] == "reference"
        assert {decode.params[p] for p in ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope")} == {fp8}
        # the builder's buffers hold what the planner wrote, sized by the info helper at init
        assert builder.decode_buffers["work_info_set"].shape[0] == decode.buffers["work_info_set"]["shape"][0]
        assert torch.equal(
            builder.decode_buffers["work_indptr"][decode.written["work_indptr"]],
            decode.outputs["work_indptr"][decode.written["work_indptr"]],
        )
        loaded = mla_golden.load(tmp_path / f"{arch}-step.safetensors").call
        assert loaded.params["dtype_kv_nope"] == fp8 and loaded.device["arch"] == arch
        assert mla_golden.load(tmp_path / f"{arch}-step-1.safetensors").call.op == "get_ps_metadata_v1"
        with mla_golden.expect("aiter", tmp_path, name=f"{arch}-step"):  # a rebuild matches
            module.MlaMetadataBuilder(num_heads=16).build(SEQ_LENS, QUERY_LENS)
        with pytest.raises(mla_golden.GoldenMismatch, match=rf"dtype_kv_nope: '{fp8}' -> None"):
            with mla_golden.expect("aiter", tmp_path, name=f"{arch}-step"):
                module.MlaMetadataBuilder(num_heads=16, pass_dtypes=False).build(SEQ_LENS, QUERY_LENS)


def test_an_older_aiter_version_serves_its_planners_and_an_unknown_one_touches_nothing() -> None:
    old = reference.at("v0.1.16")
    with reference.as_aiter("v0.1.16") as aiter:
        from aiter import get_mla_metadata_info_v1, get_mla_metadata_v1

        assert get_mla_metadata_v1 is old.get_mla_metadata_v1 and get_mla_metadata_info_v1 is old.get_mla_metadata_info_v1
        assert "dtype_q_nope" not in inspect.signature(aiter.get_mla_metadata_v1).parameters  # that version's signature
        assert aiter.dtypes is dtypes
    marker = types.ModuleType("aiter")
    sys.modules["aiter"] = marker
    try:
        with pytest.raises(mla_golden.errors.UnknownVersionError):
            with reference.as_aiter("not-a-version"):
                pass
        assert sys.modules["aiter"] is marker
    finally:
        del sys.modules["aiter"]
