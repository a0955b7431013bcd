"""A golden's cost is bounded by its own size: wild params are refused before anything plans with them.

Bounds are counted (bytes of peak RSS with a wide margin, notes written), never timed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.calls import prefill_call
from helpers.forged import forge
from helpers.repo import ROOT

from mla_golden import limits
from mla_golden.golden.store import load
from mla_golden.runs import Result, Status, note_copies

FOLDING = ROOT / "goldens/decode/dsv3-tp/gfx950-cu256/h16-fp8-q1-b1-jitter8192-p1.safetensors"
CLI = str(Path(sys.executable).parent / "mla-golden")
#: Peak RSS a CLI run over one small golden stays under (torch alone is ~250 MB).
BOUND_MB = 500


def _peak_rss_mb(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``args`` in a fresh child of a fresh interpreter: its peak RSS alone, and what it printed.

    The child's address space is capped at 6 GB, so a run that would blow far past the bound fails
    instead of taking the machine's memory.
    """
    probe = (
        "import json, resource, subprocess, sys; cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30)); "
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, preexec_fn=cap); "
        "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode, done.stdout, done.stderr]))"
    )
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True)
    rss_kb, code, stdout, stderr = json.loads(out.stdout)
    return rss_kb / 1024, subprocess.CompletedProcess(args, code, stdout, stderr)


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [{"num_heads_per_head_k": 2**30}, {"topk": 2**31}, {"max_split_per_batch": -(2**31) - 1}, {"max_seqlen_qo": 2**31 - 1}],
    ids=["heads-2^30", "topk-2^31", "int32-underflow", "max_seqlen_qo-2^31-1"],
)
def test_a_forged_small_golden_is_refused_before_planning_within_the_memory_bound(tmp_path: Path, params: Any) -> None:
    """2^30 heads folded into 2^26 batches: diff ran 120 s and reached 9.2 GB; topk 2^31 raised OverflowError;
    max_seqlen_qo 2^31-1 reached 3.5 GB (16 heads x that many query rows is past aiter's int32)."""
    forged = forge(FOLDING, tmp_path, params=params)
    assert forged.stat().st_size < 16_000
    beyond = limits.problems(load(forged).call)
    assert beyond and any(word in beyond[0] for word in (next(iter(params)), "units", "query heads"))
    peak, run = _peak_rss_mb([CLI, "diff", str(tmp_path), "--backend", "reference", "--format", "json"])
    assert run.returncode == 2, run.stderr[-2000:]
    (result,) = json.loads(run.stdout)["results"]
    assert result["status"] == "bad" and result["message"].startswith("not replayed: ")
    assert peak < BOUND_MB, f"diff of a {forged.stat().st_size}-byte golden peaked at {peak:.0f} MB"
    peak, run = _peak_rss_mb([CLI, "check", str(tmp_path), "--format", "json"])
    assert run.returncode == 1 and "call.precondition" in run.stdout
    assert peak < BOUND_MB


def test_head_counts_aiter_cannot_address_are_refused_even_where_it_does_not_fold(tmp_path: Path) -> None:
    """gfx950 bf16 plans any head count natively: 2^30 heads passed check and replayed as 'equal'."""
    native = ROOT / "goldens/decode/dsv3-tp/gfx950-cu256/h32-bf16-q1-b128-jitter8192-p1.safetensors"
    beyond = limits.problems(load(forge(native, tmp_path, params={"num_heads_per_head_k": 2**30})).call)
    assert beyond and "query heads" in beyond[0]
    prefill = ROOT / "goldens/prefill/dsv3-fp8-prefill/gfx950-cu256/h16-b1-t2048-dd66962e.safetensors"
    beyond = limits.problems(load(forge(prefill, tmp_path / "p", params={"num_heads_k": 2**16})).call)
    assert beyond and "16 bits" in beyond[0]


def test_the_shipped_goldens_are_within_the_limits() -> None:
    for path in sorted((ROOT / "goldens").rglob("*.safetensors")):
        assert limits.problems(load(path).call) == [], path


def test_copy_notes_grow_linearly_with_the_number_of_copies() -> None:
    """10,000 identical goldens: each note listed every other key (1.3 GB of JSON, 5.35 GB of memory)."""
    sizes = {}
    for copies in (10, 1000):
        results = [Result(f"decode/copy-{i}", Status.PASSED, content="same") for i in range(copies)]
        (group,) = note_copies(results)
        assert len(group) == copies
        sizes[copies] = sum(len(n) for r in results for n in r.notes)
        assert all("and" in r.notes[0] and f"{copies - 1 - 3} more" in r.notes[0] for r in results)
    assert sizes[1000] < 200 * sizes[10]  # linear: 100x the copies, about 100x the text


@pytest.mark.slow
def test_buffers_declared_at_the_element_cap_are_refused_before_they_are_built(tmp_path: Path) -> None:
    """A 49 KB golden declaring 2^25 elements: show took 673 MB, check 1.56 GB, diff 5.5 GB."""
    from mla_golden.errors import GoldenError
    from mla_golden.golden.safetensors_file import MAX_ELEMENTS

    call = load(FOLDING).call
    others = sum(max(1, math.prod(spec["shape"])) for name, spec in call.buffers.items() if name != "work_indptr")
    forged = forge(FOLDING, tmp_path, buffers={"work_indptr": [MAX_ELEMENTS - others]})
    assert forged.stat().st_size < 64_000
    with pytest.raises(GoldenError, match="elements declared for"):
        load(forged)
    for command in (["show", str(forged)], ["check", str(tmp_path)], ["diff", str(tmp_path), "--backend", "reference"]):
        peak, run = _peak_rss_mb([CLI, *command])
        assert run.returncode == 2 and "elements declared for" in run.stdout + run.stderr, command
        assert peak < BOUND_MB, f"{command[0]} of a {forged.stat().st_size}-byte golden peaked at {peak:.0f} MB"



@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_a_prefill_calls_planned_units_are_its_query_tiles_times_its_kv_heads(dtype: torch.dtype) -> None:
    """Query lengths 5, 0 and 300 at qlen_granularity 256 are 1 + 0 + 2 tiles, for each of the call's KV heads,
    counted alike from an int32 indptr (through numpy) and a wider one (as Python ints)."""
    call = prefill_call([5, 1, 300])
    indptr = torch.tensor([0, 5, 5, 305], dtype=dtype)
    call = dataclasses.replace(call, inputs={**call.inputs, "seqlens_qo_indptr": indptr})
    assert call.params["qlen_granularity"] == 256
    assert limits.planned_units(call) == 3 * call.params["num_heads_k"]
