"""caller_sizing: the buffers a caller on another version allocates, found from how the golden's caller sized.

The truth is the sizing helpers themselves: a call whose caller sized with the
old helper for some batch size must get the new helper's buffers for that same
batch size, whatever the call's own batch.
"""

from __future__ import annotations

from typing import Any

import torch
from helpers.calls import decode_call

import mla_golden
from mla_golden import reference
from mla_golden.backends import resolve
from mla_golden.caller_sizing import Resizing, caller_buffers
from mla_golden.schema import OUTPUTS

OLD, NEW = "62028796", "e4048607"
BATCH = 4


def _call(version: str, sizing_batch: int, helper_split: int = -1, call_split: int = -1, extra_rows: int = 0) -> mla_golden.Call:
    """A gfx950 bf16 64-head decode call (the helpers of OLD and NEW size it differently) on ``version``.

    Buffers sized for ``sizing_batch`` requests with ``helper_split`` as the helper's split cap, the
    planner called with ``call_split``; ``extra_rows`` more work_info_set rows than the helper gives.
    """
    return decode_call([900] * BATCH, 64, planner=reference.at(version), device=("gfx950", 256), dtype=torch.bfloat16,
                       sizing_batch=sizing_batch, helper_split=helper_split, call_split=call_split, extra_rows=extra_rows)


def _helper_specs(version: str, sizing_batch: int, split: int = -1) -> dict[str, dict[str, Any]]:
    with reference.device("gfx950", cu_num=256):
        shapes = reference.at(version).get_mla_metadata_info_v1(
            sizing_batch, 1, 64, torch.bfloat16, torch.bfloat16, False, max_split_per_batch=split
        )
    return {
        name: {"shape": [shape] if isinstance(shape, int) else list(shape), "dtype": str(dtype)}
        for name, (shape, dtype) in zip(OUTPUTS, shapes)
    }


def _resize(call: mla_golden.Call) -> Resizing | str:
    with reference.device("gfx950", cu_num=256):
        return caller_buffers(call, reference.at(OLD).get_mla_metadata_info_v1, reference.at(NEW).get_mla_metadata_info_v1)


def test_the_batch_size_the_caller_sized_for_is_found_and_sized_by_the_new_helper() -> None:
    call = _call(OLD, sizing_batch=37)
    assert call.buffers == _helper_specs(OLD, 37)
    found = _resize(call)
    assert isinstance(found, Resizing)
    assert found.buffers == _helper_specs(NEW, 37)
    old, new = _helper_specs(OLD, 37), _helper_specs(NEW, 37)
    assert found.changes == tuple(f"{n} {old[n]['shape']} -> {new[n]['shape']}" for n in OUTPUTS if old[n] != new[n])
    assert found.changes, "OLD and NEW size gfx950 bf16 64 heads differently"


def test_a_split_cap_passed_to_the_planner_only_is_found_too() -> None:
    call = _call(OLD, sizing_batch=8, helper_split=-1, call_split=2)
    assert call.params["max_split_per_batch"] == 2
    found = _resize(call)
    assert isinstance(found, Resizing) and found.buffers == _helper_specs(NEW, 8, split=-1)


def test_buffers_no_helper_call_explains_stay_the_goldens_and_the_replay_says_why() -> None:
    call = _call(OLD, sizing_batch=BATCH, extra_rows=3)
    reason = _resize(call)
    assert isinstance(reason, str) and "for no batch size from 4 to 4096" in reason
    replayed = resolve(f"reference@{NEW}").replay(call)
    assert replayed.buffers == call.buffers
    assert f"buffers as the golden's: {reason}" in replayed.provenance["capture"]["notes"]


def test_the_recording_version_replays_on_the_goldens_own_buffers() -> None:
    call = _call(OLD, sizing_batch=37)
    replayed = resolve(f"reference@{OLD}").replay(call)
    assert replayed.buffers == call.buffers
    assert mla_golden.diff(call, replayed).equal
    moved = resolve(f"reference@{NEW}").replay(call)
    assert moved.buffers == _helper_specs(NEW, 37)
