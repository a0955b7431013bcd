"""A toy aiter: a tree that ``aiter-src`` builds and runs like aiter's, small enough to write commit by commit.

Its decode planner is a few lines of host C++ with aiter's own entry point
(``get_mla_metadata_v1`` on torch tensors) and Python wrapper and sizing
helper: each batch's kv range is cut into works of ``KV_SPLIT`` tokens, one
work per CU part in order (from the last CU part for calls of more than
``REVERSE_ABOVE`` batches), split batches merged by one reduce group each. The knobs are
``#define``s in ``metadata/v1_2_device.cuh``, so a planted planner change is a
one-line commit, and a comment or a reformat is one that plans alike.

It is not aiter's planner and ``check`` does not find its plans sound: the
tests use it to find *which commit* changed a plan, never to judge a plan.
"""

from __future__ import annotations

from pathlib import Path

import torch

import mla_golden
from mla_golden.schema import ATTENTION_PY, CPP_FILE

HEADER = "csrc/kernels/mla/metadata/v1_2_device.cuh"

PLANNER_CU = """\
#include "metadata/v1_2_device.cuh"

void get_mla_metadata_v1(const torch::Tensor& seqlens_qo_indptr,
                         const torch::Tensor& seqlens_kv_indptr,
                         const torch::Tensor& kv_last_page_lens,
                         const int32_t num_heads_per_head_k,
                         const int32_t num_heads_k,
                         const bool is_causal,
                         torch::Tensor& work_metadata_ptrs,
                         torch::Tensor& work_info_set,
                         torch::Tensor& work_indptr,
                         torch::Tensor& reduce_indptr,
                         torch::Tensor& reduce_final_map,
                         torch::Tensor& reduce_partial_map,
                         const int32_t page_size,
                         const int32_t kv_granularity,
                         const int32_t max_seqlen_qo,
                         const int32_t uni_seqlen_qo,
                         const bool fast_mode,
                         const int32_t topk,
                         const int32_t max_split_per_batch,
                         const bool intra_batch_mode,
                         std::optional<at::ScalarType> dtype_q,
                         std::optional<at::ScalarType> dtype_kv)
{
    toy_plan(seqlens_kv_indptr, work_metadata_ptrs, work_info_set, work_indptr,
             reduce_indptr, reduce_final_map, reduce_partial_map);
}
"""

HEADER_CUH = """\
#pragma once
#define KV_SPLIT {split}
#define REVERSE_ABOVE {reverse_above}

inline void toy_plan(const torch::Tensor& kv_indptr, torch::Tensor& ptrs, torch::Tensor& info, torch::Tensor& indptr,
                     torch::Tensor& r_indptr, torch::Tensor& r_final, torch::Tensor& r_partial)
{{
    const int32_t* kv = kv_indptr.data_ptr<int32_t>();
    const int batches = static_cast<int>(kv_indptr.numel()) - 1;
    const int parts = static_cast<int>(indptr.numel()) - 1;
    int32_t* w = info.data_ptr<int32_t>();
    int works = 0, groups = 0, partials = 0;
    r_indptr.data_ptr<int32_t>()[0] = 0;
    for(int b = 0; b < batches; ++b)
    {{
        const int begin = kv[b], end = kv[b + 1];
        const int pieces = (end - begin + KV_SPLIT - 1) / KV_SPLIT;
        for(int p = 0; p < pieces; ++p, ++works)
        {{
            int32_t* row = w + 8 * works;
            const int kv_end = begin + (p + 1) * KV_SPLIT < end ? begin + (p + 1) * KV_SPLIT : end;
            row[0] = b; row[1] = pieces > 1 ? partials + p : -1; row[2] = b; row[3] = b + 1;
            row[4] = begin + p * KV_SPLIT; row[5] = kv_end; row[6] = end - kv_end; row[7] = 0;
        }}
        if(pieces > 1)
        {{
            for(int p = 0; p < pieces; ++p)
                r_partial.data_ptr<int32_t>()[partials + p] = partials + p;
            r_final.data_ptr<int32_t>()[2 * groups] = b;
            r_final.data_ptr<int32_t>()[2 * groups + 1] = b + 1;
            partials += pieces;
            r_indptr.data_ptr<int32_t>()[++groups] = partials;
        }}
    }}
    int32_t* ip = indptr.data_ptr<int32_t>();
    for(int i = 0; i <= parts; ++i)
    {{
        const int first = batches > REVERSE_ABOVE ? works - (parts - i) : i;
        ip[i] = i == parts ? works : (first < 0 ? 0 : (first > works ? works : first));
    }}
    ptrs.data_ptr<uint64_t>()[0] = reinterpret_cast<uint64_t>(indptr.data_ptr());
    ptrs.data_ptr<uint64_t>()[1] = reinterpret_cast<uint64_t>(info.data_ptr());
}}
"""

ATTENTION = '''\
import torch


@compile_ops("module_mla_metadata")
def get_mla_metadata_v1(
    seqlens_qo_indptr, seqlens_kv_indptr, kv_last_page_lens, num_heads_per_head_k, num_heads_k, is_causal,
    work_metadata_ptrs, work_info_set, work_indptr, reduce_indptr, reduce_final_map, reduce_partial_map,
    page_size=1, kv_granularity=16, max_seqlen_qo=-1, uni_seqlen_qo=-1, fast_mode=True, topk=-1,
    max_split_per_batch=-1, intra_batch_mode=False, dtype_q=None, dtype_kv=None,
): ...


def get_mla_metadata_info_v1(
    batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse, fast_mode=True, num_kv_splits=32,
    intra_batch_mode=False, max_split_per_batch=-1,
):
    parts = get_cu_num()
    works = batch_size * num_kv_splits
    return (
        ((2,), torch.uint64),
        ((parts + 1,), torch.int32),
        ((works, 8), torch.int32),
        ((batch_size + 1,), torch.int32),
        ((batch_size, 2), torch.int32),
        ((works,), torch.int32),
    )
'''


#: Never: no call has that many batches.
NEVER = 1 << 30


def planner_files(split: int = 64, reverse_above: int = NEVER, *, comment: str = "", broken: bool = False) -> dict[str, str]:
    """The toy planner's sources: works of ``split`` kv tokens, CU parts handed out from the last one for calls of
    more than ``reverse_above`` batches; ``comment`` adds a comment (the same planner by meaning), ``broken`` a
    line g++ refuses."""
    header = HEADER_CUH.format(split=split, reverse_above=reverse_above)
    if comment:
        header = f"// {comment}\n" + header
    if broken:
        header += "this does not compile;\n"
    return {CPP_FILE: PLANNER_CU, HEADER: header, ATTENTION_PY: ATTENTION}


def toy_call(planner: object, kv_lens: list[int], cu_num: int = 16) -> mla_golden.Call:
    """A decode call of ``len(kv_lens)`` single-token requests on ``planner`` (an aiter-src module), spied."""
    batch = len(kv_lens)
    with planner.device("gfx942", cu_num):  # type: ignore[attr-defined]
        shapes = planner.get_mla_metadata_info_v1(batch, 1, 16, None, None, False)  # type: ignore[attr-defined]
        ptrs, indptr, info, r_indptr, r_final, r_partial = (torch.empty(s, dtype=d) for s, d in shapes)
        kv = torch.tensor([0, *torch.tensor(kv_lens).cumsum(0).tolist()], dtype=torch.int32)
        with mla_golden.spy(planner) as spy:
            planner.get_mla_metadata_v1(  # type: ignore[attr-defined]
                torch.arange(batch + 1, dtype=torch.int32), kv, torch.ones(batch, dtype=torch.int32), 16, 1, True,
                ptrs, info, indptr, r_indptr, r_final, r_partial, max_seqlen_qo=1, uni_seqlen_qo=1,
            )
    return spy.calls.one()


def entry_point(body: str = "") -> str:
    """The least planner source a tree's build accepts: aiter's entry point, holding ``body`` (for tests whose
    compiler is :func:`fake_compiler`, or that only read the source)."""
    return f"void get_mla_metadata_v1(const int32_t num_heads_k)\n{{\n{body}\n}}\n"


def fake_compiler(folder: Path, built: str = 'echo > "$2"') -> Path:
    """A "compiler" for ``CXX`` that only runs ``built`` with the file named after -o as ``$2``: a build that costs
    nothing (by default an empty file, a harness that never runs)."""
    fake = folder / "fake-cxx"
    fake.write_text(f'#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\n{built}\n')
    fake.chmod(0o755)
    return fake


def tree_at(root: Path, files: dict[str, str]) -> Path:
    """``files`` written under ``root``: a toy tree ``aiter_src(root)`` builds."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "csrc" / "include").mkdir(parents=True, exist_ok=True)
    return root
