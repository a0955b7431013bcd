"""Per-call time of the reference planners on serving-sized shapes.

Run: ``pytest benchmarks/ --benchmark-only``. Each benchmark plans for the
device aiter would run on, with buffers sized by the reference's own info
function and allocated once, outside the timed loop (the planners overwrite
them on every call, as aiter's do). Torch runs single-threaded here: the
planners' tensor work is a few memory passes, and on a shared CI runner
intra-op threads that wait on busy cores make the figures swing several-fold.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest
import torch

from mla_golden.reference import (
    Device,
    device,
    get_mla_metadata_info_v1,
    get_mla_metadata_v1,
    get_ps_metadata_info_v1,
    get_ps_metadata_v1,
)

FP8_GFX950 = torch.float8_e4m3fn
DECODE_HEADS = 16


def _alloc(info: tuple) -> list[torch.Tensor]:
    """Buffers from an aiter-style info tuple ``((shape, dtype), ...)``."""
    return [
        torch.empty(shape if isinstance(shape, tuple) else (shape,), dtype=dtype)
        for shape, dtype in info
    ]


def _indptr(lengths: list[int]) -> torch.Tensor:
    """Cumulative lengths with a leading 0, int32 as aiter wants."""
    out = [0]
    for length in lengths:
        out.append(out[-1] + length)
    return torch.tensor(out, dtype=torch.int32)


def _decode_call(kv_lens: list[int]) -> Callable[[], None]:
    """vLLM decode step: fp8 q/kv, one query token per sequence, page size 1."""
    batch_size = len(kv_lens)
    qo_indptr = _indptr([1] * batch_size)
    kv_indptr = _indptr(kv_lens)
    kv_last_page_lens = torch.ones(batch_size, dtype=torch.int32)
    (
        work_metadata_ptrs,
        work_indptr,
        work_info_set,
        reduce_indptr,
        reduce_final_map,
        reduce_partial_map,
    ) = _alloc(
        get_mla_metadata_info_v1(
            batch_size, 1, DECODE_HEADS, FP8_GFX950, FP8_GFX950, is_sparse=False, fast_mode=True
        )
    )

    def plan() -> None:
        get_mla_metadata_v1(
            qo_indptr,
            kv_indptr,
            kv_last_page_lens,
            DECODE_HEADS,
            1,
            True,
            work_metadata_ptrs,
            work_info_set,
            work_indptr,
            reduce_indptr,
            reduce_final_map,
            reduce_partial_map,
            page_size=1,
            kv_granularity=16,
            max_seqlen_qo=1,
            uni_seqlen_qo=1,
            fast_mode=True,
            dtype_q=FP8_GFX950,
            dtype_kv=FP8_GFX950,
        )

    return plan


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    """Stable per-call figures on shared runners (see the module docstring)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def gfx950() -> Iterator[Device]:
    """MI355X: gfx950 with 256 CUs."""
    with device("gfx950", 256) as dev:
        yield dev


def test_decode_batch256_kv8192(benchmark, gfx950) -> None:
    benchmark(_decode_call([8192] * 256))


def test_decode_batch1024_variable_kv(benchmark, gfx950) -> None:
    rng = random.Random(0)
    benchmark(_decode_call([rng.randint(1, 16384) for _ in range(1024)]))


@pytest.mark.parametrize(("arch", "cu_num"), [("gfx942", 304), ("gfx950", 256)])
def test_prefill_64x8k_128heads(benchmark, arch: str, cu_num: int) -> None:
    """vLLM fp8 prefill: qo_indptr == kv_indptr, 256-row q tiles, 128-token kv units."""
    seq_lens = [8192] * 64
    indptr = _indptr(seq_lens)
    context_lens = torch.tensor(seq_lens, dtype=torch.int32)
    with device(arch, cu_num):
        buffers = _alloc(get_ps_metadata_info_v1(len(seq_lens), 128, max(seq_lens), 256))
        benchmark(
            get_ps_metadata_v1,
            indptr,
            indptr,
            context_lens,
            1,
            128,
            *buffers,
            qhead_granularity=1,
            qlen_granularity=256,
            kvlen_granularity=128,
            block_size=1,
            is_causal=True,
        )
    work_indptr = buffers[1]
    assert int(work_indptr[-1]) > 0
