"""Summarise verdicts as regions: which parameter values diverge, and which never do.

Points are grouped by their categorical parameters (op, device, heads,
dtype, query length, page size, split cap, causality, sparse topk, prefill
tiles, env). Regions are
learnt as a decision list: starting from a divergent group not yet covered,
a region begins as "everywhere" and is narrowed, one parameter at a time, to
that group's value that leaves the largest share of divergent cases (ties:
the most cases), until no group that never diverged is left in it or 90% of
its cases diverged. So a
region reads "device gfx942:304" when that alone explains the divergence, and
"heads 32 x dtype fp8 x device gfx950:256" when it takes all three; the cases
it covers say whether it diverged at every batch or only at some.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mla_golden.sweeper.evaluate import DIVERGED, EQUAL
from mla_golden.sweeper.space import PREFILL, Point
from mla_golden.sweeper.work import CaseResult

#: A region stops narrowing once this share of its cases diverged: sparse samples leave a few
#: equal cases in most groups, and chasing each splits one story into many regions.
PURE = 0.9
#: The value of an axis an op does not have (prefill has no dtype, query length, pages...).
NOT_APPLICABLE = "-"
#: Categorical axes, in the order regions are widened (least telling first) and reversed for display.
AXES = ("env", "causal", "sparse", "tiles", "split", "page_size", "qlen", "device", "dtype", "heads", "op")


def labels(point: Point) -> dict[str, str]:
    """The categorical value of each axis, as reports show it."""
    env = ",".join(f"{k}={v}" for k, v in point.env if v is not None) or "none"
    prefill = point.op == PREFILL
    return {
        "op": "prefill" if prefill else "decode",
        "device": f"{point.arch}:{point.cu_num}",
        "heads": str(point.heads),
        "dtype": NOT_APPLICABLE if prefill else point.dtype,
        "qlen": NOT_APPLICABLE if prefill else str(point.qlen),
        "page_size": NOT_APPLICABLE if prefill else str(point.page_size),
        "split": NOT_APPLICABLE if prefill else ("none" if point.max_split_per_batch == -1 else "capped"),
        "causal": "causal" if point.causal else "noncausal",
        "sparse": NOT_APPLICABLE if prefill else ("dense" if point.topk < 0 else f"topk {point.topk}"),
        "tiles": point.tiles if prefill else NOT_APPLICABLE,
        "env": NOT_APPLICABLE if prefill else env,
    }


#: Axes whose every value says which axis it is (``noncausal``, ``topk 64``): a condition on one shows the value alone.
SELF_NAMED = frozenset({"causal", "sparse"})


def natural(value: str) -> tuple[Any, ...]:
    """A sort key reading the numbers in a value as numbers: ``qlen 2`` before ``qlen 16``, ``topk 64`` before
    ``topk 2048``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", value))


def condition(axis: str, value: str) -> str:
    """An axis value as reports name it: ``heads 32``, ``env none``, ``noncausal``, ``topk 64``."""
    return value if axis in SELF_NAMED else f"{axis} {value}"


def listed(values: list[str]) -> str:
    """Values of one axis in a line: ``16, 64, 128``; joined by `` | `` where a value holds a comma itself (an env of
    two variables, ``A=1,B=0``), so that no reader takes it for two."""
    return (" | " if any("," in value for value in values) else ", ").join(values)


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

    def scope(self) -> str:
        """``heads 32 x dtype fp8 x noncausal`` (axes in a fixed order, each as :func:`condition` names it), or
        ``everywhere``."""
        shown = [condition(axis, self.where[axis]) for axis in reversed(AXES) if axis in self.where]
        return " x ".join(shown) or "everywhere"

    def describe(self) -> str:
        scope = "for " + self.scope() if self.where else "everywhere"
        if self.everywhere:
            extent = f"at every batch ({_batches(self.all_batches)})"
        else:
            extent = f"at batch {_batches(self.batches)} only"
        return f"diverges {scope}: {self.diverged} of {self.cases} cases, {extent}"

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "cases": self.cases, "diverged": self.diverged, "everywhere": self.everywhere,
                "batches": [min(self.batches), max(self.batches)], "description": self.describe()}  # fmt: skip


def _batches(sizes: list[int]) -> str:
    """``1..296``, or ``163`` where they are one size."""
    return f"{min(sizes)}" if min(sizes) == max(sizes) else f"{min(sizes)}..{max(sizes)}"


@dataclass
class Summary:
    regions: list[Region]
    #: axis -> value -> [cases, diverged], values in :func:`natural` order
    marginals: dict[str, dict[str, list[int]]]

    def never(self) -> dict[str, list[str]]:
        """Per axis, the values that never diverged (over at least one judged case)."""
        out = {}
        for axis in reversed(AXES):
            values = {v: counts for v, counts in self.marginals[axis].items() if v != NOT_APPLICABLE}
            clean = [value for value, (_, diverged) in values.items() if diverged == 0]
            if clean and len(values) > 1:
                out[axis] = clean
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"regions": [r.to_dict() for r in self.regions], "never_diverges": self.never(), "marginals": self.marginals}


#: An axis-value pattern over group keys (tuples in AXES order): (axis position, value) pairs.
_Pattern = tuple[tuple[int, str], ...]


def _pattern(where: dict[str, str]) -> _Pattern:
    return tuple((AXES.index(axis), value) for axis, value in where.items())


def _fits(pattern: _Pattern, key: tuple[str, ...]) -> bool:
    return all(key[i] == value for i, value in pattern)


def _any_fits(pattern: _Pattern, keys: Sequence[tuple[str, ...]]) -> bool:
    return any(_fits(pattern, key) for key in keys)


def _purity(where: dict[str, str], groups: dict[tuple[str, ...], list[int]]) -> tuple[float, int]:
    """Share of divergent cases in the region, and its cases."""
    pattern = _pattern(where)
    cases = diverged = 0
    for key, (n, hit) in groups.items():
        if _fits(pattern, key):
            cases, diverged = cases + n, diverged + hit
    return (diverged / cases if cases else 0.0), cases


def _narrow(seed: dict[str, str], groups: dict[tuple[str, ...], list[int]], clean: list[tuple[str, ...]]) -> dict[str, str]:
    """The region around ``seed``: add its values one at a time, purest first, until it is (nearly) all divergent."""
    where: dict[str, str] = {}
    while _any_fits(_pattern(where), clean) and _purity(where, groups)[0] < PURE:
        best: tuple[float, int, str] | None = None
        for axis in AXES:
            if axis in where:
                continue
            score = (*_purity({**where, axis: seed[axis]}, groups), axis)
            if best is None or score[:2] > best[:2]:
                best = score
        assert best is not None  # the seed itself is not clean, so narrowing to all of it ends the loop
        where[best[2]] = seed[best[2]]
    return where


#: A judged case's point and its :func:`labels`, by case index: parsed once as verdicts arrive, read by the
#: summary and the rules when the sweep ends.
Parsed = Mapping[int, tuple[Point, dict[str, str]]]


def labelled(result: CaseResult) -> tuple[Point, dict[str, str]]:
    """A verdict's point and its :func:`labels`."""
    point = Point.from_dict(result.point)
    return point, labels(point)


def judged(results: Sequence[CaseResult]) -> list[CaseResult]:
    """The verdicts summaries are made of: equal and divergent (skipped / undefined left out)."""
    return [r for r in results if r.status in (EQUAL, DIVERGED)]


def summarise(results: Sequence[CaseResult], parsed: Parsed | None = None) -> Summary:
    """Regions and per-value counts over the equal and divergent verdicts (skipped/undefined left out)."""
    keyed = [(tuple((parsed[r.index] if parsed else labelled(r))[1][a] for a in AXES), r) for r in judged(results)]
    marginals: dict[str, dict[str, list[int]]] = {axis: {} for axis in AXES}
    groups: dict[tuple[str, ...], list[int]] = {}
    for key, result in keyed:
        hit = int(result.status == DIVERGED)
        group = groups.setdefault(key, [0, 0])
        group[0] += 1
        group[1] += hit
    for key, (cases, hits) in groups.items():  # per value: the sum over its groups
        for axis, value in zip(AXES, key):
            counts = marginals[axis].setdefault(value, [0, 0])
            counts[0] += cases
            counts[1] += hits
    marginals = {axis: dict(sorted(values.items(), key=lambda item: natural(item[0]))) for axis, values in marginals.items()}
    clean = [key for key, (_, hit) in groups.items() if hit == 0]
    seeds = sorted((key for key, (_, hit) in groups.items() if hit), key=lambda k: -groups[k][1])
    regions: list[Region] = []
    patterns: list[_Pattern] = []
    for key in seeds:
        if not any(_fits(pattern, key) for pattern in patterns):
            regions.append(Region(_narrow(dict(zip(AXES, key)), groups, clean)))
            patterns.append(_pattern(regions[-1].where))
    # the first region a group's key fits, once per group rather than once per case
    home = {key: next((r for r, p in zip(regions, patterns) if _fits(p, key)), None) for key in groups}
    for key, result in keyed:
        region = home[key]
        if region is not None:
            batch = len(result.point["seq_lens"])
            region.cases += 1
            region.all_batches.append(batch)
            if result.status == DIVERGED:
                region.diverged += 1
                region.batches.append(batch)
    return Summary(regions, marginals)
