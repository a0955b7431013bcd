"""The case vocabulary: what a case's words mean as a planner call.

The case matrix (:mod:`mla_golden.matrix`) and the sweep space
(:mod:`mla_golden.sweeper.space`) both describe planner calls in the same
words: a device ``ARCH:CU``, heads per rank, a dtype name (``bf16``, ``fp8``),
request lengths drawn ``uniform`` or ``jitter``, and the arguments vLLM's
builders pass (``AiterMLAMetadataBuilder`` for decode,
``_build_fp8_prefill_ps_metadata`` for prefill). This module is the one place
those words are turned into numbers, tensors and golden keys, so a recorded
case and a swept point of the same shape make the same call.

Heavy imports (torch, the reference) happen inside the functions that need
them: loading a matrix or space must stay cheap.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mla_golden.errors import MatrixError

if TYPE_CHECKING:
    import torch

#: Dtype names a case may give; ``fp8`` is the device's fp8 type (:func:`arch_dtype_name`).
DTYPE_NAMES = ("bf16", "fp8")
#: The sweep's extra dtype name: the planner is passed no dtype at all.
NO_DTYPE = "none"
#: How a case's request lengths are drawn: all equal to the top, or spread below it (:func:`lengths`).
CONTEXT_MODES = ("uniform", "jitter")
#: vLLM's cap on kv splits per request (``_DEFAULT_MLA_NUM_KV_SPLITS``).
VLLM_MAX_KV_SPLITS = 32
#: vLLM's FP8 prefill call (``_build_fp8_prefill_ps_metadata``): ``gqa_ratio`` 1 and these keyword
#: arguments (its tile ``_FP8_PREFILL_TILE_Q`` is the qlen granularity).
PREFILL_GQA_RATIO = 1
PREFILL_OPTIONS: dict[str, int | bool] = {
    "qhead_granularity": 1, "qlen_granularity": 256, "kvlen_granularity": 128, "block_size": 1, "is_causal": True,
}  # fmt: skip

_DEVICE_RE = re.compile(r"^(gfx[0-9a-z]+):([1-9][0-9]*)$")


# ---------------------------------------------------------------- devices


def default_devices() -> tuple[str, ...]:
    """Every arch the planners know, as its full part (``gfx942:304``...): what a case plans for unless told."""
    from mla_golden.reference import FULL_PART_CUS

    return tuple(f"{arch}:{cu}" for arch, cu in FULL_PART_CUS.items())


def arch_problem(arch: str) -> str | None:
    """Why the planners cannot plan for ``arch`` (one they know no LDS size or CU count of), or None.

    Planning every case for such an arch would write goldens that each hold the same arch error.
    """
    from mla_golden.reference import FULL_PART_CUS

    if arch in FULL_PART_CUS:
        return None
    return f"unknown arch {arch!r} (known: {', '.join(sorted(FULL_PART_CUS))})"


def device_problem(text: object) -> str | None:
    """Why ``text`` is not a device ``ARCH:CU`` the planners can plan for, or None."""
    match = _DEVICE_RE.match(text) if isinstance(text, str) else None
    if match is None:
        return f"expected devices as 'ARCH:CU' such as 'gfx942:304', got {text!r}"
    return arch_problem(match.group(1))


def split_device(text: str) -> tuple[str, int]:
    """'gfx942:304' -> ('gfx942', 304), for text :func:`device_problem` accepted."""
    arch, cu = text.split(":")
    return arch, int(cu)


def parse_device(text: str) -> tuple[str, int]:
    """'gfx942:304' -> ('gfx942', 304); MatrixError otherwise (an arch the planners know nothing of too)."""
    match = _DEVICE_RE.match(text)
    if match is None:
        raise MatrixError(f"device {text!r}: expected ARCH:CU such as gfx942:304")
    problem = arch_problem(match.group(1))
    if problem:
        raise MatrixError(f"device {text!r}: {problem}")
    return match.group(1), int(match.group(2))


# ---------------------------------------------------------------- shapes


def kernel_heads(heads: int) -> int:
    """Heads vLLM passes the decode planner: fewer than 16 per rank are padded to 16 (``max(16, num_heads)``)."""
    return max(16, heads)


def vllm_max_split_per_batch(heads: int, batch: int, cu_num: int) -> int:
    """vLLM ``AiterMLAMetadataBuilder._max_split_per_batch``: capped splits only with 128+ (padded) heads."""
    if kernel_heads(heads) < 128 or batch <= 0:
        return -1
    return max(1, min((cu_num + batch - 1) // batch, VLLM_MAX_KV_SPLITS))


def kv_granularity(page_size: int) -> int:
    """The decode ``kv_granularity`` vLLM passes: the page size, at least 16."""
    return max(page_size, 16)


def decode_params(
    heads: int, causal: bool, page_size: int, qlen: int, max_split_per_batch: int, q_dtype: str | None, kv_dtype: str | None
) -> dict[str, object]:
    """The scalar arguments of a decode planner call as vLLM's builder makes it (dtypes by name), for
    ``schema.build_arguments``: the matrix and the sweep plan their decode calls with the same ones."""
    return {
        "num_heads_per_head_k": heads, "num_heads_k": 1, "is_causal": causal,
        "page_size": page_size, "kv_granularity": kv_granularity(page_size),
        "max_seqlen_qo": qlen, "uni_seqlen_qo": qlen, "fast_mode": True, "topk": -1,
        "max_split_per_batch": max_split_per_batch, "intra_batch_mode": False,
        "is_cp_round_robin": False, "mla_version": 0,
        "dtype_q_nope": q_dtype, "dtype_q_rope": q_dtype, "dtype_kv_nope": kv_dtype, "dtype_kv_rope": kv_dtype,
    }  # fmt: skip


def lengths(mode: str, top: int, count: int, low: int, draw: Callable[[int, int], int]) -> tuple[int, ...]:
    """``count`` request lengths: all ``top`` (uniform), or each ``draw(lo, top)`` with lo = max(low, top // 8) (jitter).

    ``draw`` picks an integer in [lo, top]; the matrix and the sweep seed theirs differently.
    """
    if mode == "uniform":
        return (top,) * count
    start = max(low, top // 8)
    return tuple([draw(start, top) for _ in range(count)])


# ---------------------------------------------------------------- dtypes


def arch_dtype_name(name: str, arch: str) -> str | None:
    """The torch dtype (``"torch.bfloat16"``...) a case's dtype ``name`` means on ``arch``; None for ``none``.

    ``fp8`` is the arch's fp8 as aiter's ``dtypes`` has it (:func:`mla_golden.reference.dtypes.fp8_of`):
    an arch aiter lists none for gets aiter's 8-bit fallback, as there.
    """
    if name == NO_DTYPE:
        return None
    return str(torch_dtype(name, arch))


def torch_dtype(name: str, arch: str) -> torch.dtype:
    """The torch dtype a case's dtype ``name`` (``bf16`` or ``fp8``) means on ``arch``."""
    import torch

    from mla_golden.reference.dtypes import fp8_of

    if name == "fp8":
        return fp8_of(arch)
    if name == "bf16":
        return torch.bfloat16
    raise ValueError(f"unknown case dtype {name!r} (known: {', '.join((*DTYPE_NAMES, NO_DTYPE))})")


# ---------------------------------------------------------------- vLLM's inputs


def decode_inputs(seq_lens: Sequence[int], qlen: int, page_size: int, device: str | None = None) -> dict[str, torch.Tensor]:
    """The decode planner's input tensors as vLLM builds them: ``qlen`` queries and ``ceil(n / page_size)`` pages per request."""
    import torch

    pages = [math.ceil(n / page_size) for n in seq_lens]
    return {
        "seqlens_qo_indptr": torch.arange(0, (len(seq_lens) + 1) * qlen, qlen, dtype=torch.int32, device=device),
        "seqlens_kv_indptr": torch.tensor([0, *itertools.accumulate(pages)], dtype=torch.int32, device=device),
        "kv_last_page_lens": torch.tensor(
            [n - (p - 1) * page_size for n, p in zip(seq_lens, pages)], dtype=torch.int32, device=device
        ),
    }


def prefill_inputs(seq_lens: Sequence[int], block_size: int = 1) -> dict[str, torch.Tensor]:
    """The prefill planner's host-side inputs as vLLM builds them: new tokens only, so kv == q; the KV in pages of
    ``block_size`` tokens (vLLM's 1: one page per token)."""
    import torch

    indptr = torch.tensor([0, *itertools.accumulate(seq_lens)], dtype=torch.int32)
    pages = [0, *itertools.accumulate(math.ceil(n / block_size) for n in seq_lens)]
    return {
        "seqlens_qo_indptr": indptr,
        "pages_kv_indptr": indptr.clone() if block_size == 1 else torch.tensor(pages, dtype=torch.int32),
        "context_lens": torch.tensor(list(seq_lens), dtype=torch.int32),
    }


# ---------------------------------------------------------------- keys


def device_label(arch: object, cu_num: object) -> str:
    """``gfx942-cu304``: a device as keys and messages name it."""
    return f"{arch}-cu{cu_num}"


def case_key(head: str, arch: str, cu_num: int, label: str) -> str:
    """``HEAD/ARCH-cuN/LABEL``: every golden key names its device the same way, after what made it."""
    return f"{head}/{device_label(arch, cu_num)}/{label}"
