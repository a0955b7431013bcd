"""The invariant checker (mla_golden.invariants): the invariants hold on aiter's own outputs and catch what breaks them.

Real data first: every e4048607 conformance record passes (with the hazard of
its shape where aiter's result is partly undefined), the old commit
33d168a0's head-folding bug (kv_end past the batch, negative kv_offset) is
flagged wherever it occurs, and every recorded anomaly comes with its hazard.
Then one deliberately broken call per invariant, each reporting exactly that
invariant; every shipped golden passes; and so does whatever the reference
planner (bit-exact to aiter) plans for random shapes.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import json
import math
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.calls import incident
from helpers.conformance import record_call, record_params, records
from helpers.repo import ROOT

import mla_golden
from mla_golden import reference
from mla_golden.call import Call
from mla_golden.capture.canary import replay
from mla_golden.checks import HAZARDS, INVARIANTS, CheckResult, check
from mla_golden.context import planner_env
from mla_golden.reference import (
    LDS_BYTES,
    get_mla_metadata_info_v1,
    get_mla_metadata_v1,
    get_ps_metadata_info_v1,
    get_ps_metadata_v1,
)
from mla_golden.reference import device as reference_device
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.render.report import render_check_text
from mla_golden.schema import OUTPUTS, WorkColumn

OLD_FILE = "cross_version-33d168a06297-"

#: Anomaly text of a record -> the hazards that explain it (any one suffices).
ANOMALY_HAZARDS = {
    "values depend on reads past the end of an input tensor": {
        "fold_qo_indptr_past_end",
        "fold_last_page_lens_past_end",
    },
    "values depend on LDS contents read before being written": {"lds_read_before_write"},
    "write beyond buffer end": {"sparse_writes_past_buffer"},
}
#: aiter wrote part of these calls' metadata past the buffers its helper sized: what is left
#: in the buffers is inconsistent (work_indptr runs past work_info_set, reduce groups lack
#: partials), and check says so.
TRUNCATION = {"work_indptr", "coverage", "reduce_indptr", "reduce.group"}


def _anomalies(record: dict[str, Any]) -> set[str]:
    return {text.split(": ", 1)[1] for text in record.get("anomalies", [])}


@cache
def _by_case(prefix: str) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in records(prefix)}


def _assert_new_record_passes(record: dict[str, Any]) -> CheckResult:
    """An e4048607 record: no violation, except what a write past a helper-sized buffer leaves behind."""
    result = check(record_call(record))
    anomalies = _anomalies(record)
    if record["result"] == "error":
        assert "aborts" in result.hazard_names, render_check_text(result)
    if "write beyond buffer end" in anomalies:
        assert "sparse_writes_past_buffer" in result.hazard_names
        assert result.invariants <= TRUNCATION, render_check_text(result)
    else:
        assert result.ok, render_check_text(result)
    return result


@pytest.mark.parametrize("record", record_params("mla_v1-e4048607") + record_params("ps_v1-e4048607"))
def test_every_e4048607_record_passes(record: dict[str, Any]) -> None:
    _assert_new_record_passes(record)


ANOMALOUS = [
    p
    for p in record_params("mla_v1-e4048607")
    if p.values[0] is None or p.values[0].get("anomalies") or p.values[0]["result"] == "error"
]


@pytest.mark.parametrize("record", ANOMALOUS)
def test_anomalies_come_with_their_hazard(record: dict[str, Any]) -> None:
    result = check(record_call(record))
    if record["result"] == "error":
        assert "aborts" in result.hazard_names
    for anomaly in _anomalies(record):
        assert ANOMALY_HAZARDS[anomaly] & result.hazard_names, (anomaly, render_check_text(result))
    for hazard in result.hazards:
        assert hazard.hazard in HAZARDS and hazard.message


def _old_bug(call: Call) -> bool:
    """The old planner's folding defect, judged from the raw rows: kv_end past the batch or kv_offset < 0."""
    if not call.outputs:
        return False
    kv = call.inputs["seqlens_kv_indptr"].tolist()
    rows = call.outputs["work_info_set"][call.written["work_info_set"].all(dim=1)].tolist()
    dense = call.params["topk"] < 0
    for row in rows:
        kv_start, kv_end, kv_offset = row[WorkColumn.KV_START], row[WorkColumn.KV_END], row[WorkColumn.KV_OFFSET]
        if kv_offset < 0:
            return True
        if dense and 0 <= kv_start < kv[-1]:
            batch = bisect.bisect_right(kv, kv_start) - 1
            if kv_end > kv[batch + 1]:
                return True
    return False


@pytest.mark.parametrize("record", record_params(OLD_FILE))
def test_old_commit_folding_bug_is_flagged(record: dict[str, Any]) -> None:
    new = _by_case("mla_v1-e4048607").get(record["case_id"])
    if new is not None:
        _assert_new_record_passes(new)
    if "old" not in record or record["old"]["result"] != "ok":
        return  # the old commit's outputs equal the new ones
    old = record_call(record, side="old")
    if _old_bug(old):
        result = check(old)
        assert {"work.kv_range", "work.kv_offset"} & result.invariants, render_check_text(result)


# ---------------------------------------------------------------------------
# One broken call per invariant
# ---------------------------------------------------------------------------


def _clone(call: Call) -> Call:
    return copy.deepcopy(call)


def _first_record(prefix: str, wanted: Callable[[dict[str, Any], Call], bool]) -> Call:
    for record in records(prefix):
        if record["result"] == "ok" and not record.get("anomalies"):
            call = record_call(record)
            if wanted(record, call):
                return call
    pytest.skip(f"no {prefix} record to break")


def _num_works(call: Call) -> int:
    return (
        int(call.written["work_info_set"].any(dim=1).sum())
        if call.op == "get_mla_metadata_v1"
        else int((call.outputs["work_info_set"][:, WorkColumn.EXTRA] != 0).sum())
    )


def _rows(call: Call) -> torch.Tensor:
    return call.outputs["work_info_set"][: _num_works(call)]


@cache
def _decode_base() -> Call:
    """A dense causal page_size-1 decode call, 2+ query rows per tile, with split and unsplit tiles."""

    def wanted(record: dict[str, Any], call: Call) -> bool:
        kw, internals = record["call"]["kwargs"], record["planner_internals"]
        rows = _rows(call)
        return (
            kw["page_size"] == 1
            and kw["topk"] < 0
            and not kw["is_cp_round_robin"]
            and record["call"]["args"]["is_causal"]
            and internals["qk_batch_ratio"] == 1
            and internals["qo_splits"] == 0
            and kw["uni_seqlen_qo"] >= 2
            and bool((rows[:, WorkColumn.PARTIAL_QO_LOC] >= 0).any())
            and bool((rows[:, WorkColumn.PARTIAL_QO_LOC] < 0).any())
        )

    return _first_record("mla_v1-", wanted)


@cache
def _ps_base() -> Call:
    """A prefill call with several KV heads and batches, split and unsplit tiles."""

    def wanted(record: dict[str, Any], call: Call) -> bool:
        rows = _rows(call)
        args = record["call"]["args"]
        return (
            args["num_heads_k"] > 1
            and len(args["seqlens_qo_indptr"]) > 2
            and bool((rows[:, WorkColumn.PARTIAL_QO_LOC] >= 0).any())
            and bool((rows[:, WorkColumn.PARTIAL_QO_LOC] < 0).any())
        )

    return _first_record("ps_v1-", wanted)


def _split_pieces(call: Call) -> list[int]:
    """Rows of the first split tile, in kv order."""
    rows = _rows(call)
    first = int((rows[:, WorkColumn.PARTIAL_QO_LOC] >= 0).nonzero()[0])
    tile = [WorkColumn.BATCH_IDX, WorkColumn.QO_START, WorkColumn.QO_END, WorkColumn.EXTRA]  # what a tile's pieces share
    key = rows[first, tile].tolist()
    same = [i for i in range(len(rows)) if rows[i, tile].tolist() == key]
    return sorted(same, key=lambda i: int(rows[i, WorkColumn.KV_START]))


def _unsplit_last_tile_row(call: Call) -> int:
    """An unsplit work that runs to its batch's kv end (kv_offset 0)."""
    rows = _rows(call)
    return int(((rows[:, WorkColumn.PARTIAL_QO_LOC] < 0) & (rows[:, WorkColumn.KV_OFFSET] == 0)).nonzero()[0])


def _break_work_indptr(call: Call) -> None:
    call.outputs["work_indptr"][0] = -1


def _break_batch(call: Call) -> None:
    call.outputs["work_info_set"][_unsplit_last_tile_row(call), WorkColumn.BATCH_IDX] = 1 << 20  # no batch, folded or not


def _break_qo_range(call: Call) -> None:
    call.outputs["work_info_set"][0, WorkColumn.QO_END] += 1


def _break_kv_range(call: Call) -> None:
    # the old 33d168a0 defect: the last piece runs one token past the batch, kv_offset goes -1
    row = _unsplit_last_tile_row(call)
    call.outputs["work_info_set"][row, WorkColumn.KV_END] += 1
    call.outputs["work_info_set"][row, WorkColumn.KV_OFFSET] = -1


def _break_kv_offset(call: Call) -> None:
    call.outputs["work_info_set"][0, WorkColumn.KV_OFFSET] += 1


def _break_coverage(call: Call) -> None:
    first = _split_pieces(call)[0]
    call.outputs["work_info_set"][first, WorkColumn.KV_END] -= 1  # a one-token gap before the next piece
    if call.op == "get_mla_metadata_v1":
        call.outputs["work_info_set"][first, WorkColumn.KV_OFFSET] += 1  # kv_offset still agrees with kv_end
    else:
        call.outputs["work_info_set"][first, WorkColumn.KV_OFFSET] += int(call.params["block_size"])


def _break_split_partial(call: Call) -> None:
    rows = _rows(call)
    unsplit = int((rows[:, WorkColumn.PARTIAL_QO_LOC] < 0).nonzero()[0])
    call.outputs["work_info_set"][unsplit, WorkColumn.PARTIAL_QO_LOC] = 1 << 20


def _break_partial_overlap(call: Call) -> None:
    rows = _rows(call)
    split = (rows[:, WorkColumn.PARTIAL_QO_LOC] >= 0).nonzero().view(-1).tolist()
    a, b = split[0], split[-1]
    old, new = int(rows[a, WorkColumn.PARTIAL_QO_LOC]), int(rows[b, WorkColumn.PARTIAL_QO_LOC]) + 1  # inside b's slot (tiles hold 2+ rows)
    call.outputs["work_info_set"][a, WorkColumn.PARTIAL_QO_LOC] = new
    pmap = call.outputs["reduce_partial_map"]
    pmap[pmap == old] = new


def _break_reduce_indptr(call: Call) -> None:
    call.outputs["reduce_indptr"][0] = -1


def _break_reduce_group(call: Call) -> None:
    indptr = call.outputs["reduce_indptr"].tolist()
    group = next(g for g in range(len(indptr) - 1) if indptr[g + 1] > indptr[g])
    call.outputs["reduce_final_map"][group, 1] += 1


def _break_pointers(call: Call) -> None:
    call.provenance["capture"]["ptrs_ok"] = False


def _break_written(call: Call) -> None:
    call.written["work_indptr"][:] = False
    call.outputs["work_indptr"][:] = 0


def _break_call_indptr(call: Call) -> None:
    # uniform query lengths: aiter plans from uni_seqlen_qo, so only the input is wrong
    call.inputs["seqlens_qo_indptr"] += 5


def _break_kv_pages(call: Call) -> None:
    call.inputs["kv_last_page_lens"][0] = 0  # page_size 1: aiter ignores it, the kernel may not


def _break_undersized(call: Call) -> None:
    written = int(call.written["reduce_partial_map"].sum())
    call.buffers["reduce_partial_map"]["shape"] = [written]
    call.outputs["reduce_partial_map"] = call.outputs["reduce_partial_map"][:written].clone()
    call.written["reduce_partial_map"] = call.written["reduce_partial_map"][:written].clone()


def _break_head_range(call: Call) -> None:
    column = call.outputs["work_info_set"][:, WorkColumn.EXTRA]
    first = int(column[0])
    column[column == first] = (1000 << 16) | 999  # head 0's plan relabelled to a head that does not exist


def _break_seqlen_qo(call: Call) -> Call:
    """A builder that declares MTP verification as qlen 1: aiter (the reference) plans for what it is told."""
    declared = _clone(call)
    declared.params["max_seqlen_qo"] = 1
    declared.params["uni_seqlen_qo"] = 1
    return replay(declared, get_mla_metadata_v1)


def _break_folding(call: Call) -> Call:
    """v0.1.16.post2's plan of a 32-head fp8 gfx950 call (folded 16 x 2), labelled as e4048607's (which runs it native)."""
    folded = incident(reference.at("v0.1.16.post2"))
    planner = {**folded.provenance["planner"], "version": "e4048607", "commit": None}
    return Call(**{**folded.__dict__, "provenance": {**folded.provenance, "planner": planner}})


def _break_precondition(call: Call) -> None:
    """A gqa ratio of -1: aiter's prefill planner takes it without a word (and ignores it)."""
    call.params["gqa_ratio"] = -1


def _break_head_count(call: Call) -> None:
    """24 fp8 query heads: aiter's decode host code fails its head-count check (no folding into 16-head batches)."""
    call.params["num_heads_per_head_k"] = 24
    for name in ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope"):
        call.params[name] = "torch.float8_e4m3fn"


def _break_kv_granularity(call: Call) -> None:
    call.params["kv_granularity"] = 24  # metadata.cu: "kv_granularity Must be power of 2!"


def _break_dtype(call: Call) -> None:
    call.params["dtype_kv_nope"] = "torch.float64"  # aiter's wrapper: "Unsupported dtype"


def _break_pointer_buffer(call: Call) -> None:
    """One pointer slot: the planner writes two, and the reference refuses the buffer (BufferTooSmallError)."""
    call.buffers["work_metadata_ptrs"]["shape"] = [1]
    call.outputs["work_metadata_ptrs"] = call.outputs["work_metadata_ptrs"][:1].clone()
    call.written["work_metadata_ptrs"] = call.written["work_metadata_ptrs"][:1].clone()


def _break_kvlen_granularity(call: Call) -> None:
    call.params["kvlen_granularity"] = 96  # metadata.cu: "kvlen_granlarity Must be power of 2!"


def _break_qlen_granularity(call: Call) -> None:
    call.params["qlen_granularity"] = 0  # the planner's query tiling loop never ends


def _break_final_map_rows(call: Call) -> None:
    """reduce_final_map with a part row: the prefill planner copies whole host rows back, past its end."""
    odd = call.outputs["reduce_final_map"].numel() - 1
    call.buffers["reduce_final_map"]["shape"] = [odd]
    call.outputs["reduce_final_map"] = call.outputs["reduce_final_map"].reshape(-1)[:odd].clone()
    call.written["reduce_final_map"] = call.written["reduce_final_map"].reshape(-1)[:odd].clone()


BREAKS: list[tuple[str, str, Callable[[Call], Call | None]]] = [
    ("work_indptr", "decode", _break_work_indptr),
    ("work_indptr", "prefill", _break_work_indptr),
    ("work.batch", "decode", _break_batch),
    ("work.folding", "decode", _break_folding),
    ("work.qo_range", "decode", _break_qo_range),
    ("work.qo_range", "prefill", _break_qo_range),
    ("work.kv_range", "decode", _break_kv_range),
    ("work.kv_offset", "decode", _break_kv_offset),
    ("work.kv_offset", "prefill", _break_kv_offset),
    ("work.head_range", "prefill", _break_head_range),
    ("coverage", "decode", _break_coverage),
    ("coverage", "prefill", _break_coverage),
    ("split.partial", "decode", _break_split_partial),
    ("split.partial", "prefill", _break_split_partial),
    ("partial.overlap", "decode", _break_partial_overlap),
    ("reduce_indptr", "decode", _break_reduce_indptr),
    ("reduce.group", "decode", _break_reduce_group),
    ("reduce.group", "prefill", _break_reduce_group),
    ("pointers", "decode", _break_pointers),
    ("written", "decode", _break_written),
    ("call.indptr", "decode", _break_call_indptr),
    ("call.kv_pages", "decode", _break_kv_pages),
    ("call.seqlen_qo", "decode", _break_seqlen_qo),
    ("buffer.undersized", "decode", _break_undersized),
    ("call.precondition", "prefill", _break_precondition),
    ("call.precondition", "decode", _break_head_count),
    ("call.precondition", "decode", _break_kv_granularity),
    ("call.precondition", "decode", _break_dtype),
    ("call.precondition", "decode", _break_pointer_buffer),
    ("call.precondition", "prefill", _break_kvlen_granularity),
    ("call.precondition", "prefill", _break_qlen_granularity),
    ("call.precondition", "prefill", _break_final_map_rows),
]


def test_every_invariant_has_a_breaking_test() -> None:
    assert {name for name, _op, _fn in BREAKS} == set(INVARIANTS)


@pytest.mark.parametrize(("invariant", "op", "breaker"), BREAKS, ids=[f"{n}-{o}-{f.__name__}" for n, o, f in BREAKS])
def test_breaking_one_invariant_reports_exactly_it(
    invariant: str, op: str, breaker: Callable[[Call], Call | None]
) -> None:
    base = _decode_base() if op == "decode" else _ps_base()
    assert check(base).ok, render_check_text(check(base))
    broken = _clone(base)
    broken = breaker(broken) or broken
    result = check(broken)
    assert result.invariants == {invariant}, render_check_text(result)
    assert invariant in render_check_text(result)
    assert json.loads(json.dumps(result.to_dict()))["ok"] is False
    assert {v["invariant"] for v in result.to_dict()["violations"]} == {invariant}


def test_a_head_count_the_recording_planner_refuses_is_a_violation() -> None:
    """2^31-8 heads on a 128-head plan: within int32, but aiter's head-count check fails, so no plan comes back."""
    golden = next(mla_golden.load(p) for p in GOLDENS if "dsv3-tp" in p.parts and "gfx942-cu304" in p.parts)
    lie = _clone(golden.call)
    lie.params["num_heads_per_head_k"] = 2**31 - 8
    result = check(lie)
    assert result.invariants == {"call.precondition"}, render_check_text(result)
    (violation,) = result.violations
    assert violation.where == "params" and "refuses these arguments" in violation.message and "#heads" in violation.message
    unknown = _clone(lie)  # a planner no ported version is: a later aiter may take these heads
    unknown.provenance = {"backend": "my_planners", "planner": {"backend": "my_planners", "version": None, "commit": None}}
    result = check(unknown)
    assert result.ok and "aborts" in result.hazard_names, render_check_text(result)
    raised = _clone(lie)  # the same call recorded as raising is what that planner does
    raised.outputs, raised.written, raised.error = {}, {}, "[AITER] only supports #heads in [16, 64, 128]"
    result = check(raised)
    assert result.ok and "aborts" in result.hazard_names, render_check_text(result)


def _reshaped_info(call: Call, shape: list[int]) -> Call:
    """``call`` with its work_info_set buffer given ``shape`` (its first elements kept, as aiter's raw pointer sees them)."""
    out = _clone(call)
    count = math.prod(shape)
    out.buffers["work_info_set"]["shape"] = shape
    out.outputs["work_info_set"] = call.outputs["work_info_set"].reshape(-1)[:count].reshape(shape).clone()
    out.written["work_info_set"] = call.written["work_info_set"].reshape(-1)[:count].reshape(shape).clone()
    return out


def test_a_decode_work_info_set_of_any_shape_is_read_as_rows_of_eight() -> None:
    """aiter takes work_info_set as a raw pointer: a part row at its end holds no work (it crashed check), one that
    was written held a work cut short, which the planner never writes."""
    base = _decode_base()
    rows = base.outputs["work_info_set"].shape[0]
    used = int(base.written["work_info_set"].any(dim=1).sum())
    assert used < rows, "the base call leaves rows unwritten"
    assert check(_reshaped_info(base, [rows * 8 - 3])).ok
    assert check(_reshaped_info(base, [rows, 7])).ok  # 7-int32 rows of memory, read as rows of 8
    cut = _reshaped_info(base, [used * 8 - 3])
    result = check(cut)
    assert result.invariants == {"call.precondition"} and result.violations[0].where == "work_info_set", render_check_text(result)


def test_a_check_that_cannot_run_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """When aiter's own sizing helper refuses the call, the sizing check is reported as skipped, not passed silently."""
    from mla_golden import reference

    def refuses(*args: object, **kwargs: object) -> None:
        raise AssertionError("num_head_qo must be a multiple of 8, got 12")

    monkeypatch.setattr(reference, "get_mla_metadata_info_v1", refuses)  # the newest version's helper
    result = check(next(mla_golden.load(p) for p in GOLDENS if "decode" in p.parts).call)
    assert result.ok
    assert result.skipped == [
        "buffer.undersized: aiter's sizing helper refuses these arguments (AssertionError: num_head_qo must be a multiple of 8, got 12)"
    ]
    assert "  skipped: buffer.undersized: aiter's sizing helper refuses" in render_check_text(result)
    assert result.to_dict()["skipped"] == result.skipped


GOLDENS = sorted((ROOT / "goldens").rglob("*.safetensors"))


@pytest.mark.parametrize("path", GOLDENS, ids=[p.stem for p in GOLDENS])
def test_every_shipped_golden_passes(path: Path) -> None:
    result = check(mla_golden.load(path).call)
    assert result.ok, render_check_text(result)


# ---------------------------------------------------------------------------
# Beyond the records: whatever the reference planner (bit-exact to aiter) plans passes
# ---------------------------------------------------------------------------

_SIZING_ORDER = OUTPUTS  # get_*_info_v1 return order


def _specs(sizes: tuple[Any, ...]) -> dict[str, dict[str, Any]]:
    return {
        name: {"shape": list(shape) if isinstance(shape, tuple) else [shape], "dtype": str(dtype)}
        for name, (shape, dtype) in zip(_SIZING_ORDER, sizes)
    }


def _random_decode(rng: random.Random) -> Call:
    arch = rng.choice(["gfx942", "gfx950"])
    cu_num = rng.choice([304, 80]) if arch == "gfx942" else 256
    batches, heads, page = rng.randint(1, 12), rng.choice([16, 32, 48, 64, 128]), rng.choice([1, 1, 16, 64])
    fp8 = str(FP8_BY_ARCH[arch])
    dtype = rng.choice([fp8, "torch.bfloat16", None])
    uniform, qlen = rng.random() < 0.7, rng.randint(1, 4)
    qlens = [qlen] * batches if uniform else [rng.randint(1, 4) for _ in range(batches)]
    topk = rng.choice([-1, -1, -1, 64])
    tokens = [rng.randint(max(qlens), 3000) for _ in range(batches)]
    pages = [-(-t // page) for t in tokens]
    params = dict(
        num_heads_per_head_k=heads,
        num_heads_k=1,
        is_causal=rng.random() < 0.8,
        page_size=page,
        kv_granularity=max(page, 16),
        max_seqlen_qo=max(qlens),
        uni_seqlen_qo=qlen if uniform else -1,
        fast_mode=True,
        topk=topk,
        max_split_per_batch=rng.choice([-1, -1, 4]),
        intra_batch_mode=False,
        is_cp_round_robin=rng.random() < 0.2,
        mla_version=0,
        dtype_q_nope=dtype,
        dtype_q_rope=dtype,
        dtype_kv_nope=dtype,
        dtype_kv_rope=dtype,
    )
    torch_dtype = getattr(torch, dtype.removeprefix("torch.")) if dtype else None
    env = {"AITER_ENABLE_EXPERIMENTAL": rng.choice([None, "1"]), "AITER_MLA_META_USE_PARALLEL": None}
    with reference_device(arch, cu_num), planner_env(env):
        sizes = get_mla_metadata_info_v1(
            batches,
            max(qlens),
            heads,
            torch_dtype,
            torch_dtype,
            topk >= 0,
            max_split_per_batch=params["max_split_per_batch"],
        )
    return Call(
        op="get_mla_metadata_v1",
        params=params,
        inputs={
            "seqlens_qo_indptr": torch.tensor([0, *itertools.accumulate(qlens)], dtype=torch.int32),
            "seqlens_kv_indptr": torch.tensor([0, *itertools.accumulate(pages)], dtype=torch.int32),
            "kv_last_page_lens": torch.tensor([t - (p - 1) * page for t, p in zip(tokens, pages)], dtype=torch.int32),
        },
        buffers=_specs(sizes),
        device={"arch": arch, "cu_num": cu_num, "warp_size": 64, "lds_bytes": LDS_BYTES[arch]},
        env=env,
    )


def _random_prefill(rng: random.Random) -> Call:
    arch = rng.choice(["gfx942", "gfx950"])
    cu_num = rng.choice([304, 80]) if arch == "gfx942" else 256
    batches, heads_k = rng.randint(1, 6), rng.choice([1, 2, 8, 16, 32])
    q_gran, kv_gran, block = rng.choice([64, 128, 256]), rng.choice([16, 64, 128]), rng.choice([1, 16])
    qlens = [rng.randint(0, 700) for _ in range(batches)]
    context = [q + rng.choice([0, rng.randint(0, 2000)]) for q in qlens]
    params = dict(
        gqa_ratio=1,
        num_heads_k=heads_k,
        qhead_granularity=rng.choice([1, 2]),
        qlen_granularity=q_gran,
        kvlen_granularity=kv_gran,
        block_size=block,
        is_causal=rng.random() < 0.8,
    )
    with reference_device(arch, cu_num):
        sizes = get_ps_metadata_info_v1(batches, heads_k, max(qlens), q_gran)
    return Call(
        op="get_ps_metadata_v1",
        params=params,
        inputs={
            "seqlens_qo_indptr": torch.tensor([0, *itertools.accumulate(qlens)], dtype=torch.int32),
            "pages_kv_indptr": torch.tensor(
                [0, *itertools.accumulate(-(-c // block) for c in context)], dtype=torch.int32
            ),
            "context_lens": torch.tensor(context, dtype=torch.int32),
        },
        buffers=_specs(sizes),
        device={"arch": arch, "cu_num": cu_num, "warp_size": 64, "lds_bytes": LDS_BYTES[arch]},
        env={},
    )


@pytest.mark.parametrize("seed", range(8))
def test_whatever_the_reference_plans_passes(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(8):
        planned = replay(_random_decode(rng), get_mla_metadata_v1)
        result = check(planned)
        assert result.ok, render_check_text(result)
        if planned.error is not None:  # the reference refuses exactly what aiter leaves undefined
            assert result.hazards, planned.error
    for _ in range(4):
        result = check(replay(_random_prefill(rng), get_ps_metadata_v1))
        assert result.ok, render_check_text(result)


def test_a_prefill_sizing_check_that_cannot_run_says_so() -> None:
    golden = next(mla_golden.load(p) for p in GOLDENS if "prefill" in p.parts)
    call = _clone(golden.call)
    call.params["qlen_granularity"] = 0  # with queries to tile, the planner never returns: a violation of its own
    assert check(call).invariants == {"call.precondition"}
    call.inputs["seqlens_qo_indptr"].zero_()  # no queries: the plan's works fit no tile, and the helper cannot size
    result = check(call)
    assert not result.ok and "call.precondition" not in result.invariants, render_check_text(result)
    assert "buffer.undersized: aiter's sizing helper divides by qlen_granularity=0" in result.skipped
    assert "skipped: buffer.undersized" in render_check_text(result)
