"""Conformance records as sweep points: the calls a deployment-shaped sweep can make.

A record is covered when its call is one a sweep point makes: uniform query
length, one KV head, kv_granularity max(page_size, 16), dense, fast mode,
no round robin, MLA version 0, one q and one kv dtype, at least 16 heads,
buffers sized for exactly the batch (decode); vLLM's FP8 prefill convention
(prefill). :func:`point_of` returns None for any other record.
"""

from __future__ import annotations

from typing import Any

from helpers.conformance import records
from mla_golden.sweeper.space import DECODE, PREFILL, Point


def cross_version(old12: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(cross-version record, the e4048607 record of the same inputs) for the old commit ``old12``."""
    new = {r["case_id"]: r for prefix in ("mla_v1-e4048607", "ps_v1-e4048607") for r in records(prefix)}
    return [(r, new[r["case_id"]]) for r in records(f"cross_version-{old12}")]


def _dtype(name: str | None) -> str | None:
    if name is None:
        return "none"
    if name.startswith("torch.float8"):
        return "fp8"
    return "bf16" if name == "torch.bfloat16" else None


def point_of(record: dict[str, Any]) -> Point | None:
    """The sweep point whose call is the (per-version) record's, or None when no point makes that call."""
    args, kwargs, device = record["call"]["args"], record["call"]["kwargs"], record["device"]
    env = tuple(sorted(record["env"].items()))
    if record["op"] == PREFILL:
        lens = args["context_lens"]
        indptr = [0]
        for n in lens:
            indptr.append(indptr[-1] + n)
        vllm = {"qhead_granularity": 1, "qlen_granularity": 256, "kvlen_granularity": 128, "block_size": 1, "is_causal": True}
        if args["gqa_ratio"] != 1 or kwargs != vllm or args["seqlens_qo_indptr"] != indptr or args["pages_kv_indptr"] != indptr:
            return None
        return Point(PREFILL, device["arch"], device["cu_num"], args["num_heads_k"], tuple(lens))
    qlen = kwargs["max_seqlen_qo"]
    batch = len(args["kv_last_page_lens"])
    page = kwargs["page_size"]
    q = kwargs["dtype_q_nope"] if kwargs["dtype_q_nope"] is not None else kwargs["dtype_q"]
    kv = kwargs["dtype_kv_nope"] if kwargs["dtype_kv_nope"] is not None else kwargs["dtype_kv"]
    q_rope = kwargs["dtype_q_rope"] if kwargs["dtype_q_rope"] is not None else q
    kv_rope = kwargs["dtype_kv_rope"] if kwargs["dtype_kv_rope"] is not None else kv
    sizing = record["buffers"]["sizing_call"]
    plain = (
        args["num_heads_k"] == 1 and args["num_heads_per_head_k"] >= 16 and kwargs["uni_seqlen_qo"] == qlen
        and args["seqlens_qo_indptr"] == list(range(0, (batch + 1) * qlen, qlen)) and kwargs["fast_mode"]
        and kwargs["topk"] == -1 and not kwargs["intra_batch_mode"] and not kwargs["is_cp_round_robin"]
        and kwargs["mla_version"] == 0 and kwargs["kv_granularity"] == max(page, 16) and q == q_rope and kv == kv_rope
        and _dtype(q) is not None and _dtype(kv) is not None and sizing["batch_size"] == batch
        and sizing.get("max_split_per_batch", -1) == kwargs["max_split_per_batch"]
    )  # fmt: skip
    q_dtype, kv_dtype = _dtype(q), _dtype(kv)
    if not plain or q_dtype is None or kv_dtype is None:
        return None
    kv_indptr = args["seqlens_kv_indptr"]
    pages = [kv_indptr[i + 1] - kv_indptr[i] for i in range(batch)]
    lens = tuple((p - 1) * page + last for p, last in zip(pages, args["kv_last_page_lens"]))
    if min(lens) < qlen or any(not 1 <= last <= page for last in args["kv_last_page_lens"]):
        return None
    return Point(
        DECODE, device["arch"], device["cu_num"], args["num_heads_per_head_k"], lens, qlen=qlen,
        q_dtype=q_dtype, kv_dtype=kv_dtype, page_size=page, max_split_per_batch=kwargs["max_split_per_batch"],
        causal=args["is_causal"], env=env,
    )  # fmt: skip
