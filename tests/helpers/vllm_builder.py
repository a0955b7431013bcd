"""A metadata builder written the way vLLM's ``AiterMLAMetadataBuilder`` is (vLLM 0.28-0.33).

What matters for mla-golden is copied in shape, not in code: a module-level
``from aiter import ...`` and function-level ones, ``dtypes.fp8`` for an fp8
cache (so the dtype follows the GPU), buffers sized once at init by the
``*_info_v1`` helpers for the largest batch, and the planners called at build
on slices of persistent inputs. Import it inside ``reference.as_aiter()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from aiter import dtypes  # module level, as vLLM's backends import aiter names

#: vLLM's FP8 prefill Q tile (``_FP8_PREFILL_TILE_Q``).
PREFILL_TILE_Q = 256

_BUFFERS = ("work_meta_data", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")


@dataclass
class Metadata:
    """What build() hands the attention kernels (the planner-filled buffers)."""

    decode: dict[str, torch.Tensor] | None
    prefill: dict[str, torch.Tensor] | None


class MlaMetadataBuilder:
    """Decode metadata through get_mla_metadata_v1, FP8 prefill metadata through get_ps_metadata_v1."""

    def __init__(
        self,
        *,
        num_heads: int,
        max_num_reqs: int = 16,
        max_model_len: int = 2048,
        kv_cache_dtype: str = "fp8",
        model_dtype: torch.dtype = torch.bfloat16,
        pass_dtypes: bool = True,
        size_with_dtypes: bool = True,
    ) -> None:
        from aiter import get_mla_metadata_info_v1  # function level, as vLLM's __init__ does

        self.num_heads = num_heads
        # False replays the regression: the planner call lost its dtypes (with ``size_with_dtypes`` False the sizing
        # helper's call lost them too, so the plan changes silently instead of outgrowing its buffers)
        self.pass_dtypes = pass_dtypes
        fp8 = kv_cache_dtype in ("fp8", "fp8_e4m3")
        self.kv_dtype = dtypes.fp8 if fp8 else {torch.float16: dtypes.fp16, torch.bfloat16: dtypes.bf16}[model_dtype]
        self.q_dtype = dtypes.fp8 if fp8 else model_dtype
        sizing = (self.q_dtype, self.kv_dtype) if size_with_dtypes else (None, None)
        shapes = get_mla_metadata_info_v1(max_num_reqs, 1, num_heads, *sizing, is_sparse=False, fast_mode=True)
        self.decode_buffers = {name: torch.empty(size, dtype=dt) for name, (size, dt) in zip(_BUFFERS, shapes)}
        self.kv_last_page_len = torch.ones(max_num_reqs, dtype=torch.int32)
        self.prefill_buffers: dict[str, torch.Tensor] | None = None
        if fp8 and model_dtype == torch.bfloat16:
            self._init_prefill(max_num_reqs, max_model_len)

    def _init_prefill(self, max_num_reqs: int, max_qlen: int) -> None:
        from aiter import get_ps_metadata_info_v1

        shapes = get_ps_metadata_info_v1(
            batch_size=max_num_reqs, num_head_k=self.num_heads, max_qlen=max_qlen, qlen_granularity=PREFILL_TILE_Q
        )
        self.prefill_buffers = {name: torch.empty(size, dtype=dt) for name, (size, dt) in zip(_BUFFERS, shapes)}

    def build(self, seq_lens: list[int], query_lens: list[int]) -> Metadata:
        """Decodes (query length 1) first, then prefills (query length == sequence length), as vLLM orders them."""
        decodes = [s for s, q in zip(seq_lens, query_lens) if q == 1]
        prefills = [q for q in query_lens if q > 1]
        decode = self._build_decode(decodes) if decodes else None
        prefill = self._build_prefill(prefills) if prefills and self.prefill_buffers is not None else None
        return Metadata(decode, prefill)

    def _build_decode(self, seq_lens: list[int]) -> dict[str, torch.Tensor]:
        from aiter import get_mla_metadata_v1

        batch = len(seq_lens)
        kv_indptr = torch.zeros(batch + 1, dtype=torch.int32)
        kv_indptr[1:] = torch.cumsum(torch.tensor(seq_lens, dtype=torch.int32), 0)
        b = self.decode_buffers
        get_mla_metadata_v1(
            torch.arange(batch + 1, dtype=torch.int32),
            kv_indptr,
            self.kv_last_page_len[:batch],
            self.num_heads,
            1,
            True,
            b["work_meta_data"],
            b["work_info_set"],
            b["work_indptr"],
            b["reduce_indptr"],
            b["reduce_final_map"],
            b["reduce_partial_map"],
            page_size=1,
            kv_granularity=16,
            max_seqlen_qo=1,
            uni_seqlen_qo=1,
            fast_mode=True,
            **({"dtype_q": self.q_dtype, "dtype_kv": self.kv_dtype} if self.pass_dtypes else {}),
        )
        return b

    def _build_prefill(self, query_lens: list[int]) -> dict[str, torch.Tensor]:
        from aiter import get_ps_metadata_v1

        assert self.prefill_buffers is not None
        qo_indptr = torch.zeros(len(query_lens) + 1, dtype=torch.int32)
        qo_indptr[1:] = torch.cumsum(torch.tensor(query_lens, dtype=torch.int32), 0)
        b = self.prefill_buffers
        get_ps_metadata_v1(
            qo_indptr,
            qo_indptr.clone(),
            torch.tensor(query_lens, dtype=torch.int32),
            1,
            self.num_heads,
            b["work_meta_data"],
            b["work_indptr"],
            b["work_info_set"],
            b["reduce_indptr"],
            b["reduce_final_map"],
            b["reduce_partial_map"],
            qhead_granularity=1,
            qlen_granularity=PREFILL_TILE_Q,
            kvlen_granularity=128,
            block_size=1,
            is_causal=True,
        )
        return b
