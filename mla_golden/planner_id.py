"""Which planner produced a call: written into a golden's provenance, read back to replay it.

A golden names its planner under ``provenance["planner"]``: live aiter by the
version and commit its build reports, the reference by its version
(``reference@e4048607``) and that version's aiter commit. Goldens written
before the reference had versions carry only ``reference_of: "aiter
<commit12>"`` (or, for live aiter, ``aiter: {version, commit}``); they read
back the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mla_golden.reference import PlannerVersion

REFERENCE = "reference"
AITER = "aiter"
#: aiter's own planner built from a source tree (``mla_golden.aiter_src``).
AITER_SRC = "aiter-src"


@dataclass(frozen=True)
class RecordedPlanner:
    """The planner a call came from, as its provenance tells."""

    #: 'aiter', 'reference', or the module of a stand-in planner.
    backend: str
    #: aiter's version string, or the reference version's name (8-hex commit prefix).
    version: str | None = None
    commit: str | None = None

    @property
    def label(self) -> str:
        """How reports name it: ``reference@e4048607``, ``aiter 0.1.20 (e4048607a535)``."""
        if self.backend == REFERENCE:
            name = self.version or (self.commit or "")[:8]
            return f"{REFERENCE}@{name}" if name else REFERENCE
        if self.backend == AITER:
            version = self.version or "unknown version"
            return f"{AITER} {version}" + (f" ({self.commit[:12]})" if self.commit else "")
        if self.backend == AITER_SRC:
            return f"{AITER_SRC}@{(self.commit or '')[:12] or self.version or 'unknown'}"
        return self.backend

    def to_dict(self) -> dict[str, Any]:
        """What goes into ``provenance["planner"]``."""
        return {"backend": self.backend, "name": self.label, "version": self.version, "commit": self.commit}


def of_reference(version: PlannerVersion) -> RecordedPlanner:
    """The identity of a reference version."""
    return RecordedPlanner(REFERENCE, version.name, version.commit)


def stamp(provenance: dict[str, Any], planner: RecordedPlanner) -> None:
    """Name ``planner`` in ``provenance`` (and, for the reference, the ``reference_of`` older readers know)."""
    provenance["planner"] = planner.to_dict()
    if planner.backend == REFERENCE:
        provenance["reference_of"] = f"aiter {(planner.commit or '')[:12]}"


def recorded_planner(provenance: Mapping[str, Any]) -> RecordedPlanner:
    """The planner a golden's provenance names (any golden this mla-golden reads)."""
    entry = provenance.get("planner")
    if isinstance(entry, Mapping) and entry.get("backend"):
        return RecordedPlanner(str(entry["backend"]), _str_or_none(entry.get("version")), _str_or_none(entry.get("commit")))
    backend = str(provenance.get("backend") or "unknown")
    if backend == AITER:
        aiter = provenance.get("aiter") or {}
        return RecordedPlanner(AITER, _str_or_none(aiter.get("version")), _str_or_none(aiter.get("commit")))
    if backend == REFERENCE:
        # before versions: "reference_of": "aiter e4048607a535"
        commit = str(provenance.get("reference_of") or "").removeprefix("aiter ").strip() or None
        version = reference_version(RecordedPlanner(REFERENCE, None, commit)) if commit else None
        return RecordedPlanner(REFERENCE, version.name if version else None, version.commit if version else commit)
    return RecordedPlanner(backend)


def planner_label(provenance: Mapping[str, Any]) -> str:
    """``recorded_planner(provenance).label`` (a tree diff asks twice per pair; a tree holds a few planners)."""
    entry = provenance.get("planner")
    if type(entry) is dict and type(entry.get("backend")) is str and entry["backend"]:
        version, commit = entry.get("version"), entry.get("commit")
        if (type(version) is str or version is None) and (type(commit) is str or commit is None):
            return _named_label(entry["backend"], version, commit)
    return recorded_planner(provenance).label


@functools.lru_cache(maxsize=256)
def _named_label(backend: str, version: str | None, commit: str | None) -> str:
    """The label of a provenance naming its planner as (backend, version, commit), as :func:`recorded_planner` reads it."""
    return recorded_planner({"planner": {"backend": backend, "version": version, "commit": commit}}).label


def reference_version(planner: RecordedPlanner) -> PlannerVersion | None:
    """The ported reference version that plans like ``planner``, if one does.

    A reference golden names its version; a live-aiter golden is matched by
    its commit, else by its version as a release tag (``0.1.20`` -> ``v0.1.20``).
    """
    from mla_golden import reference

    if planner.backend == REFERENCE:
        candidates = [planner.version, planner.commit]
    elif planner.backend == AITER:
        version = planner.version or ""
        candidates = [planner.commit, version, f"v{version}" if version and not version.startswith("v") else None]
    elif planner.backend == AITER_SRC:
        candidates = [planner.commit]
    else:
        return None
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return reference.at(candidate).version
        except reference.UnknownVersionError:
            continue
    return None


def rules_version(provenance: Mapping[str, Any]) -> PlannerVersion:
    """The ported version whose rules judge a golden with this provenance: the one that recorded it, else the newest."""
    from mla_golden.reference.versions import latest

    return reference_version(recorded_planner(provenance)) or latest()


def planner_of(fn: Callable[..., Any], backend: str, aiter: Mapping[str, Any] | None) -> RecordedPlanner:
    """The identity of planner function ``fn`` (``backend`` as ``context.backend_of`` says)."""
    if backend == REFERENCE:
        return of_reference(_reference_version_of(fn))
    if backend == AITER:
        aiter = aiter or {}
        return RecordedPlanner(AITER, _str_or_none(aiter.get("version")), _str_or_none(aiter.get("commit")))
    identity = getattr(_unwrapped(fn), "planner_identity", None)  # an aiter-src tree's functions carry theirs
    if isinstance(identity, RecordedPlanner):
        return identity
    return RecordedPlanner(backend)


def _reference_version_of(fn: Callable[..., Any]) -> PlannerVersion:
    """The reference version whose planner ``fn`` is.

    A function every version shares (the prefill planner; the newest version's
    are ``mla_golden.reference``'s own) counts as the newest; a caller that
    knows better (a backend pinned to a version) stamps the call itself.
    """
    from mla_golden import reference
    from mla_golden.schema import SCHEMAS

    def holds(module: Any) -> bool:  # a spy may have wrapped the module's functions
        return any(_unwrapped(getattr(module, op, None)) is fn for op in SCHEMAS)

    fn = _unwrapped(fn)
    if holds(reference):
        return reference.version
    for version in reference.versions():
        if holds(reference.at(version)):
            return version
    return reference.version


def _unwrapped(fn: Any) -> Any:
    return getattr(fn, "__wrapped__", fn)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
