"""Intercept planner calls wherever a builder reaches them.

A builder may call ``aiter.get_mla_metadata_v1`` or a name it bound at import
time (``from aiter import get_mla_metadata_v1``). ``spy()`` therefore replaces
the function object in every loaded module that holds it, and puts the
original back in every place holding the wrapper on exit (aliases made while
spying included). :mod:`mla_golden.aliases` finds those places without
rescanning modules that did not change since the last spy.

Spies nest and may overlap across threads: one wrapper per planner is
installed while any spy wants it; each call is captured once and handed to
every active spy that asked for that planner.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import threading
import warnings
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from mla_golden import reference
from mla_golden.aliases import INDEX
from mla_golden.call import Calls
from mla_golden.capture import NotRecorded, capture_live, unrecordable
from mla_golden.context import backend_of
from mla_golden.errors import NothingToIntercept
from mla_golden.golden_format import check_call
from mla_golden.schema import SCHEMAS, BoundCall, bind, signature_of

_WRAPPED = "__mla_golden_original__"
_lock = threading.RLock()
#: original function -> [wrapper, op, number of active spy entries wanting it]
_installed: dict[Callable[..., Any], list[Any]] = {}
#: original function -> its wrapper, kept for the process: the alias index then watches a fixed set of objects
_wrappers: dict[Callable[..., Any], Callable[..., Any]] = {}
#: active spy entries: (spy, entry token, ids of the originals it wants); a spy re-entered has several
_entries: list[tuple["Spy", object, frozenset[int]]] = []


def _original(fn: Any) -> Any:
    return getattr(fn, _WRAPPED, fn)


def _takers(original: Callable[..., Any]) -> list["Spy"]:
    """Active spies that want calls of ``original``, each once (however often it was entered)."""
    with _lock:
        return list({id(spy): spy for spy, _, wanted in _entries if id(original) in wanted}.values())


def _miss(takers: list["Spy"], op: str, reason: str) -> None:
    """A call passed to the planner untouched but not recorded: listed in every taker's ``missed``, and warned."""
    message = f"a {op} call was not recorded: {reason}"
    warnings.warn(f"mla-golden: {message}", stacklevel=3)
    for spy in takers:
        spy.calls.missed.append(message)


def _bind(op: str, original: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[BoundCall, inspect.Signature]:
    """Bind by the planner's own parameter names, or by position on aiter's signature when it has none of them.

    TypeError: the arguments do not fit (the planner will say so itself).
    NotRecorded: they may fit the planner but cannot be read as aiter's.
    """
    schema = SCHEMAS[op]
    sig = signature_of(original, schema)
    try:
        return bind(op, original, args, kwargs, sig), sig
    except TypeError as own:
        sig.bind(*args, **kwargs)  # TypeError when the call does not fit the planner itself: it will say so
        named = [n for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if named and all(schema.kind(schema.canonical(n)) or n in schema.dtype_aliases for n in named):
            raise NotRecorded(f"its arguments fit the planner but not mla-golden's reading of them ({own})") from own
    aiter = inspect.signature(getattr(reference, op))
    try:
        return bind(op, original, args, kwargs, aiter), aiter
    except TypeError as exc:
        raise NotRecorded(
            f"{getattr(original, '__qualname__', original)!s} does not use aiter's parameter names and its "
            f"{len(args)} positional / {len(kwargs)} keyword argument(s) do not fit aiter's {op} by position ({exc})"
        ) from exc


def _make_wrapper(op: str, original: Callable[..., Any]) -> Callable[..., Any]:
    # The reference is mla-golden's own port of a C++ op: its frames (the planner's source, the caller's
    # uninitialised buffers as arguments) tell the caller nothing, so its errors surface at the caller's call.
    own_frames = backend_of(original) == "reference"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        takers = _takers(original)
        if not takers:  # an alias kept outside any module outlived its spy: no capture cost
            return original(*args, **kwargs)
        try:
            bound, sig = _bind(op, original, args, kwargs)
            reason = unrecordable(bound)
            if reason:
                raise NotRecorded(reason)
            call, result, exc = capture_live(op, original, bound, args, kwargs, sig)
        except TypeError:
            return original(*args, **kwargs)  # the arguments do not fit: let the planner say so
        except (ValueError, NotRecorded) as missed:  # fits, but cannot be recorded as made: never silently
            _miss(takers, op, str(missed))
            if not isinstance(missed, NotRecorded) or not missed.ran:
                return original(*args, **kwargs)
            return missed.result
        problems = check_call(call, "call")
        if problems:  # a golden could not hold it as made
            _miss(takers, op, "; ".join(problems))
        else:
            for spy in takers:
                spy.calls.append(call)
        if exc is not None:
            raise exc.with_traceback(None) if own_frames else exc
        return result

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attr, getattr(original, attr, None))
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]  # inspect.signature follows it
    setattr(wrapper, _WRAPPED, original)
    return wrapper


def _resolve(targets: Iterable[ModuleType | str]) -> tuple[dict[Callable[..., Any], str], list[ModuleType]]:
    """Planner functions (originals) reachable from ``targets`` with their op, and the target modules."""
    found: dict[Callable[..., Any], str] = {}
    modules: list[ModuleType] = []
    for target in targets:
        if isinstance(target, str):
            try:
                module = importlib.import_module(target)
            except ImportError:
                continue  # aiter absent: nothing to intercept there
        else:
            module = target
        modules.append(module)
        for op in SCHEMAS:
            fn = getattr(module, op, None)
            if callable(fn):
                found[_original(fn)] = op
    return found, modules


class Spy(contextlib.ContextDecorator):
    """Capture every planner call made inside the block into ``self.calls``.

    ``targets``: modules (or module names) whose planner functions to
    intercept, with every alias of them; default ``aiter``. Finding no
    planner there raises :class:`NothingToIntercept` (a spy that sees nothing
    would pass every test). A call that cannot be recorded as the program
    made it is passed to the planner untouched, listed with the reason in
    ``self.missed`` (also ``self.calls.missed``) and warned about.
    """

    def __init__(self, *targets: ModuleType | str) -> None:
        self.targets = targets or ("aiter",)
        self.calls = Calls()
        #: one entry per __enter__ not yet exited: (token, originals, modules)
        self._stack: list[tuple[object, dict[Callable[..., Any], str], list[ModuleType]]] = []

    @property
    def missed(self) -> list[str]:
        """Calls made but not recorded, each with the reason."""
        return self.calls.missed

    def __enter__(self) -> "Spy":
        with _lock:
            originals, modules = _resolve(self.targets)
            if not originals:
                names = ", ".join(t if isinstance(t, str) else t.__name__ for t in self.targets)
                raise NothingToIntercept(
                    f"mla_golden.spy(): no get_mla_metadata_v1 / get_ps_metadata_v1 to intercept in {names} "
                    "(is aiter importable? without it, pass the planner module, e.g. spy(mla_golden.reference))"
                )
            for original, op in originals.items():
                entry = _installed.get(original)
                if entry is None:
                    if original not in _wrappers:
                        _wrappers[original] = _make_wrapper(op, original)
                    entry = [_wrappers[original], op, 0]
                    _installed[original] = entry
                entry[2] += 1
            for module, name, original in INDEX.holders(originals, modules):
                setattr(module, name, _installed[original][0])
            token = object()
            self._stack.append((token, originals, modules))
            _entries.append((self, token, frozenset(id(o) for o in originals)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _lock:
            token, originals, modules = self._stack.pop()
            _entries[:] = [e for e in _entries if e[1] is not token]
            unwrap = {}
            for original in originals:
                entry = _installed[original]
                entry[2] -= 1
                if entry[2] == 0:
                    unwrap[entry[0]] = original
                    del _installed[original]
            if unwrap:
                for module, name, wrapper in INDEX.holders(unwrap, modules):
                    setattr(module, name, unwrap[wrapper])


def spy(*targets: ModuleType | str) -> Spy:
    """Intercept planner calls inside a ``with`` block (or a decorated function).

    >>> with mla_golden.spy(aiter) as s:
    ...     builder.build(...)
    >>> call = s.calls.one("get_mla_metadata_v1")
    """
    return Spy(*targets)
