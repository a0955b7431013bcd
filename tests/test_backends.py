"""Backend resolution: auto takes live aiter only when it can plan here, and says why it did not."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.repo import ROOT

from mla_golden import reference
from mla_golden.backends import SIZERS, BackendError, parse_spec, resolve


def test_reference_plans_for_any_device() -> None:
    backend = resolve("reference")
    assert backend.name == "reference" and backend.tensor_device == "cpu" and backend.live_device() is None
    assert backend.planner("get_ps_metadata_v1").__module__.startswith("mla_golden.reference")
    with backend.plans_for("gfx950", 256):
        assert backend.module.current_device().arch == "gfx950"


def test_auto_falls_back_to_the_reference_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    backend = resolve("auto")
    assert backend.name == "reference" and "aiter does not import" in backend.reason
    with pytest.raises(BackendError, match="aiter does not import"):
        resolve("aiter")


def test_an_aiter_without_the_planners_or_a_gpu_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    partial: Any = types.ModuleType("aiter")
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


def test_unknown_backend() -> None:
    with pytest.raises(BackendError, match="choose one of auto, aiter, reference"):
        resolve("cuda")


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [("auto", ("auto", None)), ("reference", ("reference", None)), ("reference@aded0f84", ("reference", "aded0f84")),
     (" reference@v0.1.16.post2 ", ("reference", "v0.1.16.post2")), ("reference@", ("reference", ""))],
)  # fmt: skip
def test_backend_specs_parse_in_the_library(spec: str, parsed: Any) -> None:
    assert parse_spec(spec) == parsed


def test_a_pinned_reference_plans_as_its_version_and_never_switches() -> None:
    pinned = resolve("reference@2026-08-10")  # a date: the newest version at or before it
    assert (pinned.label, pinned.spec, pinned.pinned) == ("reference@aded0f84", "reference@aded0f84", True)
    assert pinned.module is reference.at("aded0f84") and "aded0f84 (2026-08-05)" in pinned.reason
    assert resolve(pinned.spec) == pinned
    legacy = {"backend": "reference", "reference_of": "aiter e4048607a535"}
    assert pinned.for_golden(legacy) == (pinned, None)


def test_the_plain_reference_follows_the_version_a_golden_names() -> None:
    plain = resolve("reference")
    assert (plain.label, plain.spec, plain.pinned) == ("reference@e4048607", "reference", False)
    assert plain.module is reference
    old = {"backend": "reference", "planner": {"backend": "reference", "version": "33d168a0", "commit": None}}
    chosen, note = plain.for_golden(old)
    assert chosen.module is reference.at("33d168a0") and chosen.label == "reference@33d168a0"
    assert note == "replayed on reference@33d168a0, the planner version that recorded this golden"
    # written before versions existed: only 'reference_of'
    chosen, note = plain.for_golden({"backend": "reference", "reference_of": "aiter e4048607a535"})
    assert chosen is plain and note == "replayed on reference@e4048607, the planner version that recorded this golden"
    chosen, note = plain.for_golden({"backend": "standins"})
    assert chosen is plain and note is not None and "(standins) is not a ported reference version" in note


def test_a_bad_version_names_the_known_ones() -> None:
    with pytest.raises(BackendError, match=r"unknown aiter planner version 'v9'; known versions .*33d168a0"):
        resolve("reference@v9")
    with pytest.raises(BackendError, match="only the reference has versions"):
        resolve("auto@aded0f84")


@pytest.mark.slow
def test_a_plug_in_in_the_current_folder_imports_from_the_installed_command(tmp_path: Path) -> None:
    """``--b python:my_planners:patched`` as the README writes it: the module sits in the folder the command runs in.
    The console script's sys.path holds no current folder (python -m and pytest's do); the backend adds it."""
    (tmp_path / "my_planners.py").write_text("from mla_golden import reference as patched\n")
    script = Path(sys.executable).with_name("mla-golden")
    goldens = ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx950-cu256"
    ran = subprocess.run([str(script), "diff", str(goldens), "--backend", "python:my_planners:patched", "--quiet"],
                         cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert ran.returncode == 0 and "│ equal  │    16 │" in ran.stdout, ran.stderr  # the plug-in (the reference) replays equal
    ran = subprocess.run([str(script), "diff", str(goldens), "--backend", "python:not_here:patched"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 2 and f"looked in the current folder {tmp_path}" in ran.stderr, ran.stderr
