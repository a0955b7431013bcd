"""Binding calls made through aiter's historical signatures to one canonical form, and back."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from helpers import standins

from mla_golden.binding import bind, build_arguments
from mla_golden.schema import MLA_OP, PS_OP, AdaptationError, schema_for

QO = torch.tensor([0, 1, 3], dtype=torch.int32)
KV = torch.tensor([0, 40, 100], dtype=torch.int32)


def _call_through(fn: Any, dtype: Any) -> Any:
    """Call ``fn`` the way a builder of its era would: positionally, by its own parameter order."""
    bufs = standins.toy_buffers(2, 100)
    names = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    values = {
        "seqlens_qo_indptr": QO,
        "seqlens_kv_indptr": KV,
        "kv_last_page_lens": torch.ones(2, dtype=torch.int32),
        "num_heads_per_head_k": 16,
        "num_heads_k": 1,
        "is_causal": True,
        "work_info": bufs["work_info_set"],
        **bufs,
    }
    positional = [values[n] for n in names[: names.index("reduce_partial_map") + 1]]
    kwargs = {"max_seqlen_qo": 2}
    if "dtype_q" in names and dtype is not None:
        kwargs.update(dtype_q=dtype, dtype_kv=dtype)
    return bind(MLA_OP, fn, tuple(positional), kwargs), bufs


@pytest.mark.parametrize("fn", standins.HISTORY, ids=lambda f: f.__name__)
def test_every_historical_signature_binds_to_the_same_canonical_call(fn: Any) -> None:
    bound, bufs = _call_through(fn, None)
    reference, _ = _call_through(standins.mla_e4048607, None)
    assert bound.params == reference.params
    assert set(bound.inputs) == set(reference.inputs)
    for name, tensor in reference.inputs.items():
        assert torch.equal(bound.inputs[name], tensor), name
    # outputs are found by role, whatever the version called or ordered them
    assert bound.buffers["work_info_set"] is bufs["work_info_set"]
    assert bound.buffers["work_indptr"] is bufs["work_indptr"]
    assert bound.signature == list(fn.__code__.co_varnames[: fn.__code__.co_argcount])


@pytest.mark.parametrize("fn", standins.HISTORY[1:], ids=lambda f: f.__name__)
def test_legacy_dtype_aliases_fill_nope_and_rope(fn: Any) -> None:
    bound, _ = _call_through(fn, torch.bfloat16)
    for name in ("dtype_q_nope", "dtype_q_rope", "dtype_kv_nope", "dtype_kv_rope"):
        assert bound.params[name] == "torch.bfloat16"


def test_explicit_nope_dtype_wins_over_the_legacy_alias() -> None:
    bufs = standins.toy_buffers(2, 100)
    bound = bind(
        MLA_OP,
        standins.mla_e4048607,
        (QO, KV, torch.ones(2, dtype=torch.int32), 16, 1, True, *bufs.values()),
        {"dtype_q": torch.bfloat16, "dtype_q_nope": torch.float8_e4m3fn},
    )
    assert bound.params["dtype_q_nope"] == "torch.float8_e4m3fn"
    assert bound.params["dtype_q_rope"] == "torch.bfloat16"


def test_old_signature_notes_what_it_implied() -> None:
    bound, _ = _call_through(standins.mla_33d168a0, None)
    assert any("kv_last_page_lens" in n for n in bound.notes)
    assert any(n.startswith("page_size") for n in bound.notes)
    assert torch.equal(bound.inputs["kv_last_page_lens"], torch.ones(2, dtype=torch.int32))


def test_build_arguments_replays_on_an_older_signature_and_says_so() -> None:
    bound, bufs = _call_through(standins.mla_e4048607, torch.bfloat16)
    _, kwargs, notes = build_arguments(MLA_OP, standins.mla_33d168a0, bound.params, bound.inputs, bufs)
    assert "kv_last_page_lens" not in kwargs and "page_size" not in kwargs
    assert kwargs["dtype_q"] is torch.bfloat16 and kwargs["work_info_set"] is bufs["work_info_set"]
    assert any("page_size dropped" in n for n in notes)
    assert any("legacy dtype_q" in n for n in notes)


def test_build_arguments_refuses_what_an_older_signature_cannot_express() -> None:
    bound, bufs = _call_through(standins.mla_e4048607, None)
    paged = dict(bound.params, page_size=64)
    with pytest.raises(AdaptationError, match="page_size=64"):
        build_arguments(MLA_OP, standins.mla_33d168a0, paged, bound.inputs, bufs)
    mixed = dict(bound.params, dtype_q_nope="torch.float8_e4m3fn", dtype_q_rope="torch.bfloat16")
    with pytest.raises(AdaptationError, match="dtype_q cannot express"):
        build_arguments(MLA_OP, standins.mla_33d168a0, mixed, bound.inputs, bufs)
    fp8 = dict(bound.params, dtype_q_nope="torch.float8_e4m3fn", dtype_q_rope="torch.float8_e4m3fn")
    with pytest.raises(AdaptationError, match="dtype_q_nope"):
        build_arguments(MLA_OP, standins.mla_2025_10, fp8, bound.inputs, bufs)


def test_ps_work_info_is_the_canonical_work_info_set() -> None:
    assert schema_for(PS_OP).canonical("work_info") == "work_info_set"
    assert schema_for(PS_OP).work_columns[7] == "q_head_range"
    assert schema_for(MLA_OP).work_columns[6] == "kv_offset"


def test_unknown_op_is_named() -> None:
    with pytest.raises(ValueError, match="unknown op 'nope'"):
        schema_for("nope")


SEEN: dict[str, Any] = {}


def _received(fn: Any) -> dict[str, Any]:
    """What ``fn`` receives (it notes it in SEEN) when called with build_arguments of a paged fp8 call."""
    bound, bufs = _call_through(standins.mla_e4048607, None)
    fp8 = "torch.float8_e4m3fn"
    call_params = dict(bound.params, page_size=64, topk=2048, dtype_q_nope=fp8, dtype_q_rope=fp8)
    args, kwargs, _ = build_arguments(MLA_OP, fn, call_params, bound.inputs, bufs)
    SEEN.clear()
    fn(*args, **kwargs)
    return dict(SEEN)


def test_a_planner_taking_kwargs_receives_every_argument_the_call_has() -> None:
    import inspect

    def named_then_kwargs(seqlens_qo_indptr: Any, seqlens_kv_indptr: Any, kv_last_page_lens: Any, num_heads_per_head_k: Any,
                          num_heads_k: Any, is_causal: Any, work_metadata_ptrs: Any, work_info_set: Any, work_indptr: Any,
                          reduce_indptr: Any, reduce_final_map: Any, reduce_partial_map: Any, *args: Any,
                          **kwargs: Any) -> None:  # fmt: skip
        SEEN.update(kwargs, args=args, seqlens_kv_indptr=seqlens_kv_indptr, num_heads_per_head_k=num_heads_per_head_k)

    seen = _received(named_then_kwargs)
    assert seen["args"] == () and seen["page_size"] == 64 and seen["topk"] == 2048
    assert seen["dtype_q_nope"] is torch.float8_e4m3fn and torch.equal(seen["seqlens_kv_indptr"], KV)
    assert seen["num_heads_per_head_k"] == 16
    reference = inspect.signature(standins.mla_e4048607).parameters
    assert set(seen) - {"args"} >= set(reference) - {"dtype_q", "dtype_kv"} - set(list(reference)[:12]) | {"seqlens_kv_indptr"}


def test_a_planner_taking_only_args_receives_every_argument_in_aiters_order() -> None:
    def only_args(*args: Any) -> None:
        SEEN["args"] = args

    args = _received(only_args)["args"]
    order = schema_for(MLA_OP).signature
    assert len(args) == len(order) and args[order.index("page_size")] == 64 and args[order.index("topk")] == 2048
    assert torch.equal(args[1], KV) and args[order.index("dtype_q_nope")] is torch.float8_e4m3fn


def test_a_planner_of_another_order_is_bound_by_name_and_kwargs_takes_the_rest() -> None:
    def reordered(seqlens_kv_indptr: Any, seqlens_qo_indptr: Any, **kwargs: Any) -> None:
        SEEN.update(kwargs, qo=seqlens_qo_indptr, kv=seqlens_kv_indptr)

    seen = _received(reordered)
    assert torch.equal(seen["kv"], KV) and torch.equal(seen["qo"], QO), "never by position onto other names"
    assert seen["page_size"] == 64 and "work_info_set" in seen and "seqlens_qo_indptr" not in seen


def test_a_planner_with_neither_still_cannot_receive_what_it_does_not_name() -> None:
    with pytest.raises(AdaptationError, match="page_size=64"):
        _received(standins.mla_33d168a0)
