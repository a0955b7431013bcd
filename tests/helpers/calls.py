"""Planner calls several tests make, built the way a caller builds them (helper-sized buffers, or buffers of its own).

One decode builder (``decode_call``) and one prefill builder (``prefill_call``); every other call here is one of
them with its arguments named.
"""

from __future__ import annotations

from types import ModuleType

import torch

import mla_golden
from helpers.conformance import ps_outputs
from mla_golden import reference
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.schema import OUTPUTS


def decode_call(
    kv_lens: list[int], heads: int = 16, *, planner: ModuleType = reference, device: tuple[str, int] = ("gfx942", 304),
    dtype: torch.dtype | None = None, sizing_batch: int | None = None, helper_split: int = -1, call_split: int = -1,
    extra_rows: int = 0, flat_work_info: bool = False, topk: int = -1,
) -> mla_golden.Call:
    """A decode call of one-token requests with ``kv_lens`` kv tokens on ``device``, spied on ``planner`` (the
    reference, or one version of it), q and kv of ``dtype`` (default: that arch's fp8).

    Its buffers are sized by ``planner``'s helper for ``sizing_batch`` requests (default: the call's) with
    ``helper_split`` as its split cap, plus ``extra_rows`` work_info_set rows; the planner is called with
    ``call_split`` (a cap is passed only when given: some versions take none). ``flat_work_info``: work_info_set
    allocated 1-D (8 x #work elements), which aiter plans into alike. ``topk``: a sparse call, each request
    attending to its ``topk`` selected kv tokens.
    """
    batch, dtype = len(kv_lens), dtype or FP8_BY_ARCH[device[0]]
    helper_cap = {} if helper_split == -1 else {"max_split_per_batch": helper_split}
    call_cap = {} if call_split == -1 else {"max_split_per_batch": call_split}
    with planner.device(*device):
        shapes = planner.get_mla_metadata_info_v1(sizing_batch or batch, 1, heads, dtype, dtype, topk >= 0, **helper_cap)
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}
        rows = bufs["work_info_set"].shape[0] + extra_rows
        bufs["work_info_set"] = torch.empty((rows * 8,) if flat_work_info else (rows, 8), dtype=torch.int32)
        kv = torch.zeros(batch + 1, dtype=torch.int32)
        kv[1:] = torch.cumsum(torch.tensor(kv_lens, dtype=torch.int32), 0)
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), kv, torch.ones(batch, dtype=torch.int32), heads, 1, True,
                bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"],
                bufs["reduce_indptr"], bufs["reduce_final_map"], bufs["reduce_partial_map"],
                max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=dtype, dtype_kv=dtype, **call_cap, **({"topk": topk} if topk >= 0 else {}),
            )  # fmt: skip
    return spy.calls.one()


def many_requests(batch: int) -> mla_golden.Call:
    """A decode call over ``batch`` one-token requests of 100..149 kv tokens."""
    return decode_call([100 + i % 50 for i in range(batch)])


def incident(planner: ModuleType, batch: int = 4) -> mla_golden.Call:
    """gfx950, fp8 q and kv, 32 heads, ``batch`` single-token requests of 700 kv tokens, spied on ``planner`` (a
    reference version module): v0.1.16.post2's dispatch folds it to 16 x 2, e4048607's does not."""
    return decode_call([700] * batch, 32, planner=planner, device=("gfx950", 256))


def prefill_call(
    seq_lens: list[int], *, exact: bool = False, heads: int = 16, context: list[int] | None = None,
    causal: bool = True, qlen_granularity: int = 256, kvlen_granularity: int = 128, block_size: int = 1,
    qhead_granularity: int = 1, device: tuple[str, int] = ("gfx950", 256),
) -> mla_golden.Call:
    """A vLLM-style prefill call (default: gfx950/256, 16 KV heads, causal, each query seeing only its own tokens);
    ``exact``: buffers sized to the plan, not by the helper. ``context``: kv tokens per request (a chunked prefill:
    more than its queries), in pages of ``block_size``; the other keywords are the planner's own arguments.
    """
    outputs = OUTPUTS
    context = seq_lens if context is None else context
    with reference.device(*device):
        qo = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
        qo[1:] = torch.cumsum(torch.tensor(seq_lens), 0)
        kv = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
        kv[1:] = torch.cumsum(torch.tensor([-(-n // block_size) for n in context]), 0)
        shapes = reference.get_ps_metadata_info_v1(len(seq_lens), heads, max(seq_lens), qlen_granularity)
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(outputs, shapes)}

        def plan(b: dict[str, torch.Tensor]) -> None:
            reference.get_ps_metadata_v1(
                qo, kv, torch.tensor(context, dtype=torch.int32), 1, heads, *ps_outputs(b[n] for n in outputs),
                qhead_granularity=qhead_granularity, qlen_granularity=qlen_granularity,
                kvlen_granularity=kvlen_granularity, block_size=block_size, is_causal=causal,
            )  # fmt: skip

        if exact:
            plan(bufs)
            works = int(bufs["work_indptr"][-1])
            reduce = bufs["reduce_indptr"].tolist()
            groups = max(g for g in range(len(reduce)) if g == 0 or reduce[g] != reduce[g - 1])
            exact_shapes = {"work_info_set": (works, 8), "reduce_indptr": (groups + 1,), "reduce_final_map": (groups, 2),
                            "reduce_partial_map": (reduce[-1],)}  # fmt: skip
            bufs = {n: torch.empty(exact_shapes.get(n, shape), dtype=dt) for n, (shape, dt) in zip(outputs, shapes)}
        with mla_golden.spy(reference) as spy:
            plan(bufs)
    return spy.calls.one()
