"""Which planner implementation a CLI run records from or replays on.

``aiter`` is the live library on a GPU; ``reference`` is mla-golden's CPU port
of it (the newest ported aiter version), ``reference@VERSION`` one older
version of that port (commit prefix, release tag or date); ``auto`` takes
aiter when it imports and can plan on this machine, and the reference
otherwise, and says why, so nobody mistakes a reference run for a hardware one.
``python:MODULE[:ATTR]`` plugs in any object with the four planner and sizing
functions in aiter's signatures (a module, ``mla_golden.reference.at(...)``, a
copy of the planner with a planted bug): it plans on CPU tensors for the
device of the reference's device context, as the reference does.

An unpinned reference replays each golden on the version that recorded it
(:meth:`Backend.for_golden`), so a golden recorded on an older aiter still
replays equal; ``reference@NEW`` replays every golden on NEW: an upgrade
preview.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mla_golden.call import Call
    from mla_golden.reference import PlannerVersion

from mla_golden.errors import BackendError
from mla_golden.schema import SCHEMAS

NAMES = ("auto", "aiter", "reference", "python")
#: Separates a backend from the version it is pinned to: ``reference@aded0f84``.
VERSION_SEP = "@"
#: Separates the ``python`` backend from what it plugs in: ``python:pkg.mod:planners``.
TARGET_SEP = ":"
#: Backends planning on the CPU for the reference's device context (any device).
_ANY_DEVICE = ("reference", "python")
#: Buffer-sizing helper of each planner op.
SIZERS = {op: schema.sizer for op, schema in SCHEMAS.items()}


@dataclass(frozen=True)
class Backend:
    """A planner module and how to plan with it."""

    name: str
    #: The planner module (aiter, ``mla_golden.reference``) or a reference version's module-like object.
    module: Any
    #: Why this backend was chosen (for ``auto``) or where it comes from.
    reason: str
    #: torch device the planner's tensors live on.
    tensor_device: str
    #: The reference version it plans as (None for aiter).
    version: PlannerVersion | None = None
    #: The version was asked for (``reference@VERSION``): replays never switch to the recording version.
    pinned: bool = False
    #: What a ``python`` backend plugs in (``MODULE[:ATTR]``).
    target: str | None = None

    @property
    def spec(self) -> str:
        """What ``resolve`` takes to give this backend again (in a worker process, say)."""
        if self.target is not None:
            return f"{self.name}{TARGET_SEP}{self.target}"
        return f"{self.name}{VERSION_SEP}{self.version.name}" if self.pinned and self.version else self.name

    def to_dict(self) -> dict[str, Any]:
        """The backend as a run's JSON document names it."""
        version = None if self.version is None else {"name": self.version.name, "commit": self.version.commit, "date": self.version.date}
        return {"name": self.name, "spec": self.spec, "version": version, "reason": self.reason}

    @property
    def label(self) -> str:
        """How reports name it: ``reference@e4048607``, ``aiter``, ``python:pkg.mod:planners``."""
        if self.target is not None:
            return self.spec
        return f"{self.name}{VERSION_SEP}{self.version.name}" if self.version else self.name

    @property
    def plans_any_device(self) -> bool:
        """Does it plan for the reference's device context (reference, plug-ins) rather than a live GPU?"""
        return self.name in _ANY_DEVICE

    def planner(self, op: str) -> Callable[..., Any]:
        """The planner function for ``op``, looked up now (so a spy's wrapper is seen)."""
        fn = getattr(self.module, op, None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {op}")
        return fn

    def sizer(self, op: str) -> Callable[..., Any]:
        """The ``get_*_info_v1`` helper that sizes ``op``'s buffers."""
        fn = getattr(self.module, SIZERS[op], None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {SIZERS[op]}")
        return fn

    def plans_for(self, arch: str, cu_num: int) -> contextlib.AbstractContextManager[Any]:
        """Plan for ``arch``/``cu_num`` inside the block (the reference's device context).

        aiter plans for the GPU it runs on; :meth:`live_device` says which.
        """
        if self.plans_any_device:
            from mla_golden.reference import device

            return device(arch, cu_num)
        return contextlib.nullcontext()

    def live_device(self) -> tuple[str, int] | None:
        """(arch, cu_num) of the GPU aiter plans for; None for the reference or a plug-in (they plan for any)."""
        if self.plans_any_device:
            return None
        import torch

        from mla_golden.context import gpu_device

        info = gpu_device(torch.device("cuda", torch.cuda.current_device()))
        return info["arch"], int(info["cu_num"])

    def replay(self, call: Call) -> Call:
        """``call`` replayed on this backend's planner, its provenance naming this backend's version.

        On the version that recorded it, the replay plans into the golden's
        own buffers (a faithful replay). On another reference version it plans
        into the buffers that version's sizing helper gives, as a caller on it
        would allocate them (:mod:`mla_golden.caller_sizing`); a note says
        which buffers changed size, or why the golden's were kept.
        """
        from mla_golden.capture import replay
        from mla_golden.context import plan_for

        buffers, note = self._caller_buffers(call)
        # a plug-in's functions live outside mla_golden.reference, so replay() would not set its device
        planning = plan_for(call.device) if self.name == "python" else contextlib.nullcontext()
        with planning:
            actual = replay(call, self.planner(call.op), on=self.tensor_device, buffers=buffers)
        if note:
            actual.provenance["capture"]["notes"].append(note)
        self.stamp(actual)
        return actual

    def _caller_buffers(self, call: Call) -> tuple[dict[str, dict[str, Any]] | None, str | None]:
        """The buffers a caller of this version allocates for ``call`` (None: the golden's), and a note."""
        if self.version is None:
            return None, None  # live aiter: its version is not a ported one to size by
        from mla_golden import reference
        from mla_golden.caller_sizing import Resizing, caller_buffers
        from mla_golden.capture import planner_env
        from mla_golden.context import plan_for
        from mla_golden.planner_id import recorded_planner, reference_version

        recorded = reference_version(recorded_planner(call.provenance))
        helper = SIZERS[call.op]
        if recorded == self.version:
            return None, None
        if recorded is None:
            return None, f"buffers as the golden's: the planner that recorded it is no ported version, whose {helper} is unknown"
        target = self.sizer(call.op)
        old = getattr(reference.at(recorded), helper)
        if old is target:
            return None, None  # one helper for every version (prefill)
        with planner_env(call.env), plan_for(call.device):
            found = caller_buffers(call, old, target)
        if not isinstance(found, Resizing):
            return None, f"buffers as the golden's: {found}"
        sized = f"buffers sized by {self.label}'s {helper}, as a caller on it allocates them"
        return found.buffers, f"{sized}: {', '.join(found.changes)}" if found.changes else None

    def stamp(self, call: Call) -> None:
        """Name this backend's reference version as ``call``'s planner.

        A function all versions share (the prefill planner) cannot tell which
        version it ran as; the backend can.
        """
        if self.version is not None:
            from mla_golden.planner_id import of_reference, stamp

            stamp(call.provenance, of_reference(self.version))

    def for_golden(self, provenance: Mapping[str, Any]) -> tuple[Backend, str | None]:
        """The backend to replay a golden with this provenance on, and a note saying which and why.

        Only an unpinned reference switches: to the version that recorded the
        golden when it is a ported one, else it stays on the newest.
        """
        if self.name != "reference" or self.pinned:
            return self, None
        from mla_golden.planner_id import recorded_planner, reference_version

        recorded = recorded_planner(provenance)
        version = reference_version(recorded)
        if version is None:
            return self, (
                f"replayed on the newest reference, {self.label}: the planner that recorded this golden "
                f"({recorded.label}) is not a ported reference version"
            )
        chosen = self if self.version is not None and version.name == self.version.name else _reference(version.name)
        recorder = "" if recorded.label == chosen.label else f" ({recorded.label})"
        return chosen, f"replayed on {chosen.label}, the planner version that recorded this golden{recorder}"


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``'reference@aded0f84'`` -> ``('reference', 'aded0f84')``; ``'auto'`` -> ``('auto', None)``;
    ``'python:pkg.mod:planners'`` -> ``('python', 'pkg.mod:planners')``.

    BackendError for an unknown backend, or a version on a backend other than the reference.
    """
    stripped = spec.strip()
    if stripped.partition(TARGET_SEP)[0] == "python":
        return "python", _python_target(stripped)
    name, sep, version = stripped.partition(VERSION_SEP)
    if name not in NAMES:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)} (or reference@VERSION, python:MODULE:ATTR)")
    if sep and name != "reference":
        raise BackendError(f"backend {spec!r}: only the reference has versions (reference@VERSION); {name} is what is installed")
    return name, version if sep else None  # 'reference@' names no version: the reference says which exist


def _python_target(spec: str) -> str:
    """``MODULE[:ATTR]`` of a ``python:`` spec, BackendError when it names none."""
    target = spec.partition(TARGET_SEP)[2]
    module, _, attr = target.partition(TARGET_SEP)
    dotted = all(part.isidentifier() for part in module.split("."))
    if not module or not dotted or (attr and not all(part.isidentifier() for part in attr.split("."))):
        raise BackendError(f"backend {spec!r}: expected python:MODULE[:ATTR], e.g. python:my_planners:patched")
    return target


def _python(target: str) -> Backend:
    """The object ``MODULE[:ATTR]`` names as a backend, BackendError saying what is missing."""
    module_name, _, attr = target.partition(TARGET_SEP)
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # a plug-in's import can fail in any way; say how
        raise BackendError(f"module {module_name} does not import: {type(exc).__name__}: {exc}") from exc
    for part in filter(None, attr.split(".")):
        if not hasattr(found, part):
            raise BackendError(f"{module_name}:{attr} cannot be found: {type(found).__name__} has no attribute {part}")
        found = getattr(found, part)
    missing = [n for n in (*SIZERS, *SIZERS.values()) if not callable(getattr(found, n, None))]
    if missing:
        raise BackendError(f"{target} has no {', '.join(missing)} (a plug-in needs the planner and sizing functions of both ops)")
    return Backend("python", found, f"plug-in planner {target}", "cpu", target=target)


def _reference(version: str | None = None) -> Backend:
    """The reference planners: ``mla_golden.reference`` itself (the newest version), or ``version`` pinned."""
    from mla_golden import reference

    if version is None:
        module: Any = reference
        planned = reference.version
    else:
        try:
            module = reference.at(version)
        except reference.UnknownVersionError as exc:
            raise BackendError(str(exc)) from exc
        planned = module.version
    reason = f"mla-golden's CPU port of aiter {planned.name} ({planned.date})"
    return Backend("reference", module, reason, "cpu", planned, pinned=version is not None)


def _aiter() -> Backend:
    """Live aiter, or BackendError saying why it cannot plan here."""
    try:
        module = importlib.import_module("aiter")
    except Exception as exc:  # aiter's import can fail in many ways (no GPU, ABI, JIT build)
        raise BackendError(f"aiter does not import: {type(exc).__name__}: {exc}") from exc
    missing = [n for n in (*SIZERS, *SIZERS.values()) if not callable(getattr(module, n, None))]
    if missing:
        raise BackendError(f"aiter has no {', '.join(missing)}")
    import torch

    if not torch.cuda.is_available():
        raise BackendError("aiter imports but torch sees no ROCm/CUDA device")
    version = getattr(module, "__version__", None) or "unknown version"
    return Backend("aiter", module, f"live aiter ({version})", "cuda")


def resolve(spec: str) -> Backend:
    """The backend ``spec`` names (auto, aiter, reference, reference@VERSION, python:MODULE[:ATTR]); BackendError when it cannot be used."""
    name, version = parse_spec(spec)
    if name == "python":
        assert version is not None  # parse_spec gives python its target
        return _python(version)
    if name == "reference":
        return _reference(version)
    if name == "aiter":
        return _aiter()
    if name == "auto":
        try:
            return _aiter()
        except BackendError as exc:
            backend = _reference()
            return replace(backend, reason=f"{backend.reason}; {exc}")
    raise AssertionError(name)  # parse_spec admits only NAMES
