"""Version against version on the reference alone: it changes exactly where aiter changed.

Every ``cross_version-*`` record's inputs run on ``reference.at(old)`` (with
``call_old`` where the old signature differs) and on ``reference.at(new)``,
each into canary-filled buffers from its own sizing helper, undefined results
allowed. The two plans differ (result, error message, a buffer shape, which
elements are written, a written value, or which are undefined) exactly for
the records the data marks ``differs``. No recorded output is used: this is
the upgrade preview ``mla-golden diff --backend reference@NEW`` rests on.
And on random inputs where no version rule applies, the versions plan alike.

One exception, checked as such: where both versions' plans are wholly
undefined (the planner reads LDS before writing it), the reference plans
nothing on either side, while aiter's records, taken from one run each, may
differ in which of their undefined elements that run stored (ten 33d168a0
records differ in nothing else).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from helpers.conformance import (
    CANARY,
    MLA_BUFFER_NAMES,
    PS_BUFFER_NAMES,
    VersionCase,
    conformance_files,
    file_stem,
    records,
    replay,
    sizing,
    version_cases,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mla_golden.context import planner_env
from mla_golden.reference import (
    AiterCheckError,
    BufferTooSmallError,
    allow_undefined,
    at,
    device,
)
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.schema import OUTPUTS

Plan = tuple[Any, ...]
#: The plan of a call whose every output depends on memory aiter reads before writing it.
WHOLLY_UNDEFINED = ("undefined",)


def _plan(case: VersionCase) -> Plan:
    """What the case's version plans for its inputs, in a form that compares by value."""
    module = at(case.version)
    shapes = sizing(module, case)
    order = MLA_BUFFER_NAMES if case.op == "get_mla_metadata_v1" else PS_BUFFER_NAMES
    info_order = OUTPUTS if case.op == "get_mla_metadata_v1" else PS_BUFFER_NAMES
    buffers = {
        name: torch.full(shape, CANARY, dtype=dtype)
        for name, (shape, dtype) in zip(info_order, shapes, strict=True)
    }
    sized = tuple(shape for shape, _ in shapes)
    try:
        with allow_undefined():
            replay(module, case, buffers)
    except AiterCheckError as error:
        return sized, ("error", error.message)
    except BufferTooSmallError as error:
        return sized, ("too small", error.buffer, error.needed)
    if all(bool((buffers[name] == CANARY).all()) for name in order[1:]):
        return sized, WHOLLY_UNDEFINED  # not even which elements aiter stores is defined
    contents = []
    for name in order[1:]:
        flat = buffers[name].reshape(-1).to(torch.int64)
        written = (flat != CANARY).nonzero().flatten()
        contents.append((name, tuple(written.tolist()), tuple(flat[written].tolist())))
    return sized, tuple(contents)


def _new_case(case: VersionCase) -> VersionCase:
    return next(c for c in version_cases() if c.version == "e4048607" and c.case_id == case.case_id)


CROSS_FILES = [file_stem(path) for path in conformance_files("cross_version-")]


@pytest.mark.slow
@pytest.mark.parametrize("stem", CROSS_FILES)
def test_versions_differ_exactly_where_aiter_did(stem: str) -> None:
    recs = {rec["case_id"]: rec for rec in records(stem)}
    old_cases = [c for c in version_cases() if c.source.endswith(stem) and c.case_id in recs]
    assert len(old_cases) == len(recs)
    plans = {case.case_id: (_plan(case), _plan(_new_case(case))) for case in old_cases}
    # Where both versions' plans are wholly undefined (LDS read before written) there is nothing
    # to compare; aiter's records can then differ only in which undefined elements one run stored.
    undefined = {key for key, (old, new) in plans.items() if old == new and old[1] == WHOLLY_UNDEFINED}
    for key in undefined:
        new_side = _new_case(next(c for c in old_cases if c.case_id == key)).expected
        assert new_side.get("indeterminate_record"), key
        assert recs[key].get("old", new_side).get("indeterminate_record"), key
        diff = recs[key].get("diff", {})
        assert not diff.get("result") and not diff.get("buffer_shapes"), key
        assert all(not field["num_diff_elements"] for field in diff.get("fields", {}).values()), key
    flagged = {key for key, (old, new) in plans.items() if old != new}
    differs = {key for key, rec in recs.items() if rec["differs"]} - undefined
    assert flagged == differs, (
        f"flagged but equal in aiter: {sorted(flagged - differs)[:5]}; "
        f"differ in aiter but not flagged: {sorted(differs - flagged)[:5]}"
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gpu=st.sampled_from([("gfx942", 304), ("gfx950", 256), ("gfx942", 80)]),
    kv_lens=st.lists(st.integers(1, 6000), min_size=1, max_size=300),
    heads_fp8=st.sampled_from([(16, False), (16, True), (128, True)]),
    parallel=st.sampled_from([None, "0"]),
)
def test_versions_agree_where_no_rule_differs(
    gpu: tuple[str, int], kv_lens: list[int], heads_fp8: tuple[int, bool], parallel: str | None
) -> None:
    """Single-token causal decode with 16 heads (or fp8 128): v0.1.16.post2, post4, aded0f84 and e4048607 plan alike.

    None of their differences applies there (folding, tiles, causal trim, round
    robin), and the parallel planner that v0.1.16.post4, aded0f84 and e4048607
    pick for it (AITER_MLA_META_USE_PARALLEL unset) must equal v0.1.16.post2's
    serial one.
    """
    arch, cu_num = gpu
    heads, fp8 = heads_fp8
    dtype = FP8_BY_ARCH[arch] if fp8 else torch.bfloat16
    batch = len(kv_lens)
    plans = []
    for version in ("v0.1.16.post2", "v0.1.16.post4", "aded0f84", "e4048607"):
        module = at(version)
        with planner_env({"AITER_MLA_META_USE_PARALLEL": parallel}), device(arch, cu_num):
            info = at("e4048607").get_mla_metadata_info_v1(batch, 1, heads, dtype, dtype, False)
            buffers = {
                name: torch.full(shape if isinstance(shape, tuple) else (shape,), CANARY, dtype=dt)
                for name, (shape, dt) in zip(OUTPUTS, info, strict=True)
            }
            module.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32),
                torch.tensor([0, *itertools.accumulate(kv_lens)], dtype=torch.int32),
                torch.ones(batch, dtype=torch.int32),
                heads, 1, True, *(buffers[name] for name in MLA_BUFFER_NAMES),
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=dtype, dtype_kv=dtype,
            )  # fmt: skip
        plans.append([buffers[name] for name in MLA_BUFFER_NAMES[1:]])
    for other in plans[1:]:
        for mine, theirs in zip(plans[0], other, strict=True):
            assert torch.equal(mine, theirs)
