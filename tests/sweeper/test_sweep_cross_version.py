"""A sweep between two reference versions finds what aiter's own cross-version records show.

The records (``cross_version-*.jsonl``) hold the same inputs run through an
older aiter commit and through e4048607, and whether the two disagree. Every
record whose call a deployment-shaped sweep point makes (``sweep_records``)
is swept on ``reference@OLD`` vs ``reference@e4048607``: the sweep must
diverge exactly where the record says the commits differ, and shrink each
divergence to a smaller call that still diverges. The same sweep runs on a
local Ray instance with the same verdicts.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from helpers.sweep_records import cross_version, point_of

import mla_golden
from mla_golden.binding import canonical_params
from mla_golden.schema import OUTPUTS, schema_for
from mla_golden.sweeper.evaluate import DIVERGED, UNDEFINED, evaluate, run_side, template
from mla_golden.sweeper.planners import resolve_planner
from mla_golden.sweeper.space import Point

NEW = "reference@e4048607"


def _covered(old12: str) -> list[tuple[dict[str, Any], Point]]:
    """(cross-version record, its sweep point) for every record a sweep point can make."""
    pairs = []
    for cross, new in cross_version(old12):
        point = point_of(new)
        if point is not None:
            pairs.append((cross, point))
    return pairs


def _sample(pairs: list[tuple[dict[str, Any], Point]], equal: int) -> list[tuple[dict[str, Any], Point]]:
    """Every record that differs, and ``equal`` of the rest (a fixed sample)."""
    differs = [p for p in pairs if p[0]["differs"]]
    same = [p for p in pairs if not p[0]["differs"]]
    return differs + random.Random(0).sample(same, min(equal, len(same)))


@pytest.mark.parametrize("old12", ["aded0f84", "33d168a0"])
def test_points_make_exactly_the_recorded_calls(old12: str) -> None:
    new = {c["case_id"]: n for c, n in cross_version(old12)}
    covered = _covered(old12)
    assert len(covered) > 200, "the sweep's deployment shapes cover most records"
    planner = resolve_planner(NEW)
    for cross, point in covered:
        record = new[cross["case_id"]]
        call, _ = template(point, planner)
        schema = schema_for(record["op"])
        scalars = {k: v for k, v in {**record["call"]["args"], **record["call"]["kwargs"]}.items() if not isinstance(v, list)}
        params, _ = canonical_params(record["op"], scalars)
        assert call.params == params, cross["case_id"]
        inputs = {schema.canonical(k): v for k, v in record["call"]["args"].items() if isinstance(v, list)}
        assert {n: t.tolist() for n, t in call.inputs.items()} == inputs, cross["case_id"]
        assert {k: v for k, v in call.env.items() if v is not None} == {k: v for k, v in record["env"].items() if v is not None}
        assert (call.device["arch"], call.device["cu_num"]) == (record["device"]["arch"], record["device"]["cu_num"])
        side = run_side(point, planner)
        recorded = {schema.canonical(n): tuple(b["shape"]) for n, b in record["buffers"].items() if isinstance(b, dict) and "shape" in b}
        assert dict(zip(OUTPUTS, side.shapes)) == {n: recorded[n] for n in OUTPUTS}, cross["case_id"]


def _check_against_records(old12: str, findings: Any, sample: list[tuple[dict[str, Any], Point]]) -> None:
    by_index = {r.index: r for r in findings.results}
    mismatched = []
    for index, (cross, _) in enumerate(sample):
        result = by_index[index]
        if result.status == UNDEFINED:
            assert cross.get("old", {}).get("anomalies") or cross["differs"], "undefined only where aiter's result is"
            continue
        if (result.status == DIVERGED) != cross["differs"]:
            mismatched.append((cross["case_id"], cross["differs"], result.status, result.detail))
    assert not mismatched, f"{len(mismatched)} of {len(sample)} records disagree with the sweep: {mismatched[:5]}"


@pytest.mark.slow
@pytest.mark.parametrize(("old12", "equal"), [("aded0f84", 25), ("33d168a0", 10)])
def test_version_sweep_finds_the_recorded_divergences_and_shrinks_them(old12: str, equal: int) -> None:
    sample = _sample(_covered(old12), equal)
    old = f"reference@{old12}"
    findings = mla_golden.sweep(old, NEW, [p for _, p in sample])
    assert findings.stopped_by == "space" and len(findings.results) == len(sample)
    _check_against_records(old12, findings, sample)
    a, b = resolve_planner(old), resolve_planner(NEW)
    for result in findings.results:
        if result.status != DIVERGED:
            continue
        minimal = Point.from_dict(result.minimal)
        assert minimal.batch <= len(result.point["seq_lens"]) and max(minimal.seq_lens) <= max(result.point["seq_lens"])
        again = evaluate(minimal, a, b)
        assert again.status == DIVERGED and list(again.signature) == result.signature, "the reproducer diverges as its group does"


@pytest.mark.slow
def test_the_same_sweep_runs_on_a_local_ray_cluster() -> None:
    ray = pytest.importorskip("ray")
    sample = _sample(_covered("33d168a0"), 6)[:24]
    points = [p for _, p in sample]
    inline = mla_golden.sweep("reference@33d168a0", NEW, points)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = mla_golden.sweep("reference@33d168a0", NEW, points, ray="local")
        # With one of the two CPUs held by other work, the sweep runs on the free one instead of waiting for it.
        class Holder:  # defined here: Ray ships it by value (the workers cannot import the test module)
            def ping(self) -> int:
                return 1

        holder = ray.remote(num_cpus=1)(Holder).remote()
        ray.get(holder.ping.remote())
        crowded: list[Any] = []
        thread = threading.Thread(target=lambda: crowded.append(mla_golden.sweep("reference@33d168a0", NEW, points, ray="local")))
        thread.start()
        thread.join()  # no deadline a loaded machine could miss: a sweep that waits for the held CPU keeps this waiting
        assert crowded, "the crowded sweep ended without a result"
    finally:
        ray.shutdown()
    # The verdicts and the causes are the same; a reproducer may differ: a worker tries a case of a cause it knows at
    # the lengths it shrank that cause to, and which cases a worker sees first depends on how chunks are spread.
    a, b = resolve_planner("reference@33d168a0"), resolve_planner(NEW)
    for found in (on_ray, crowded[0]):
        assert [(r.index, r.status, r.kind) for r in found.results] == [(r.index, r.status, r.kind) for r in inline.results]
        assert [g.signature for g in found.groups] == [g.signature for g in inline.groups]
        for group in found.groups:
            again = evaluate(Point.from_dict(group.reproducer.point), a, b)
            assert (group.signature[0], *again.signature) == group.signature and group.reproducer.confirmed
    assert on_ray.diverged
    _check_against_records("33d168a0", on_ray, sample)
