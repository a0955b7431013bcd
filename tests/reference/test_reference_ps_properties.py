"""Invariants of the reference PS planner on random prefill batches.

The conformance records pin exact values on a fixed set of inputs; these
check, on inputs hypothesis draws, what the prefill kernel and the reduce
kernel rely on: every (batch, q tile, q head range) sees its KV range exactly
once, split tiles have a consistent reduce group, CU parts are a CSR, and
aiter's own sizing helper gives buffers large enough.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch
from helpers.conformance import CANARY, PS_BUFFER_NAMES, canary_buffers, ps_outputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mla_golden.reference import device, get_ps_metadata_info_v1, get_ps_metadata_v1

BUFFER_NAMES = PS_BUFFER_NAMES
DEVICES = (("gfx942", 304), ("gfx942", 80), ("gfx950", 256))


@dataclass
class Batch:
    """One random prefill call and the reference's outputs for it."""

    arch: str
    cu_num: int
    num_heads_k: int
    qo_lens: list[int]
    context_lens: list[int]
    kv_indptr: list[int]
    qhead_granularity: int
    qlen_granularity: int
    kvlen_granularity: int
    block_size: int
    is_causal: bool
    out: dict[str, torch.Tensor]

    @property
    def num_works(self) -> int:
        return int(self.out["work_indptr"][-1])

    def works(self) -> list[list[int]]:
        return self.out["work_info"][: self.num_works].tolist()


@st.composite
def prefill_batches(draw: st.DrawFn) -> Batch:
    """A prefill batch (chunked when context > query) planned on a random device."""
    arch, cu_num = draw(st.sampled_from(DEVICES))
    num_heads_k = draw(st.sampled_from([1, 2, 8, 16, 32, 128]))
    block_size = draw(st.sampled_from([1, 16]))
    kvlen_granularity = draw(st.sampled_from([16, 128]))
    qlen_granularity = draw(st.sampled_from([64, 256]))
    qhead_granularity = draw(st.sampled_from([1, 8, 16]))
    is_causal = draw(st.booleans())
    batch_size = draw(st.integers(1, 8))
    qo_lens = draw(st.lists(st.integers(1, 1500), min_size=batch_size, max_size=batch_size))
    extra = draw(st.lists(st.integers(0, 1500), min_size=batch_size, max_size=batch_size))
    context_lens = [q + e for q, e in zip(qo_lens, extra)]
    qo_indptr = [0]
    kv_indptr = [0]
    for qo_len, ctx_len in zip(qo_lens, context_lens):
        qo_indptr.append(qo_indptr[-1] + qo_len)
        kv_indptr.append(kv_indptr[-1] + -(-ctx_len // block_size))
    with device(arch, cu_num):
        info = get_ps_metadata_info_v1(
            batch_size, num_heads_k, max(qo_lens), qlen_granularity=qlen_granularity
        )
        out = canary_buffers(BUFFER_NAMES, info)
        get_ps_metadata_v1(
            torch.tensor(qo_indptr, dtype=torch.int32),
            torch.tensor(kv_indptr, dtype=torch.int32),
            torch.tensor(context_lens, dtype=torch.int32),
            1,
            num_heads_k,
            *ps_outputs(out.values()),
            qhead_granularity=qhead_granularity,
            qlen_granularity=qlen_granularity,
            kvlen_granularity=kvlen_granularity,
            block_size=block_size,
            is_causal=is_causal,
        )
    return Batch(
        arch, cu_num, num_heads_k, qo_lens, context_lens, kv_indptr, qhead_granularity,
        qlen_granularity, kvlen_granularity, block_size, is_causal, out,
    )


PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(prefill_batches())
def test_every_tile_and_head_sees_its_kv_exactly_once(batch: Batch) -> None:
    """Works of one (batch, q tile, head range) chain over the tile's KV pages."""
    qo_start_of_batch = [0]
    for qo_len in batch.qo_lens:
        qo_start_of_batch.append(qo_start_of_batch[-1] + qo_len)
    pieces: dict[tuple[int, int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for batch_idx, _, qo_start, qo_end, kv_start, kv_end, _, q_heads in batch.works():
        pieces[(batch_idx, qo_start, qo_end, q_heads)].append((kv_start, kv_end))

    expected_keys = set()
    for b, qo_len in enumerate(batch.qo_lens):
        for local_start in range(0, qo_len, batch.qlen_granularity):
            local_end = min(local_start + batch.qlen_granularity, qo_len)
            for head in range(batch.num_heads_k):
                q_heads = ((head + 1) * batch.qhead_granularity << 16) | (
                    head * batch.qhead_granularity
                )
                key = (
                    b,
                    qo_start_of_batch[b] + local_start,
                    qo_start_of_batch[b] + local_end,
                    q_heads,
                )
                expected_keys.add(key)
                ranges = sorted(pieces[key])
                assert ranges, f"no work for {key}"
                kv_begin, kv_batch_end = batch.kv_indptr[b], batch.kv_indptr[b + 1]
                ctx = batch.context_lens[b]
                visible = min(ctx - qo_len + local_end, ctx) if batch.is_causal else ctx
                assert ranges[0][0] == kv_begin
                for (_, prev_end), (start, _end) in zip(ranges, ranges[1:]):
                    assert start == prev_end, f"gap or overlap in {key}: {ranges}"
                units = -(-visible // batch.kvlen_granularity)
                blocks = units * (batch.kvlen_granularity // batch.block_size)
                last_end = ranges[-1][1]
                assert last_end == min(kv_begin + blocks, kv_batch_end)
                # the tile reaches every page holding a token it may attend to
                assert last_end - kv_begin >= -(-visible // batch.block_size)
    assert set(pieces) == expected_keys


@PROPERTY_SETTINGS
@given(prefill_batches())
def test_reduce_groups_match_partial_works(batch: Batch) -> None:
    """Split tiles, and only those, have one reduce group holding their partials."""
    works_per_tile: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for _, partial_o_loc, qo_start, qo_end, _, _, _, q_heads in batch.works():
        works_per_tile[(qo_start, qo_end, q_heads)].append(partial_o_loc)

    reduce_indptr = batch.out["reduce_indptr"].tolist()
    final_map = batch.out["reduce_final_map"].tolist()
    partial_map = batch.out["reduce_partial_map"].tolist()
    num_groups = sum(1 for lo, hi in zip(reduce_indptr, reduce_indptr[1:]) if hi > lo)
    groups = {
        tuple(final_map[g]): partial_map[reduce_indptr[g] : reduce_indptr[g + 1]]
        for g in range(num_groups)
    }
    assert len(groups) == num_groups, "duplicate final locations"
    assert list(groups) == sorted(groups)
    assert all(hi >= lo for lo, hi in zip(reduce_indptr, reduce_indptr[1:]))
    assert reduce_indptr[0] == 0

    split_tiles = set()
    for (qo_start, qo_end, _), partials in works_per_tile.items():
        if len(partials) == 1:
            assert partials == [-1]
            continue
        split_tiles.add((qo_start, qo_end))
        assert -1 not in partials
        assert len(set(partials)) == len(partials)
        assert all(loc % batch.qlen_granularity == 0 for loc in partials)
        assert sorted(partials) == groups[(qo_start, qo_end)]
    assert split_tiles == set(groups)
    # past the groups: reduce_indptr holds the partial count, maps hold zeros
    assert all(v == reduce_indptr[num_groups] for v in reduce_indptr[num_groups:])
    assert not any(loc for row in final_map[num_groups:] for loc in row)
    assert not any(partial_map[reduce_indptr[num_groups] :])


@PROPERTY_SETTINGS
@given(prefill_batches())
def test_work_indptr_is_a_csr_over_the_cus(batch: Batch) -> None:
    """One monotone entry per CU, ending at the work count; rows past it are zero.

    Also: buffers sized by aiter's helper were large enough (the call did not
    raise BufferTooSmallError while drawing the batch).
    """
    work_indptr = batch.out["work_indptr"].tolist()
    assert len(work_indptr) == batch.cu_num + 1
    assert work_indptr[0] == 0
    assert all(hi >= lo for lo, hi in zip(work_indptr, work_indptr[1:]))
    assert not batch.out["work_info"][batch.num_works :].any()
    assert (batch.out["work_metadata_ptrs"] == CANARY).all(), "aiter never writes it"
