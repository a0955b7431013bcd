"""Big goldens stay readable: ``show`` and ``textconv`` summarise a long schedule by default, ``--all`` prints it all.

Expected rows come from the golden's tensors, never from the code under test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.calls import many_requests
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.golden.store import Golden, derived_key, load, write


def _golden(tmp_path: Path, requests: int) -> Path:
    call = many_requests(requests)
    path = tmp_path / f"big-{requests}.safetensors"
    write(path, Golden(derived_key(call), call))
    return path


def _run(*args: object) -> str:
    ran = CliRunner().invoke(app, [str(a) for a in args])
    assert ran.exit_code == 0, ran.output
    return ran.stdout


@pytest.fixture(scope="module")
def hundreds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _golden(tmp_path_factory.mktemp("show"), 300)


@pytest.fixture(scope="module")
def thousands(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _golden(tmp_path_factory.mktemp("textconv"), 12_000)


def _written_rows(path: Path) -> list[int]:
    written = load(path).call.written["work_info_set"].any(dim=1)
    return written.nonzero().reshape(-1).tolist()


def test_show_prints_the_first_and_last_50_work_items_and_all_with_all(hundreds: Path) -> None:
    call = load(hundreds).call
    works = int(call.outputs["work_indptr"][-1])
    assert works > 200
    data = json.loads(_run("show", hundreds, "--format", "json"))
    items = [item for part in data["cu_parts"] for item in part["items"]]
    assert [item["work"] for item in items] == [*range(50), *range(works - 50, works)]
    assert data["work_items"] == works
    for item in items:  # each shown row as the tensor holds it
        assert list(item["columns"].values()) == call.outputs["work_info_set"][item["work"]].tolist()
    text = _run("show", hundreds)
    assert f"... {works - 100} of {works} work items not shown (the first and last 50): --all shows every one" in text
    shown = [int(m.group(1)) for m in re.finditer(r"^\s*\d*\s*│\s*(\d+)\s*│", text, re.MULTILINE)]
    assert shown == [*range(50), *range(works - 50, works)]
    everything = json.loads(_run("show", hundreds, "--format", "json", "--all"))
    assert [item["work"] for part in everything["cu_parts"] for item in part["items"]] == list(range(works))
    text = _run("show", hundreds, "--all")
    assert "not shown" not in text
    assert [int(m.group(1)) for m in re.finditer(r"^\s*\d*\s*│\s*(\d+)\s*│", text, re.MULTILINE)] == list(range(works))


def test_show_of_one_cu_part_is_summarised_too(hundreds: Path) -> None:
    indptr = load(hundreds).call.outputs["work_indptr"].tolist()
    part = max(range(len(indptr) - 1), key=lambda p: indptr[p + 1] - indptr[p])
    lo, hi = indptr[part], indptr[part + 1]
    data = json.loads(_run("show", hundreds, "--format", "json", "--cu", part))
    (only,) = data["cu_parts"]
    expected = list(range(lo, hi)) if hi - lo <= 100 else [*range(lo, lo + 50), *range(hi - 50, hi)]
    assert [item["work"] for item in only["items"]] == expected and data["work_items"] == hi - lo


def test_textconv_keeps_5000_lines_at_each_end_and_a_digest_of_the_rest(thousands: Path, tmp_path: Path) -> None:
    rows = _written_rows(thousands)
    assert len(rows) > 10_000
    text = _run("textconv", thousands).splitlines()
    works = [int(line.split(":")[0].removeprefix("work ")) for line in text if line.startswith("work ")]
    assert works == rows[:5000] + rows[-5000:]
    (left_out,) = [line for line in text if line.startswith("work_info_set rows ")]
    assert left_out.startswith(f"work_info_set rows {rows[5000]}..{rows[-5001]}: {len(rows) - 10_000} not shown (sha256 ")
    whole = _run("textconv", thousands, "--all").splitlines()
    assert [int(line.split(":")[0].removeprefix("work ")) for line in whole if line.startswith("work ")] == rows
    assert not [line for line in whole if "--all shows" in line]
    assert set(text) - set(whole) <= {line for line in text if "--all shows" in line}, "every other line is --all's"
    # a change in a row left out changes the digest line (git diff still sees it), and nothing else
    golden = load(thousands)
    golden.call.outputs["work_info_set"][rows[6000], 5] += 1
    changed = tmp_path / "changed.safetensors"
    write(changed, Golden(golden.key, golden.call))
    other = _run("textconv", changed).splitlines()
    assert [(a, b) for a, b in zip(text, other) if a != b] == [
        (left_out, next(line for line in other if line.startswith("work_info_set rows ")))
    ]
