"""A decode metadata builder shaped like vLLM's AiterMLAMetadataBuilder._build_decode.

It binds the planner at import time (``from aiter import ...``), as real
builders do, so interception must find that alias too.
"""

from __future__ import annotations

import torch
from aiter import get_mla_metadata_info_v1, get_mla_metadata_v1

from mla_golden.reference.dtypes import FP8_BY_ARCH

NUM_HEADS = 128  # DeepSeek-V3 at TP 1
FP8 = FP8_BY_ARCH["gfx942"]


def build(seq_lens: list[int], *, pass_dtypes: bool = True) -> dict[str, torch.Tensor]:
    """Size, allocate and fill decode metadata for one query token per sequence."""
    batch = len(seq_lens)
    dtype = FP8 if pass_dtypes else None  # the regression: the dtype arguments went missing
    shapes = get_mla_metadata_info_v1(batch, 1, NUM_HEADS, dtype, dtype, False)
    names = ("work_metadata_ptrs", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")
    bufs = {n: torch.empty(shape, dtype=dt) for n, (shape, dt) in zip(names, shapes)}
    kv_indptr = torch.zeros(batch + 1, dtype=torch.int32)
    kv_indptr[1:] = torch.cumsum(torch.tensor(seq_lens, dtype=torch.int32), 0)
    get_mla_metadata_v1(
        torch.arange(batch + 1, dtype=torch.int32),
        kv_indptr,
        torch.ones(batch, dtype=torch.int32),
        NUM_HEADS,
        1,
        True,
        bufs["work_metadata_ptrs"],
        bufs["work_info_set"],
        bufs["work_indptr"],
        bufs["reduce_indptr"],
        bufs["reduce_final_map"],
        bufs["reduce_partial_map"],
        max_seqlen_qo=1,
        uni_seqlen_qo=1,
        **({"dtype_q": dtype, "dtype_kv": dtype} if pass_dtypes else {}),
    )
    return bufs
