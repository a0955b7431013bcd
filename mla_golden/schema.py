"""The op schema: the one place that knows the planner ops' parameters.

Every other module asks this one which arguments are input tensors, scalars
or output buffers, what each parameter was called in older aiter versions,
and what the columns of ``work_info_set`` mean.

aiter's signatures changed many times (parameters renamed, added, dtype
aliases split into nope/rope pairs): each op's schema lists every name a
parameter had. Binding a live call to canonical names, and building the
arguments of another signature back, is :mod:`mla_golden.binding`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import torch

from mla_golden.errors import AdaptationError as AdaptationError  # re-exported: importable from here too

MLA_OP = "get_mla_metadata_v1"
PS_OP = "get_ps_metadata_v1"

#: Where aiter defines both ops (paths in its repository): the C++ planners, the headers they include, and the
#: Python wrappers with their sizing helpers. What aiter-src builds, planner digests hash, and history follows.
CPP_FILE = "csrc/kernels/mla/metadata.cu"
CPP_DIR = "csrc/kernels/mla/metadata"
ATTENTION_PY = "aiter/ops/attention.py"

#: Output buffers, canonical names, in the order goldens and reports list them
#: (also the order aiter's get_*_info_v1 sizing helpers return their shapes).
OUTPUTS = (
    "work_metadata_ptrs",
    "work_indptr",
    "work_info_set",
    "reduce_indptr",
    "reduce_final_map",
    "reduce_partial_map",
)
#: Holds raw device pointers: never compared by value.
POINTER_OUTPUT = "work_metadata_ptrs"
#: Environment variables the planners read (each op's ``env_vars`` is a subset).
ENV_VARS = ("AITER_ENABLE_EXPERIMENTAL", "AITER_MLA_META_USE_PARALLEL")


class WorkColumn(IntEnum):
    """The columns of a work_info_set row (aiter's ``MlaWorkInfo``: eight int32), by position.

    The last column is ``pad`` for decode and ``q_head_range`` for prefill;
    :attr:`OpSchema.work_columns` names them per op.
    """

    BATCH_IDX = 0
    PARTIAL_QO_LOC = 1
    QO_START = 2
    QO_END = 3
    KV_START = 4
    KV_END = 5
    KV_OFFSET = 6
    EXTRA = 7


#: int32 values per work_info_set row.
WORK_ROW = len(WorkColumn)
_SHARED_WORK_COLUMNS = tuple(c.name.lower() for c in WorkColumn)[:-1]


def head_range(packed: int) -> tuple[int, int]:
    """A prefill work's ``q_head_range`` column: ``(q_head_end << 16) | q_head_start`` -> (start, end)."""
    return packed & 0xFFFF, packed >> 16


def pack_head_range(start: int, end: int) -> int:
    """The inverse of :func:`head_range`."""
    return (end << 16) | (start & 0xFFFF)


def span(bounds: Sequence[int]) -> str:
    """A range as every report writes one, half-open: ``[0, 4)`` (``[112, 112)`` is empty)."""
    return f"[{bounds[0]}, {bounds[1]})"


def format_cell(column: str, value: int) -> str:
    """A work_info_set value as reports show it; head ranges as ``[start, end)`` like every range (:func:`span`)."""
    if column == "q_head_range":
        return span(head_range(value))
    return str(value)


@dataclass(frozen=True)
class OpSchema:
    """What one planner op takes and fills."""

    name: str
    #: int32 input tensors, canonical names, in call order.
    inputs: tuple[str, ...]
    #: Scalar parameters (canonical name -> value aiter assumes when absent).
    scalars: Mapping[str, Any]
    #: Scalars whose value is a torch dtype (stored as "torch.bfloat16" or None).
    dtype_params: tuple[str, ...]
    #: Historical parameter name -> canonical name.
    aliases: Mapping[str, str]
    #: Legacy dtype alias -> the (nope, rope) canonical pair it fills.
    dtype_aliases: Mapping[str, tuple[str, str]]
    #: Name of the last work_info_set column (the others are :class:`WorkColumn`'s).
    work_extra: str
    #: aiter's ``get_*_info_v1`` helper that sizes this op's buffers.
    sizer: str
    #: Input tensors an older signature may lack, and the value implied then.
    implied_inputs: Mapping[str, str] = field(default_factory=dict)
    #: Environment variables the planner reads.
    env_vars: tuple[str, ...] = ()
    #: The newest aiter signature's parameters, in order and as it spells them (its legacy aliases left
    #: out), and how many lead without a default: what callers such as vLLM pass by position, the rest
    #: by keyword. A planner taking ``*args`` / ``**kwargs`` is called this way (:func:`mla_golden.binding.build_arguments`).
    signature: tuple[str, ...] = ()
    positional: int = 0
    #: The same for the sizing helper (:attr:`sizer`).
    sizer_signature: tuple[str, ...] = ()
    sizer_positional: int = 0

    @property
    def work_columns(self) -> tuple[str, ...]:
        """Names of the 8 int32 columns of a work_info_set row, in order."""
        return (*_SHARED_WORK_COLUMNS, self.work_extra)

    def canonical(self, name: str) -> str:
        """Canonical name of a parameter as some aiter version spelled it."""
        return self.aliases.get(name, name)

    def kind(self, canonical: str) -> str | None:
        """'input', 'output', 'scalar' or None for a name this op does not know."""
        if canonical in self.inputs:
            return "input"
        if canonical in OUTPUTS:
            return "output"
        if canonical in self.scalars:
            return "scalar"
        return None


MLA = OpSchema(
    name=MLA_OP,
    inputs=("seqlens_qo_indptr", "seqlens_kv_indptr", "kv_last_page_lens"),
    scalars={
        "num_heads_per_head_k": None,
        "num_heads_k": None,
        "is_causal": None,
        "page_size": 1,
        "kv_granularity": 16,
        "max_seqlen_qo": -1,
        "uni_seqlen_qo": -1,
        "fast_mode": True,
        "topk": -1,
        "max_split_per_batch": -1,
        "intra_batch_mode": False,
        "is_cp_round_robin": False,
        "mla_version": 0,
        "dtype_q_nope": None,
        "dtype_q_rope": None,
        "dtype_kv_nope": None,
        "dtype_kv_rope": None,
    },
    dtype_params=("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope"),
    aliases={"work_info": "work_info_set"},
    dtype_aliases={
        "dtype_q": ("dtype_q_nope", "dtype_q_rope"),
        "dtype_kv": ("dtype_kv_nope", "dtype_kv_rope"),
    },
    work_extra="pad",
    sizer="get_mla_metadata_info_v1",
    # Before aiter 739c63177e (2026-02-02) there was no paging: every last page holds one token.
    implied_inputs={"kv_last_page_lens": "ones"},
    env_vars=ENV_VARS,
    # aiter/ops/attention.py at e4048607: get_mla_metadata_v1, get_mla_metadata_info_v1
    signature=(
        "seqlens_qo_indptr", "seqlens_kv_indptr", "kv_last_page_lens", "num_heads_per_head_k", "num_heads_k",
        "is_causal", "work_metadata_ptrs", "work_info_set", "work_indptr", "reduce_indptr", "reduce_final_map",
        "reduce_partial_map", "page_size", "kv_granularity", "max_seqlen_qo", "uni_seqlen_qo", "fast_mode", "topk",
        "max_split_per_batch", "intra_batch_mode", "is_cp_round_robin", "mla_version",
        "dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope",
    ),
    positional=12,
    sizer_signature=(
        "batch_size", "max_seqlen_qo", "num_head_qo", "q_dtype", "kv_dtype", "is_sparse", "fast_mode",
        "num_kv_splits", "intra_batch_mode", "max_split_per_batch",
    ),
    sizer_positional=6,
)  # fmt: skip

PS = OpSchema(
    name=PS_OP,
    inputs=("seqlens_qo_indptr", "pages_kv_indptr", "context_lens"),
    scalars={
        "gqa_ratio": None,
        "num_heads_k": None,
        "qhead_granularity": 1,
        "qlen_granularity": 256,
        "kvlen_granularity": 16,
        "block_size": 16,
        "is_causal": True,
    },
    dtype_params=(),
    aliases={"work_info": "work_info_set"},
    dtype_aliases={},
    work_extra="q_head_range",
    sizer="get_ps_metadata_info_v1",
    # aiter/ops/attention.py at e4048607: get_ps_metadata_v1, get_ps_metadata_info_v1
    signature=(
        "seqlens_qo_indptr", "pages_kv_indptr", "context_lens", "gqa_ratio", "num_heads_k", "work_metadata_ptrs",
        "work_indptr", "work_info", "reduce_indptr", "reduce_final_map", "reduce_partial_map",
        "qhead_granularity", "qlen_granularity", "kvlen_granularity", "block_size", "is_causal",
    ),
    positional=11,
    sizer_signature=("batch_size", "num_head_k", "max_qlen", "qlen_granularity"),
    sizer_positional=3,
)  # fmt: skip

SCHEMAS: dict[str, OpSchema] = {MLA.name: MLA, PS.name: PS}


def schema_for(op: str) -> OpSchema:
    """The schema of ``op``; ValueError naming the known ops otherwise."""
    try:
        return SCHEMAS[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(SCHEMAS)}") from None


def dtype_name(value: Any) -> str | None:
    """torch.float8_e4m3fn -> 'torch.float8_e4m3fn'; None stays None."""
    if value is None:
        return None
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, str) and isinstance(getattr(torch, value.removeprefix("torch."), None), torch.dtype):
        return "torch." + value.removeprefix("torch.")
    raise ValueError(f"expected a torch dtype or None, got {value!r}")


def to_dtype(name: str | None) -> torch.dtype | None:
    """'torch.bfloat16' -> torch.bfloat16; None stays None."""
    if name is None:
        return None
    dtype = getattr(torch, str(name).removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown torch dtype {name!r}")
    return dtype
