"""Find every module attribute that holds a given function, without rescanning unchanged modules.

``spy()`` must replace a planner wherever a builder bound it (``from aiter
import get_mla_metadata_v1`` at import, or a global assigned later), which
means looking through every loaded module's namespace: about 0.2 s with
vLLM's 3000 modules loaded, on every enter and exit. This index remembers,
per module, which names held a watched object and the namespace's version
when it looked; a module is rescanned only when its namespace changed since.

The version is CPython's per-dict version tag (PEP 509: every insert, update
or delete gives the dict a new, globally unique tag), read through ctypes
because Python code cannot see it. A self-test at import checks that the tag
is where it is expected and moves on every kind of change; where it does not
(another interpreter, a layout this was not written for) every lookup scans
every module, as before: slower, never less complete.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Iterable
from types import ModuleType
from typing import Any

#: Offset of ``ma_version_tag`` in a PyDictObject: after the object header and ``ma_used``.
_TAG_OFFSET = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)


def _tag_cell(namespace: dict[str, Any]) -> ctypes.c_uint64:
    """A live view of ``namespace``'s version tag (valid while the dict is alive: callers keep it)."""
    return ctypes.c_uint64.from_address(id(namespace) + _TAG_OFFSET)


def _tag_works() -> bool:
    """Whether this interpreter's dicts carry a version tag where expected that moves as PEP 509 says."""
    if sys.implementation.name != "cpython" or type({}).__basicsize__ < _TAG_OFFSET + 8:
        return False
    probe: dict[str, Any] = {}
    cell = _tag_cell(probe)
    seen = [cell.value]
    for change in (lambda: probe.__setitem__("a", 1), lambda: probe.__setitem__("a", 2), lambda: probe.pop("a")):
        change()
        seen.append(cell.value)
    return all(later != earlier for earlier, later in zip(seen, seen[1:]))


class _Entry:
    """One module as last scanned: its namespace's tag then, and the names holding watched objects."""

    __slots__ = ("module", "namespace", "cell", "tag", "hits")

    def __init__(self, module: ModuleType, namespace: dict[str, Any], cell: ctypes.c_uint64 | None) -> None:
        self.module = module
        self.namespace = namespace  # kept alive: the cell reads its memory
        self.cell = cell
        self.tag: int | None = None  # never scanned
        self.hits: list[tuple[str, int]] = []


class AliasIndex:
    """Which (module, name) pairs hold any of the watched objects; cached per module version.

    ``watch`` adds objects (the planners and their wrappers); the cache is
    dropped when the watched set grows, which happens once per planner.
    """

    def __init__(self, use_tags: bool) -> None:
        self._use_tags = use_tags
        self._lock = threading.RLock()
        self._watched: dict[int, Any] = {}  # id -> object (kept alive, so the id stays its own)
        self._entries: list[_Entry] = []
        self._modules_tag: int | None = None  # sys.modules' own tag when _entries was built

    @property
    def cached(self) -> bool:
        """Whether unchanged modules are skipped (False: every lookup scans every module)."""
        return self._use_tags

    def watch(self, objects: Iterable[Any]) -> None:
        with self._lock:
            new = {id(o): o for o in objects if id(o) not in self._watched}
            if new:
                self._watched.update(new)
                for entry in self._entries:
                    entry.tag = None

    def holders(self, targets: Iterable[Any], extra: Iterable[ModuleType] = ()) -> list[tuple[ModuleType, str, Any]]:
        """Every (module, attribute, value) where the value is one of ``targets``, among loaded modules and ``extra``."""
        wanted = {id(t): t for t in targets}
        self.watch(wanted.values())
        with self._lock:
            entries = self._refresh()
            known = {id(e.module) for e in entries}
            entries += [self._scan(_Entry(m, m.__dict__, None)) for m in extra if id(m) not in known and scannable(m)]
            found = []
            for entry in entries:
                for name, value_id in entry.hits:
                    target = wanted.get(value_id)
                    if target is not None and entry.namespace.get(name) is target:
                        found.append((entry.module, name, target))
            return found

    def _refresh(self) -> list[_Entry]:
        """Entries of the loaded modules, rescanning those whose namespace changed; those with hits returned."""
        modules_tag = _tag_cell(sys.modules).value if self._use_tags else None
        if modules_tag is None or modules_tag != self._modules_tag:
            old = {id(e.module): e for e in self._entries}
            entries = []
            for module in list(sys.modules.values()):
                entry = old.get(id(module))
                if entry is None or entry.module is not module:
                    if not scannable(module):
                        continue
                    entry = _Entry(module, module.__dict__, _tag_cell(module.__dict__) if self._use_tags else None)
                entries.append(entry)
            self._entries, self._modules_tag = entries, modules_tag
        if not self._use_tags:
            return [e for e in map(self._scan, self._entries) if e.hits]
        stale = [e for e in self._entries if e.cell.value != e.tag]  # type: ignore[union-attr]
        for entry in stale:
            self._scan(entry)
        return [e for e in self._entries if e.hits]

    def _scan(self, entry: _Entry) -> _Entry:
        entry.tag = entry.cell.value if entry.cell is not None else None  # read first: a change during the scan shows next time
        watched = self._watched
        entry.hits = [(name, id(value)) for name, value in list(entry.namespace.items()) if id(value) in watched]
        return entry


def scannable(module: Any) -> bool:
    """A module whose namespace can be read without side effects."""
    if type(module).__name__ == "_LazyModule":
        return False  # importlib.util.LazyLoader: touching it would run its import; it cannot hold an alias yet
    return isinstance(getattr(module, "__dict__", None), dict)


#: The index spy() uses (one per process: the cache is shared by every spy).
INDEX = AliasIndex(_tag_works())
