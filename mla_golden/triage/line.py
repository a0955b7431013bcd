"""aiter's history as a line of planners: the commits along a first-parent line where the planner changes by meaning.

Between two commits, most of aiter's history does not touch the planner, and
of the commits that do, many only reformat it. What matters to a plan is the
planner *by meaning* (:mod:`mla_golden.reference.planner_digest`): the line
keeps one :class:`State` per run of commits that share a digest, named by the
commit that began it. Commits that do not touch the planner's sources cost no
digest at all; those that do cost one ``git ls-tree`` and the blobs not seen
before (:class:`~mla_golden.aiter_build.repo.AiterRepo`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mla_golden.aiter_build.repo import AiterRepo, Commit
from mla_golden.errors import AiterSourceError

if TYPE_CHECKING:
    from mla_golden.reference import PlannerVersion


@dataclass(frozen=True)
class State:
    """One planner along a line: the commit that made it, its digest, the port that plans as it (if one does)."""

    commit: Commit
    digest: str
    #: The ported reference version with the same planner by meaning: it plans this state without a build.
    ported: PlannerVersion | None
    #: The planner source files ``commit`` changed against its first parent.
    touched: tuple[str, ...] = ()
    #: How many commits of the line share this planner (the run ``commit`` begins).
    commits: int = 1

    @property
    def label(self) -> str:
        """``9d0d5e7c77`` or ``d85eb69420 (= reference@aded0f84)``."""
        return self.commit.short + (f" (= reference@{self.ported.name})" if self.ported else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.commit.to_dict(),
            "planner_digest": self.digest,
            "same_planner_as": f"reference@{self.ported.name}" if self.ported else None,
            "touched": list(self.touched),
            "commits": self.commits,
        }


def state_at(repo: AiterRepo, rev: str, touched: tuple[str, ...] = ()) -> State:
    """The planner at ``rev`` as a state of its own; AiterSourceError when ``rev`` has no planner sources."""
    from mla_golden.reference.planner_digest import ported_version

    commit = repo.commit(rev)
    if not repo.has_planner(commit.sha):
        raise AiterSourceError(
            f"{rev} ({commit.short}) has no planner sources (csrc/kernels/mla/metadata.cu and aiter/ops/attention.py): "
            f"is {repo.path} a clone of ROCm/aiter, and is {rev} recent enough to have get_mla_metadata_v1?"
        )
    digest = repo.digest(commit.sha)
    return State(commit, digest, ported_version(digest), touched)


def planner_line(repo: AiterRepo, base: str, tip: str) -> list[State]:
    """The planners after ``base`` up to ``tip`` along ``tip``'s first parents, oldest first: one state per change by
    meaning (a commit whose digest differs from the state before it), each counting the commits it spans."""
    from mla_golden.reference.planner_digest import ported_version

    line = repo.first_parent_line(base, tip)
    touching = repo.planner_commits(base, tip)
    current = repo.digest(base)
    states: list[State] = []
    spans: list[int] = []
    for commit in line:
        if commit.sha in touching and repo.has_planner(commit.sha):
            digest = repo.digest(commit.sha)
            if digest != current:
                current = digest
                states.append(State(commit, digest, ported_version(digest), repo.touched(commit.sha)))
                spans.append(0)
        if spans:
            spans[-1] += 1
    return [State(s.commit, s.digest, s.ported, s.touched, n) for s, n in zip(states, spans)]
