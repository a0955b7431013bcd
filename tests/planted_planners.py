"""Copies of the reference planners with planted bugs, for ``python:planted_planners:NAME`` sweeps.

Each object has the four functions a plug-in planner needs, in aiter's
signatures; a bug is a small change to the reference's result under a
condition on the call, so a sweep's reproducer can be judged minimal.
"""

from __future__ import annotations

import functools
import inspect
from types import SimpleNamespace
from typing import Any

import torch

from mla_golden import reference

#: Decode bug: a request this long (KV tokens) or longer gets a wrong last work_indptr entry.
LONG_REQUEST = 2000
#: Prefill sizing bug: from this batch size on, the helper sizes work_info one row too long.
BIG_BATCH = 4

_DECODE = inspect.signature(reference.get_mla_metadata_v1)
_PREFILL = inspect.signature(reference.get_ps_metadata_v1)


@functools.wraps(reference.get_mla_metadata_v1)  # a plug-in keeps aiter's signature: callers bind by it
def _decode_long_request_bug(*args: Any, **kwargs: Any) -> None:
    reference.get_mla_metadata_v1(*args, **kwargs)
    bound = _DECODE.bind(*args, **kwargs).arguments
    page = bound.get("page_size", 1)
    pages = bound["seqlens_kv_indptr"].diff()
    tokens = (pages - 1) * page + bound["kv_last_page_lens"]
    if int(tokens.max()) >= LONG_REQUEST:
        bound["work_indptr"][-1] += 1


def _prefill_sizing_bug(batch_size: int, num_head_k: int, max_qlen: int, qlen_granularity: int = 256) -> Any:
    sized = reference.get_ps_metadata_info_v1(batch_size, num_head_k, max_qlen, qlen_granularity)
    if batch_size < BIG_BATCH:
        return sized
    shape, dtype = sized[2]
    assert isinstance(shape, tuple)
    rows, columns = shape
    return (*sized[:2], ((rows + 1, columns), dtype), *sized[3:])


def _unpaged(
    seqlens_qo_indptr: Any, seqlens_kv_indptr: Any, num_heads_per_head_k: int, num_heads_k: int, is_causal: bool,
    work_metadata_ptrs: Any, work_info_set: Any, work_indptr: Any, reduce_indptr: Any, reduce_final_map: Any,
    reduce_partial_map: Any, kv_granularity: int = 16, max_seqlen_qo: int = -1, uni_seqlen_qo: int = -1,
    fast_mode: bool = True, topk: int = -1, max_split_per_batch: int = -1, intra_batch_mode: bool = False,
    is_cp_round_robin: bool = False, mla_version: int = 0, dtype_q_nope: Any = None, dtype_q_rope: Any = None,
    dtype_kv_nope: Any = None, dtype_kv_rope: Any = None,
) -> None:
    """The reference's decode planner in a signature without pages (no kv_last_page_lens, no page_size)."""
    ones = torch.ones(seqlens_kv_indptr.numel() - 1, dtype=torch.int32)
    reference.get_mla_metadata_v1(
        seqlens_qo_indptr, seqlens_kv_indptr, ones, num_heads_per_head_k, num_heads_k, is_causal, work_metadata_ptrs,
        work_info_set, work_indptr, reduce_indptr, reduce_final_map, reduce_partial_map, 1, kv_granularity,
        max_seqlen_qo, uni_seqlen_qo, fast_mode, topk, max_split_per_batch, intra_batch_mode, is_cp_round_robin,
        mla_version, dtype_q_nope, dtype_q_rope, dtype_kv_nope, dtype_kv_rope,
    )  # fmt: skip


def _prefill_always_causal(*args: Any, **kwargs: Any) -> None:
    """The prefill planner with is_causal dropped: every call plans as causal (its default)."""
    bound = _PREFILL.bind(*args, **kwargs)
    bound.arguments.pop("is_causal", None)
    reference.get_ps_metadata_v1(*bound.args, **bound.kwargs)


_REFERENCE = {
    name: getattr(reference, name)
    for name in ("get_mla_metadata_v1", "get_mla_metadata_info_v1", "get_ps_metadata_v1", "get_ps_metadata_info_v1")
}

#: The reference unchanged, as a plug-in.
clean = SimpleNamespace(**_REFERENCE)
#: One bug: long decode requests.
one_bug = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _decode_long_request_bug})
#: Two bugs: long decode requests, and prefill buffers sized for big batches.
two_bugs = SimpleNamespace(
    **{**_REFERENCE, "get_mla_metadata_v1": _decode_long_request_bug, "get_ps_metadata_info_v1": _prefill_sizing_bug}
)
#: No bug, but a signature without pages: a paged call is one it cannot make (skipped).
unpaged = SimpleNamespace(**{**_REFERENCE, "get_mla_metadata_v1": _unpaged})
#: One bug: prefill ignores is_causal=False (a non-causal call plans as causal).
causal_prefill = SimpleNamespace(**{**_REFERENCE, "get_ps_metadata_v1": functools.wraps(reference.get_ps_metadata_v1)(_prefill_always_causal)})
#: Not a planner: the sizing helpers are missing.
incomplete = SimpleNamespace(get_mla_metadata_v1=reference.get_mla_metadata_v1)
