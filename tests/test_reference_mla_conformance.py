"""The reference MLA decode planner reproduces every aiter mla_v1 conformance record.

Each record is replayed on its device and environment into buffers pre-filled
with a canary: written elements must equal aiter's, every other element must
keep the canary. Expected failures must fail the same way: aiter's check
message, a buffer too small for what aiter writes past its end, or an
undefined result (then, under ``allow_undefined()``, the defined elements must
still match). The sizing helper must reproduce the record's buffers, and the
host dispatch aiter's ``planner_internals``. A few tests at the end cover
aiter behaviour that no record exercises (argument checks, alias resolution).
"""

from __future__ import annotations

import pytest
import torch
from conformance import (
    CANARY,
    MLA_BUFFER_NAMES,
    Expected,
    alloc_buffers,
    canary_buffers,
    expected_outputs,
    input_tensors,
    record_params,
    torch_dtype,
)

from mla_golden.reference import _device
from mla_golden.reference._undefined import UNDEFINED_PLACEHOLDER, allow_undefined
from mla_golden.reference.errors import (
    AiterCheckError,
    BufferTooSmallError,
    UndefinedResultError,
)
from mla_golden.reference.mla_v1 import (
    get_mla_metadata_info_v1,
    get_mla_metadata_v1,
    plan_mla_metadata_v1,
)
from mla_golden.schema import OUTPUTS

RECORDS = record_params("mla_v1-e4048607")
BUFFER_NAMES = MLA_BUFFER_NAMES
SIZING_ORDER = OUTPUTS  # get_mla_metadata_info_v1 return order
DTYPE_KWARGS = (
    "dtype_q_nope",
    "dtype_q_rope",
    "dtype_kv_nope",
    "dtype_kv_rope",
    "dtype_q",
    "dtype_kv",
)


@pytest.fixture
def on_record_env(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Set the record's environment variables (None = unset) for the test."""

    def apply(record: dict) -> None:
        for name, value in record["env"].items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

    return apply


def _on_device(record: dict):  # type: ignore[no-untyped-def]
    dev = record["device"]
    return _device.device(
        dev["arch"], dev["cu_num"], warp_size=dev["warp_size"], lds_bytes=dev["lds_bytes"]
    )


def _kwargs(call: dict) -> dict:
    kwargs = dict(call["kwargs"])
    for name in DTYPE_KWARGS:
        kwargs[name] = torch_dtype(kwargs[name])
    return kwargs


def _run(record: dict, buffers: dict[str, torch.Tensor]) -> None:
    """Replay the record's call on the reference, on the record's device."""
    call = record["call"]
    inputs = input_tensors(call)
    args = call["args"]
    with _on_device(record):
        get_mla_metadata_v1(
            inputs["seqlens_qo_indptr"],
            inputs["seqlens_kv_indptr"],
            inputs["kv_last_page_lens"],
            args["num_heads_per_head_k"],
            args["num_heads_k"],
            args["is_causal"],
            buffers["work_metadata_ptrs"],
            buffers["work_info_set"],
            buffers["work_indptr"],
            buffers["reduce_indptr"],
            buffers["reduce_final_map"],
            buffers["reduce_partial_map"],
            **_kwargs(call),
        )


def _check_buffer(name: str, actual: torch.Tensor, expected: Expected, buffers: dict) -> None:
    """Written elements equal aiter's; untouched ones keep the canary."""
    __tracebackhide__ = True
    assert tuple(actual.shape) == expected.shape
    flat = actual.reshape(-1)
    if expected.skipped:
        # raw pointers: aiter stores work_indptr's then work_info_set's address
        pointers = iter([buffers["work_indptr"].data_ptr(), buffers["work_info_set"].data_ptr()])
        want = [next(pointers) if written else CANARY for written in expected.written.tolist()]
        assert flat.view(torch.int64).tolist() == want, name
        return
    got = flat.to(torch.int64)
    bad = (got != expected.values) & expected.written
    assert not bad.any(), (
        f"{name}: {int(bad.sum())} written elements differ, first at flat index "
        f"{int(bad.nonzero()[0])}: got {int(got[bad][0])}, aiter {int(expected.values[bad][0])}"
    )
    untouched = ~expected.written & ~expected.indeterminate
    clobbered = (got != CANARY) & untouched
    assert not clobbered.any(), (
        f"{name}: stored to {int(clobbered.sum())} elements aiter leaves alone, first at flat "
        f"index {int(clobbered.nonzero()[0])} (value {int(got[clobbered][0])})"
    )


def _assert_untouched(buffers: dict[str, torch.Tensor]) -> None:
    __tracebackhide__ = True
    for name, buf in buffers.items():
        assert bool((buf.reshape(-1).to(torch.int64) == CANARY).all()), f"{name} was written"


@pytest.mark.parametrize("record", RECORDS)
def test_record(record: dict, on_record_env) -> None:  # type: ignore[no-untyped-def]
    on_record_env(record)
    buffers = alloc_buffers(record["buffers"], CANARY)

    if record["result"] == "error":
        with pytest.raises(AiterCheckError) as info:
            _run(record, buffers)
        assert info.value.message == record["error"]["message"]
        assert info.value.source == record["error"]["source"]
        _assert_untouched(buffers)
        return

    expected = expected_outputs(record["outputs"])
    beyond = [name for name in BUFFER_NAMES if expected[name].beyond_end]
    if beyond:
        with pytest.raises(BufferTooSmallError) as too_small:
            _run(record, buffers)
        first = expected[beyond[0]]
        assert too_small.value.buffer == beyond[0]
        assert too_small.value.numel == first.written.numel()
        assert too_small.value.needed == max(end for _, end in first.beyond_end)
        _assert_untouched(buffers)
        return

    if any(e.indeterminate.any() for e in expected.values()) or record.get("indeterminate_record"):
        with pytest.raises(UndefinedResultError):
            _run(record, buffers)
        _assert_untouched(buffers)
        with allow_undefined():
            _run(record, buffers)
        for name in BUFFER_NAMES[1:]:
            flat = buffers[name].reshape(-1)
            if record.get("indeterminate_record"):
                # nothing is defined, not even where aiter stores: only the pointers are written
                _assert_untouched({name: buffers[name]})
            else:
                assert bool((flat[expected[name].indeterminate] == UNDEFINED_PLACEHOLDER).all())
    else:
        _run(record, buffers)
    for name in BUFFER_NAMES:
        _check_buffer(name, buffers[name], expected[name], buffers)


@pytest.mark.parametrize("record", RECORDS)
def test_planner_internals(record: dict, on_record_env) -> None:  # type: ignore[no-untyped-def]
    """The host dispatch picks aiter's kernel, traits and parameters."""
    if record["result"] != "ok":
        pytest.skip("aiter rejected the inputs before choosing a kernel")
    on_record_env(record)
    call = record["call"]
    inputs = input_tensors(call)
    args = call["args"]
    kwargs = call["kwargs"]
    ids = record["resolved_dtype_ids"]
    with _on_device(record):
        dispatch = plan_mla_metadata_v1(
            inputs["seqlens_qo_indptr"],
            inputs["seqlens_kv_indptr"],
            inputs["kv_last_page_lens"],
            args["num_heads_per_head_k"],
            args["num_heads_k"],
            args["is_causal"],
            record["buffers"]["reduce_indptr"]["shape"][0],
            page_size=kwargs["page_size"],
            kv_granularity=kwargs["kv_granularity"],
            max_seqlen_qo=kwargs["max_seqlen_qo"],
            uni_seqlen_qo=kwargs["uni_seqlen_qo"],
            topk=kwargs["topk"],
            max_split_per_batch=kwargs["max_split_per_batch"],
            is_cp_round_robin=kwargs["is_cp_round_robin"],
            mla_version=kwargs["mla_version"],
            **ids,
        )
    params, traits = dispatch.params, dispatch.traits
    got = {
        "kernel": dispatch.kernel_name,
        "packed_qo_len_per_wg": traits.packed_qo_len_per_wg,
        "qo_splits": int(traits.qo_splits),
        "uni_seqlen_qo": traits.uni_seqlen_qo,
        "lds_batch_info": int(traits.lds_batch_info),
        "is_sparse": int(traits.is_sparse),
        "num_cu": params.num_cu,
        "num_splits": params.num_splits,
        "num_batches": params.num_batches,
        "num_heads": params.num_heads,
        "qk_batch_ratio": params.qk_batch_ratio,
        "fixed_over_head_num_blocks": params.fixed_over_head_num_blocks,
    }
    assert got == record["planner_internals"]


@pytest.mark.parametrize("record", RECORDS)
def test_sizing(record: dict, on_record_env) -> None:  # type: ignore[no-untyped-def]
    """get_mla_metadata_info_v1 on the record's device and env gives the record's buffers."""
    on_record_env(record)
    sizing = dict(record["buffers"]["sizing_call"])
    sizing["q_dtype"] = torch_dtype(sizing["q_dtype"])
    sizing["kv_dtype"] = torch_dtype(sizing["kv_dtype"])
    with _on_device(record):
        info = get_mla_metadata_info_v1(**sizing)
    for name, (shape, dtype) in zip(SIZING_ORDER, info, strict=True):
        spec = record["buffers"][name]
        got_shape = (shape,) if isinstance(shape, int) else tuple(shape)
        assert got_shape == tuple(spec["shape"]), name
        assert dtype == torch_dtype(spec["dtype"]), name


def _decode_args(
    dtype: torch.dtype = torch.bfloat16, seqlen_qo: int = 1, **overrides: object
) -> tuple[list, dict]:
    """A valid 2-batch, 16-head decode call, buffers from the sizing helper, canary-filled."""
    inputs = {
        "seqlens_qo_indptr": torch.tensor([0, seqlen_qo, 2 * seqlen_qo], dtype=torch.int32),
        "seqlens_kv_indptr": torch.tensor([0, 100, 300], dtype=torch.int32),
        "kv_last_page_lens": torch.tensor([1, 1], dtype=torch.int32),
    }
    inputs.update({k: v for k, v in overrides.items() if k in inputs})  # type: ignore[misc]
    info = get_mla_metadata_info_v1(2, seqlen_qo, 16, dtype, dtype, False)
    buffers = canary_buffers(SIZING_ORDER, info)
    args = [*inputs.values(), 16, 1, True, *(buffers[name] for name in BUFFER_NAMES)]
    kwargs = {
        "max_seqlen_qo": seqlen_qo,
        "uni_seqlen_qo": seqlen_qo,
        "dtype_q": dtype,
        "dtype_kv": dtype,
    }
    kwargs.update({k: v for k, v in overrides.items() if k not in inputs})
    return args, kwargs


@pytest.mark.parametrize(
    ("overrides", "source", "message"),
    [
        ({"kv_granularity": 24}, "metadata.cu:70", "kv_granularity Must be power of 2!"),
        ({"page_size": 3}, "metadata.cu:72", "page_size Must be power of 2!"),
        (
            {"seqlens_qo_indptr": torch.arange(6, dtype=torch.int32)[::2]},
            "metadata.cu:74",
            "seqlens_qo_indptr should be continuous!",
        ),
        (
            {"seqlens_kv_indptr": torch.tensor([0, 100, 300])},
            "metadata.cu:80",
            "seqlens_kv_indptr's element type should be int!",
        ),
        (
            {"kv_last_page_lens": torch.ones(2, dtype=torch.int16)},
            "metadata.cu:84",
            "kv_last_page_lens's element type should be int!",
        ),
    ],
)
def test_input_checks(overrides: dict, source: str, message: str) -> None:
    """metadata.cu's checks of the op's arguments, which no record trips."""
    args, kwargs = _decode_args(**overrides)
    with pytest.raises(AiterCheckError) as info:
        get_mla_metadata_v1(*args, **kwargs)
    assert info.value.source == f"csrc/kernels/mla/{source}"
    assert info.value.message == f"get_mla_metadata_v1: {message}"


@pytest.mark.parametrize(
    ("intra_batch_mode", "planner"), [(False, "v1_1_device.cuh"), (True, "v1_0_device.cuh")]
)
def test_slow_modes_not_ported(intra_batch_mode: bool, planner: str) -> None:
    args, kwargs = _decode_args(fast_mode=False, intra_batch_mode=intra_batch_mode)
    with pytest.raises(NotImplementedError, match=planner):
        get_mla_metadata_v1(*args, **kwargs)


@pytest.mark.parametrize(("rope", "clusters"), [(torch.bfloat16, 512), (None, 256)])
def test_legacy_alias_fills_only_missing_dtypes(
    monkeypatch: pytest.MonkeyPatch, rope: torch.dtype | None, clusters: int
) -> None:
    """dtype_q / dtype_kv fill only the nope/rope dtypes not given, as aiter's wrapper does.

    V40 with fp8 nope + bf16 rope and 16 heads x 4 tokens runs aiter's m16x4
    kernel at occupancy 2 (twice the clusters); all-fp8 V40 does not.
    """
    monkeypatch.setenv("AITER_ENABLE_EXPERIMENTAL", "1")
    fp8 = torch.float8_e4m3fn
    with _device.device("gfx950", 256):
        args, kwargs = _decode_args(
            fp8, seqlen_qo=4, mla_version=1, dtype_q_rope=rope, dtype_kv_rope=rope
        )
        get_mla_metadata_v1(*args, **kwargs)
    work_indptr = args[6 + BUFFER_NAMES.index("work_indptr")]
    assert int((work_indptr != CANARY).sum()) == clusters + 1
