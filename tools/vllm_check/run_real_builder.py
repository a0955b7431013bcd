"""Developer check, not CI: vLLM's real AiterMLAMetadataBuilder on CPU, aiter played by mla_golden.reference.

    python tools/vllm_check/run_real_builder.py --arch gfx942 --heads 16 [--mixed] [--drop-dtypes] [--update]

Needs vLLM's Python sources and the packages its backend module imports on
sys.path (see README.md here; nothing of it is committed). What is faked, and
why, is listed below: only what a CPU machine without CUDA, Triton or a model
cannot provide. The planners, vLLM's builder code and its buffer sizing run
for real. Prints the planner calls and compares them with goldens through
mla_golden.expect (--update writes them).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import types

import torch

import mla_golden
from mla_golden import reference

NS = types.SimpleNamespace
CU_NUM = {"gfx942": 304, "gfx950": 256}


class CpuExpandPageIndices:
    """vLLM's Triton ``_expand_page_indices_kernel`` on CPU (no Triton here): block ids to flat token pages."""

    def __getitem__(self, grid: object) -> object:
        return self.run

    def run(self, page_indices, block_table, s0, s1, cu, *later, KERNEL_BLOCK_SIZE, **constants):  # noqa: N803
        """vLLM 0.33 adds num_real_tokens and CLAMP_TAIL (only used by varlen verify, not exercised here)."""
        k = KERNEL_BLOCK_SIZE
        for r in range(cu.numel() - 1):
            start, end = int(cu[r]), int(cu[r + 1])
            t = torch.arange(end - start)
            page_indices[start:end] = block_table[r, t // k] * k + t % k


def fake_gpu(arch: str) -> None:
    """What vLLM reads from torch.cuda, answered for the simulated GPU (CPU torch has no CUDA)."""
    torch.cuda.get_device_properties = lambda device=None: NS(
        gcnArchName=f"{arch}:sramecc+:xnack-", multi_processor_count=CU_NUM[arch], name="simulated",
        major=9, minor=4, total_memory=1 << 36,
    )  # fmt: skip
    # gfx950 turns on vLLM's FP8 prefill (aiter e4048607 has its kernels): pinned staging buffers and CUDA events
    empty = torch.empty
    torch.empty = lambda *a, pin_memory=False, **k: empty(*a, **k)
    torch.cuda.Event = lambda *a, **k: NS(synchronize=lambda: None, record=lambda *a: None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gfx942", choices=sorted(CU_NUM))
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--mixed", action="store_true", help="decodes and prefills (else eight long decodes)")
    parser.add_argument("--drop-dtypes", action="store_true", help="the regression: the planner call loses its dtypes")
    parser.add_argument("--update", action="store_true", help="write the goldens instead of comparing")
    parser.add_argument("--goldens", default=os.path.join(tempfile.gettempdir(), "vllm-check-goldens"))
    args = parser.parse_args()
    fake_gpu(args.arch)

    with reference.as_aiter(), reference.device(args.arch):
        import vllm.v1.attention.backends.mla.rocm_aiter_mla as backend
        import vllm.v1.worker.workspace as workspace
        from vllm.platforms import current_platform
        from vllm.v1.attention.backend import CommonAttentionMetadata
        from vllm.v1.kv_cache_interface import MLAAttentionSpec

        backend._expand_page_indices_kernel = CpuExpandPageIndices()
        type(current_platform).num_compute_units = classmethod(lambda cls, *a: CU_NUM[args.arch])
        workspace.current_workspace_manager = lambda: NS(get_simultaneous=lambda *r: None)  # no GPU workspace

        # A DeepSeek-V3-shaped MLA layer and the config fields the builder reads (no model to load here).
        prefill_backend = NS(get_name=lambda: "AITER_FLASH_ATTN", prepare_metadata=lambda *a, **k: None)
        layer = NS(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                   num_heads=args.heads, prefill_backend=NS(clone=lambda: prefill_backend),
                   non_causal_multi_token_decode=False)  # fmt: skip
        vllm_config = NS(
            model_config=NS(dtype=torch.bfloat16, max_model_len=8192, use_mla=True, hf_config=NS(), hf_text_config=NS(),
                            get_num_attention_heads=lambda pc: args.heads, get_head_size=lambda: 576),
            parallel_config=NS(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                               cp_kv_cache_interleave_size=1, tensor_parallel_size=1),
            compilation_config=NS(static_forward_context={"layer.0": layer},
                                  cudagraph_mode=NS(has_full_cudagraphs=lambda: False)),
            cache_config=NS(cache_dtype="fp8", block_size=1, num_gpu_blocks=None),
            scheduler_config=NS(max_num_seqs=16, max_num_batched_tokens=8192),
            attention_config=NS(use_prefill_query_quantization=False),
            speculative_config=None,
        )  # fmt: skip
        spec = MLAAttentionSpec(block_size=1, num_kv_heads=1, head_size=576, dtype=torch.bfloat16, cache_dtype_str="fp8")
        builder = backend.AiterMLAMetadataBuilder(spec, ["layer.0"], vllm_config, torch.device("cpu"))
        print(f"builder: {type(builder).__module__}.{type(builder).__name__}; dtypes {builder._mla_q_dtype}")
        if args.drop_dtypes:
            builder._mla_q_dtype = builder._mla_kv_dtype = None

        seq_lens = [700, 1900, 100, 3000, 300, 600] if args.mixed else [3000] * 8
        query_lens = [1, 1, 1, 1, 300, 600] if args.mixed else [1] * 8
        block_table = torch.zeros(len(seq_lens), 8192, dtype=torch.int32)
        for i, s in enumerate(seq_lens):
            block_table[i, :s] = torch.arange(i * 8192, i * 8192 + s, dtype=torch.int32)
        qsl = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
        common = CommonAttentionMetadata(
            query_start_loc=qsl, query_start_loc_cpu=qsl.clone(), seq_lens=torch.tensor(seq_lens, dtype=torch.int32),
            num_reqs=len(seq_lens), num_actual_tokens=sum(query_lens), max_query_len=max(query_lens),
            max_seq_len=max(seq_lens), block_table_tensor=block_table,
            slot_mapping=torch.zeros(sum(query_lens), dtype=torch.int64),
            seq_lens_cpu_upper_bound=torch.tensor(seq_lens, dtype=torch.int32),
        )  # fmt: skip
        name = f"{args.arch}-h{args.heads}-{'mixed' if args.mixed else 'decode'}"
        try:
            with mla_golden.expect("aiter", args.goldens, name=name, update=args.update) as spy:
                builder.build(0, common)
        except Exception as error:
            print(f"build raised {type(error).__name__}: {error}")
            if error.__cause__ is not None:
                print(f"golden report:\n{error.__cause__}")
            sys.exit(1)
        for call in spy.calls:
            print(f"{call.op}: arch {call.device['arch']}, dtype_kv_nope {call.params.get('dtype_kv_nope')}")
        print("goldens written" if args.update else "equal to the goldens")


if __name__ == "__main__":
    main()
