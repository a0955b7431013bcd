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

from mla_golden import reference

#: Decode bug: a request this long (KV tokens) or longer gets a wrong last work_indptr entry.
LONG_REQUEST = 2000
#: Prefill sizing bug: from this batch size on, the helper sizes work_info one row too long.
BIG_BATCH = 4

_DECODE = inspect.signature(reference.get_mla_metadata_v1)


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
#: Not a planner: the sizing helpers are missing.
incomplete = SimpleNamespace(get_mla_metadata_v1=reference.get_mla_metadata_v1)
