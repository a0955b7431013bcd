"""The reference PS planner rejects bad inputs as aiter does.

The ps_v1 conformance records (outputs, written masks, buffer shapes) are
replayed by test_reference_versions_conformance.py; here: inputs aiter
rejects with its message, or that the reference refuses with a clear one
where aiter checks nothing and would misread memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from helpers.conformance import CANARY, PS_BUFFER_NAMES, canary_buffers, ps_outputs

from mla_golden.reference import (
    AiterCheckError,
    BufferTooSmallError,
    UndefinedResultError,
    get_ps_metadata_info_v1,
    get_ps_metadata_v1,
)

BUFFER_NAMES = PS_BUFFER_NAMES


# ---------------------------------------------------------------------------
# Rejected inputs (on the default device, gfx942 with 304 CUs)
# ---------------------------------------------------------------------------

SEQ_LENS = [300, 17, 1024]
NUM_HEADS_K = 8


def _call_args() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A small vLLM-style prefill call and canary buffers sized by the info function."""
    indptr = torch.tensor([0, *torch.tensor(SEQ_LENS).cumsum(0).tolist()], dtype=torch.int32)
    inputs = {
        "seqlens_qo_indptr": indptr,
        "pages_kv_indptr": indptr.clone(),
        "context_lens": torch.tensor(SEQ_LENS, dtype=torch.int32),
    }
    info = get_ps_metadata_info_v1(len(SEQ_LENS), NUM_HEADS_K, max(SEQ_LENS))
    buffers = canary_buffers(BUFFER_NAMES, info)
    return inputs, buffers


def _plan(
    inputs: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], **kwargs: object
) -> None:
    params: dict[str, Any] = {"kvlen_granularity": 128, "block_size": 1} | kwargs  # some tests pass bad types
    get_ps_metadata_v1(
        inputs["seqlens_qo_indptr"],
        inputs["pages_kv_indptr"],
        inputs["context_lens"],
        1,
        NUM_HEADS_K,
        *ps_outputs(buffers[name] for name in BUFFER_NAMES),
        **params,
    )


def _strided(tensor: torch.Tensor) -> torch.Tensor:
    """Same values, stride 2."""
    return tensor.repeat_interleave(2)[::2]


def test_valid_call_fills_whole_buffers() -> None:
    inputs, buffers = _call_args()
    _plan(inputs, buffers)
    for name in BUFFER_NAMES[1:]:
        assert not (buffers[name] == CANARY).any(), name
    assert (buffers["work_metadata_ptrs"] == CANARY).all()


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (
            lambda i: i.update(seqlens_qo_indptr=i["seqlens_qo_indptr"].to(torch.int64)),
            251,
            "seqlens_qo_indptr's element type should be int!",
        ),
        (
            lambda i: i.update(pages_kv_indptr=i["pages_kv_indptr"].to(torch.int64)),
            255,
            "seqlens_kv_indptr's element type should be int!",
        ),
        (
            lambda i: i.update(seqlens_qo_indptr=_strided(i["seqlens_qo_indptr"])),
            249,
            "seqlens_qo_indptr should be continuous!",
        ),
        (
            lambda i: i.update(pages_kv_indptr=_strided(i["pages_kv_indptr"])),
            253,
            "seqlens_kv_indptr should be continuous!",
        ),
    ],
    ids=["qo_int64", "kv_int64", "qo_strided", "kv_strided"],
)
def test_aiter_checks(edit: Callable[[dict[str, Any]], None], line: int, message: str) -> None:
    inputs, buffers = _call_args()
    edit(inputs)
    snapshot = {name: buf.clone() for name, buf in buffers.items()}
    with pytest.raises(AiterCheckError) as info:
        _plan(inputs, buffers)
    source = f"csrc/kernels/mla/metadata.cu:{line}"
    assert info.value.source == source
    assert info.value.message == f"get_ps_metadata_v1: {message}"
    assert str(info.value) == f"[AITER] {source} get_ps_metadata_v1: {message}"
    for name, buf in buffers.items():
        assert torch.equal(buf, snapshot[name]), name


def test_kvlen_granularity_power_of_two() -> None:
    inputs, buffers = _call_args()
    with pytest.raises(AiterCheckError, match="kvlen_granlarity Must be power of 2!") as info:
        _plan(inputs, buffers, kvlen_granularity=96)
    assert info.value.source == "csrc/kernels/mla/metadata.cu:247"


@pytest.mark.parametrize(
    "edit",
    [
        lambda i: i.update(pages_kv_indptr=i["pages_kv_indptr"][:-1]),
        lambda i: i.update(context_lens=i["context_lens"][:-1]),
        lambda i: i.update(context_lens=i["context_lens"].to(torch.int64)),
        lambda i: i.update(context_lens=_strided(i["context_lens"])),
        lambda i: i.update(seqlens_qo_indptr=i["seqlens_qo_indptr"][:0]),
    ],
    ids=[
        "kv_indptr_short",
        "context_lens_short",
        "context_lens_int64",
        "context_lens_strided",
        "qo_indptr_empty",
    ],
)
def test_inputs_aiter_would_misread(edit: Callable[[dict[str, Any]], None]) -> None:
    """aiter copies these unchecked: the reference refuses instead of guessing."""
    inputs, buffers = _call_args()
    edit(inputs)
    with pytest.raises(UndefinedResultError, match="get_ps_metadata_v1: "):
        _plan(inputs, buffers)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"block_size": 0}, "block_size=0"),
        ({"kvlen_granularity": 0}, "kvlen_granularity=0"),
        ({"qlen_granularity": 0}, "never end"),
    ],
)
def test_arguments_that_crash_or_hang_aiter(kwargs: dict[str, Any], match: str) -> None:
    inputs, buffers = _call_args()
    with pytest.raises(UndefinedResultError, match=match):
        _plan(inputs, buffers, **kwargs)


def test_inputs_must_be_1d() -> None:
    inputs, buffers = _call_args()
    inputs["context_lens"] = inputs["context_lens"].view(1, -1)
    with pytest.raises(ValueError, match="context_lens must be 1-D"):
        _plan(inputs, buffers)


def test_scalar_arguments_must_be_int32() -> None:
    inputs, buffers = _call_args()
    with pytest.raises(TypeError, match="block_size must be an int"):
        _plan(inputs, buffers, block_size=1.0)
    with pytest.raises(TypeError, match="does not fit in int32"):
        _plan(inputs, buffers, qlen_granularity=2**31)


@pytest.mark.parametrize(
    ("name", "make", "error", "match"),
    [
        ("work_info", lambda b: b.to(torch.int64), TypeError, "work_info must be torch.int32"),
        ("work_indptr", lambda b: b.float(), TypeError, "work_indptr must be torch.int32"),
        ("reduce_final_map", lambda b: b.t(), ValueError, "reduce_final_map must be contiguous"),
    ],
)
def test_bad_output_buffers(
    name: str, make: Callable[[torch.Tensor], torch.Tensor], error: type, match: str
) -> None:
    inputs, buffers = _call_args()
    buffers[name] = make(buffers[name])
    with pytest.raises(error, match=match):
        _plan(inputs, buffers)


@pytest.mark.parametrize("name", BUFFER_NAMES[1:])
def test_buffer_too_small_touches_nothing(name: str) -> None:
    """One element less than the call must write: refused, no buffer touched."""
    inputs, full = _call_args()
    _plan(inputs, full)
    num_works = int(full["work_indptr"][-1])
    num_groups = int((full["reduce_indptr"].diff() > 0).sum())
    num_partials = int(full["reduce_indptr"][-1])
    assert num_works and num_groups and num_partials
    shrunk_shape = {
        "work_indptr": (full["work_indptr"].numel() - 1,),
        "work_info": (num_works - 1, 8),
        "reduce_indptr": (num_groups,),
        "reduce_final_map": (num_groups - 1, 2),
        "reduce_partial_map": (num_partials - 1,),
    }[name]
    inputs, buffers = _call_args()
    buffers[name] = torch.full(shrunk_shape, CANARY, dtype=torch.int32)
    snapshot = {key: buf.clone() for key, buf in buffers.items()}
    with pytest.raises(BufferTooSmallError) as info:
        _plan(inputs, buffers)
    assert info.value.buffer == name
    assert info.value.numel == buffers[name].numel()
    assert info.value.needed > info.value.numel
    for key, buf in buffers.items():
        assert torch.equal(buf, snapshot[key]), key


def test_larger_work_indptr_hides_works_from_reduce() -> None:
    """aiter counts works by work_indptr's last element: zero in a larger buffer."""
    inputs, buffers = _call_args()
    _plan(inputs, buffers)
    assert int(buffers["reduce_indptr"][-1]) > 0
    inputs, big = _call_args()
    big["work_indptr"] = torch.full(
        (buffers["work_indptr"].numel() + 1,), CANARY, dtype=torch.int32
    )
    _plan(inputs, big)
    assert torch.equal(big["work_indptr"][:-1], buffers["work_indptr"])
    assert int(big["work_indptr"][-1]) == 0
    assert torch.equal(big["work_info"], buffers["work_info"])
    assert not big["reduce_indptr"].any()
    assert not big["reduce_final_map"].any()
    assert not big["reduce_partial_map"].any()
