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
from mla_golden.call import Call
from mla_golden.reference.dtypes import FP8_BY_ARCH
from mla_golden.schema import OUTPUTS


def decode_call(
    kv_lens: list[int], heads: int = 16, *, planner: ModuleType = reference, device: tuple[str, int] = ("gfx942", 304),
    dtype: torch.dtype | None = None, kv_dtype: torch.dtype | None = None, pass_dtypes: bool = True,
    qo_lens: list[int] | None = None, uniform: bool = True, page_size: int | None = None, causal: bool = True,
    sizing_batch: int | None = None, helper_split: int = -1, call_split: int = -1, extra_rows: int = 0,
    flat_work_info: bool = False, topk: int = -1,
) -> Call:
    """A decode call of requests with ``kv_lens`` kv tokens and ``qo_lens`` query tokens (default one each) on
    ``device``, spied on ``planner`` (the reference, or one version of it): q of ``dtype`` (default: that arch's fp8),
    kv of ``kv_dtype`` (default: q's); ``pass_dtypes`` False: neither sized nor passed (the builder that dropped them).

    Its buffers are sized by ``planner``'s helper for ``sizing_batch`` requests (default: the call's; a sparse call's
    query tokens, as sparse plans one batch per token) with ``helper_split`` as its split cap, plus ``extra_rows``
    work_info_set rows; the planner is called with ``call_split`` (a cap is passed only when given: some versions
    take none). ``flat_work_info``: work_info_set allocated 1-D (8 x #work elements), which aiter plans into alike.
    ``topk``: a sparse call, each request attending to its ``topk`` selected kv tokens. ``page_size`` (passed only
    when given): kv in pages of that many tokens. ``uniform`` False: ``uni_seqlen_qo`` -1 (lengths not uniform).
    """
    batch, longest = len(kv_lens), max(qo_lens) if qo_lens else 1
    dtype = dtype or FP8_BY_ARCH[device[0]]
    dtypes = {"dtype_q": dtype, "dtype_kv": kv_dtype or dtype} if pass_dtypes else {}
    sized = sizing_batch or (batch * longest if topk >= 0 else batch)
    helper_cap = {} if helper_split == -1 else {"max_split_per_batch": helper_split}
    call_cap = {} if call_split == -1 else {"max_split_per_batch": call_split}
    paging = {} if page_size is None else {"page_size": page_size}
    pages = [-(-n // (page_size or 1)) for n in kv_lens]
    with planner.device(*device):
        shapes = planner.get_mla_metadata_info_v1(
            sized, longest, heads, dtypes.get("dtype_q"), dtypes.get("dtype_kv"), topk >= 0, **helper_cap
        )
        bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(OUTPUTS, shapes)}
        rows = bufs["work_info_set"].shape[0] + extra_rows
        bufs["work_info_set"] = torch.empty((rows * 8,) if flat_work_info else (rows, 8), dtype=torch.int32)
        qo, kv = _indptr(qo_lens or [1] * batch), _indptr(pages)
        last = torch.tensor([n - (p - 1) * (page_size or 1) if n else 1 for n, p in zip(kv_lens, pages)], dtype=torch.int32)
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(
                qo, kv, last, heads, 1, causal, bufs["work_metadata_ptrs"], bufs["work_info_set"], bufs["work_indptr"],
                bufs["reduce_indptr"], bufs["reduce_final_map"], bufs["reduce_partial_map"], **paging,
                max_seqlen_qo=longest, uni_seqlen_qo=longest if uniform else -1, **dtypes, **call_cap,
                **({"topk": topk} if topk >= 0 else {}),
            )  # fmt: skip
    call: Call = spy.calls.one()
    return call


def _indptr(lengths: list[int]) -> torch.Tensor:
    """int32 running sums of ``lengths`` from 0: an indptr over them."""
    indptr = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int32), 0)
    return indptr


def many_requests(batch: int) -> Call:
    """A decode call over ``batch`` one-token requests of 100..149 kv tokens."""
    return decode_call([100 + i % 50 for i in range(batch)])


def incident(planner: ModuleType, batch: int = 4) -> Call:
    """gfx950, fp8 q and kv, 32 heads, ``batch`` single-token requests of 700 kv tokens, spied on ``planner`` (a
    reference version module): v0.1.16.post2's dispatch folds it to 16 x 2, e4048607's does not."""
    return decode_call([700] * batch, 32, planner=planner, device=("gfx950", 256))


def prefill_call(
    seq_lens: list[int], *, exact: bool = False, heads: int = 16, context: list[int] | None = None,
    causal: bool = True, qlen_granularity: int = 256, kvlen_granularity: int = 128, block_size: int = 1,
    qhead_granularity: int = 1, device: tuple[str, int] = ("gfx950", 256),
) -> Call:
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
    call: Call = spy.calls.one()
    return call
