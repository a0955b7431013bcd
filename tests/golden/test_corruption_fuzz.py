"""A seeded corruption fuzz over the shipped goldens: every corrupted file is refused, named, in bounded memory.

Each file's CPU time is held to a bound in ``benchmarks/bench.py`` (the same fuzz, ``make bench``): a clock
read in a test fails on a loaded machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import corruption
from helpers.repo import ROOT

from mla_golden.golden.store import GoldenStore

SHIPPED = sorted(GoldenStore(ROOT / "goldens").paths())
#: Peak memory may grow by at most this much over the whole run (one load of the largest golden is ~1 MB).
MEMORY_BOUND_MB = 512


def test_1200_corruptions_are_all_refused_naming_the_file(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = corruption.run(SHIPPED, count=1200, seed=20261201, workdir=tmp_path)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(result.summary())
    assert result.total == 1200 and min(result.tried.values()) >= 150
    assert result.loaded == [], result.loaded[:5]
    assert result.tracebacks == [], result.tracebacks[:5]
    assert result.unnamed == [], result.unnamed[:5]
    assert result.refused == 1200
    assert grown_mb < MEMORY_BOUND_MB


@pytest.mark.slow
def test_a_sample_through_the_real_cli(tmp_path: Path) -> None:
    """One corrupted file of each kind in a tree with a good one: check and diff exit 2, name each file, no traceback."""
    tree = tmp_path / "tree"
    good = SHIPPED[0]
    rel = good.relative_to(good.parents[3])
    (tree / rel).parent.mkdir(parents=True)
    (tree / rel).write_bytes(good.read_bytes())
    bad = []
    for i, (_kind, _, data) in enumerate(corruption.corrupt(SHIPPED[:1], len(corruption.KINDS), seed=7)):
        path = tree / "corrupt" / f"c{i}.safetensors"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        bad.append(path)
    cli = [str(Path(sys.executable).parent / "mla-golden")]
    for args in (["check", str(tree)], ["diff", str(tree), "--backend", "reference"], ["show", str(bad[0])]):
        run = subprocess.run([*cli, *args], capture_output=True, text=True)
        output = run.stdout + run.stderr
        assert run.returncode == 2, (args, output[-2000:])
        assert "Traceback" not in output
        for path in bad if args[0] != "show" else bad[:1]:
            assert str(path) in output.replace("\n", ""), (args, path)


#: 300 forged goldens in chunks that xdist can spread over its workers (one item took 130 s on a loaded box).
FORGE_CHUNKS, FORGE_PER_CHUNK = 6, 50


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(FORGE_CHUNKS))
def test_forged_content_costs_check_diff_and_pictures_no_more_than_the_file(chunk: Any) -> None:
    """Goldens edited with a valid digest (wild lengths, indices, head counts): no traceback, memory bounded."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = corruption.forge_run(SHIPPED, count=FORGE_PER_CHUNK, seed=20261201 + chunk, start=chunk * FORGE_PER_CHUNK)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.tried == FORGE_PER_CHUNK
    assert result.tracebacks == [], result.tracebacks[:5]
    assert grown_mb < MEMORY_BOUND_MB, f"{grown_mb:.0f} MB for {FORGE_PER_CHUNK} forged goldens"
