"""``mla-golden textconv``: a golden as stable text, so ``git diff`` of a changed golden shows its changed rows."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.golden.store import Golden, GoldenStore, load, write

SHIPPED = ROOT / "goldens"


def _decode_golden() -> Path:
    return next(p for p in GoldenStore(SHIPPED / "decode").paths() if load(p).call.error is None)


def textconv(path: Path) -> str:
    ran = CliRunner().invoke(app, ["textconv", str(path)])
    assert ran.exit_code == 0, ran.output
    return ran.stdout


def test_the_text_is_the_call_alone_one_line_per_row(tmp_path: Path) -> None:
    source = _decode_golden()
    golden = load(source)
    text = textconv(source)
    lines = text.splitlines()
    assert lines[0] == f"golden {golden.key}"
    for name, value in golden.call.params.items():
        assert f"param {name} = {value!r}" in lines if isinstance(value, str) else f"param {name} = {value}" in lines
    assert f"device arch = {golden.call.device['arch']!r}" in lines
    rows = int(golden.call.written["work_info_set"].any(dim=1).sum())
    assert sum(line.startswith("work ") for line in lines) == rows  # one line per written work item
    first = golden.call.outputs["work_info_set"][0].tolist()
    assert lines[[line.startswith("work 0:") for line in lines].index(True)].startswith(f"work 0: batch_idx={first[0]} partial_qo_loc={first[1]}")
    # recorded again later (another time, another torch): the same text
    golden.call.provenance = {**golden.call.provenance, "created": "2031-01-01T00:00:00Z", "torch": "9.9.9"}
    again = tmp_path / "again.safetensors"
    write(again, Golden(golden.key, golden.call))
    assert textconv(again) == text
    assert "2031-01-01" not in text and "9.9.9" not in text and "created" not in text and "digest" not in text


def test_textconv_of_a_missing_path_is_exit_2() -> None:
    ran = CliRunner().invoke(app, ["textconv", "no/such.safetensors"])
    assert ran.exit_code == 2 and "no such file or folder" in ran.output


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _repo_with_textconv(tmp_path: Path) -> Path:
    """A git repository with the README's two lines, this interpreter standing in for the mla-golden script."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / ".gitattributes").write_text("*.safetensors diff=mla-golden\n")
    _git(repo, "config", "diff.mla-golden.textconv", f"{sys.executable} -m mla_golden.cli textconv")
    return repo


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_diff_of_a_changed_golden_names_the_changed_work_rows(tmp_path: Path) -> None:
    repo = _repo_with_textconv(tmp_path)
    golden = load(_decode_golden())
    path = repo / "goldens" / "decode.safetensors"
    path.parent.mkdir()
    write(path, Golden(golden.key, golden.call))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "golden")
    assert _git(repo, "diff") == ""
    changed = golden.call.outputs["work_info_set"].clone()
    changed[3, 5] += 7  # work 3's kv_end
    golden.call.outputs["work_info_set"] = changed
    write(path, Golden(golden.key, golden.call), update=True)
    shown = _git(repo, "diff")
    assert "Binary files" not in shown
    removed = [line for line in shown.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in shown.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(removed) == len(added) == 1, shown
    assert removed[0].startswith("-work 3: ") and added[0].startswith("+work 3: ")
    assert f"kv_end={int(changed[3, 5])}" in added[0] and f"kv_end={int(changed[3, 5]) - 7}" in removed[0]


def test_textconv_of_a_file_that_is_no_golden_is_one_line_exit_0(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    weights = tmp_path / "model.safetensors"
    save_file({"embed": torch.zeros(4, 3, dtype=torch.bfloat16)}, str(weights), metadata={"format": "pt"})
    ran = CliRunner().invoke(app, ["textconv", str(weights)])
    assert ran.exit_code == 0 and ran.stderr == ""
    assert ran.stdout == f"not an mla-golden file: a safetensors file of 1 tensor (BF16), {weights.stat().st_size} bytes, metadata format 'pt'\n"
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(_decode_golden().read_bytes()[:-1])
    ran = CliRunner().invoke(app, ["textconv", str(corrupt)])
    assert ran.exit_code == 0 and ran.stdout.startswith("unreadable mla-golden file: truncated") and str(corrupt) not in ran.stdout
    assert ran.stderr.startswith(f"warning: {corrupt}: truncated"), "the precise problem, with the path, on stderr"
    ran = CliRunner().invoke(app, ["textconv", str(tmp_path)])
    assert ran.exit_code == 2 and "not a regular file (a folder)" in ran.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_diff_and_log_survive_model_weights_beside_the_goldens(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    repo = _repo_with_textconv(tmp_path)
    weights = repo / "model.safetensors"
    save_file({"w": torch.zeros(3, dtype=torch.float16)}, str(weights), metadata={"format": "pt"})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "weights")
    save_file({"w": torch.zeros(5, dtype=torch.float16)}, str(weights), metadata={"format": "pt"})
    shown = _git(repo, "diff")  # check=True: rc 128 raises
    assert "-not an mla-golden file: a safetensors file of 1 tensor (F16)" in shown
    assert "+not an mla-golden file: a safetensors file of 1 tensor (F16)" in shown
    _git(repo, "commit", "-qam", "bigger weights")
    assert "+not an mla-golden file" in _git(repo, "log", "-p")
