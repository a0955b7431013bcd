"""Summarise verdicts as regions: which parameter values diverge, and which never do.

Points are grouped by their categorical parameters (op, device, heads,
dtype, query length, page size, split cap, causality, env). Each group with a
divergence seeds a region that is widened greedily: a parameter becomes
"any" when no group that never diverged matches the widened region. So a
region reads "heads 32 x fp8 x gfx950:256 (any qlen, page size...)": every
group it covers diverged somewhere, and the cases it covers say whether at
every batch or only at some.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mla_golden.sweeper.evaluate import DIVERGED, EQUAL
from mla_golden.sweeper.space import PREFILL, Point
from mla_golden.sweeper.work import CaseResult

#: Categorical axes, in the order regions are widened (least telling first) and reversed for display.
AXES = ("env", "causal", "split", "page_size", "qlen", "device", "dtype", "heads", "op")


def labels(point: Point) -> dict[str, str]:
    """The categorical value of each axis, as reports show it."""
    env = ",".join(f"{k}={v}" for k, v in point.env if v is not None) or "none"
    prefill = point.op == PREFILL
    return {
        "op": "prefill" if prefill else "decode",
        "device": f"{point.arch}:{point.cu_num}",
        "heads": str(point.heads),
        "dtype": "-" if prefill else point.dtype,
        "qlen": "-" if prefill else str(point.qlen),
        "page_size": "-" if prefill else str(point.page_size),
        "split": "-" if prefill else ("none" if point.max_split_per_batch == -1 else "capped"),
        "causal": "-" if prefill else ("causal" if point.causal else "noncausal"),
        "env": "-" if prefill else env,
    }


@dataclass
class Region:
    """Parameter values (axis -> value; absent axes: any) where points diverged."""

    where: dict[str, str]
    cases: int = 0
    diverged: int = 0
    #: Batch sizes of the divergent cases, and of all cases, in the region.
    batches: list[int] = field(default_factory=list)
    all_batches: list[int] = field(default_factory=list)

    @property
    def everywhere(self) -> bool:
        return self.diverged == self.cases

    def describe(self) -> str:
        shown = [f"{axis} {self.where[axis]}" for axis in reversed(AXES) if axis in self.where]
        scope = "for " + " x ".join(shown) if shown else "everywhere"
        if self.everywhere:
            extent = f"at every batch ({min(self.all_batches)}..{max(self.all_batches)})"
        else:
            extent = f"at batch {min(self.batches)}..{max(self.batches)} only"
        return f"diverges {scope}: {self.diverged} of {self.cases} cases, {extent}"

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "cases": self.cases, "diverged": self.diverged, "everywhere": self.everywhere,
                "batches": [min(self.batches), max(self.batches)], "description": self.describe()}  # fmt: skip


@dataclass
class Summary:
    regions: list[Region]
    #: axis -> value -> [cases, diverged]
    marginals: dict[str, dict[str, list[int]]]

    def never(self) -> dict[str, list[str]]:
        """Per axis, the values that never diverged (over at least one judged case)."""
        out = {}
        for axis in reversed(AXES):
            clean = [value for value, (_, diverged) in self.marginals[axis].items() if diverged == 0]
            if clean and len(self.marginals[axis]) > 1:
                out[axis] = clean
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"regions": [r.to_dict() for r in self.regions], "never_diverges": self.never(), "marginals": self.marginals}


def _matches(where: dict[str, str], values: dict[str, str]) -> bool:
    return all(values[axis] == value for axis, value in where.items())


def summarise(results: Sequence[CaseResult]) -> Summary:
    """Regions and per-value counts over the equal and divergent verdicts (skipped/undefined left out)."""
    judged = [(labels(Point.from_dict(r.point)), r) for r in results if r.status in (EQUAL, DIVERGED)]
    marginals: dict[str, dict[str, list[int]]] = {axis: {} for axis in AXES}
    groups: dict[tuple[str, ...], list[int]] = {}
    for values, result in judged:
        hit = int(result.status == DIVERGED)
        for axis in AXES:
            counts = marginals[axis].setdefault(values[axis], [0, 0])
            counts[0] += 1
            counts[1] += hit
        group = groups.setdefault(tuple(values[a] for a in AXES), [0, 0])
        group[0] += 1
        group[1] += hit
    clean = [dict(zip(AXES, key)) for key, (_, hit) in groups.items() if hit == 0]
    seeds = sorted((key for key, (_, hit) in groups.items() if hit), key=lambda k: -groups[k][1])
    regions: list[Region] = []
    for key in seeds:
        values = dict(zip(AXES, key))
        if any(_matches(r.where, values) for r in regions):
            continue
        where = dict(values)
        for axis in AXES:
            wider = {a: v for a, v in where.items() if a != axis}
            if not any(_matches(wider, c) for c in clean):
                where = wider
        regions.append(Region(where))
    for values, result in judged:
        for region in regions:
            if _matches(region.where, values):
                batch = len(result.point["seq_lens"])
                region.cases += 1
                region.all_batches.append(batch)
                if result.status == DIVERGED:
                    region.diverged += 1
                    region.batches.append(batch)
                break
    return Summary(regions, marginals)
