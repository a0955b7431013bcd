"""Capture with inputs and buffers on a GPU (aiter's buffers live there; torch's cuda API on ROCm too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import standins

import mla_golden

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]


def _plan(device: str) -> tuple[mla_golden.Call, dict[str, torch.Tensor]]:
    aiter = standins.fake_aiter()
    bufs = standins.toy_buffers(3, 200, device=device)
    with mla_golden.spy(aiter) as spy:
        aiter.get_mla_metadata_v1(
            torch.tensor([0, 1, 2, 3], dtype=torch.int32, device=device),
            torch.tensor([0, 50, 200, 210], dtype=torch.int32, device=device),
            torch.ones(3, dtype=torch.int32, device=device), 16, 1, True, *bufs.values(),
            dtype_q=torch.float8_e4m3fn, dtype_kv=torch.float8_e4m3fn,
        )  # fmt: skip
    return spy.calls.one(), bufs


def test_capture_on_gpu_matches_cpu_and_checks_device_pointers() -> None:
    gpu, bufs = _plan("cuda")
    cpu, _ = _plan("cpu")
    assert all(t.device.type == "cpu" for t in [*gpu.inputs.values(), *gpu.outputs.values(), *gpu.written.values()])
    assert gpu.facts["ptrs_ok"] is True and gpu.facts["deterministic"] is True
    props = torch.cuda.get_device_properties(0)
    assert gpu.device["cu_num"] == props.multi_processor_count
    assert gpu.device["arch"] and gpu.device["arch"] != "gfx942" or torch.version.hip
    for name in cpu.outputs:
        assert torch.equal(gpu.written[name], cpu.written[name]), name
        if name != "work_metadata_ptrs":
            assert torch.equal(gpu.outputs[name], cpu.outputs[name]), name
    assert torch.equal(gpu.outputs["work_info_set"][:5], bufs["work_info_set"][:5].cpu())


def test_replay_onto_the_gpu(tmp_path: Path) -> None:
    cpu, _ = _plan("cpu")
    replayed = mla_golden.replay(cpu, standins.mla_e4048607, on="cuda")
    assert replayed.facts["ptrs_ok"] is True
    diff = mla_golden.diff(cpu, replayed)
    assert not any(not f.equal for f in diff.fields), mla_golden.render_text(diff)
