"""The limits a golden's parameters are held to before anything plans with them (replay, check).

A golden is small, but its parameters say how much the planner will do: a
forged or corrupted head count of 2^30 folds into 2^26 planned batches, a
``topk`` of 2^31 cannot even be passed to aiter. Before a replay or a check
plans anything, :func:`problems` holds the parameters to what aiter itself
takes or can address:

- every integer parameter fits int32 (aiter's bindings take them as
  ``int32_t``: anything wider is refused there, or wraps);
- head counts stay addressable: decode query rows (heads x query tokens, and
  heads x ``max_seqlen_qo``) fit the int32 arithmetic aiter does with them;
  prefill head ranges fit the 16-bit halves ``pack_dword`` packs
  ``q_head_range`` into (``csrc/include/ps.h``, aiter e4048607);
- the units aiter would plan (decode: batches after head folding, times query
  tokens when sparse; prefill: query tiles times KV heads) stay within
  :data:`UNITS_PER_WORK` times the works the golden recorded and the batches
  its inputs hold, plus :data:`UNITS_SLACK`. A real plan has a unit per work
  or fewer (an empty batch has none); a golden that asks for more than that
  asks the planner to write past the buffers it was recorded with, so its cost
  stays proportional to the golden's own size;
- the buffers it declares (which a replay allocates, twice) hold at most
  :data:`DECLARED_PER_STORED` times the elements the golden stores (inputs and
  written outputs) plus :data:`DECLARED_SLACK`, the bound loading holds them to: room for a caller's
  over-allocation (vLLM sizes for its largest batch), not for a 2^25-element
  declaration in a 49 KB file.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mla_golden.call import Call
from mla_golden.schema import MLA_OP, PS_OP, WORK_ROW

if TYPE_CHECKING:
    pass

#: Declared buffer elements a golden may have per element it stores, and on top (16 MB of int32): loading and
#: replay build every declared buffer, so a 49 KB file cannot ask for 2^25 elements.
DECLARED_PER_STORED = 64
DECLARED_SLACK = 1 << 22


def declared_bound(stored: int) -> int:
    """The most buffer elements a golden storing ``stored`` elements may declare (loading and replay build them):
    the golden's reader holds a file to it, and a replay or check the params it plans with."""
    return DECLARED_PER_STORED * stored + DECLARED_SLACK

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
#: Planned units allowed per recorded work and per input batch.
UNITS_PER_WORK = 16
#: Planned units allowed on top (a call that raised records no works).
UNITS_SLACK = 1 << 16


def problems(call: Call) -> list[str]:
    """What in ``call``'s parameters is beyond what aiter takes or can address; empty when it may be planned."""
    found = [
        f"params.{name} = {value} is outside int32 ({INT32_MIN}..{INT32_MAX}), the type aiter's binding takes"
        for name, value in sorted(call.params.items())
        if isinstance(value, int) and not isinstance(value, bool) and not INT32_MIN <= value <= INT32_MAX
    ]
    found += _head_problems(call)
    if found:
        return found
    declared = sum(math.prod(spec["shape"]) for spec in call.buffers.values())
    from mla_golden.tensors import count_true

    stored = sum(t.numel() for t in call.inputs.values()) + sum(count_true(m) for m in call.written.values())
    if declared > declared_bound(stored):
        found.append(
            f"buffers declare {declared} elements for {stored} stored (inputs and written outputs): more than the "
            f"{declared_bound(stored)} a golden storing that much may declare"
        )
        return found
    units = planned_units(call)
    budget = UNITS_PER_WORK * (_recorded_works(call) + _batches(call)) + UNITS_SLACK
    if units is not None and units > budget:
        found.append(
            f"these params make aiter plan {units} units (batches after head folding, or query tiles x KV heads) "
            f"for {_batches(call)} batch(es) and {_recorded_works(call)} recorded work(s): more than the "
            f"{budget} such a golden can hold (heads or query lengths out of any real range?)"
        )
    return found


def _head_problems(call: Call) -> list[str]:
    p = call.params
    if call.op == PS_OP:
        heads, gran = p.get("num_heads_k"), p.get("qhead_granularity", 1)
        if isinstance(heads, int) and isinstance(gran, int) and heads * gran > 0xFFFF:
            return [f"num_heads_k x qhead_granularity = {heads * gran}: q_head_range keeps head indices in 16 bits"]
        return []
    if call.op != MLA_OP:
        return []
    per_kv, kv_heads = p.get("num_heads_per_head_k"), p.get("num_heads_k")
    if not (isinstance(per_kv, int) and isinstance(kv_heads, int)):
        return []
    heads, qo, declared = per_kv * kv_heads, _ints(call, "seqlens_qo_indptr", 2, last=True), p.get("max_seqlen_qo", -1)
    tokens = max(qo[-1] if qo else 0, declared if isinstance(declared, int) else -1, 1)
    if heads * tokens > INT32_MAX:
        return [f"{heads} query heads x {tokens} query tokens = {heads * tokens} rows: past the int32 aiter plans them in"]
    return []


def planned_units(call: Call) -> int | None:
    """How many units aiter's planner walks for ``call`` (None when it would not plan at all)."""
    if call.op == PS_OP:
        q_gran, heads = call.params.get("qlen_granularity"), call.params.get("num_heads_k")
        if not (isinstance(q_gran, int) and isinstance(heads, int) and q_gran > 0 and heads > 0):
            return None
        return heads * _query_tiles(call, q_gran)
    if call.op != MLA_OP:
        return None
    return _decode_units(call, _ints(call, "seqlens_qo_indptr", 2))


def _query_tiles(call: Call, q_gran: int) -> int:
    """Query tiles of ``q_gran`` rows over the batches seqlens_qo_indptr gives (the batches with queries)."""
    import numpy as np

    from mla_golden.tensors import NARROW_INTS

    tensor = call.inputs.get("seqlens_qo_indptr")
    if tensor is None or tensor.numel() < 2:
        return 0
    if tensor.dtype not in NARROW_INTS:  # wider (or not integers): as Python numbers, which cannot overflow
        qo = tensor.reshape(-1).tolist()
        return sum(-(-(b - a) // q_gran) for a, b in zip(qo, qo[1:]) if b > a)
    values = tensor.reshape(-1).cpu().numpy().astype(np.int64)  # in numpy: a Python step per batch cost 25 ms at 62,500
    lens = values[1:] - values[:-1]
    return int(((lens[lens > 0] + q_gran - 1) // q_gran).sum())


def _decode_units(call: Call, qo: list[int]) -> int | None:
    """Batches aiter's decode dispatch plans (after head folding; per query token when sparse)."""
    from mla_golden.context import as_recorded
    from mla_golden.planner_id import rules_version
    from mla_golden.reference.layout import decode_layout

    try:
        with as_recorded(call):
            layout = decode_layout(call.inputs, call.params, _numel(call, "reduce_indptr"), rules_version(call.provenance).features)
    except Exception:  # noqa: BLE001 - aiter refuses these inputs: the planner says why, at no cost
        return None
    batches = layout.dispatch.params.num_batches
    return batches * (qo[1] - qo[0]) if layout.is_sparse and len(qo) > 1 else batches


def _numel(call: Call, name: str) -> int:
    spec = call.buffers.get(name)
    return math.prod(spec["shape"]) if spec is not None else 0


def _ints(call: Call, name: str, first: int | None = None, *, last: bool = False) -> list[int]:
    """Input ``name`` flat (its ``first`` elements only, and with ``last`` its last one too: what is read of it)."""
    tensor = call.inputs.get(name)
    if tensor is None:
        return []
    flat = tensor.reshape(-1)
    if first is None or flat.numel() <= first + 1:
        return flat.tolist()
    return [*flat[:first].tolist(), *(flat[-1:].tolist() if last else [])]


def _batches(call: Call) -> int:
    tensor = call.inputs.get("seqlens_qo_indptr")
    return max((0 if tensor is None else tensor.numel()) - 1, 0)


def _recorded_works(call: Call) -> int:
    from mla_golden.tensors import count_true, rows_written

    written = call.written.get("work_info_set")
    if written is None or written.numel() % WORK_ROW:
        return 0
    return count_true(rows_written(written))


