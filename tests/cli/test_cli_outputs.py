"""--html / --png output paths: a folder or an unwritable path is exit 2 with a message, no temp file; the user's umask."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.cli import app

GOLDEN = ROOT / "goldens/prefill/dsv3-fp8-prefill/gfx950-cu256/h16-b4-t3117-115ed9cb.safetensors"


def _temps(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("option", ["--html", "--png"])
@pytest.mark.parametrize("command", ["show", "diff"])
def test_an_output_onto_a_folder_is_refused_before_any_work(tmp_path: Path, command: str, option: str) -> None:
    args = [command, str(GOLDEN)] + (["--backend", "reference"] if command == "diff" else [])
    ran = CliRunner().invoke(app, [*args, option, str(tmp_path)])
    assert ran.exit_code == 2 and "is a folder" in ran.output and "Traceback" not in ran.output
    assert _temps(tmp_path) == []


def test_an_output_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    ran = CliRunner().invoke(app, ["show", str(GOLDEN), "--html", str(tmp_path / "afile" / "x.html")])
    assert ran.exit_code == 2 and "is not a folder" in ran.output


def test_a_write_that_fails_is_exit_2_and_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(src: Any, dst: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", denied)  # files.atomic_write's rename into place fails, as on a read-only target
    ran = CliRunner().invoke(app, ["show", str(GOLDEN), "--html", str(tmp_path / "x.html")])
    assert ran.exit_code == 2 and "cannot write: Permission denied" in ran.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_reports_get_the_users_umask(tmp_path: Path, umask: int) -> None:
    before = os.umask(umask)
    try:
        ran = CliRunner().invoke(app, ["show", str(GOLDEN), "--html", str(tmp_path / "x.html")])
    finally:
        os.umask(before)
    assert ran.exit_code == 0
    assert (tmp_path / "x.html").stat().st_mode & 0o777 == 0o666 & ~umask
