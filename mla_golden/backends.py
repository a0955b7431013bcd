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
``aiter-src:PATH`` and ``aiter-src@REV`` are aiter's own planner built from a
source tree (a folder, or a revision of the clone that ``--aiter-repo`` /
``MLA_GOLDEN_AITER_REPO`` names): any aiter commit, exact, on the CPU.

An unpinned reference replays each golden on the version that recorded it
(:meth:`Backend.for_golden`), so a golden recorded on an older aiter still
replays equal; ``reference@NEW`` replays every golden on NEW: an upgrade
preview.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from mla_golden.aiter_build.repo import AiterRepo
    from mla_golden.call import Call
    from mla_golden.reference import PlannerVersion

from mla_golden.errors import BackendError as BackendError  # re-exported: importable from here too
from mla_golden.schema import SCHEMAS

NAMES = ("auto", "aiter", "reference", "python", "aiter-src")
#: Separates a backend from the version it is pinned to: ``reference@aded0f84``, ``aiter-src@v0.1.19``.
VERSION_SEP = "@"
#: Separates the ``python`` backend from what it plugs in: ``python:pkg.mod:planners``.
TARGET_SEP = ":"
#: Separates ``aiter-src`` from the folder of its tree: ``aiter-src:/path/to/aiter``.
PATH_SEP = ":"
AITER_SRC = "aiter-src"
#: Backends whose functions plan in the reference's device context (a plug-in need not bring its own).
_REFERENCE_DEVICE = ("reference", "python")
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
    #: What ``resolve`` takes to give it again when its name and version do not say (``aiter-src:FOLDER``).
    source: str | None = None
    #: The aiter commit ``reference@COMMIT`` named when it is not the port's own (its planner means the port's).
    asked: str | None = None

    @property
    def spec(self) -> str:
        """What ``resolve`` takes to give this backend again (in a worker process, say)."""
        if self.source is not None:
            return self.source
        if self.target is not None:
            return f"{self.name}{TARGET_SEP}{self.target}"
        return f"{self.name}{VERSION_SEP}{self.version.name}" if self.pinned and self.version else self.name

    def to_dict(self) -> dict[str, Any]:
        """The backend as a run's JSON document names it."""
        version: dict[str, Any] | None = None
        if self.version is not None:
            version = {"name": self.version.name, "commit": self.version.commit, "date": self.version.date}
        identity = getattr(self.module, "planner_identity", None)
        if identity is not None:  # an aiter-src tree: its commit, else its planner-source digest
            version = {"name": (identity.commit or "")[:12] or identity.version, "commit": identity.commit, "date": None}
        return {"name": self.name, "spec": self.spec, "version": version, "reason": self.reason}

    @property
    def label(self) -> str:
        """How reports name it: ``reference@e4048607``, ``aiter-src@e4048607a535``, ``python:pkg.mod:planners``, ``aiter``."""
        if self.target is not None:
            return self.spec
        identity = getattr(self.module, "planner_identity", None)
        if identity is not None:
            return str(identity.label)
        return f"{self.name}{VERSION_SEP}{self.version.name}" if self.version else self.name

    @property
    def plans_any_device(self) -> bool:
        """Does it plan for a simulated device (reference, plug-ins, aiter-src) rather than a live GPU?"""
        return self._device_context() is not None

    def planner(self, op: str) -> Callable[..., Any]:
        """The planner function for ``op``, looked up now (so a spy's wrapper is seen)."""
        fn: object = getattr(self.module, op, None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {op}")
        return fn

    def sizer(self, op: str) -> Callable[..., Any]:
        """The ``get_*_info_v1`` helper that sizes ``op``'s buffers."""
        fn: object = getattr(self.module, SIZERS[op], None)
        if not callable(fn):
            raise BackendError(f"{self.name} backend has no {SIZERS[op]}")
        return fn

    def plans_for(self, arch: str, cu_num: int) -> contextlib.AbstractContextManager[Any]:
        """Plan for ``arch``/``cu_num`` inside the block: the module's ``device`` context (reference, aiter-src).

        aiter plans for the GPU it runs on; :meth:`live_device` says which.
        """
        device = self._device_context()
        return contextlib.nullcontext() if device is None else device(arch, cu_num)

    def _device_context(self) -> Callable[..., contextlib.AbstractContextManager[Any]] | None:
        """``device(arch, cu_num)`` when it plans for a simulated device (on the CPU): the module's own, else
        the reference's for a plug-in (its functions read the reference's device context)."""
        if self.tensor_device != "cpu":
            return None
        device = getattr(self.module, "device", None)
        if callable(device):  # a plug-in's device(arch, cu_num), untyped
            return cast("Callable[..., contextlib.AbstractContextManager[Any]]", device)
        if self.name in _REFERENCE_DEVICE:
            from mla_golden.reference import device as reference_device

            return reference_device
        return None

    def live_device(self) -> tuple[str, int] | None:
        """(arch, cu_num) of the GPU aiter plans for; None for a simulated device (it plans for any)."""
        if self._device_context() is not None:
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
        from mla_golden.capture.canary import replay
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
        """The buffers a caller of this version allocates for ``call`` (None: the golden's), and a note.

        A reference version and an aiter tree size by their own helper; live
        aiter replays on the golden's buffers (its helper needs the GPU it runs on).
        """
        if self.version is None and self.name != AITER_SRC:
            return None, None  # live aiter: its version is not a ported one to size by
        from mla_golden import reference
        from mla_golden.caller_sizing import Resizing, caller_buffers
        from mla_golden.context import as_recorded
        from mla_golden.planner_id import recorded_planner, reference_version

        planner = recorded_planner(call.provenance)
        recorded = reference_version(planner)
        helper = SIZERS[call.op]
        if recorded is not None and recorded == self.version:
            return None, None
        if recorded is None:
            if self.name == AITER_SRC and planner.label == self.label:
                return None, None  # recorded on this very tree
            return None, f"buffers as the golden's: the planner that recorded it is no ported version, whose {helper} is unknown"
        target = self.sizer(call.op)
        old = getattr(reference.at(recorded), helper)
        if old is target:
            return None, None  # one helper for every version (prefill)
        with as_recorded(call):
            found = caller_buffers(call, old, target)
        if not isinstance(found, Resizing):
            return None, f"buffers as the golden's: {found}"
        sized = f"buffers sized by {self.label}'s {helper}, as a caller on it allocates them"
        return found.buffers, f"{sized}: {', '.join(found.changes)}" if found.changes else None

    def stamp(self, call: Call) -> None:
        """Name this backend's reference version as ``call``'s planner.

        A function all versions share (the prefill planner) cannot tell which
        version it ran as; the backend can. An aiter-src tree names its commit
        (or source digest).
        """
        identity = getattr(self.module, "planner_identity", None)
        if identity is not None:
            from mla_golden.planner_id import stamp

            stamp(call.provenance, identity)
        elif self.version is not None:
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

    ``'aiter-src:PATH'`` -> ``('aiter-src', 'PATH')`` and ``'aiter-src@REV'`` ->
    ``('aiter-src', '@REV')`` (the ``@`` kept: it tells a revision from a folder).
    BackendError for an unknown backend, a version on live aiter or auto, or an aiter-src with no tree.
    """
    stripped = spec.strip()
    if stripped.partition(TARGET_SEP)[0] == "python":
        return "python", _python_target(stripped)
    if stripped.startswith(AITER_SRC):
        rest = stripped[len(AITER_SRC) :]
        if rest.startswith(PATH_SEP) and rest[1:]:
            return AITER_SRC, rest[1:]
        if rest.startswith(VERSION_SEP) and rest[1:]:
            return AITER_SRC, rest
        raise BackendError(f"backend {spec!r}: name the aiter tree: aiter-src:PATH (a checkout) or aiter-src@REV (with --aiter-repo)")
    name, sep, version = stripped.partition(VERSION_SEP)
    if name not in NAMES:
        raise BackendError(
            f"unknown backend {name!r}; choose one of {', '.join(NAMES)} "
            "(reference@VERSION, python:MODULE:ATTR, aiter-src:PATH, aiter-src@REV)"
        )
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
        _current_folder_importable()
        found: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # a plug-in's import can fail in any way (sys.exit too); say how
        where = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            where = f" (looked in the current folder {os.getcwd()} and on sys.path, as python -m does)"
        raise BackendError(f"module {module_name} does not import: {type(exc).__name__}: {exc}{where}") from exc
    for part in filter(None, attr.split(".")):
        if not hasattr(found, part):
            raise BackendError(f"{module_name}:{attr} cannot be found: {type(found).__name__} has no attribute {part}")
        found = getattr(found, part)
    missing = [n for n in (*SIZERS, *SIZERS.values()) if not callable(getattr(found, n, None))]
    if missing:
        raise BackendError(f"{target} has no {', '.join(missing)} (a plug-in needs the planner and sizing functions of both ops)")
    unlike = [problem for name in (*SIZERS, *SIZERS.values()) if (problem := _unlike_aiter(name, getattr(found, name)))]
    if unlike:
        raise BackendError(f"{target}: not in aiter's signatures (mla-golden calls a plug-in as aiter is called): {'; '.join(unlike)}")
    return Backend("python", found, f"plug-in planner {target}", "cpu", target=target)


def _current_folder_importable() -> None:
    """Let a plug-in module in the current folder import, as under ``python -m`` and pytest (an installed console
    script's sys.path holds no current folder); it stays there, for the plug-in's own later imports."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _unlike_aiter(name: str, fn: Callable[..., Any]) -> str | None:
    """How ``fn``'s signature differs from what every aiter version's ``name`` takes, or None.

    aiter's parameters without a default must open the signature, in aiter's
    order and by aiter's names (any version's spelling; an input an older
    aiter lacked, such as ``kv_last_page_lens``, may be absent), or be taken
    by ``*args`` and ``**kwargs`` after an opening that is; and nothing else
    may be required: record passes them by position, diff and sweep by name.
    """
    import inspect

    from mla_golden import reference
    from mla_golden.schema import schema_for

    schema = schema_for(name if name in SCHEMAS else next(op for op, sizer in SIZERS.items() if sizer == name))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        return f"{name} has no signature Python can read ({exc})"
    aiter_sig = inspect.signature(getattr(reference, name))
    canonical = [schema.canonical(n) if name in SCHEMAS else n for n in sig.parameters]
    aiters = [schema.canonical(n) if name in SCHEMAS else n for n, p in aiter_sig.parameters.items() if p.default is p.empty]
    required = [n for n in aiters if n in canonical or n not in schema.implied_inputs]
    opening = [n for n, p in zip(canonical, sig.parameters.values()) if p.kind is p.POSITIONAL_OR_KEYWORD][: len(required)]
    extra = [n for n, p in list(sig.parameters.items())[len(required) :] if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    stars: dict[inspect._ParameterKind, str] = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    shown = f"{name}({', '.join(stars.get(p.kind, '') + p.name for p in sig.parameters.values())})"
    kinds = {p.kind for p in sig.parameters.values()}
    # one taking *args and **kwargs receives what its named opening leaves out, by position and by name alike
    takes_rest = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD} <= kinds
    if opening != required and not (takes_rest and required[: len(opening)] == opening):
        return f"{shown} does not open with aiter's ({', '.join(aiters)})"
    if extra:
        return f"{shown} requires {', '.join(extra)}, which aiter's {name} does not take"
    return None


def _reference(version: str | None = None, repo: str | None = None) -> Backend:
    """The reference planners: ``mla_golden.reference`` itself (the newest version), or ``version`` pinned.

    A commit that is no port's own resolves from the aiter clone ``repo`` (default MLA_GOLDEN_AITER_REPO)
    when its planner means the same as a port's (:func:`_by_meaning`).
    """
    from mla_golden import reference

    if version is None:
        module: Any = reference
        planned = reference.version
    else:
        try:
            module = reference.at(version)
        except reference.UnknownVersionError as exc:
            if _COMMIT.fullmatch(version.strip()):
                return _by_meaning(version.strip(), repo, exc)
            raise BackendError(str(exc)) from exc
        planned = module.version
    reason = f"mla-golden's CPU port of aiter {planned.name} ({planned.date})"
    return Backend("reference", module, reason, "cpu", planned, pinned=version is not None)


#: What ``reference@`` takes as an aiter commit to look up in a clone (tags and dates resolve without one).
_COMMIT = re.compile(r"[0-9a-fA-F]{7,40}")


def _by_meaning(commit: str, repo: str | None, unknown: Exception) -> Backend:
    """``reference@COMMIT`` for any aiter commit whose planner sources mean the same as a port's
    (:mod:`mla_golden.reference.planner_digest`), read from the clone; BackendError naming the nearest port
    and what differs when none does."""
    from mla_golden.aiter_build.repo import AiterRepo
    from mla_golden.aiter_build.tree import REPO_ENV
    from mla_golden.errors import AiterSourceError
    from mla_golden.reference.planner_digest import ported_version

    clone_path = repo or os.environ.get(REPO_ENV)
    if not clone_path:
        raise BackendError(
            f"{unknown}; any other aiter commit whose planner is a port's by meaning resolves given its clone: "
            f"--aiter-repo DIR (or {REPO_ENV})"
        ) from unknown
    with AiterRepo(clone_path) as clone:
        try:
            sha = clone.commit_sha(commit)
        except AiterSourceError as exc:
            raise BackendError(f"{unknown}; nor is it a commit of the aiter clone {clone.path}") from exc
        named = f"aiter {sha[:10]} ({clone.commit(sha).date})"
        if not clone.has_planner(sha):
            raise BackendError(f"{named} has no planner sources (csrc/kernels/mla/metadata.cu, aiter/ops/attention.py)")
        port = ported_version(clone.digest(sha))
        if port is None:
            raise BackendError(f"{named} is not ported: no ported planner means the same; {nearest_port(clone, sha)}")
    backend = _reference(port.name)
    return replace(backend, reason=f"{backend.reason}: {named} plans as it, its planner sources mean the same", asked=sha)


def nearest_port(clone: AiterRepo, sha: str) -> str:
    """Which ported version's planner is nearest commit ``sha``'s (fewest planner pieces differ, then the closest
    date) and in what it differs: the C++ sources and attention.py functions, by meaning."""
    from mla_golden import reference
    from mla_golden.errors import AiterSourceError

    mine = clone.planner_pieces(sha)
    when = date.fromisoformat(clone.commit(sha).date)
    candidates = []
    for version in reference.versions():
        try:
            theirs = clone.planner_pieces(version.commit)
        except AiterSourceError:  # a clone without that commit
            continue
        differ = sorted(p for p in mine.keys() | theirs.keys() if mine.get(p) != theirs.get(p))
        candidates.append((len(differ), abs((date.fromisoformat(version.date) - when).days), version.name, version, differ))
    if not candidates:
        return "the clone holds none of the ported versions' commits to compare it with"
    *_, version, differ = min(candidates)
    shown = ", ".join(differ[:4]) + (f" and {len(differ) - 4} more" if len(differ) > 4 else "")
    return f"the nearest port is {version.name} ({version.date}), whose planner differs in {shown}"


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


def _aiter_src(tree: str, repo: str | None) -> Backend:
    """aiter's own planner of a folder (``tree``) or a revision (``@REV``, from ``repo`` or MLA_GOLDEN_AITER_REPO)."""
    from mla_golden.aiter_build import at_path, at_revision

    module = at_revision(tree[1:], repo) if tree.startswith(VERSION_SEP) else at_path(tree)
    where = module.tree.spec if tree.startswith(VERSION_SEP) else str(module.tree.csrc_root)
    reason = f"aiter's own planner built from {where} ({module.planner_identity.label}) for the host"
    # A worker process gets the tree by its folder (a revision is extracted there): no repo needed.
    source = f"{AITER_SRC}{PATH_SEP}{module.tree.csrc_root}"
    return Backend(AITER_SRC, module, reason, "cpu", source=source)


def resolve(spec: str, *, aiter_repo: str | None = None) -> Backend:
    """The backend ``spec`` names (auto, aiter, reference[@VERSION], python:MODULE[:ATTR], aiter-src:PATH, aiter-src@REV).

    ``aiter_repo`` is the git clone ``aiter-src@REV`` takes REV from (default
    MLA_GOLDEN_AITER_REPO), and ``reference@COMMIT`` looks a commit up in when it is no port's own. BackendError (for aiter-src an AiterSourceError, also a
    ValueError) when it cannot be used.
    """
    name, version = parse_spec(spec)
    if name == "python":
        assert version is not None  # parse_spec gives python its target
        return _python(version)
    if name == "reference":
        return _reference(version, aiter_repo)
    if name == AITER_SRC:
        assert version is not None  # parse_spec requires a tree
        return _aiter_src(version, aiter_repo)
    if name == "aiter":
        return _aiter()
    if name == "auto":
        try:
            return _aiter()
        except BackendError as exc:
            backend = _reference()
            return replace(backend, reason=f"{backend.reason}; {exc}")
    raise AssertionError(name)  # parse_spec admits only NAMES
