"""Planner specs of ``mla-golden sweep``: BACKEND[@VERSION][:ARCH[:CU]][+ENV=VAL...]."""

from __future__ import annotations

from pathlib import Path

import pytest

from mla_golden.errors import SpecError
from mla_golden.sweeper.planners import PlannerSpec, parse_planner_spec, resolve_planner


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("reference", PlannerSpec("reference")),
        ("aiter", PlannerSpec("aiter")),
        ("reference@e4048607", PlannerSpec("reference", "e4048607")),
        ("reference@v0.1.16.post2", PlannerSpec("reference", "v0.1.16.post2")),
        ("reference@e4048607:gfx942:80", PlannerSpec("reference", "e4048607", "gfx942", 80)),
        ("reference:gfx950", PlannerSpec("reference", None, "gfx950")),
        (
            "reference@aded0f84+AITER_MLA_META_USE_PARALLEL=1",
            PlannerSpec("reference", "aded0f84", env=(("AITER_MLA_META_USE_PARALLEL", "1"),)),
        ),
        (
            "reference:gfx942:304+AITER_ENABLE_EXPERIMENTAL=1+AITER_MLA_META_USE_PARALLEL=unset",
            PlannerSpec(
                "reference", None, "gfx942", 304, (("AITER_ENABLE_EXPERIMENTAL", "1"), ("AITER_MLA_META_USE_PARALLEL", None))
            ),
        ),
    ],
)
def test_specs_parse_and_print_back(text: str, spec: PlannerSpec) -> None:
    assert parse_planner_spec(text) == spec
    assert parse_planner_spec(str(spec)) == spec, "str() writes the same notation back"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("referenc", "unknown backend 'referenc'"),
        ("aiter@e4048607", "only the reference has versions"),
        ("reference:mi300", "expected BACKEND[@VERSION][:ARCH[:CU]]"),
        ("reference:gfx90a", "unknown arch 'gfx90a' (known: gfx942, gfx950)"),
        ("reference:gfx999:100", "unknown arch 'gfx999' (known: gfx942, gfx950)"),
        ("reference@e4048607:gfx999:8+AITER_MLA_META_USE_PARALLEL=1", "unknown arch 'gfx999'"),
        ("python:helpers.planted_planners:clean:gfx999:8", "unknown arch 'gfx999'"),
        ("reference+AITER_FOO=1", "AITER_FOO is not a planner env var"),
        ("reference:gfx942:0", "expected BACKEND"),
        ("auto", "not auto"),
        ("reference@:gfx942", "expected BACKEND"),
    ],
)
def test_bad_specs_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_planner_spec(text)
    assert problem in str(info.value) and repr(text) in str(info.value)


def test_device_override_and_env_pins() -> None:
    spec = parse_planner_spec("reference:gfx942+AITER_MLA_META_USE_PARALLEL=0")
    assert spec.device_for("gfx950", 256) == ("gfx942", 304), "an arch alone means its full part"
    assert parse_planner_spec("reference").device_for("gfx950", 256) == ("gfx950", 256), "no override: the case's own device"
    planner = resolve_planner(spec)
    env = planner.env_for({"AITER_ENABLE_EXPERIMENTAL": "1", "AITER_MLA_META_USE_PARALLEL": None})
    assert env == {"AITER_ENABLE_EXPERIMENTAL": "1", "AITER_MLA_META_USE_PARALLEL": "0"}


def test_versions_resolve_to_the_versioned_reference() -> None:
    old = resolve_planner("reference@aded0f84")
    assert str(old.module.version) == "aded0f84" and "aded0f84" in old.label
    with pytest.raises(SpecError) as info:
        resolve_planner("reference@deadbeef")
    assert "e4048607" in str(info.value), "an unknown version lists the known ones"


def test_live_aiter_that_cannot_run_here_is_a_spec_error() -> None:
    pytest.importorskip("torch")
    try:
        import aiter  # noqa: F401
    except Exception:
        with pytest.raises(SpecError) as info:
            resolve_planner("aiter")
        assert "aiter" in str(info.value)
    else:
        pytest.skip("aiter imports here")


@pytest.mark.parametrize(
    ("text", "backend", "arch", "cu"),
    [
        ("python:helpers.planted_planners:clean", "python:helpers.planted_planners:clean", None, None),
        ("python:helpers.planted_planners:clean:gfx950", "python:helpers.planted_planners:clean", "gfx950", None),
        ("python:helpers.planted_planners:clean:gfx942:80", "python:helpers.planted_planners:clean", "gfx942", 80),
        ("python:helpers.planted_planners", "python:helpers.planted_planners", None, None),
    ],
)
def test_a_plug_in_planner_keeps_its_colons_and_takes_a_device(text: str, backend: str, arch: str | None, cu: int | None) -> None:
    spec = parse_planner_spec(text)
    assert (spec.backend, spec.backend_spec, spec.arch, spec.cu_num) == ("python", backend, arch, cu)
    assert parse_planner_spec(str(spec)) == spec


def test_a_plug_in_planner_plans_like_the_reference_it_copies() -> None:
    from mla_golden.sweeper.evaluate import DIVERGED, EQUAL, evaluate
    from mla_golden.sweeper.space import DECODE, Point

    reference, clean = resolve_planner("reference:gfx950"), resolve_planner("python:helpers.planted_planners:clean:gfx950")
    assert clean.label == "plug-in planner helpers.planted_planners:clean"
    point = Point(DECODE, "gfx942", 304, 16, (3000, 40), q_dtype="fp8", kv_dtype="fp8")
    assert evaluate(point, reference, clean).status == EQUAL
    assert evaluate(point, resolve_planner("reference"), clean).status == DIVERGED, "the plug-in plans for gfx950, as told"
    buggy = resolve_planner("python:helpers.planted_planners:one_bug:gfx950")
    assert evaluate(point, reference, buggy).status == DIVERGED
    assert evaluate(Point(DECODE, "gfx942", 304, 16, (1999, 40), q_dtype="fp8", kv_dtype="fp8"), reference, buggy).status == EQUAL


def test_a_sweep_parses_each_planner_spec_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The driver parses both sides before anything starts and hands the parsed specs on: resolving, the workers,
    their caches and the reproducers' goldens take them as they are."""
    import mla_golden
    from mla_golden.sweeper import driver, planners
    from mla_golden.sweeper.space import DECODE, Point

    parsed: list[str] = []

    def counting(text: str) -> PlannerSpec:
        parsed.append(text)
        return parse_planner_spec(text)

    for module in (driver, planners):
        monkeypatch.setattr(module, "parse_planner_spec", counting)
    point = Point(DECODE, "gfx942", 304, 16, (3000, 40), q_dtype="fp8", kv_dtype="fp8")
    findings = mla_golden.sweep("reference", "reference:gfx942:80", [point], out=tmp_path)
    assert findings.diverged and findings.reproducers[0].written, "a case was judged, shrunk and written"
    assert sorted(parsed) == ["reference", "reference:gfx942:80"]
