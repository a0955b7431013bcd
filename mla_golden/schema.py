"""The op schema: the one place that knows the planner ops' parameters.

Every other module asks this one which arguments are input tensors, scalars
or output buffers, what each parameter was called in older aiter versions,
and what the columns of ``work_info_set`` mean.

aiter's signatures changed many times (parameters renamed, added, dtype
aliases split into nope/rope pairs). A live call is bound
with ``inspect.signature`` of the function actually called and normalised to
canonical names, so calls made through any historical signature compare
equal. Replaying on another signature goes the other way
(:func:`build_arguments`) and says what it had to adapt.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, NamedTuple

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


def format_cell(column: str, value: int) -> str:
    """A work_info_set value as reports show it; head ranges as ``[start, end)`` like every range."""
    if column == "q_head_range":
        start, end = head_range(value)
        return f"[{start}, {end})"
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
    #: by keyword. A planner taking ``*args`` / ``**kwargs`` is called this way (:func:`build_arguments`).
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


def _scalar(value: Any) -> Any:
    """A JSON-able form of a scalar argument: enums and numpy / 0-d tensor scalars become plain values."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return int(value)  # IntEnum -> plain int
    if hasattr(value, "value") and isinstance(value.value, int):
        return int(value.value)  # plain Enum such as aiter's MlaVersion
    item = getattr(value, "item", None)
    if callable(item):  # numpy scalar, one-element tensor
        try:
            plain = item()
        except (ValueError, RuntimeError) as exc:
            raise ValueError(f"expected a scalar argument, got {type(value).__name__} ({exc})") from exc
        if isinstance(plain, (bool, int, float)):
            return plain
    raise ValueError(f"unexpected scalar argument {value!r}")


@dataclass
class BoundCall:
    """A live call normalised to canonical names."""

    op: str
    params: dict[str, Any]
    inputs: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    #: The parameter names of the signature the call went through.
    signature: list[str]
    #: What normalisation had to assume (e.g. an input the signature lacks).
    notes: list[str]


#: Signatures by function: inspect.signature costs ~0.4 ms, paid per call on a sweep's hot path otherwise.
_SIGNATURES: weakref.WeakKeyDictionary[Callable[..., Any], inspect.Signature] = weakref.WeakKeyDictionary()


def signature_of(fn: Callable[..., Any], schema: OpSchema) -> inspect.Signature:
    """The live signature of ``fn``, or the e4048607 one when Python cannot tell."""
    try:
        return _SIGNATURES[fn]
    except (KeyError, TypeError):  # not seen yet, or not weak-referenceable
        pass
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        names = [*schema.inputs, *schema.scalars, *OUTPUTS]
        return inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names]
        )
    with contextlib.suppress(TypeError):
        _SIGNATURES[fn] = sig
    return sig


def canonical_params(op: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Scalar arguments (by any version's names) -> canonical params, and what had to be assumed.

    Legacy ``dtype_q`` / ``dtype_kv`` fill the nope and rope dtypes not given,
    as aiter's wrapper does; a scalar the signature lacks takes the value
    aiter assumes when it is absent. Tensor arguments are skipped.
    """
    schema = schema_for(op)
    params: dict[str, Any] = {}
    notes: list[str] = []
    for name, value in arguments.items():
        canonical = schema.canonical(name)
        if name in schema.dtype_aliases or schema.kind(canonical) != "scalar":
            continue
        params[canonical] = dtype_name(value) if canonical in schema.dtype_params else _scalar(value)
    for alias, targets in schema.dtype_aliases.items():
        if arguments.get(alias) is not None:
            for target in targets:
                if params.get(target) is None:
                    params[target] = dtype_name(arguments[alias])
    for name, default in schema.scalars.items():
        if name not in params:
            params[name] = default
            if default is not None or name not in schema.dtype_params:
                notes.append(f"{name} not in this signature; taken as {default!r}")
    return params, notes


def bind(
    op: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], sig: inspect.Signature | None = None
) -> BoundCall:
    """Normalise a call ``fn(*args, **kwargs)`` of ``op`` to canonical names.

    ``sig`` binds the arguments (default: ``fn``'s own signature). Raises
    TypeError when the arguments do not fit it (the real call would fail the
    same way).
    """
    schema = schema_for(op)
    sig = sig or signature_of(fn, schema)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    inputs: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    named: dict[str, Any] = {}
    unknown: list[str] = []
    roles = parameter_roles(schema, sig)
    for name, value in bound.arguments.items():
        if name not in roles:  # *args / **kwargs
            continue
        canonical, kind = roles[name]
        if kind == "input":
            inputs[canonical] = value
        elif kind == "output":
            buffers[canonical] = value
        elif kind == "scalar" or name in schema.dtype_aliases:
            named[name] = value
        else:
            unknown.append(f"parameter {name!r} is not in the {op} schema; ignored")
    params, notes = canonical_params(op, named)
    notes = unknown + notes
    for name in schema.inputs:
        if name not in inputs:
            inputs[name] = implied_input(schema, name, inputs)
            notes.append(f"{name} not in this signature; implied {schema.implied_inputs[name]}")
    missing = [n for n in OUTPUTS if n not in buffers]
    if missing:
        raise TypeError(f"{op}: signature of {fn!r} has no output buffer(s) {missing}")
    return BoundCall(op, params, inputs, buffers, list(sig.parameters), notes)


#: (op, id(signature)) -> (signature, its parameters' roles); bounded: a signature built per call must not grow it.
_ROLES: dict[tuple[str, int], tuple[inspect.Signature, dict[str, tuple[str, str | None]]]] = {}


def parameter_roles(schema: OpSchema, sig: inspect.Signature) -> dict[str, tuple[str, str | None]]:
    """Each non-variadic parameter of ``sig``: (canonical name, kind); worked out once per signature (do not modify)."""
    cached = _ROLES.get((schema.name, id(sig)))
    if cached is not None and cached[0] is sig:
        return cached[1]
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    roles = {
        name: (schema.canonical(name), schema.kind(schema.canonical(name)))
        for name, parameter in sig.parameters.items()
        if parameter.kind not in variadic
    }
    if len(_ROLES) >= 256:
        _ROLES.clear()
    _ROLES[(schema.name, id(sig))] = (sig, roles)
    return roles


def implied_input(schema: OpSchema, name: str, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The value of input ``name`` for a signature that lacks it (e.g. all-ones kv_last_page_lens)."""
    rule = schema.implied_inputs.get(name)
    if rule != "ones":
        raise TypeError(f"{schema.name}: required input {name!r} missing from the call")
    indptr = inputs[schema.inputs[0]]
    return torch.ones(max(indptr.numel() - 1, 0), dtype=torch.int32, device=indptr.device)


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Arguments(NamedTuple):
    """How to call a planner, ``fn(*args, **kwargs)``, and what had to be adapted to its signature."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    notes: list[str]


def as_aiter_callers_pass(
    sig: inspect.Signature,
    order: Sequence[str],
    positional: int,
    values: Mapping[str, Any],
    canonical: Callable[[str], str] = str,
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """``values`` (by aiter's names, ``order`` its signature's) as a caller of aiter passes them, when ``sig`` takes them.

    First as vLLM calls the planners (the first ``positional`` by position, the
    rest by keyword), then every one by position (a function taking only
    ``*args``). A position must land on ``*args`` or on a parameter of the same
    (``canonical``) name: a function of another order is not bound by position.
    None when neither way binds.
    """
    named = [name for name, p in sig.parameters.items() if p.kind in _POSITIONAL]
    tries = [positional]
    if all(name in values for name in order):
        tries.append(len(order))
    for count in tries:
        lead = list(order[:count])
        if not all(name in values for name in lead):
            continue
        if any(canonical(a) != canonical(b) for a, b in zip(named, lead)):
            continue
        args = tuple(values[name] for name in lead)
        kwargs = {name: values[name] for name in order[count:] if name in values}
        try:
            sig.bind(*args, **kwargs)
        except TypeError:
            continue
        return args, kwargs
    return None


def aiter_values(
    schema: OpSchema, params: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor]
) -> dict[str, Any]:
    """Every argument of a canonical call under the newest aiter signature's names (:attr:`OpSchema.signature`)."""
    values: dict[str, Any] = {}
    for name in schema.signature:
        canonical = schema.canonical(name)
        kind = schema.kind(canonical)
        if kind == "input":
            values[name] = inputs[canonical]
        elif kind == "output":
            values[name] = buffers[canonical]
        else:
            value = params.get(canonical, schema.scalars[canonical])
            values[name] = to_dtype(value) if canonical in schema.dtype_params else value
    return values


def build_arguments(
    op: str,
    fn: Callable[..., Any],
    params: Mapping[str, Any],
    inputs: Mapping[str, torch.Tensor],
    buffers: Mapping[str, torch.Tensor],
) -> Arguments:
    """The arguments calling ``fn`` with a canonical call, and the adaptations made.

    ``fn`` is bound as Python binds it: a planner taking ``*args`` or
    ``**kwargs`` receives every argument of the call, as aiter's callers pass
    them (:func:`as_aiter_callers_pass`), or its named parameters by name and
    the rest through ``**kwargs`` under aiter's names. A canonical value the
    signature cannot receive is dropped only when it equals what that
    signature implies; otherwise AdaptationError names it.
    """
    schema = schema_for(op)
    sig = signature_of(fn, schema)
    variadic = {p.kind: name for name, p in sig.parameters.items() if p.kind in _VARIADIC}
    if variadic:
        values = aiter_values(schema, params, inputs, buffers)
        passed = as_aiter_callers_pass(sig, schema.signature, schema.positional, values, schema.canonical)
        if passed is not None:
            how = f"{len(passed[0])} by position, {len(passed[1])} by keyword"
            return Arguments(*passed, [f"the planner takes {_stars(variadic)}: passed every argument as aiter's callers do ({how})"])
    names = set(sig.parameters)
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    carried: set[str] = set()
    for name, parameter in sig.parameters.items():
        if parameter.kind in _VARIADIC:
            continue
        if name in schema.dtype_aliases:
            nope, rope = schema.dtype_aliases[name]
            if nope in names:
                continue  # the per-component parameters carry them
            if params.get(nope) != params.get(rope):
                raise AdaptationError(
                    f"{name} cannot express {nope}={params.get(nope)} with {rope}={params.get(rope)}"
                )
            kwargs[name] = to_dtype(params.get(nope))
            carried.update((nope, rope))
            notes.append(f"{nope}/{rope} passed as legacy {name}")
            continue
        canonical = schema.canonical(name)
        kind = schema.kind(canonical)
        if kind == "input":
            kwargs[name] = inputs[canonical]
        elif kind == "output":
            kwargs[name] = buffers[canonical]
        elif kind == "scalar":
            value = params.get(canonical, schema.scalars[canonical])
            kwargs[name] = to_dtype(value) if canonical in schema.dtype_params else value
        elif parameter.default is inspect.Parameter.empty:
            raise AdaptationError(f"{fn!r} requires {name!r}, which the {op} schema does not know")
        else:
            notes.append(f"{name} is unknown to mla-golden; left at its default {parameter.default!r}")
            continue
        carried.add(canonical)
    if inspect.Parameter.VAR_KEYWORD in variadic:
        extra = {name: value for name, value in aiter_values(schema, params, inputs, buffers).items()
                 if schema.canonical(name) not in carried and name not in kwargs}  # fmt: skip
        if extra:
            kwargs.update(extra)
            carried.update(schema.canonical(name) for name in extra)
            notes.append(f"{', '.join(extra)} passed through **{variadic[inspect.Parameter.VAR_KEYWORD]}")
    for name in schema.inputs:
        if name not in carried:
            implied = implied_input(schema, name, inputs)
            if not torch.equal(inputs[name].cpu(), implied.cpu()):
                raise AdaptationError(f"this signature has no {name}; the call needs {name} other than its implied value")
            notes.append(f"{name} dropped: not in this signature (it held the implied {schema.implied_inputs[name]})")
    for name, implied in schema.scalars.items():
        if name in carried:
            continue
        if params.get(name) != implied:
            raise AdaptationError(
                f"this signature has no {name}; the call needs {name}={params.get(name)!r}, "
                f"which differs from the implied {implied!r}"
            )
        if implied is not None:
            notes.append(f"{name} dropped: not in this signature (it held the implied {implied!r})")
    return Arguments((), kwargs, notes)


def _stars(variadic: Mapping[Any, str]) -> str:
    """``*args, **kwargs``: the variadic parameters as the signature writes them."""
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return ", ".join(stars[kind] + name for kind, name in variadic.items())
