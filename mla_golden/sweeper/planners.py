"""Planner specs: which planner a sweep side runs, for which device, under which env.

Notation (``docs/cli.md``, "mla-golden sweep")::

    BACKEND[@VERSION][:ARCH[:CU]][+ENV=VAL...]

``BACKEND`` is ``reference`` (mla-golden's CPU port), ``aiter`` (the live
library) or ``python:MODULE[:ATTR]`` (a plug-in planner object; any backend
:func:`mla_golden.backends.parse_spec` knows, ``:`` in it included); ``@VERSION`` picks a ported aiter planner version of the reference
(``reference@aded0f84``; without it, the newest port); ``:ARCH[:CU]`` plans
every case for that device instead of the case's own (the CU count defaults to
the arch's full part; only an arch name, ``gfx`` and digits, starts it, so
``python:pkg.mod:planners:gfx950`` plans the plug-in for gfx950); each ``+NAME=VALUE`` pins a planner env var for every
case (``unset`` unsets it). Examples: ``reference@e4048607:gfx942:80``,
``reference+AITER_MLA_META_USE_PARALLEL=0``, ``aiter``.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mla_golden.cases import arch_problem
from mla_golden.errors import BackendError, SpecError
from mla_golden.reference import FULL_PART_CUS
from mla_golden.schema import ENV_VARS

if TYPE_CHECKING:
    from mla_golden.backends import Backend

UNSET = "unset"

#: What follows ``BACKEND[@VERSION]`` (that part is :func:`mla_golden.backends.parse_spec`'s): the
#: device, recognised only as an arch name, and the env pins.
_OVERRIDES_RE = re.compile(
    r"(?::(?P<arch>gfx[0-9][0-9a-z]*)(?::(?P<cu>[0-9]+))?)?"
    r"(?P<env>(?:\+[A-Z_][A-Z0-9_]*=[A-Za-z0-9._-]*)*)$"
)
_SPEC_FORM = "BACKEND[@VERSION][:ARCH[:CU]][+ENV=VALUE...], e.g. reference@e4048607:gfx942:80"


@dataclass(frozen=True)
class PlannerSpec:
    """One side of a sweep, as written on the command line."""

    backend: str
    version: str | None = None
    arch: str | None = None
    cu_num: int | None = None
    #: Pinned planner env vars (None = unset), in the order given.
    env: tuple[tuple[str, str | None], ...] = ()
    #: The backend part as written, when it is more than ``BACKEND[@VERSION]`` (``python:pkg.mod:planners``).
    written: str | None = None

    @property
    def backend_spec(self) -> str:
        """The ``BACKEND[@VERSION]`` part, as :func:`mla_golden.backends.resolve` takes it."""
        from mla_golden.backends import VERSION_SEP

        if self.written is not None:
            return self.written
        return self.backend + (f"{VERSION_SEP}{self.version}" if self.version else "")

    def __str__(self) -> str:
        text = self.backend_spec
        if self.arch:
            text += f":{self.arch}" + (f":{self.cu_num}" if self.cu_num else "")
        return text + "".join(f"+{k}={UNSET if v is None else v}" for k, v in self.env)

    def device_for(self, arch: str, cu_num: int) -> tuple[str, int]:
        """The device a case planned for (arch, cu_num) runs on under this spec."""
        if self.arch is None:
            return arch, cu_num
        return self.arch, self.cu_num or FULL_PART_CUS.get(self.arch, cu_num)


def parse_planner_spec(text: str) -> PlannerSpec:
    """``reference@e4048607:gfx942:80+AITER_MLA_META_USE_PARALLEL=0`` -> PlannerSpec; SpecError otherwise.

    A whole sweep side; its ``BACKEND[@VERSION]`` part is :func:`mla_golden.backends.parse_spec`'s.
    """
    from mla_golden.backends import NAMES, VERSION_SEP
    from mla_golden.backends import parse_spec as parse_backend

    stripped = text.strip()
    match = _OVERRIDES_RE.search(stripped)
    assert match is not None  # every part of the pattern may be empty
    head = stripped[: match.start()]
    try:
        backend, version = parse_backend(head)
    except BackendError as exc:
        form = f"; expected {_SPEC_FORM}" if ":" in head else ""  # a device that is no arch name reads as part of the backend
        raise SpecError(f"planner {text!r}: {exc}{form}") from exc
    if backend == "auto":
        named = ", ".join(n for n in NAMES if n != "auto")
        raise SpecError(f"planner {text!r}: a sweep side names its planner ({named}), not auto")
    cu = match.group("cu")
    if version == "" or (cu is not None and cu.startswith("0")):  # no version after '@'; a CU count of 0 or 08
        raise SpecError(f"planner {text!r}: expected {_SPEC_FORM}")
    arch = match.group("arch")
    problem = None if arch is None else arch_problem(arch)
    if problem is not None:  # with or without a CU count: every case would plan into the same arch error
        raise SpecError(f"planner {text!r}: {problem}")
    env: list[tuple[str, str | None]] = []
    for item in filter(None, match.group("env").split("+")):
        name, _, value = item.partition("=")
        if name not in ENV_VARS:
            raise SpecError(f"planner {text!r}: {name} is not a planner env var (known: {', '.join(ENV_VARS)})")
        env.append((name, None if value == UNSET else value))
    plain = backend + (f"{VERSION_SEP}{version}" if version else "")
    written = None if head.strip() == plain else head.strip()
    return PlannerSpec(backend, version if written is None else None, arch, int(cu) if cu else None, tuple(env), written)


@dataclass(frozen=True)
class Parameters:
    """A function's parameter names, and whether it takes ``*args`` / ``**kwargs`` (then it receives any)."""

    names: frozenset[str]
    variadic: bool


@dataclass
class Planner:
    """A resolved spec: the backend whose functions plan, and how a sweep plans with it."""

    spec: PlannerSpec
    backend: Backend
    _functions: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)
    _parameters: dict[str, Parameters] = field(default_factory=dict, repr=False)
    #: How each (op, params) binds to this planner's signature (evaluate._arguments).
    bindings: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False)

    @property
    def module(self) -> Any:
        """The module whose functions plan (``reference.at(VERSION)``, live aiter)."""
        return self.backend.module

    @property
    def label(self) -> str:
        """What actually runs (e.g. "reference e4048607 (the newest port)", "live aiter (0.1.20)")."""
        version = self.backend.version
        if version is None:
            return self.backend.reason
        if self.backend.asked:
            return f"reference {version.name}, as aiter {self.backend.asked[:10]} plans"
        return f"reference {version.name}" + ("" if self.backend.pinned else " (the newest port)")

    @property
    def portable(self) -> PlannerSpec:
        """The spec that gives this planner again without an aiter clone (what workers resolve):
        ``reference@COMMIT`` as the port it plans as, ``aiter-src@REV`` as the folder it was extracted to."""
        backend_spec = self.backend.spec
        return self.spec if backend_spec == self.spec.backend_spec else replace(self.spec, version=None, written=backend_spec)

    @property
    def tensor_device(self) -> str:
        return self.backend.tensor_device

    def function(self, name: str) -> Callable[..., Any]:
        fn = self._functions.get(name)
        if fn is None:
            fn = getattr(self.module, name, None)
            if not callable(fn):
                raise SpecError(f"planner {self.spec}: {self.label} has no {name}")
            self._functions[name] = fn
        return fn

    def parameters(self, fn: Callable[..., Any]) -> Parameters:
        """The parameters of one of this planner's functions (cached: inspect is slow on the hot path)."""
        key = f"params:{getattr(fn, '__name__', id(fn))}"
        found = self._parameters.get(key)
        if found is None:
            parameters = inspect.signature(fn).parameters.values()
            variadic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)
            found = self._parameters[key] = Parameters(frozenset(p.name for p in parameters), variadic)
        return found

    def device_context(self, device: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
        """Plan for ``device`` inside the block: the reference's device context; live aiter plans for its GPU."""
        if not self.backend.plans_any_device:
            return contextlib.nullcontext()
        from mla_golden.context import plan_for

        return plan_for(device)

    def plans_for_now(self, device: Mapping[str, Any]) -> bool:
        """Is ``device`` what this planner plans for already (so no device context is needed)?"""
        if not self.backend.plans_any_device:
            return True
        from mla_golden.reference import current_device

        now = current_device()
        return (now.arch, now.cu_num) == (device["arch"], device["cu_num"])

    def env_for(self, env: Mapping[str, str | None]) -> dict[str, str | None]:
        """A case's env with this spec's pins applied."""
        merged = dict(env)
        merged.update(self.spec.env)
        return merged

    def live_device(self) -> tuple[str, int] | None:
        """(arch, cu_num) live aiter plans for; None for the reference (it plans for any device)."""
        return self.backend.live_device()


def resolve_planner(spec: PlannerSpec | str, aiter_repo: str | None = None) -> Planner:
    """The planner a spec names (:func:`mla_golden.backends.resolve` of its backend, ``aiter_repo`` the aiter
    clone ``aiter-src@REV`` and ``reference@COMMIT`` read); SpecError when it cannot run here."""
    from mla_golden.backends import resolve as resolve_backend

    spec = parse_planner_spec(spec) if isinstance(spec, str) else spec
    try:
        backend = resolve_backend(spec.backend_spec, aiter_repo=aiter_repo)
    except BackendError as exc:
        raise SpecError(f"planner {spec}: {exc}") from exc
    return Planner(spec, backend)
