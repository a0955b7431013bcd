"""aiter's MLA kernels, as names only: the reference plans, it does not run attention.

vLLM's ROCm MLA backend imports these (some at module level, some to probe
what the installed aiter supports, some through ``inspect.signature``), so the
stand-in ``aiter`` must have them with aiter's parameter names (as at
e4048607: ``aiter/mla.py``, ``aiter/ops/attention.py``, ``aiter/ops/mha.py``,
``aiter/ops/triton/attention/mla.py``, ``aiter/ops/triton/gluon/mla_gluon.py``).
Calling one raises :class:`NotImplementedError`.
"""

from __future__ import annotations

from typing import Any, NoReturn


def _only_plans(name: str) -> NoReturn:
    raise NotImplementedError(
        f"{name}: mla_golden.reference only plans (get_mla_metadata_v1, get_ps_metadata_v1 and their "
        "_info_v1 sizers); it has no attention kernels. Run kernels on a real aiter."
    )


def mla_decode_fwd(
    q: Any, kv_buffer: Any, o: Any, qo_indptr: Any, kv_indptr: Any, kv_indices: Any, kv_last_page_lens: Any,
    max_seqlen_q: Any, page_size: int = 1, nhead_kv: int = 1, sm_scale: Any = None, logit_cap: float = 0.0,
    num_kv_splits: Any = None, num_kv_splits_indptr: Any = None, work_meta_data: Any = None, work_indptr: Any = None,
    work_info_set: Any = None, reduce_indptr: Any = None, reduce_final_map: Any = None,
    reduce_partial_map: Any = None, q_scale: Any = None, kv_scale: Any = None, intra_batch_mode: bool = False,
    return_logits: bool = False, return_lse: bool = False, g_kv_indptr: Any = None, cp_world_size: int = 1,
    cp_rank: int = 0, causal: bool = True,
) -> NoReturn:
    _only_plans("aiter.mla.mla_decode_fwd")


def mla_prefill_ps_asm_fwd(
    Q: Any, K: Any, V: Any, qo_indptr: Any, kv_indptr: Any, kv_page_indices: Any, work_indptr: Any,
    work_info_set: Any, max_seqlen_q: int, softmax_scale: float, is_causal: bool, splitData: Any, splitLse: Any,
    output: Any, q_scale: Any = None, k_scale: Any = None, v_scale: Any = None,
) -> NoReturn:
    _only_plans("aiter.mla_prefill_ps_asm_fwd")


def mla_reduce_v1(
    partial_output: Any, partial_lse: Any, reduce_indptr: Any, reduce_final_map: Any, reduce_partial_map: Any,
    max_seqlen_q: int, num_kv_splits: int, final_output: Any, final_lse: Any = None,
) -> NoReturn:
    _only_plans("aiter.mla_reduce_v1")


def flash_attn_varlen_func(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int, max_seqlen_k: int,
    min_seqlen_q: int = 0, dropout_p: float = 0.0, softmax_scale: Any = None, logits_soft_cap: float = 0.0,
    causal: bool = False, window_size: tuple[int, int, int] = (-1, -1, 0), bias: Any = None,
    alibi_slopes: Any = None, deterministic: bool = False, return_lse: bool = False,
    return_attn_probs: bool = False, how_v3_bf16_cvt: int = 1, block_table: Any = None, out: Any = None,
    cu_seqlens_q_padded: Any = None, cu_seqlens_k_padded: Any = None, sink_ptr: Any = None,
) -> NoReturn:
    _only_plans("aiter.flash_attn_varlen_func")


def triton_mla_decode_fwd(
    q: Any, kv_buffer: Any, out: Any, cu_seqlens_q: Any, seqused_k: Any, max_seqlen_kv: int, block_tables: Any,
    softmax_scale: float, kv_lora_rank: int, qk_rope_head_dim: int, causal: bool, q_descale: Any,
    kv_descale: Any, q_scales: Any = None, out_scale: Any = None, shuffled_kv_cache: bool = False,
    skip_reduce: bool = False,
) -> NoReturn:
    _only_plans("aiter.ops.triton.attention.mla.mla_decode_fwd")


triton_mla_decode_fwd.__name__ = triton_mla_decode_fwd.__qualname__ = "mla_decode_fwd"


def mla_gluon(
    q_nope: Any, q_pe: Any, kv_c: Any, o: Any, page_table: Any, seq_info: Any, sm_scale: float, k_pe: Any = None,
    kv_pe_offset: int = 512, use_2d_view: bool = True, kv_scale: float = 1.0, min_kv_seq_len: int = 1,
    return_lse: bool = False, has_pe: bool = True, attn_sink: Any = None,
) -> NoReturn:
    _only_plans("aiter.ops.triton.gluon.mla_gluon.mla_gluon")
