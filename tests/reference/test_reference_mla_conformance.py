"""aiter behaviour of the reference MLA decode planner that no conformance record exercises.

The records themselves (every version's, e4048607 included) are replayed by
test_reference_versions_conformance.py; here: the op's argument checks, the
planners not ported, and the wrapper's resolution of the legacy dtype aliases.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.conformance import CANARY, MLA_BUFFER_NAMES, canary_buffers

from mla_golden.reference import device, get_mla_metadata_info_v1, get_mla_metadata_v1
from mla_golden.reference.errors import AiterCheckError
from mla_golden.schema import OUTPUTS

BUFFER_NAMES = MLA_BUFFER_NAMES
SIZING_ORDER = OUTPUTS  # get_mla_metadata_info_v1 return order


def _decode_args(
    dtype: torch.dtype = torch.bfloat16, seqlen_qo: int = 1, **overrides: object
) -> tuple[list[Any], dict[str, Any]]:
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
def test_input_checks(overrides: dict[str, Any], source: str, message: str) -> None:
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
    with device("gfx950", 256):
        args, kwargs = _decode_args(
            fp8, seqlen_qo=4, mla_version=1, dtype_q_rope=rope, dtype_kv_rope=rope
        )
        get_mla_metadata_v1(*args, **kwargs)
    work_indptr = args[6 + BUFFER_NAMES.index("work_indptr")]
    assert int((work_indptr != CANARY).sum()) == clusters + 1
