"""Intercept planner calls wherever a builder reaches them.

A builder may call ``aiter.get_mla_metadata_v1`` or a name it bound at import
time (``from aiter import get_mla_metadata_v1``). ``spy()`` therefore replaces
the function object in every loaded module that holds it, and puts the
original back in every place holding the wrapper on exit (aliases made while
spying included). :mod:`mla_golden.capture.aliases` finds those places without
rescanning modules that did not change since the last spy.

Spies nest and may overlap across threads: one wrapper per planner is
installed while any spy wants it; each call is captured once and handed to
every active spy that asked for that planner. aiter's and the reference's
planners are wrapped too while a spy is active, so that a call made through a
program's own wrapper is recorded where aiter's signature applies: with the
values the wrapper passed on, not the defaults its signature shows.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mla_golden import reference
from mla_golden.binding import bind, parameter_roles, signature_of
from mla_golden.call import Call, Calls
from mla_golden.capture.aliases import INDEX, scannable
from mla_golden.capture.canary import LiveCapture, NotRecorded, unrecordable
from mla_golden.context import backend_of
from mla_golden.errors import NothingToIntercept
from mla_golden.golden.rules import check_call
from mla_golden.schema import SCHEMAS

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


@dataclass
class _Frame:
    """An intercepted call in progress on this thread."""

    #: The spies that take what this call records, or any planner call it reaches.
    takers: list["Spy"]
    #: Whether it reached another intercepted planner (which then recorded the call).
    reached: bool = False
    #: Whether its probes are running (their planner calls are not the program's).
    probing: bool = False


class _Local(threading.local):
    """Per-thread state, typed: each thread's ``frames`` list is made on its first use."""

    frames: list[_Frame]


_local = _Local()


def _frames() -> list[_Frame]:
    """This thread's intercepted calls in progress, innermost last."""
    try:
        return _local.frames
    except AttributeError:
        _local.frames = []
        return _local.frames


def _takers(original: Callable[..., Any], frames: list[_Frame]) -> list["Spy"]:
    """Spies that want this call of ``original``, each once: its own, and those of the call it runs inside."""
    with _lock:
        found = {id(spy): spy for spy, _, wanted in _entries if id(original) in wanted}
    if frames:
        found.update((id(spy), spy) for spy in frames[-1].takers)
    return list(found.values())


def _miss(takers: list["Spy"], op: str, reason: str) -> None:
    """A call passed to the planner untouched but not recorded: listed in every taker's ``missed``, and warned."""
    message = f"a {op} call was not recorded: {reason}"
    warnings.warn(f"mla-golden: {message}", stacklevel=3)
    for spy in takers:
        spy.calls.missed.append(message)


def _reason_unbindable(op: str, original: Callable[..., Any], sig: inspect.Signature) -> str | None:
    """Why binding a call by ``original``'s own signature would not show what the planner receives (None: it would).

    A function taking ``**kwargs`` / ``*args`` or parameters aiter's planner
    lacks is a wrapper: what it forwards, and with which values, is not in its
    signature, so defaults read from it could be values the program never used.
    """
    schema = SCHEMAS[op]
    roles = parameter_roles(schema, sig)
    foreign = [n for n, (_, kind) in roles.items() if kind is None and n not in schema.dtype_aliases]
    if len(roles) == len(sig.parameters) and not foreign:
        return None
    where = f"{getattr(original, '__qualname__', original)!s}{sig}"
    variadic = [p for p in sig.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if variadic:
        star = "**" if variadic[0].kind is inspect.Parameter.VAR_KEYWORD else "*"
        return f"{where} takes {star}{variadic[0].name}"
    return f"{where} has parameter(s) aiter's {op} lacks ({', '.join(foreign)})"


def _prepare(
    op: str, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[LiveCapture | None, str]:
    """A capture of this call by ``original``'s own signature, or None and why it cannot be one.

    TypeError: the arguments do not fit ``original`` (it will say so itself).
    """
    sig = signature_of(original, SCHEMAS[op])
    wrapper = _reason_unbindable(op, original, sig)
    if wrapper and backend_of(original) == "aiter":
        # aiter's own planner behind an opaque signature: compile_ops wraps the compiled op in a
        # (*args, **kwargs) function without __wrapped__ (aiter/jit/utils/torch_guard.py, 620287969c and
        # e4048607). Its parameters are aiter's, with aiter's defaults: bind on aiter's signature.
        aiter = inspect.signature(getattr(reference, op))
        try:
            bound = bind(op, original, args, kwargs, aiter)
        except (TypeError, ValueError) as exc:
            return None, f"{wrapper}: the call does not fit aiter's {op} by name and position ({exc})"
        sig = aiter
    elif wrapper:
        sig.bind(*args, **kwargs)  # TypeError when the call does not fit the wrapper itself
        return None, (
            f"{wrapper} and reached no planner mla-golden intercepts, so it cannot tell the values the planner "
            f"received from defaults (spy the module the wrapper calls too, e.g. spy(aiter))"
        )
    else:
        try:
            bound = bind(op, original, args, kwargs, sig)
        except TypeError as exc:
            sig.bind(*args, **kwargs)  # TypeError when the call does not fit the planner itself
            return None, str(exc)  # it fits, but lacks what a golden needs (an output buffer)
        except ValueError as exc:
            return None, str(exc)
    reason = unrecordable(bound)
    if reason:
        return None, reason
    try:
        return LiveCapture(op, original, bound, sig), ""
    except NotRecorded as exc:
        return None, exc.reason


def _hand(takers: list["Spy"], op: str, call: Call) -> None:
    """A captured call to every taker, or listed as missed when a golden could not hold it as made.

    The outputs are not re-checked: the capture built them from the buffers it recorded (values only where written).
    """
    problems = check_call(call, "call", outputs=False)
    if problems:
        _miss(takers, op, "; ".join(problems))
        return
    for spy in takers:
        spy.calls.append(call)


def _make_wrapper(op: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The function spies put in place of ``original``.

    Each call is a frame on this thread's stack. A planner call reached
    inside it (a wrapper forwarding to aiter's planner) is recorded there,
    where aiter's own signature applies, and the outer call is not recorded
    again; a call that reaches none is recorded by its own signature when that
    shows everything the planner receives, and missed loudly otherwise.
    """

    # The reference is mla-golden's own port of a C++ op: its frames (the planner's source, the caller's
    # uninitialised buffers as arguments) tell the caller nothing, so its errors surface at the caller's call.
    own_frames = backend_of(original) == "reference"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        frames = _frames()
        if frames and frames[-1].probing:  # a probe run of an enclosing capture, not the program's call
            return original(*args, **kwargs)
        takers = _takers(original, frames)
        if not takers:  # an alias kept outside any module outlived its spy: no capture cost
            return original(*args, **kwargs)
        if frames:
            frames[-1].reached = True
        try:
            live, reason = _prepare(op, original, args, kwargs)
        except TypeError:
            return original(*args, **kwargs)  # the arguments do not fit: let the planner say so
        frame = _Frame(takers)
        frames.append(frame)
        try:
            result = original(*args, **kwargs)
        except Exception as exc:
            if not frame.reached:
                if live is None:
                    _miss(takers, op, reason)
                else:
                    _hand(takers, op, live.failed(exc))
            raise exc.with_traceback(None) if own_frames else exc  # noqa: B904 - the program's own error, unchained
        finally:
            frames.pop()
        if frame.reached:
            return result
        if live is None:
            _miss(takers, op, reason)
            return result
        frame.probing = True
        frames.append(frame)
        try:
            call = live.finish(args, kwargs)
        except NotRecorded as missed:
            _miss(takers, op, missed.reason)
            return result
        finally:
            frames.pop()
        _hand(takers, op, call)
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
    would pass every test). A target that is a wrapper is followed to the
    planner it calls (aiter's or the reference's), where the call is recorded
    as the planner received it. A call that cannot be recorded so is passed to
    the planner untouched, listed with the reason in ``self.missed`` (also
    ``self.calls.missed``) and warned about.
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
            # The planners a wrapper among the targets may forward to: their calls are recorded for this spy
            # only inside a call of its targets (see _make_wrapper).
            inner, inner_modules = _resolve(_forward_targets())
            installed = {**inner, **originals}
            modules += [m for m in inner_modules if all(m is not t for t in modules)]
            for original, op in installed.items():
                entry = _installed.get(original)
                if entry is None:
                    if original not in _wrappers:
                        _wrappers[original] = _make_wrapper(op, original)
                    entry = [_wrappers[original], op, 0]
                    _installed[original] = entry
                entry[2] += 1
            for module, name, original in INDEX.holders(installed, modules):
                setattr(module, name, _installed[original][0])
            token = object()
            self._stack.append((token, installed, modules))
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


def _forward_targets() -> list[ModuleType]:
    """Modules holding planners with aiter's own signature: aiter when loaded (never imported here), the reference."""
    loaded = sys.modules.get("aiter")
    return [reference] + ([loaded] if isinstance(loaded, ModuleType) and scannable(loaded) else [])


def spy(*targets: ModuleType | str) -> Spy:
    """Intercept planner calls inside a ``with`` block (or a decorated function).

    >>> with mla_golden.spy(aiter) as s:
    ...     builder.build(...)
    >>> call = s.calls.one("get_mla_metadata_v1")
    """
    return Spy(*targets)
