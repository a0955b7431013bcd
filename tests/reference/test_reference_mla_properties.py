"""Properties of the reference MLA decode planner on random decode batches.

* every (batch, query tile) gets its kv range covered exactly once by its
  works, in order, ending where aiter's causal trim says;
* split tiles and reduce groups agree (``partial_qo_loc`` -1 = not split);
* aiter's serial and parallel planners agree wherever the parallel one may run.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from helpers.conformance import canary_buffers
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from mla_golden.context import planner_env
from mla_golden.reference import device, get_mla_metadata_info_v1, get_mla_metadata_v1
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.reference.errors import AiterCheckError, UndefinedResultError
from mla_golden.reference.mla_v1 import plan_mla_metadata_v1
from mla_golden.reference.mla_v1_comm import MlaV12Traits
from mla_golden.reference.mla_v1_dispatch import AITER_DTYPE_BF16, AITER_DTYPE_FP8, MlaV12Dispatch
from mla_golden.reference.mla_v1_parallel import kn_get_mla_metadata_v1_2_parallel
from mla_golden.reference.mla_v1_serial import kn_get_mla_metadata_v1_2
from mla_golden.schema import OUTPUTS

DEVICES = [("gfx942", 304), ("gfx950", 256), ("gfx942", 80), ("gfx950", 8)]
PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass
class Decode:
    """One planner call: a decode (or MTP) step of a random batch."""

    arch: str
    cu_num: int
    heads: int
    fp8: bool
    qo_lens: list[int]
    uniform_qo: bool
    kv_lens: list[int]  # tokens
    page_size: int
    is_causal: bool
    is_cp_round_robin: bool
    max_split_per_batch: int
    env: dict[str, str | None]

    @property
    def max_seqlen_qo(self) -> int:
        return max(self.qo_lens)

    @property
    def pages(self) -> list[int]:
        return [-(-kv // self.page_size) for kv in self.kv_lens]

    @property
    def last_page_lens(self) -> list[int]:
        return [kv - (pages - 1) * self.page_size for kv, pages in zip(self.kv_lens, self.pages)]


@st.composite
def decodes(draw: st.DrawFn, *, max_batch: int = 48, parallel_eligible: bool = False) -> Decode:
    arch, cu_num = draw(st.sampled_from(DEVICES))
    batch = draw(st.integers(1, max_batch))
    if parallel_eligible:
        heads = draw(st.sampled_from([16, 64, 128]))
        qo_lens, uniform, page_size = [1] * batch, True, 1
    else:
        heads = draw(st.sampled_from([16, 32, 48, 64, 128]))
        uniform = draw(st.booleans())
        qo_len = st.integers(1, 4)
        if uniform:
            qo_lens = [draw(qo_len)] * batch
        else:
            qo_lens = draw(st.lists(qo_len, min_size=batch, max_size=batch))
        page_size = draw(st.sampled_from([1, 1, 16, 64]))
    kv_lens = draw(st.lists(st.integers(1, 6000), min_size=batch, max_size=batch))
    kv_lens = [max(kv, q) for kv, q in zip(kv_lens, qo_lens)]  # a query sees its own tokens
    return Decode(
        arch=arch,
        cu_num=cu_num,
        heads=heads,
        fp8=draw(st.booleans()),
        qo_lens=qo_lens,
        uniform_qo=uniform,
        kv_lens=kv_lens,
        page_size=page_size,
        is_causal=draw(st.booleans()),
        is_cp_round_robin=draw(st.booleans()),
        max_split_per_batch=draw(st.sampled_from([-1, -1, 1, 2, 16, 32])),
        env={
            "AITER_ENABLE_EXPERIMENTAL": draw(st.sampled_from([None, "1"])),
            "AITER_MLA_META_USE_PARALLEL": None,
        },
    )


def _indptr(lengths: list[int]) -> torch.Tensor:
    out = [0]
    for length in lengths:
        out.append(out[-1] + length)
    return torch.tensor(out, dtype=torch.int32)


def _call_kwargs(case: Decode) -> dict[str, Any]:
    dtype = FP8_BY_ARCH[case.arch] if case.fp8 else torch.bfloat16
    return dict(
        page_size=case.page_size,
        kv_granularity=max(case.page_size, 16),
        max_seqlen_qo=case.max_seqlen_qo,
        uni_seqlen_qo=case.qo_lens[0] if case.uniform_qo else -1,
        max_split_per_batch=case.max_split_per_batch,
        is_cp_round_robin=case.is_cp_round_robin,
        dtype_q=dtype,
        dtype_kv=dtype,
    )


def _inputs(case: Decode) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        _indptr(case.qo_lens),
        _indptr(case.pages),
        torch.tensor(case.last_page_lens, dtype=torch.int32),
    )


def _plan(case: Decode, env: dict[str, str | None] | None = None) -> dict[str, torch.Tensor]:
    """Run the reference on ``case``; skip inputs aiter rejects or leaves undefined."""
    kwargs = _call_kwargs(case)
    dtype = kwargs["dtype_q"]
    with device(case.arch, case.cu_num), planner_env({**case.env, **(env or {})}):
        info = get_mla_metadata_info_v1(
            len(case.qo_lens),
            case.max_seqlen_qo,
            case.heads,
            dtype,
            dtype,
            is_sparse=False,
            max_split_per_batch=case.max_split_per_batch,
        )
        buffers = canary_buffers(OUTPUTS, info)
        try:
            get_mla_metadata_v1(
                *_inputs(case),
                case.heads,
                1,
                case.is_causal,
                buffers["work_metadata_ptrs"],
                buffers["work_info_set"],
                buffers["work_indptr"],
                buffers["reduce_indptr"],
                buffers["reduce_final_map"],
                buffers["reduce_partial_map"],
                **kwargs,
            )
        except (AiterCheckError, UndefinedResultError):
            assume(False)
    return buffers


def _dispatch(case: Decode) -> MlaV12Dispatch:
    kwargs = _call_kwargs(case)
    dtype_id = AITER_DTYPE_FP8 if case.fp8 else AITER_DTYPE_BF16
    with device(case.arch, case.cu_num), planner_env(case.env):
        return plan_mla_metadata_v1(
            *_inputs(case),
            case.heads,
            1,
            case.is_causal,
            reduce_indptr_size=len(case.qo_lens) * 8 + 1,  # only sizes the tail fill
            page_size=kwargs["page_size"],
            kv_granularity=kwargs["kv_granularity"],
            max_seqlen_qo=kwargs["max_seqlen_qo"],
            uni_seqlen_qo=kwargs["uni_seqlen_qo"],
            max_split_per_batch=kwargs["max_split_per_batch"],
            is_cp_round_robin=kwargs["is_cp_round_robin"],
            dtype_q_nope=dtype_id,
            dtype_kv_nope=dtype_id,
        )


def _num_qo_tiles(traits: MlaV12Traits, num_heads: int, seqlen_qo: int) -> int:
    """Query tiles of a batch, as aiter's mla_v12_num_qo_tiles defines them."""
    if not traits.qo_splits:
        return 1
    if num_heads * 2 > traits.packed_qo_len_per_wg:
        return seqlen_qo
    return -(-seqlen_qo * num_heads // traits.packed_qo_len_per_wg)


def _works(buffers: dict[str, torch.Tensor]) -> list[list[int]]:
    num_works = int(buffers["work_indptr"][-1])
    return buffers["work_info_set"][:num_works].tolist()


@PROPERTY_SETTINGS
@given(decodes())
def test_every_tile_covered_once(case: Decode) -> None:
    buffers = _plan(case)
    dispatch = _dispatch(case)
    params, traits = dispatch.params, dispatch.traits
    ratio = params.qk_batch_ratio
    event(f"{dispatch.kernel_name}, qk_batch_ratio={ratio}, kQoSplits={traits.qo_splits}")
    works = _works(buffers)
    # work_indptr is a CSR over all works
    indptr = buffers["work_indptr"][: params.num_cu + 1].tolist()
    assert indptr[0] == 0 and indptr == sorted(indptr)

    tiles: dict[tuple[int, int, int], list[list[int]]] = defaultdict(list)
    for work in works:
        tiles[(work[0], work[2], work[3])].append(work)

    expected_tiles = set()
    kv_indptr = [0]
    for pages in case.pages:
        kv_indptr.append(kv_indptr[-1] + pages)
    uni = case.qo_lens[0] if case.uniform_qo else -1
    qo_indptr = _indptr(case.qo_lens).tolist()
    for batch in range(params.num_batches):
        seqlen_qo = case.qo_lens[batch // ratio]
        num_qo_tiles = _num_qo_tiles(traits, params.num_heads, seqlen_qo)
        tile_size = -(-seqlen_qo // num_qo_tiles)
        begin = uni * batch if uni > 0 else qo_indptr[batch]
        end = uni * (batch + 1) if uni > 0 else qo_indptr[batch + 1]
        kv_begin, kv_end = kv_indptr[batch // ratio], kv_indptr[batch // ratio + 1]
        for tile in range(num_qo_tiles):
            qo_start = begin + tile * tile_size
            key = (batch, qo_start, min(qo_start + tile_size, end))
            expected_tiles.add(key)
            if case.page_size > 1 or not case.is_causal:
                tail = 0
            elif ratio != 1:
                tail = max(num_qo_tiles - (qo_start // ratio) % uni - 1, 0)
            else:
                tail = 0 if case.is_cp_round_robin else num_qo_tiles - 1 - tile
            pieces = tiles[key]
            assert pieces, f"tile {key} has no work"
            if len(pieces) > 1:
                event("some tile split")
            assert pieces[0][4] == kv_begin, key
            for before, after in zip(pieces, pieces[1:]):
                assert after[4] == before[5], f"tile {key}: gap or overlap"
            for work in pieces:
                assert work[4] < work[5] or (work[4] == work[5] == kv_end - tail), key
            assert pieces[-1][5] == kv_end - tail, f"tile {key}: ends at {pieces[-1][5]}"
            if case.page_size == 1:
                for work in pieces:
                    assert work[6] == kv_end - work[5]
    assert set(tiles) == expected_tiles


@PROPERTY_SETTINGS
@given(decodes())
def test_reduce_groups_match_split_tiles(case: Decode) -> None:
    buffers = _plan(case)
    works = _works(buffers)
    tiles: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for work in works:
        tiles[(work[0], work[2], work[3])].append(work[1])
    reduce_indptr = buffers["reduce_indptr"].tolist()
    assert reduce_indptr[0] == 0 and reduce_indptr == sorted(reduce_indptr)
    partial_map = buffers["reduce_partial_map"].tolist()
    final_map = buffers["reduce_final_map"].tolist()
    groups = {}
    for group in range(len(reduce_indptr) - 1):
        begin, end = reduce_indptr[group], reduce_indptr[group + 1]
        if begin != end:
            groups[tuple(final_map[group])] = partial_map[begin:end]
    split = {}
    for (_batch, qo_start, qo_end), locs in tiles.items():
        if len(locs) == 1:
            assert locs == [-1], "a tile with one work is not split"
        else:
            assert -1 not in locs, "every piece of a split tile has a partial location"
            split[(qo_start, qo_end)] = locs
    assert groups == split
    all_locs = [loc for locs in split.values() for loc in locs]
    assert len(set(all_locs)) == len(all_locs), "partial locations are unique"


@PROPERTY_SETTINGS
@given(decodes(max_batch=200, parallel_eligible=True), st.booleans())
def test_serial_and_parallel_planners_agree(case: Decode, lds_batch_info: bool) -> None:
    dispatch = _dispatch(case)
    assume(dispatch.kernel is kn_get_mla_metadata_v1_2_parallel)
    params = dispatch.params
    traits = dataclasses.replace(dispatch.traits, lds_batch_info=lds_batch_info)
    qo, kv, last = (t.tolist() for t in _inputs(case))
    serial = kn_get_mla_metadata_v1_2(params, traits, qo, kv, last)
    parallel = kn_get_mla_metadata_v1_2_parallel(params, traits, qo, kv, last)
    assert vars(serial) == vars(parallel)
    # and through the API, as AITER_MLA_META_USE_PARALLEL chooses
    by_serial = _plan(case, {"AITER_MLA_META_USE_PARALLEL": "0"})
    by_parallel = _plan(case)
    for name, buffer in by_serial.items():
        if name != "work_metadata_ptrs":
            assert torch.equal(buffer, by_parallel[name]), name


def _short_kv_case(kv_len: int) -> Decode:
    """Three single-token batches; a long first one leaves its cluster nearly full."""
    return Decode(
        arch="gfx942",
        cu_num=80,
        heads=16,
        fp8=True,
        qo_lens=[1, 1, 1],
        uniform_qo=True,
        kv_lens=[5000, kv_len, 300],
        page_size=1,
        is_causal=True,
        is_cp_round_robin=False,
        max_split_per_batch=-1,
        env={"AITER_ENABLE_EXPERIMENTAL": None, "AITER_MLA_META_USE_PARALLEL": None},
    )


@pytest.mark.parametrize("kv_len", [1, 16, 17])
def test_short_kv_batches(kv_len: int) -> None:
    """Batches with little kv get the same works from both planners."""
    case = _short_kv_case(kv_len)
    dispatch = _dispatch(case)
    qo, kv, last = (t.tolist() for t in _inputs(case))
    serial = kn_get_mla_metadata_v1_2(dispatch.params, dispatch.traits, qo, kv, last)
    parallel = kn_get_mla_metadata_v1_2_parallel(dispatch.params, dispatch.traits, qo, kv, last)
    assert vars(serial) == vars(parallel)


def test_parallel_planner_drops_empty_batch_after_full_cluster() -> None:
    """aiter defect, kept by the port: with a kv-less batch the two planners disagree.

    The parallel kernel gives a batch that does not fit the rest of its cluster
    ``ceil(kv_blocks / blocks_per_cu)`` fragments on fresh clusters: none for an
    empty batch, so batch 1 gets no work; the serial kernel puts it on the next
    cluster.
    """
    case = _short_kv_case(0)
    dispatch = _dispatch(case)
    qo, kv, last = (t.tolist() for t in _inputs(case))
    serial = kn_get_mla_metadata_v1_2(dispatch.params, dispatch.traits, qo, kv, last)
    parallel = kn_get_mla_metadata_v1_2_parallel(dispatch.params, dispatch.traits, qo, kv, last)
    assert set(serial.work_info_set[::8]) == {0, 1, 2}  # batch_idx of every work
    assert set(parallel.work_info_set[::8]) == {0, 2}
