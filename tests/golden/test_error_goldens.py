"""Bad planner inputs: the reference rejects them like aiter, and the rejection is a golden like any other."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import torch

import mla_golden
from mla_golden import reference
from mla_golden.golden.store import GoldenStore
from mla_golden.reference.dtypes import FP8_BY_ARCH

#: The fp8 of the device these calls plan for (the reference's default).
FP8 = FP8_BY_ARCH[reference.DEFAULT_DEVICE.arch]


def i32(values: Any) -> Any:
    return torch.tensor(values, dtype=torch.int32)


def _plan(qo: Any, kv: Any, last: Any, **kwargs: Any) -> mla_golden.Call:
    """Size, allocate and plan with the reference under a spy; the planner's error is re-raised and captured."""
    batch = max(len(qo) - 1, 1)
    shapes = reference.get_mla_metadata_info_v1(batch, 1, 16, FP8, FP8, False)
    b = [torch.empty(s, dtype=d) for s, d in shapes]
    with mla_golden.spy(reference) as spy, contextlib.suppress(Exception):  # the spy captures the error
        reference.get_mla_metadata_v1(qo, kv, last, 16, 1, True, b[0], b[2], b[1], b[3], b[4], b[5],
                                      max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=FP8, dtype_kv=FP8, **kwargs)  # fmt: skip
    return spy.calls.one()


@pytest.mark.parametrize(
    "qo, kv, message",
    [
        (torch.tensor([0, 1], dtype=torch.int64), i32([0, 5]), "seqlens_qo_indptr's element type should be int!"),
        (i32([0, 1]), torch.tensor([0, 5], dtype=torch.int64), "seqlens_kv_indptr's element type should be int!"),
    ],
    ids=["qo-int64", "kv-int64"],
)
def test_wrong_dtype_is_rejected_recorded_and_replays_as_rejected(tmp_path: Path, qo: Any, kv: Any, message: str) -> None:
    call = _plan(qo, kv, i32([1]))
    assert call.error is not None and message in call.error and call.outputs == {}
    store = GoldenStore(tmp_path)
    store.write(mla_golden.Golden("bad-dtype", call))
    golden = store.read("bad-dtype")
    assert golden.call.error == call.error
    replayed = mla_golden.replay(golden.call, reference.get_mla_metadata_v1)
    assert mla_golden.diff(golden.call, replayed).equal


def test_non_contiguous_input_is_rejected_like_aiter() -> None:
    call = _plan(i32([0, 1, 1, 2])[::2], i32([0, 5]), i32([1]))
    assert "seqlens_qo_indptr should be continuous!" in call.error


@pytest.mark.parametrize("qo, kv, last", [([0], [0], []), ([0, 1], [0, 0], [1])], ids=["batch-0", "kv-len-0"])
def test_degenerate_batches_are_planned_and_replay_equal(qo: Any, kv: Any, last: Any) -> None:
    call = _plan(i32(qo), i32(kv), i32(last))
    assert call.error is None and call.written["work_indptr"].any()
    assert mla_golden.diff(call, mla_golden.replay(call, reference.get_mla_metadata_v1)).equal


def test_a_change_in_error_status_is_flagged() -> None:
    good = _plan(i32([0, 1]), i32([0, 5]), i32([1]))
    bad = _plan(i32([0, 1]), i32([0, 5]), i32([1]), page_size=0)  # aiter would divide by it: a precondition
    result = mla_golden.diff(good, bad)
    assert not result.equal and result.error.expected is None and "page_size: must be positive" in result.error.actual
    assert result.cause == "params changed"  # the caller's change leads; the error status follows
    assert "error status changed" in mla_golden.render_text(result)
