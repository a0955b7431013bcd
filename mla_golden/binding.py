"""A planner call bound to its op's schema, both ways: live arguments to canonical names, canonical to a signature.

A live call is bound with ``inspect.signature`` of the function actually
called and normalised to canonical names (:func:`bind`), so calls made
through any historical signature compare equal. Replaying on another
signature goes the other way (:func:`build_arguments`) and says what it had
to adapt.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from mla_golden.errors import AdaptationError
from mla_golden.schema import OUTPUTS, OpSchema, dtype_name, schema_for, to_dtype


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
    arguments = bound_arguments(sig, args, kwargs)
    inputs: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    named: dict[str, Any] = {}
    unknown: list[str] = []
    roles = parameter_roles(schema, sig)
    for name, value in arguments.items():
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


#: id(signature) -> (signature, its parameter names, their defaults), for signatures whose parameters are all
#: positional-or-keyword: bounded like _ROLES.
_PLAIN: dict[int, tuple[inspect.Signature, tuple[str, ...], tuple[Any, ...]]] = {}


def bound_arguments(sig: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``sig.bind(*args, **kwargs)`` with its defaults applied, by name in the signature's order.

    A call that fits a signature of plain parameters is bound directly: inspect's
    general binding is a fifth of a capture's own cost on a decode call. Any
    other call (one that does not fit included: TypeError) goes through inspect.
    """
    plain = _PLAIN.get(id(sig))
    if plain is None or plain[0] is not sig:
        kinds = {p.kind for p in sig.parameters.values()}
        names = tuple(sig.parameters)
        plain = (sig, names, tuple(p.default for p in sig.parameters.values()))
        if kinds - {inspect.Parameter.POSITIONAL_OR_KEYWORD}:
            plain = (sig, (), ())
        if len(_PLAIN) >= 256:
            _PLAIN.clear()
        _PLAIN[id(sig)] = plain
    _, names, defaults = plain
    given = len(args)
    if names and given <= len(names) and all(k in names[given:] for k in kwargs):
        arguments = dict(zip(names, args))
        for name, default in zip(names[given:], defaults[given:]):
            arguments[name] = kwargs.get(name, default)
        if all(v is not inspect.Parameter.empty for v in arguments.values()):
            return arguments
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


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
    return {name: _value(schema, schema.canonical(name), params, inputs, buffers) for name in schema.signature}


def _value(
    schema: OpSchema, canonical: str, params: Mapping[str, Any], inputs: Mapping[str, torch.Tensor], buffers: Mapping[str, torch.Tensor]
) -> Any:
    """A canonical call's value of ``canonical``: its input tensor, its output buffer, or its scalar (the schema's
    default when the call has none; a dtype name as the torch dtype aiter takes)."""
    kind = schema.kind(canonical)
    if kind == "input":
        return inputs[canonical]
    if kind == "output":
        return buffers[canonical]
    value = params.get(canonical, schema.scalars[canonical])
    return to_dtype(value) if canonical in schema.dtype_params else value


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
        if schema.kind(canonical) in ("input", "output", "scalar"):
            kwargs[name] = _value(schema, canonical, params, inputs, buffers)
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
    notes += _dropped(schema, carried, params, inputs)
    return Arguments((), kwargs, notes)


def _dropped(schema: OpSchema, carried: set[str], params: Mapping[str, Any], inputs: Mapping[str, torch.Tensor]) -> list[str]:
    """Notes for the canonical values a signature cannot receive, each holding what that signature implies;
    AdaptationError for one holding anything else (the call could not be made as recorded)."""
    notes = []
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
    return notes


def _stars(variadic: Mapping[Any, str]) -> str:
    """``*args, **kwargs``: the variadic parameters as the signature writes them."""
    stars = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return ", ".join(stars[kind] + name for kind, name in variadic.items())
