"""The small matrix's golden tree, recorded on the reference: what the CLI and run tests diff and damage.

Take the fixtures as ``recorded, tree = small_tree.recorded, small_tree.tree`` (module-scoped ``recorded``: one
recording per test module).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import cli_json
from helpers.matrices import SMALL_MATRIX
from mla_golden.golden.store import Golden, GoldenStore

#: Two of the tree's keys: 128 and 16 heads, fp8, 4 single-token requests on gfx942.
KEY_128 = "decode/small/gfx942-cu304/h128-fp8-q1-b4-jitter2000-p1"
KEY_16 = "decode/small/gfx942-cu304/h16-fp8-q1-b4-jitter2000-p1"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A golden tree of the small matrix, recorded on the reference."""
    root = tmp_path_factory.mktemp("recorded")
    (root / "matrix.toml").write_text(SMALL_MATRIX)
    code, report = cli_json("record", "--matrix", root / "matrix.toml", "--backend", "reference", "--out", root / "goldens")
    assert code == 0 and report["summary"] == {"written": 3}
    assert report["backend"]["name"] == "reference"
    return root


@pytest.fixture
def tree(recorded: Path, tmp_path: Path) -> Path:
    """A fresh copy of the recorded tree, free to damage."""
    shutil.copytree(recorded / "goldens", tmp_path / "goldens")
    shutil.copy(recorded / "matrix.toml", tmp_path / "matrix.toml")
    return tmp_path / "goldens"


def rewrite(root: Path, key: str, change: Any) -> None:
    """Load a golden, let ``change`` edit its call, and store it back in place."""
    store = GoldenStore(root)
    golden = store.read(key)
    change(golden.call)
    assert store.write(Golden(key, golden.call), update=True).value == "updated"
