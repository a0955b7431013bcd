"""Every reference version reproduces its aiter version's conformance records, 100%.

Records per version (tests/data/conformance, README there): e4048607 its own
``mla_v1-`` / ``ps_v1-`` files; aded0f84 and 33d168a0 the old sides of the
``cross_version-*`` files (a record that does not differ has the e4048607
outputs; 33d168a0 is called with ``call_old``, in its own signature, into
buffers from its own sizing helper); v0.1.16.post2 (62028796) its
``mla_v1-v0.1.16.post2`` file; v0.1.16.post4 (72eedddd) the oracle's
``mla_v1-`` / ``ps_v1-v0.1.16.post4`` files (parallel planner on and off). Each record is replayed into canary-filled
buffers: written elements must equal aiter's, every other element must keep
the canary, and expected failures must fail the same way (see
:func:`conformance.check_case`). The sizing helper must give the record's
buffers, and the host dispatch aiter's ``planner_internals`` where recorded.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers.conformance import (
    CANARY,
    MLA_BUFFER_NAMES,
    VersionCase,
    alloc_buffers,
    call_arguments,
    check_case,
    check_each,
    expected_outputs,
    input_tensors,
    replay,
    sizing,
    torch_dtype,
    version_cases,
    version_params,
)

from mla_golden.context import as_recorded
from mla_golden.reference import UNDEFINED_PLACEHOLDER, allow_undefined, at, versions
from mla_golden.reference.dtypes import aiter_dtype_id
from mla_golden.reference.mla_v1 import plan_mla_metadata_v1
from mla_golden.schema import OUTPUTS

MLA = "get_mla_metadata_v1"
PS = "get_ps_metadata_v1"


def test_every_version_has_records() -> None:
    """No ported version goes unchecked: each has decode records, e4048607 and aded0f84 prefill too."""
    counts: dict[tuple[str, str], int] = {}
    for case in version_cases():
        counts[case.version, case.op] = counts.get((case.version, case.op), 0) + 1
    for version in versions():
        assert counts.get((version.name, MLA), 0) > 300, version.name
    assert counts["e4048607", PS] == counts["aded0f84", PS] == 136


def _id(case: VersionCase) -> str:
    return case.id


@pytest.mark.parametrize("cases", version_params(MLA) + version_params(PS))
def test_record(cases: list[VersionCase]) -> None:
    check_each(cases, lambda case: check_case(at(case.version), case), _id)


@pytest.mark.parametrize("cases", version_params(MLA) + version_params(PS))
def test_sizing(cases: list[VersionCase]) -> None:
    check_each(cases, _check_sizing, _id)


def _check_sizing(case: VersionCase) -> None:
    """The version's own sizing helper, on the record's device and env, gives the record's buffers."""
    order = OUTPUTS if case.op == MLA else tuple(
        "work_info" if name == "work_info_set" else name for name in OUTPUTS
    )
    got = sizing(at(case.version), case)
    for name, (shape, dtype) in zip(order, got, strict=True):
        spec = case.expected["buffers"][name]
        assert shape == tuple(spec["shape"]), name
        assert dtype == torch_dtype(spec["dtype"]), name


#: Oracle records of v0.1.16.post2 on calls that read an input past its end (README there).
PAST_END = "oracle/mla_v1-v0.1.16.post2-past-end"


def _partly_undefined(case: VersionCase) -> bool:
    """aiter's plan is defined except for elements that change with the bytes after an input."""
    outputs = case.expected.get("outputs", {})
    return not case.expected.get("indeterminate_record") and any(out.get("indeterminate") for out in outputs.values())


PARTLY_UNDEFINED = [case for case in version_cases() if case.source == PAST_END and _partly_undefined(case)]


def test_past_end_records_cover_paged_and_noncausal_calls() -> None:
    """The records behind the next test hold undefined kv_offset values on paged calls and undefined non-causal tiles."""
    paged = [c for c in PARTLY_UNDEFINED if c.call["kwargs"]["page_size"] > 1]
    noncausal = [c for c in PARTLY_UNDEFINED if not c.call["args"]["is_causal"]]
    assert len(paged) >= 50 and len(noncausal) >= 50
    kv_offset = 6  # work_info_set column
    undefined_kv_offset = [
        c for c in paged
        if expected_outputs(c.expected["outputs"])["work_info_set"].indeterminate.reshape(-1, 8)[:, kv_offset].any()
    ]  # fmt: skip
    assert len(undefined_kv_offset) >= 50


@pytest.mark.parametrize("case", [pytest.param(c, id=c.case_id) for c in PARTLY_UNDEFINED])
def test_undefined_elements_are_exactly_aiters(case: VersionCase) -> None:
    """Under allow_undefined() the placeholders sit exactly where aiter's value changes with the bytes past an input.

    Paged folded calls read kv_last_page_lens, folded variable-length calls
    seqlens_qo_indptr, by folded batch past their end; the oracle varies every
    byte such a read can reach (a 65536-element tail per input).
    """
    buffers = alloc_buffers(case.expected["buffers"], CANARY)
    with allow_undefined():
        replay(at(case.version), case, buffers)
    expected = expected_outputs(case.expected["outputs"])
    for name in MLA_BUFFER_NAMES[1:]:
        placeholders = buffers[name].reshape(-1).to(torch.int64) == UNDEFINED_PLACEHOLDER
        assert torch.equal(placeholders, expected[name].indeterminate), (
            f"{name}: the reference marks {int((placeholders & ~expected[name].indeterminate).sum())} "
            f"elements undefined that aiter defines, misses {int((expected[name].indeterminate & ~placeholders).sum())}"
        )


def _dtype_ids(call: dict[str, Any]) -> dict[str, int | None]:
    """The four dtype ids the op gets once the wrapper has resolved the legacy aliases."""
    kwargs = call["kwargs"]
    ids: dict[str, int | None] = {}
    for part in ("q", "kv"):
        for half in ("nope", "rope"):
            name = kwargs.get(f"dtype_{part}_{half}") or kwargs.get(f"dtype_{part}")
            ids[f"dtype_{part}_{half}"] = None if name is None else aiter_dtype_id(torch_dtype(name))
    return ids


@pytest.mark.parametrize("cases", version_params(MLA, with_internals=True, ok_only=True))
def test_planner_internals(cases: list[VersionCase]) -> None:
    """Records aiter planned (a rejected call never chose a kernel)."""
    check_each(cases, _check_internals, _id)


def _check_internals(case: VersionCase) -> None:
    """The host dispatch picks aiter's kernel, traits and parameters (folded or not, as that version did)."""
    call = case.call
    inputs = input_tensors(call)
    args, kwargs = call["args"], call["kwargs"]
    ids = _dtype_ids(call)
    with as_recorded(case):
        dispatch = plan_mla_metadata_v1(
            inputs["seqlens_qo_indptr"],
            inputs["seqlens_kv_indptr"],
            inputs.get("kv_last_page_lens"),
            args["num_heads_per_head_k"],
            args["num_heads_k"],
            args["is_causal"],
            case.expected["buffers"]["reduce_indptr"]["shape"][0],
            page_size=kwargs.get("page_size", 1),
            kv_granularity=kwargs["kv_granularity"],
            max_seqlen_qo=kwargs["max_seqlen_qo"],
            uni_seqlen_qo=kwargs["uni_seqlen_qo"],
            topk=kwargs["topk"],
            max_split_per_batch=kwargs["max_split_per_batch"],
            is_cp_round_robin=kwargs.get("is_cp_round_robin", False),
            mla_version=kwargs.get("mla_version", 0),
            features=at(case.version).version.features,
            dtype_q_nope=ids["dtype_q_nope"],
            dtype_q_rope=ids["dtype_q_rope"],
            dtype_kv_nope=ids["dtype_kv_nope"],
            dtype_kv_rope=ids["dtype_kv_rope"],
        )
    params, traits = dispatch.params, dispatch.traits
    got = {
        "kernel": dispatch.kernel_name,
        "packed_qo_len_per_wg": traits.packed_qo_len_per_wg,
        "qo_splits": int(traits.qo_splits),
        "uni_seqlen_qo": traits.uni_seqlen_qo,
        "lds_batch_info": int(traits.lds_batch_info),
        "is_sparse": int(traits.is_sparse),
        "num_cu": params.num_cu,
        "num_splits": params.num_splits,
        "num_batches": params.num_batches,
        "num_heads": params.num_heads,
        "qk_batch_ratio": params.qk_batch_ratio,
        "fixed_over_head_num_blocks": params.fixed_over_head_num_blocks,
    }
    assert got == case.expected["planner_internals"]


def test_call_arguments_keep_the_record_order() -> None:
    """Positional arguments follow the record's (aiter's) parameter order, lists as int32 tensors."""
    call = {"args": {"a": [1, 2], "n": 3}, "kwargs": {"dtype_q": "torch.bfloat16", "page_size": 1}}
    args, kwargs = call_arguments(call)
    assert args[0].dtype == torch.int32 and args[0].tolist() == [1, 2] and args[1] == 3
    assert kwargs == {"dtype_q": torch.bfloat16, "page_size": 1}
