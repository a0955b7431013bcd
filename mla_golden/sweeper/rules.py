"""Explain one group of divergent cases by a short rule over the sweep's axes.

A rule is a conjunction of at most three conditions, each an axis value
(``device gfx950:256``, from :func:`mla_golden.sweeper.regions.labels`) or a
threshold on the call's size (``batch >= 8``, ``longest request >= 2048``,
powers of two). The search is exhaustive: every conjunction of conditions on
distinct axes is scored against all judged cases, positives being the
group's cases. The best has the highest F1 (so neither a rule that covers one
case exactly nor one that covers everything wins), then fewer conditions.
Precision (share of the cases it covers that are the group's) and coverage
(share of the group's cases it covers) are reported with it, so a rule that
explains a data-dependent bug poorly says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mla_golden.sweeper.regions import NOT_APPLICABLE, condition, labels
from mla_golden.sweeper.space import Point

#: Most conditions in a rule.
MAX_CONDITIONS = 3
#: Sizes a rule may name thresholds on.
_SIZES = {"batch": lambda p: p.batch, "longest request": lambda p: max(p.seq_lens)}


@dataclass(frozen=True)
class Condition:
    axis: str
    #: "==" for an axis value, ">=" / "<" for a size threshold.
    op: str
    value: str

    def __str__(self) -> str:
        return condition(self.axis, self.value) if self.op == "==" else f"{self.axis} {self.op} {self.value}"


@dataclass
class Rule:
    """Where a group diverges, and how well that says it."""

    conditions: tuple[Condition, ...]
    #: Cases the rule covers, and of those the group's; the group's cases in all.
    covered: int
    hits: int
    positives: int

    @property
    def precision(self) -> float:
        return self.hits / self.covered if self.covered else 0.0

    @property
    def coverage(self) -> float:
        return self.hits / self.positives if self.positives else 0.0

    def scope(self) -> str:
        return " and ".join(str(c) for c in self.conditions) or "everywhere"

    def describe(self) -> str:
        return (
            f"{self.scope()}: precision {self.precision:.0%} ({self.hits} of {self.covered} cases there), "
            f"coverage {self.coverage:.0%} ({self.hits} of {self.positives})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"conditions": [str(c) for c in self.conditions], "precision": round(self.precision, 4),
                "coverage": round(self.coverage, 4), "covered": self.covered, "hits": self.hits,
                "positives": self.positives, "description": self.describe()}  # fmt: skip


def conditions_of(points: Sequence[Point], labelled: Sequence[dict[str, str]] | None = None) -> dict[Condition, int]:
    """Every condition the cases offer, as a bit mask over them (bit i: case i); one set serves every group.

    ``labelled``: the points' :func:`~mla_golden.sweeper.regions.labels`, when the caller has them.
    """
    masks: dict[Condition, int] = {}
    by_axis: dict[str, list[str]] = {}
    for point_labels in labelled if labelled is not None else map(labels, points):
        for axis, value in point_labels.items():
            by_axis.setdefault(axis, []).append(value)
    found: list[tuple[int, int, Condition, int]] = []  # (first case, axis position, condition, mask)
    for position, (axis, values) in enumerate(by_axis.items()):
        column = np.array(values, dtype=object)
        for value in dict.fromkeys(values):
            if value != NOT_APPLICABLE:
                flags = column == value
                found.append((int(flags.argmax()), position, Condition(axis, "==", value), _bits(flags)))
    # in the order the cases first show them (ties between equally good rules go the same way every run)
    masks.update((condition, mask) for _, _, condition, mask in sorted(found, key=lambda f: f[:2]))
    everything = (1 << len(points)) - 1
    for axis, size in _SIZES.items():
        sizes = np.array([size(p) for p in points], dtype=np.int64)
        for k in range(1, int(sizes.max()).bit_length()):
            threshold = 1 << k
            above = _bits(sizes >= threshold)
            if 0 < above.bit_count() < len(points):
                masks[Condition(axis, ">=", str(threshold))] = above
                masks[Condition(axis, "<", str(threshold))] = everything & ~above
    return masks


def _bits(flags: np.ndarray[Any, Any]) -> int:
    """A bool array as an int whose bit i is ``flags[i]`` (packed by numpy: linear, where OR-ing bits one by one
    into a growing int is quadratic in the cases)."""
    return int.from_bytes(np.packbits(flags.astype(bool), bitorder="little").tobytes(), "little")


def learn(points: Sequence[Point], positive: Sequence[bool], offered: dict[Condition, int] | None = None) -> Rule:
    """The best rule of at most :data:`MAX_CONDITIONS` conditions separating the positive cases from the rest.

    ``offered``: :func:`conditions_of` ``points``, when the caller has them (a sweep learns one rule per group).
    """
    everything = (1 << len(points)) - 1
    target = _bits(np.array(positive, dtype=bool)) if len(positive) else 0
    positives = target.bit_count()
    # Only conditions that hold for some positive case can be part of a useful rule.
    offered = conditions_of(points) if offered is None else offered
    usable = [(c, m) for c, m in offered.items() if m & target and m != everything]

    def score(mask: int, size: int) -> tuple[float, int]:
        hits = (mask & target).bit_count()
        covered = mask.bit_count()
        f1 = 2 * hits / (covered + positives) if covered + positives else 0.0
        return round(f1, 12), -size

    best: tuple[tuple[float, int], tuple[Condition, ...], int] = (score(everything, 0), (), everything)

    def extend(start: int, combo: tuple[Condition, ...], mask: int) -> None:
        """Every rule of distinct axes that adds conditions after ``start`` to ``combo``, in the order
        ``itertools.combinations`` gives within a size (ties keep the first); a conjunction that covers no
        positive case is dropped with all its extensions."""
        nonlocal best
        axes = {c.axis for c in combo}
        for index in range(start, len(usable)):
            condition, m = usable[index]
            narrowed = mask & m
            if condition.axis in axes or not narrowed & target:
                continue
            grown = (*combo, condition)
            scored = score(narrowed, len(grown))
            if scored > best[0]:
                best = (scored, grown, narrowed)
            if len(grown) < MAX_CONDITIONS:
                extend(index + 1, grown, narrowed)

    extend(0, (), everything)
    _, conditions, mask = best
    return Rule(conditions, mask.bit_count(), (mask & target).bit_count(), positives)
