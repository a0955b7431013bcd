"""Backend resolution: auto takes live aiter only when it can plan here, and says why it did not."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from mla_golden.backends import SIZERS, BackendError, resolve


def test_reference_plans_for_any_device():
    backend = resolve("reference")
    assert backend.name == "reference" and backend.tensor_device == "cpu" and backend.live_device() is None
    assert backend.planner("get_ps_metadata_v1").__module__.startswith("mla_golden.reference")
    with backend.plans_for("gfx950", 256):
        assert backend.module.current_device().arch == "gfx950"


def test_auto_falls_back_to_the_reference_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    backend = resolve("auto")
    assert backend.name == "reference" and "aiter does not import" in backend.reason
    with pytest.raises(BackendError, match="aiter does not import"):
        resolve("aiter")


def test_an_aiter_without_the_planners_or_a_gpu_is_not_used(monkeypatch):
    partial = types.ModuleType("aiter")
    partial.get_mla_metadata_v1 = lambda *a, **k: None
    monkeypatch.setitem(sys.modules, "aiter", partial)
    with pytest.raises(BackendError, match="aiter has no get_ps_metadata_v1"):
        resolve("aiter")
    for name in (*SIZERS, *SIZERS.values()):
        setattr(partial, name, lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendError, match="no ROCm/CUDA device"):
        resolve("aiter")
    assert "no ROCm/CUDA device" in resolve("auto").reason


def test_unknown_backend():
    with pytest.raises(BackendError, match="choose one of auto, aiter, reference"):
        resolve("cuda")
