"""Inputs that break aiter's unchecked preconditions: the reference names the argument; check flags them in goldens."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.conformance import ps_outputs

import mla_golden
from mla_golden import reference as ref
from mla_golden.reference import PreconditionError

I32 = torch.int32


def _mla(qo: Any = (0, 1, 2, 3), kv: Any = (0, 50, 200, 210), last: Any = (1, 1, 1), heads: Any = 16, heads_k: Any = 1, arch: Any = "gfx942", buffers: Any = None, **kw: Any) -> None:
    with ref.device(arch if arch in ("gfx942", "gfx950") else "gfx942", 304):
        info = ref.get_mla_metadata_info_v1(3, 1, 16, torch.bfloat16, torch.bfloat16, False)
    bufs = buffers or [torch.empty(s, dtype=d) for s, d in info]
    with ref.device(arch, 304):
        ref.get_mla_metadata_v1(torch.tensor(qo, dtype=I32), torch.tensor(kv, dtype=I32), torch.tensor(last, dtype=I32),
                                heads, heads_k, True, bufs[0], bufs[2], bufs[1], bufs[3], bufs[4], bufs[5],
                                uni_seqlen_qo=1, max_seqlen_qo=1, **kw)  # fmt: skip


def _ps(qo: Any = (0, 600, 607, 907), ctx: Any = (600, 7, 300), gqa: Any = 1, heads_k: Any = 16, arch: Any = "gfx950") -> None:
    with ref.device("gfx950", 256):
        bufs = [torch.empty(s, dtype=d) for s, d in ref.get_ps_metadata_info_v1(3, 16, 600)]
    qo_t = torch.tensor(qo, dtype=I32)
    with ref.device(arch, 256):
        ref.get_ps_metadata_v1(qo_t, qo_t.clone(), torch.tensor(ctx, dtype=I32), gqa, heads_k, *ps_outputs(bufs),
                               qlen_granularity=256, kvlen_granularity=128, block_size=1)  # fmt: skip


MLA_CASES = [
    (dict(kv=(0, 50, 20, 210)), "seqlens_kv_indptr", "decreases"),
    (dict(kv=(0, -50, 200, 210)), "seqlens_kv_indptr", "negative"),
    (dict(qo=(0, -1, 2, 3)), "seqlens_qo_indptr", "negative"),
    (dict(last=(1, -1, 1)), "kv_last_page_lens", "1..page_size=1"),
    (dict(last=(1, 5, 1), page_size=4), "kv_last_page_lens", "1..page_size=4"),
    (dict(heads=0), "num_heads_per_head_k", "positive"),
    (dict(heads=-16), "num_heads_per_head_k", "positive"),
    (dict(heads_k=0), "num_heads_k", "positive"),
    (dict(heads="16"), "num_heads_per_head_k", "must be an int, got '16'"),
    (dict(arch="gfx000"), "arch", "not an arch"),
]


@pytest.mark.parametrize("kwargs, argument, match", MLA_CASES, ids=[f"{a}-{m[:12]}" for _, a, m in MLA_CASES])
def test_decode_preconditions_name_the_argument(kwargs: Any, argument: Any, match: Any) -> None:
    with pytest.raises(PreconditionError, match=match) as info:
        _mla(**kwargs)
    assert info.value.argument == argument and str(info.value).startswith(f"{argument}: ")


@pytest.mark.parametrize("dtype, device", [(torch.float32, "cpu"), (torch.int64, "cpu"), (torch.int32, "meta")])
def test_decode_output_buffers_of_the_wrong_dtype_or_device(dtype: torch.dtype, device: str) -> None:
    with ref.device("gfx942", 304):
        info = ref.get_mla_metadata_info_v1(3, 1, 16, torch.bfloat16, torch.bfloat16, False)
    bufs = [torch.empty(s, dtype=d if d == torch.uint64 else dtype, device=device) for s, d in info]
    with pytest.raises(PreconditionError, match="meta device|the planner writes torch.int32"):
        _mla(buffers=bufs)


@pytest.mark.parametrize(
    "kwargs, argument",
    [(dict(gqa=0), "gqa_ratio"), (dict(gqa=-8), "gqa_ratio"), (dict(heads_k=0), "num_heads_k"),
     (dict(qo=(0, -600, 607, 907)), "seqlens_qo_indptr"), (dict(qo=(0, 600, 500, 907)), "seqlens_qo_indptr"),
     (dict(ctx=(600, -7, 300)), "context_lens"), (dict(arch="gfx000"), "arch")],
)  # fmt: skip
def test_prefill_preconditions_name_the_argument(kwargs: Any, argument: str) -> None:
    with pytest.raises(PreconditionError) as info:
        _ps(**kwargs)
    assert info.value.argument == argument


def test_aiters_own_checks_keep_their_verdict() -> None:
    """What aiter checks itself (element type, contiguity) still fails with aiter's message."""
    with ref.device("gfx942", 304):
        info = ref.get_mla_metadata_info_v1(3, 1, 16, torch.bfloat16, torch.bfloat16, False)
        b = [torch.empty(s, dtype=d) for s, d in info]
        with pytest.raises(ref.AiterCheckError, match="element type should be int"):
            ref.get_mla_metadata_v1(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 50, 200, 210], dtype=I32),
                                    torch.ones(3, dtype=I32), 16, 1, True, b[0], b[2], b[1], b[3], b[4], b[5])  # fmt: skip


def test_check_flags_the_same_in_a_golden() -> None:
    with ref.device("gfx942", 304), mla_golden.spy(ref) as spy:
        _mla()
    good = spy.calls.one()
    assert mla_golden.invariants(good).ok
    for edit, argument in (
        ({"params": {**good.params, "num_heads_k": -1}}, "num_heads_k"),
        ({"device": {**good.device, "arch": "gfx000"}}, "arch"),
        ({"inputs": {**good.inputs, "kv_last_page_lens": torch.tensor([1, 0, 1], dtype=I32)}}, "kv_last_page_lens"),
    ):
        bad = mla_golden.Call(**{**good.__dict__, **edit})
        result = mla_golden.invariants(bad)
        assert not result.ok and any(argument in v.where for v in result.violations), (argument, result.violations)
