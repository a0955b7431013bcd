"""Divergent cases grouped by cause: one group per divergence signature, one reproducer each.

A signature is the op and what diverged at the minimal call a case shrank to
(the kind, error / shape / sizing / values, and the family of buffers it
first shows in: the works or the reduce maps): cases that diverge the same
way are taken to share a cause, and the group keeps the smallest minimal call
any of them shrank to.
Each group is then explained by a rule over the axes (:mod:`.rules`), and
its reproducer judged on both sides (:mod:`mla_golden.soundness`: ``check``
and the numbers a kernel engineer reads first): a kernel-invariant violation
on one side is the cause a reader wants first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mla_golden.call import Call
from mla_golden.diff_data import Cause, Diff
from mla_golden.soundness import Soundness
from mla_golden.sweeper.evaluate import DIVERGED, KIND_ERROR, KIND_SHAPE, KIND_SIZING
from mla_golden.sweeper.regions import Parsed, judged, labelled
from mla_golden.sweeper.rules import Rule, conditions_of, learn
from mla_golden.sweeper.work import CaseResult

#: Classes of cause, in the order pages list them (behaviour changes before sizing).
ERROR, GEOMETRY, VALUES, SIZING, NOT_COMPARABLE = "error", "geometry", "values", "sizing", "not comparable"
CLASSES = (ERROR, GEOMETRY, VALUES, SIZING, NOT_COMPARABLE)


#: The class of each cause the differ names; others (the device changed: a ``:ARCH`` override) go by the kind.
_CLASS_OF_CAUSE = {
    Cause.ERROR: ERROR, Cause.PLANNER_ERROR: ERROR, Cause.RESIZED: SIZING,
    Cause.GEOMETRY: GEOMETRY, Cause.PLANNER_GEOMETRY: GEOMETRY, Cause.VALUES: VALUES, Cause.PLANNER_VALUES: VALUES,
}  # fmt: skip


def signature(result: CaseResult) -> tuple[str, ...]:
    """The case's op and the divergence signature of its minimal call (a journal older than signatures gives the kind alone)."""
    return (result.point["op"], *(str(s) for s in (result.signature or [result.kind])))


def size(point: dict[str, Any]) -> tuple[int, int]:
    """How big a call is: requests, then KV tokens (what "the smallest reproducer" minimises)."""
    return len(point["seq_lens"]), sum(point["seq_lens"])


@dataclass
class Reproducer:
    """A minimal divergent call, written (with ``out``) as OUT/a/<key> and OUT/b/<key>."""

    key: str
    point: dict[str, Any]
    kind: str | None
    detail: str
    #: How many swept cases it stands for (its group's cases).
    cases: int = 1
    #: The differ's verdict on the two captured calls (False: the capture saw no divergence).
    confirmed: bool = True
    #: What ran out before the shrink reached a minimum ("evals", "time"); None: it is a minimum.
    exhausted: str | None = None
    #: Kept parameters along which it is not minimal ("qlen 1": that query length diverges the same way too).
    loose: list[str] = field(default_factory=list)
    #: Tried at the lengths another case of its group shrank to, not shrunk itself: not shown minimal.
    seeded: bool = False
    diff: Diff | None = field(default=None, repr=False)
    calls: tuple[Call, Call] | None = field(default=None, repr=False)
    written: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "point": self.point, "kind": self.kind, "detail": self.detail, "cases": self.cases,
                "confirmed": self.confirmed, "exhausted": self.exhausted, "not_minimal_along": self.loose,
                "seeded": self.seeded, "written": self.written}  # fmt: skip


@dataclass
class Group:
    """Divergent cases with one signature, the smallest reproducer among them, and why they diverge."""

    signature: tuple[str, ...]
    reproducer: Reproducer
    #: Divergent cases with this signature, and the distinct minimal calls they shrank to.
    cases: int = 0
    minimal_calls: set[str] = field(default_factory=set)
    rule: Rule | None = None
    #: Both sides of the reproducer judged (A is the expected side, B the actual); None: not captured.
    soundness: Soundness | None = None

    @property
    def kind(self) -> str:
        return self.signature[1]

    @property
    def fields(self) -> tuple[str, ...]:
        return self.signature[2:]

    @property
    def cls(self) -> str:
        """error / geometry / values / sizing / not comparable (the capture did not confirm it)."""
        rep = self.reproducer
        if not rep.confirmed:
            return NOT_COMPARABLE
        by_differ = _CLASS_OF_CAUSE.get(rep.diff.cause) if rep.diff is not None else None
        return by_differ or {KIND_ERROR: ERROR, KIND_SIZING: SIZING, KIND_SHAPE: GEOMETRY}.get(self.kind, VALUES)

    @property
    def checks(self) -> dict[str, list[str]]:
        """Side ("A", "B") -> the invariants ``check`` finds violated on it (a side that raised has none)."""
        if self.soundness is None:
            return {}
        return {"A": self.soundness.expected.violated, "B": self.soundness.actual.violated}

    def cause(self) -> str:
        """One line: the class, what the differ calls it, and what ``check`` says of each side."""
        rep = self.reproducer
        text = f"{self.cls}: " + (rep.diff.cause_label if rep.diff is not None else rep.detail)
        broken = [f"{side} violates {', '.join(names)}" for side, names in self.checks.items() if names]
        return text + ("; check: " + "; ".join(broken) if broken else "; check passes on both sides")

    def judged(self) -> str:
        """``A sound, B unsound: coverage at ...; works 64 -> 32, ..., kernel ...`` (empty when not captured)."""
        if self.soundness is None:
            return ""
        sides = ", ".join(f"{name} {side.verdict()}" for name, side in zip(SIDES, (self.soundness.expected, self.soundness.actual)))
        return f"{sides}; {self.soundness.changes(SIDES)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "signature": list(self.signature), "class": self.cls, "cause": self.cause(), "cases": self.cases,
            "minimal_calls": len(self.minimal_calls), "reproducer": self.reproducer.key,
            "rule": self.rule.to_dict() if self.rule else None, "checks": self.checks,
            "soundness": self.soundness.to_dict() if self.soundness is not None else None,
        }  # fmt: skip


#: The sweep's sides as reports name them: A (the expected side of every diff) and B.
SIDES = ("A", "B")


def judge_sides(rep: Reproducer) -> Soundness | None:
    """Both sides of the reproducer judged: the differ's judgement of the pair, or the pair judged here when the
    differ found them equal (a divergence the capture did not confirm); None when nothing was captured."""
    if rep.diff is not None and rep.diff.soundness is not None:
        return rep.diff.soundness
    if rep.calls is None:
        return None
    from mla_golden.soundness import judge_pair

    return judge_pair(*rep.calls)


def explain(groups: Sequence[Group], results: Sequence[CaseResult], parsed: Parsed | None = None) -> None:
    """Give each group its rule, learnt over every judged case (``parsed``: their points and labels, if at hand)."""
    cases = judged(results)
    both = [parsed[r.index] if parsed else labelled(r) for r in cases]
    points = [point for point, _ in both]
    offered = conditions_of(points, [values for _, values in both]) if points and groups else {}
    for group in groups:
        positive = [r.status == DIVERGED and signature(r) == group.signature for r in cases]
        group.rule = learn(points, positive, offered) if points else None
