"""Intercept planner calls wherever a builder reaches them.

A builder may call ``aiter.get_mla_metadata_v1`` or a name it bound at import
time (``from aiter import get_mla_metadata_v1``). ``spy()`` therefore replaces
the function object in every loaded module that holds it, and puts the
original back in every place holding the wrapper on exit (aliases made while
spying included).

Spies nest and may overlap across threads: one wrapper per planner is
installed while any spy wants it; each call is captured once and handed to
every active spy that asked for that planner.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

from mla_golden.call import Calls
from mla_golden.capture import capture_live
from mla_golden.schema import SCHEMAS, bind

_WRAPPED = "__mla_golden_original__"
_lock = threading.RLock()
#: original function -> (wrapper, op, number of spies wanting it)
_installed: dict[Callable[..., Any], list[Any]] = {}
#: active spies and the originals each wants
_spies: list[tuple["Spy", frozenset[int]]] = []


def _original(fn: Any) -> Any:
    return getattr(fn, _WRAPPED, fn)


def _holders(target: Any, extra: Iterable[ModuleType] = ()) -> Iterator[tuple[ModuleType, str]]:
    """Every (module, attribute) that currently holds ``target``: loaded modules plus ``extra``."""
    modules = {id(m): m for m in [*sys.modules.values(), *extra]}
    for module in modules.values():
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if value is target:
                yield module, name


def _make_wrapper(op: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = bind(op, original, args, kwargs)
        except TypeError:
            return original(*args, **kwargs)  # let the planner report the bad call itself
        call, result, exc = capture_live(op, original, bound, args, kwargs)
        with _lock:
            takers = [spy for spy, wanted in _spies if id(original) in wanted]
        for spy in takers:
            spy.calls.append(call)
        if exc is not None:
            raise exc
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
        module = target
        if isinstance(target, str):
            try:
                module = importlib.import_module(target)
            except ImportError:
                continue  # aiter absent: nothing to intercept there
        modules.append(module)
        for op in SCHEMAS:
            fn = getattr(module, op, None)
            if callable(fn):
                found[_original(fn)] = op
    return found, modules


class Spy(contextlib.ContextDecorator):
    """Capture every planner call made inside the block into ``self.calls``.

    ``targets``: modules (or module names) whose planner functions to
    intercept, with every alias of them; default ``aiter`` when importable.
    """

    def __init__(self, *targets: ModuleType | str) -> None:
        self.targets = targets or ("aiter",)
        self.calls = Calls()
        self._originals: dict[Callable[..., Any], str] = {}
        self._modules: list[ModuleType] = []

    def __enter__(self) -> "Spy":
        with _lock:
            self._originals, self._modules = _resolve(self.targets)
            for original, op in self._originals.items():
                entry = _installed.get(original)
                if entry is None:
                    entry = [_make_wrapper(op, original), op, 0]
                    _installed[original] = entry
                entry[2] += 1
                for module, name in list(_holders(original, self._modules)):
                    setattr(module, name, entry[0])
            _spies.append((self, frozenset(id(o) for o in self._originals)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        with _lock:
            _spies[:] = [(s, w) for s, w in _spies if s is not self]
            for original in self._originals:
                entry = _installed[original]
                entry[2] -= 1
                if entry[2] == 0:
                    for module, name in list(_holders(entry[0], self._modules)):
                        setattr(module, name, original)
                    del _installed[original]
            self._originals = {}


def spy(*targets: ModuleType | str) -> Spy:
    """Intercept planner calls inside a ``with`` block (or a decorated function).

    >>> with mla_golden.spy() as s:
    ...     builder.build(...)
    >>> call = s.calls.one("get_mla_metadata_v1")
    """
    return Spy(*targets)
