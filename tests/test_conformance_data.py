"""The conformance data ships with the project, and a run without it fails instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.conformance import DATA_DIR, MissingConformanceData, conformance_files, records
from helpers.repo import ROOT

#: The visible records (tests/data/conformance/README.md, "Files"), by file and count.
SHIPPED = {
    "cross_version-33d168a06297-e4048607a535": 347,
    "cross_version-aded0f840135-e4048607a535": 669,
    "mla_v1-e4048607a535": 533,
    "mla_v1-v0.1.16.post2": 456,
    "ps_v1-e4048607a535": 136,
}


@pytest.mark.parametrize(("stem", "count"), SHIPPED.items())
def test_records_ship_gzipped_in_the_repo(stem: str, count: int) -> None:
    path = DATA_DIR / f"{stem}.jsonl.gz"
    assert path.is_file()
    assert sum(1 for _ in records(stem)) == count


def test_an_empty_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(MissingConformanceData, match="mla_v1-"):
        conformance_files("mla_v1-", tmp_path)


@pytest.mark.slow
def test_a_run_without_the_data_fails(tmp_path: Path) -> None:
    env = {**os.environ, "MLA_GOLDEN_CONFORMANCE": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
         "tests/reference/test_reference_versions_conformance.py", "-k", "test_call_arguments"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode != 0
    assert "skipped" not in run.stdout.splitlines()[-1]
    assert "MissingConformanceData" in run.stdout and str(tmp_path) in run.stdout
