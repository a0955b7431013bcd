"""Soundness on every divergence: each side of a compared pair judged by check, with the numbers read first.

The seed incident's call (32 fp8 heads, single-token decode on gfx950) plans
folded 16 x 2 on v0.1.16.post2 and native on e4048607: an intended re-tiling,
sound on both sides. A new plan that drops a work leaves kv uncovered: the
headline names the broken side and the gap.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers.calls import incident
from helpers.cli import cli_json, run

import mla_golden
from mla_golden import reference
from mla_golden.call import Call
from mla_golden.golden.store import Golden, GoldenStore
from mla_golden.soundness import judge


def _pair() -> tuple[Call, Call]:
    return incident(reference.at("v0.1.16.post2")), incident(reference.at("e4048607"))


def _works(call: Call) -> int:
    return int(call.written["work_info_set"].reshape(-1, 8).any(dim=1).sum())


def test_an_intended_retiling_is_sound_on_both_sides_with_its_numbers() -> None:
    old, new = _pair()
    found = mla_golden.diff(old, new)
    assert not found.equal and found.soundness is not None
    before, after = found.soundness.expected, found.soundness.actual
    assert (before.sound, after.sound) == (True, True) and found.soundness.headline() == "sound on both sides"
    # the kernel path as the dispatch decides it: v0.1.16.post2 folds 32 fp8 heads into 16 x 2 on gfx950
    assert before.kernel == "serial/folded x2" and after.kernel.endswith("/native")
    assert (before.works, after.works) == (_works(old), _works(new))
    assert after.rules == "e4048607"
    assert after.kv_max >= after.kv_mean > 0 and after.balance == round(after.kv_max / after.kv_mean, 2)
    text = mla_golden.render_text(found)
    assert "soundness: sound on both sides (works " in text and "kernel serial/folded x2 -> " in text
    document = json.loads(mla_golden.to_json(found))["soundness"]
    assert document["both_sound"] is True and document["expected"]["kernel"] == "serial/folded x2"


def _drop_last_work(call: Call) -> Call:
    """The plan with its last work item unwritten (and work_indptr ending before it): its kv range left uncovered."""
    broken = copy.deepcopy(call)
    rows = broken.written["work_info_set"].reshape(-1, 8).any(dim=1)
    last = int(rows.nonzero().max())
    broken.written["work_info_set"].reshape(-1, 8)[last] = False
    broken.outputs["work_info_set"].reshape(-1, 8)[last] = 0  # a golden holds zeros where nothing was written
    indptr = broken.outputs["work_indptr"]
    indptr[indptr > last] = last
    return broken


def test_a_new_plan_that_drops_a_work_is_named_unsound_in_the_headline() -> None:
    old, new = _pair()
    broken = _drop_last_work(new)
    found = mla_golden.diff(old, broken)
    assert found.soundness is not None and found.soundness.expected.sound and found.soundness.actual.sound is False
    headline = found.soundness.headline()
    assert headline.startswith("the new plan breaks "), headline
    assert "coverage" in found.soundness.actual.violated or "work_indptr" in found.soundness.actual.violated
    assert headline in mla_golden.render_text(found)


def test_a_plan_no_ported_version_made_is_not_judged_on_its_head_folding() -> None:
    old, _ = _pair()
    as_tree = copy.deepcopy(old)
    # the folded plan, as an aiter tree no port plans like would have recorded it: which folding its kernel reads is unknown
    as_tree.provenance["planner"] = {"backend": "aiter-src", "name": "aiter-src@0123456789ab", "version": None, "commit": "0123456789ab" * 3}
    side = judge(as_tree)
    assert side.sound is True and side.rules == "e4048607"
    assert any(note.startswith("head folding not judged: aiter-src@0123456789ab is no ported version") for note in side.notes)
    assert mla_golden.invariants(as_tree).invariants == {"work.folding"}  # check itself still says it


def test_a_call_that_raised_has_nothing_to_judge() -> None:
    old, new = _pair()
    raised = Call(**{**new.__dict__, "error": "AiterCheckError: boom", "outputs": {}, "written": {}})
    found = mla_golden.diff(old, raised)
    assert found.soundness is not None and found.soundness.actual.sound is None
    assert found.soundness.both_sound and found.soundness.headline() == "the new plan raised; the other is sound"


def test_the_run_leads_with_soundness_and_its_json_carries_both_sides(tmp_path: Path) -> None:
    root = tmp_path
    old, new = _pair()
    GoldenStore(root / "old").write(Golden("incident", old))
    GoldenStore(root / "new").write(Golden("incident", new))
    GoldenStore(root / "broken").write(Golden("incident", _drop_last_work(new)))
    ran = run("diff", root / "new", "--against", root / "old")
    assert ran.code == 1 and ran.stdout.splitlines()[0] == "mla-golden diff: 1 result(s): 1 diverged, sound on both sides"
    ran = run("diff", root / "broken", "--against", root / "old")
    assert ran.stdout.splitlines()[0].startswith("mla-golden diff: 1 result(s): 1 diverged, 1 unsound: incident: the new plan breaks ")
    _, document = cli_json("diff", root / "broken", "--against", root / "old")
    assert document["soundness"].startswith("1 unsound: incident: the new plan breaks ")
    sides = document["results"][0]["diff"]["soundness"]
    assert sides["expected"]["sound"] is True and sides["actual"]["sound"] is False
    assert sides["expected"]["kernel"] == "serial/folded x2" and isinstance(sides["actual"]["balance"], float)


def test_equal_calls_are_not_judged() -> None:
    old, _ = _pair()
    assert mla_golden.diff(old, copy.deepcopy(old)).soundness is None


def test_a_diverged_diff_computes_each_sides_geometry_once_and_judges_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The soundness judge reads the geometry the diff computed, so each side's is computed once, not twice."""
    from mla_golden import differ, soundness
    from mla_golden.geometry import geometry

    old, new = _pair()
    computed: list[Call] = []

    def counted(call: Call) -> object:
        computed.append(call)
        return geometry(call)

    monkeypatch.setattr(differ, "geometry", counted)
    monkeypatch.setattr(soundness, "geometry", counted)
    found = mla_golden.diff(old, new)
    assert [id(c) for c in computed] == [id(old), id(new)]
    computed.clear()
    assert mla_golden.diff(old, copy.deepcopy(old)).geometry == {} and computed == []  # equal: nothing to summarise
    assert found.soundness is not None
    assert found.soundness.to_dict() == soundness.judge_pair(old, new).to_dict()
    assert judge(new, geometry(new)) == judge(new)


def test_big_pairs_are_judged_on_two_threads_as_they_are_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """From soundness.CONCURRENT_ROWS work rows a side, the expected side is judged on a second thread: each side's
    verdict is the one the serial judge gives, whichever side breaks, and each thread plans with its own call's
    env and device (set here to differ: one side recorded on gfx942/304 under AITER_MLA_META_USE_PARALLEL=0, which
    plans serially and fits none of gfx942's 304 CU parts, beside sound gfx950 plans)."""
    import threading

    from mla_golden import soundness

    old, new = _pair()
    elsewhere = copy.deepcopy(new)
    elsewhere.env = {**elsewhere.env, "AITER_MLA_META_USE_PARALLEL": "0"}
    elsewhere.device = {**elsewhere.device, "arch": "gfx942", "cu_num": 304}
    pairs = [(old, new), (old, _drop_last_work(new)), (_drop_last_work(old), new), (elsewhere, new), (new, elsewhere)]
    serial = [soundness.judge_pair(a, b).to_dict() for a, b in pairs]
    assert serial[3]["expected"]["kernel"] == "serial/native" and serial[3]["actual"]["kernel"] == "parallel/native"
    assert not serial[3]["expected"]["sound"] and serial[3]["actual"]["sound"]
    threads: list[str] = []
    judged = soundness.judge

    def noted(call: Call, shape: object = None) -> soundness.Side:
        threads.append(threading.current_thread().name)
        return judged(call, shape)  # type: ignore[arg-type]

    monkeypatch.setattr(soundness, "judge", noted)
    monkeypatch.setattr(soundness, "CONCURRENT_ROWS", 1)
    for _ in range(3):  # the env and device of one side must never leak into the other's check
        assert [soundness.judge_pair(a, b).to_dict() for a, b in pairs] == serial
    assert sum(name.startswith("mla-golden-judge") for name in threads) == 3 * len(pairs)
    monkeypatch.setattr(soundness, "CONCURRENT_ROWS", 1 << 62)
    threads.clear()
    soundness.judge_pair(old, new)
    assert threads == [threading.current_thread().name] * 2
