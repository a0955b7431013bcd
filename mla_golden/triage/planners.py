"""The planner of each state of a line, as a backend: a ported version's reference where one plans alike, else the
commit's own tree built for the host (``aiter-src``), in parallel and cached.

A state whose planner equals a port by meaning costs nothing: the reference
plans it, bit for bit. Any other state is built once (the build cache of
:mod:`mla_golden.aiter_build` keeps it for later runs); ``jobs`` builds run
at once, each a g++ process. A commit that does not build is *failed*: a
bisect skips it, as ``git bisect skip`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mla_golden.errors import MlaGoldenError
from mla_golden.triage.line import State

if TYPE_CHECKING:
    from mla_golden.aiter_build.repo import AiterRepo
    from mla_golden.backends import Backend

#: How a state's planner was had: a port (no build), a build found in the cache, a fresh build, or none.
PORT, CACHED, BUILT, FAILED = "port", "cached", "built", "failed"


@dataclass(frozen=True)
class Progress:
    """One step of a long run (a build started or ended), for a progress line on stderr or a callback."""

    #: ``building``, ``built``, ``cached``, ``port``, ``failed``
    what: str
    state: State
    #: Builds that may still be needed, at most.
    left: int
    detail: str = ""

    def __str__(self) -> str:
        subject = self.state.commit.subject
        subject = subject if len(subject) <= 60 else subject[:57] + "..."
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.what} {self.state.commit.short} {subject!r} ({self.left} build(s) left at most){detail}"


#: Where progress goes: a callback taking each step.
OnProgress = Callable[[Progress], None]


@dataclass
class Realized:
    """A state's planner, had: how, in how long, and the backend (None when it failed, with why)."""

    state: State
    outcome: str
    seconds: float
    backend: Backend | None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.state.commit.sha, "outcome": self.outcome, "seconds": round(self.seconds, 1), "problem": self.problem}


class Planners:
    """The planners of a repository's states, each had once (per digest) and kept."""

    def __init__(self, repo: AiterRepo, *, jobs: int = 1, progress: OnProgress | None = None) -> None:
        self.repo = repo
        self.jobs = max(1, jobs)
        self.progress = progress
        self._had: dict[str, Realized] = {}
        #: The build keys (AiterRepo.build_key) of the trees built or found in the cache.
        self._built: set[tuple[tuple[str, str], ...]] = set()

    def had(self, state: State) -> Realized | None:
        return self._had.get(state.digest)

    def free(self, state: State) -> bool:
        """Planning this state costs no build: a port plans it, it was had already, or a tree built already
        compiled the same C++ (only its Python differs)."""
        if state.ported is not None or state.digest in self._had:
            return True
        return self.repo.build_key(state.commit.sha) in self._built

    def _note_built(self, had: Realized) -> None:
        if had.backend is not None and had.outcome != PORT:
            self._built.add(self.repo.build_key(had.state.commit.sha))

    @property
    def realized(self) -> list[Realized]:
        return list(self._had.values())

    def get(self, states: Sequence[State], left: int = 0) -> list[Realized]:
        """The planners of ``states`` (builds in parallel, ``jobs`` at a time), in their order."""
        todo = [s for s in dict.fromkeys(states) if s.digest not in self._had]
        ports = [s for s in todo if s.ported is not None]
        for state in ports:
            self._had[state.digest] = self._port(state)
            self._say(PORT, state, left, f"planned by reference@{state.ported.name}" if state.ported else "")
        builds = [s for s in todo if s.ported is None and s.digest not in self._had]
        if builds:
            for state in builds:
                self._say("building", state, left)
            with ThreadPoolExecutor(min(self.jobs, len(builds))) as pool:
                compiled = list(pool.map(self._compile, builds))
            for state, (outcome, seconds, problem) in zip(builds, compiled):
                had = self._load(state, outcome, seconds, problem)
                self._had[state.digest] = had
                self._note_built(had)
                self._say(had.outcome, state, max(left - len(builds), 0), had.problem or f"{had.seconds:.0f} s")
        return [self._had[s.digest] for s in states]

    def _say(self, what: str, state: State, left: int, detail: str = "") -> None:
        if self.progress is not None:
            self.progress(Progress(what, state, left, detail))

    def _port(self, state: State) -> Realized:
        from mla_golden.backends import resolve

        assert state.ported is not None
        return Realized(state, PORT, 0.0, resolve(f"reference@{state.ported.name}"))

    def _compile(self, state: State) -> tuple[str, float, str | None]:
        """Extract and build ``state``'s tree (in a worker thread: the work is git and g++ processes)."""
        from mla_golden.aiter_build import build, tree

        start = time.monotonic()
        try:
            source = tree.from_revision(state.commit.sha, self.repo.path)
            harness = build.build(source.csrc_root, tree.cache_root() / "builds", quiet=True)  # progress says so
        except MlaGoldenError as error:
            return FAILED, time.monotonic() - start, _first_line(error)
        return (BUILT if harness.compiled else CACHED), time.monotonic() - start, None

    def _load(self, state: State, outcome: str, seconds: float, problem: str | None) -> Realized:
        """The built tree as a backend (its Python layer is read here, in the main thread)."""
        from mla_golden.backends import resolve

        if outcome == FAILED:
            return Realized(state, FAILED, seconds, None, problem)
        start = time.monotonic()
        try:
            backend = resolve(f"aiter-src@{state.commit.sha}", aiter_repo=str(self.repo.path))
        except Exception as error:  # noqa: BLE001 - a tree's own Python can fail in any way: the commit is skipped
            return Realized(state, FAILED, seconds + time.monotonic() - start, None, f"{type(error).__name__}: {_first_line(error)}")
        return Realized(state, outcome, seconds + time.monotonic() - start, backend)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    lines = text.splitlines()
    return (lines[0] + (f" ... ({len(lines) - 1} more line(s))" if len(lines) > 1 else "")) if lines else type(error).__name__
