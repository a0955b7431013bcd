"""What changes if we bump aiter: ``--backend reference@VERSION``, goldens naming their planner, replays on it.

Goldens are recorded the way a builder on an older aiter makes them: buffers
sized by that version's own ``get_mla_metadata_info_v1``, the planner called
with a record's inputs, under the spy. What the upgrade must change comes from
aiter itself: each ``cross_version-aded0f84*`` conformance record says whether
aded0f84 and e4048607 disagree on its inputs and, per field, the first flat
index where they do, with both values.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.cli import cli_json, run
from helpers.conformance import RecordedOn, call_arguments, records
from helpers.readme_blocks import block
from helpers.repo import ROOT

import mla_golden
from mla_golden import reference
from mla_golden.context import as_recorded
from mla_golden.diff_data import Cause
from mla_golden.golden.store import Golden, GoldenStore, load
from mla_golden.schema import OUTPUTS

OLD, NEW = "aded0f84", "e4048607"
UPGRADE = f"planner behaviour change reference@{OLD} -> reference@{NEW}"
#: Records where aded0f84 and e4048607 disagree: gfx950 fp8 32 heads at max_seqlen_qo 3 (folded at aded0f84,
#: native at e4048607: other tiles, fewer from the sizing helper), and is_causal=False with several q tiles
#: (aded0f84 still trims each tile's kv as if causal).
CHANGED = ("mla-cc94bc618e274cfe", "mla-9e38bd0438a1297a", "mla-3c0080b1ca19d300")
#: Records the upgrade leaves alone.
SAME_COUNT = 3
MATRIX = """\
format = "mla-golden-matrix/1"

[[decode]]
name = "mtp3"
heads = 32
dtype = "fp8"
qlen = 3
batch = 4
context = "jitter:2000"
devices = ["gfx950:256"]

[[decode]]
name = "plain"
heads = 16
dtype = "fp8"
batch = 4
context = "jitter:2000"
devices = ["gfx942:304"]
"""


def _cross_records() -> dict[str, dict[str, Any]]:
    return {rec["case_id"]: rec for rec in records(f"cross_version-{OLD}")}


def _picked() -> list[dict[str, Any]]:
    """The CHANGED records and the first SAME_COUNT unchanged decode records with legacy dtypes."""
    recs = _cross_records()
    assert recs, "the aded0f84 cross-version conformance records are missing"
    same = [
        rec for rec in recs.values()
        if not rec["differs"] and rec["op"] == "get_mla_metadata_v1" and rec["call"]["kwargs"]["dtype_q"]
        and rec["call"]["kwargs"]["page_size"] == 1 and len(rec["call"]["args"]["seqlens_kv_indptr"]) < 40
    ][:SAME_COUNT]  # fmt: skip
    return [recs[case] for case in CHANGED] + same


def _record_as_builder(store: GoldenStore, version: str, rec: dict[str, Any]) -> None:
    """Record ``rec``'s call on ``reference@version`` as a builder would: sized by that version's helper."""
    planners = reference.at(version)
    call = rec["call"]
    args, kwargs = call_arguments(call)
    a, k = call["args"], call["kwargs"]
    with as_recorded(RecordedOn.of(rec)):
        sizes = planners.get_mla_metadata_info_v1(
            len(a["seqlens_qo_indptr"]) - 1, k["max_seqlen_qo"], a["num_heads_per_head_k"],
            kwargs["dtype_q"], kwargs["dtype_kv"], k["topk"] != -1, fast_mode=k["fast_mode"],
            max_split_per_batch=k["max_split_per_batch"],
        )  # fmt: skip
        buffers = {name: torch.empty(shape, dtype=dtype) for name, (shape, dtype) in zip(OUTPUTS, sizes)}
        with mla_golden.spy(planners) as spy, contextlib.suppress(reference.AiterCheckError):
            planners.get_mla_metadata_v1(*args, **buffers, **kwargs)  # a rejected call is a golden too
    assert store.write(Golden(rec["case_id"], spy.calls.one())).value == "written"


def _planner_cause(want: dict[str, Any]) -> Cause:
    """The cause the record implies: the written region moved (an element written by one commit only), or values only.

    The record compares each commit's outputs in the buffers its own sizing
    helper gave, as the upgrade preview replays them.
    """
    geometry = any(field["written_only_old"] or field["written_only_new"] for field in want["fields"].values())
    return Cause.PLANNER_GEOMETRY if geometry else Cause.PLANNER_VALUES


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Goldens of the picked records, recorded on reference@aded0f84."""
    root = tmp_path_factory.mktemp("upgrade") / "goldens"
    store = GoldenStore(root)
    for rec in _picked():
        _record_as_builder(store, OLD, rec)
    return root


def test_a_golden_names_the_planner_version_that_recorded_it(old_tree: Path) -> None:
    golden = load(next(GoldenStore(old_tree).paths()))
    planner = golden.call.provenance["planner"]
    assert planner == {
        "backend": "reference", "name": f"reference@{OLD}", "version": OLD,
        "commit": "aded0f84013b2a82f839991616235069b12dfae8",
    }  # fmt: skip
    assert golden.call.provenance["reference_of"] == "aiter aded0f84013b"
    code, out, _ = run("show", golden.path)
    assert code == 0 and f"recorded by reference@{OLD} at " in out
    code, listed = cli_json("list", old_tree)
    assert code == 0 and {row["planner"] for row in listed["goldens"]} == {f"reference@{OLD}"}


def test_plain_reference_replays_each_golden_on_the_version_that_recorded_it(old_tree: Path) -> None:
    code, report = cli_json("diff", old_tree, "--backend", "reference")
    assert code == 0 and report["summary"] == {"equal": len(CHANGED) + SAME_COUNT}
    for result in report["results"]:
        assert result["notes"][0] == f"replayed on reference@{OLD}, the planner version that recorded this golden"
    assert report["by_cause"] == []
    _, _, err = run("diff", old_tree, "--backend", "reference")
    assert "backend: reference (each golden replayed on the ported version that recorded it, else on the newest: " in err
    assert f"backend: reference@{NEW}" not in err, "the header does not name a version these goldens do not replay on"


def test_upgrade_preview_names_the_planner_change_and_where_aiter_says_it_differs(old_tree: Path) -> None:
    recs = _cross_records()
    code, report = cli_json("diff", old_tree, "--backend", f"reference@{NEW}", "--max-items", "8")
    assert code == 1
    assert report["backend"]["spec"] == f"reference@{NEW}" and report["backend"]["version"]["date"] == "2026-08-22"
    results = {r["key"]: r for r in report["results"]}
    assert {k for k, r in results.items() if r["status"] == "diverged"} == set(CHANGED)
    assert report["summary"] == {"equal": SAME_COUNT, "diverged": len(CHANGED)}
    kinds = {case: _planner_cause(recs[case]["diff"]) for case in CHANGED}
    assert report["by_cause"] == [
        {"label": UPGRADE, "causes": sorted(set(kinds.values())), "count": len(CHANGED), "keys": sorted(CHANGED),
         "planner": {"old": f"reference@{OLD}", "new": f"reference@{NEW}"}},
    ]  # fmt: skip
    for case in CHANGED:
        result, want = results[case], recs[case]["diff"]
        diff = result["diff"]
        assert result["cause"] == kinds[case] and result["cause_label"] == UPGRADE, case
        assert diff["params"] == [] and diff["device"] == [] and diff["env"] == [], "same call: only the planner moved"
        assert not any("replayed on" in note for note in result["notes"]), "pinned: no switch to the recording version"
        flagged = {f["name"]: f for f in diff["fields"] if f["status"] != "equal"}
        assert set(flagged) == set(want["fields"]), case
        resized = want.get("buffer_shapes", {})
        for f in diff["fields"]:  # sized as a caller on NEW sizes them: aiter's new helper's shapes
            assert f["actual_shape"] == resized.get(f["name"], {}).get("new_shape", f["expected_shape"]), (case, f["name"])
        sizing = [n for n in result["notes"] if "buffers sized by" in n]
        if resized:
            changes = ", ".join(f"{name} {s['old_shape']} -> {s['new_shape']}" for name, s in resized.items())
            assert sizing == [f"actual: buffers sized by reference@{NEW}'s get_mla_metadata_info_v1, as a caller on it allocates them: {changes}"]
        else:
            assert sizing == [], case
        for name, field in want["fields"].items():
            first = field["first_diffs"][0]
            got = flagged[name]["first"]
            assert (got["flat"], got["expected"], got["actual"]) == (first["index"], first["old"], first["new"]), (case, name)
            assert flagged[name]["count"] == field["num_diff_elements"], (case, name)
        if "work_info_set" in want["fields"]:
            rows = {w["index"] for w in diff["work_items"]}
            assert want["fields"]["work_info_set"]["first_diffs"][0]["row"] in rows
            item = diff["work_items"][0]
            assert item["expected"]["columns"]["batch_idx"] >= 0 and item["changed"], "work items decoded"


def test_upgrade_preview_text_groups_the_divergences_by_cause(old_tree: Path) -> None:
    code, out, err = run("diff", old_tree, "--backend", f"reference@{NEW}", "--max-items", "4")
    assert code == 1
    assert f"backend: reference@{NEW}" in err
    assert out.count(f"== {UPGRADE}: {len(CHANGED)} call(s)") == 1
    assert out.count(f"likely cause: {UPGRADE}") == len(CHANGED)
    assert "params changed" not in out
    assert "divergent work items (work_info_set)" in out
    # mla-cc94bc618e274cfe: aded0f84 folds 32 heads, so one q tile of 3 rows is split across 97 partials
    assert "group 0 expected: qo [0, 3) <- partials [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45, ...] (97 partials)" in out
    by_cause = out[out.index("not ok, by cause"):]
    assert re.search(rf"│ {re.escape(UPGRADE)} +│ +{len(CHANGED)} │", by_cause)


def test_a_version_that_changes_nothing_there_is_equal(old_tree: Path, tmp_path: Path) -> None:
    tree = tmp_path / "same"
    shutil.copytree(old_tree, tree)
    for case in CHANGED:
        next(tree.rglob(f"{case}.safetensors")).unlink()
    code, report = cli_json("diff", tree, "--backend", f"reference@{NEW}")
    assert code == 0 and report["summary"] == {"equal": SAME_COUNT} and report["by_cause"] == []


def test_record_and_diff_by_version_through_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(MATRIX)
    code, report = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", f"reference@{OLD}", "--out", tmp_path / "g")
    assert code == 0 and report["summary"] == {"written": 2}
    assert report["backend"]["version"]["name"] == OLD
    code, report = cli_json("diff", tmp_path / "g", "--backend", f"reference@{NEW}")
    status = {r["key"].split("/")[1]: r for r in report["results"]}
    assert code == 1 and status["plain"]["status"] == "equal" and status["mtp3"]["status"] == "diverged"
    assert status["mtp3"]["cause_label"] == UPGRADE
    # recorded again on the new version: a different golden is refused, and the refusal names the planner change
    code, report = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", "reference", "--out", tmp_path / "g")
    refused = {r["key"].split("/")[1]: r for r in report["results"]}
    assert code == 1 and refused["mtp3"]["status"] == "refused" and refused["plain"]["status"] == "unchanged"
    assert refused["mtp3"]["cause_label"] == UPGRADE and report["by_cause"][0]["label"] == UPGRADE
    # two trees recorded on the two versions, compared call by call: the same cause
    code, _ = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", f"reference@{NEW}", "--out", tmp_path / "new")
    assert code == 0
    code, report = cli_json("diff", tmp_path / "new", "--against", tmp_path / "g")
    assert code == 1 and [(g["label"], g["count"]) for g in report["by_cause"]] == [(UPGRADE, 1)]


@pytest.mark.parametrize("spec", ["v0.1.16.post2", "620287969c", "2026-07-01"])
def test_a_version_by_tag_commit_prefix_or_date(spec: str, tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(MATRIX)
    code, report = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", f"reference@{spec}", "--out", tmp_path / "g")
    assert code == 0 and report["backend"]["version"]["name"] == "62028796"
    assert {load(p).call.provenance["planner"]["name"] for p in GoldenStore(tmp_path / "g").paths()} == {"reference@62028796"}


@pytest.mark.parametrize("command", ["record", "diff"])
@pytest.mark.parametrize("spec", ["reference@0123456789", "reference@v9.9.9", "reference@"])
def test_an_unknown_version_is_bad_usage_listing_the_known_ones(command: str, spec: str, tmp_path: Path) -> None:
    code, out, err = run(command, "--backend", spec, "--out" if command == "record" else "--quiet", *([tmp_path] if command == "record" else []))
    assert code == 2 and out == ""
    assert f"error: --backend {spec}: unknown aiter planner version" in err
    for version in ("33d168a0 (2026-02-02", "62028796 (2026-06-25, ", "aded0f84 (2026-08-05", "e4048607 (2026-08-22"):
        assert version in err
    assert "v0.1.16.post2" in err and "v0.1.20.post1" in err


def test_only_the_reference_has_versions() -> None:
    shipped = ROOT / "goldens"  # goldens to replay: the paths are checked first
    code, _, err = run("diff", shipped, "--backend", "aiter@0.1.20")
    assert code == 2 and "only the reference has versions" in err
    code, _, err = run("diff", shipped, "--backend", "gpu")
    assert code == 2 and "unknown backend 'gpu'" in err


def test_a_golden_from_an_unported_planner_replays_on_the_newest_and_says_so(old_tree: Path, tmp_path: Path) -> None:
    store = GoldenStore(tmp_path / "g")
    golden = load(next(GoldenStore(old_tree).paths()))
    golden.call.provenance["planner"] = {"backend": "aiter", "version": "0.1.99", "commit": "feedbeefcafe"}
    store.write(Golden(golden.key, golden.call))
    code, report = cli_json("diff", tmp_path / "g", "--backend", "reference")
    [result] = report["results"]
    assert result["notes"][0] == (
        f"replayed on the newest reference, reference@{NEW}: the planner that recorded this golden "
        "(aiter 0.1.99 (feedbeefcafe)) is not a ported reference version"
    )


def test_a_live_aiter_golden_replays_on_the_version_its_release_carries(old_tree: Path, tmp_path: Path) -> None:
    store = GoldenStore(tmp_path / "g")
    golden = load(next(GoldenStore(old_tree).paths()))
    golden.call.provenance["planner"] = {"backend": "aiter", "version": "0.1.16.post2", "commit": None}
    store.write(Golden(golden.key, golden.call))
    code, report = cli_json("diff", tmp_path / "g", "--backend", "reference")
    [result] = report["results"]
    assert result["notes"][0] == (
        "replayed on reference@62028796, the planner version that recorded this golden (aiter 0.1.16.post2)"
    )


def test_versions_lists_each_version_with_its_tags_and_changes() -> None:
    code, report = cli_json("versions")
    assert code == 0 and report["format"] == "mla-golden-versions/1"
    listed = report["versions"]
    assert [v["name"] for v in listed] == ["33d168a0", "62028796", "72eedddd", "aded0f84", "e4048607"]
    assert [v["date"] for v in listed] == ["2026-02-02", "2026-06-25", "2026-07-15", "2026-08-05", "2026-08-22"]
    assert "v0.1.16.post2" in listed[1]["tags"] and {"v0.1.20", "v0.1.20.post1"} <= set(listed[4]["tags"])
    assert [v["newest"] for v in listed] == [False, False, False, False, True]
    assert all(v["changes"] and v["commit"].startswith(v["name"]) for v in listed)
    assert any("kv_last_page_lens" in line for line in listed[1]["changes"])
    code, out, _ = run("versions")
    assert code == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("e4048607  2026-08-22  e4048607a535"))
    assert "v0.1.20.post1" in lines[header] and "(newest)" in lines[header]
    assert lines[header + 1].startswith("  - ") and listed[4]["changes"][0] in out


def test_the_summary_counts_each_cause_apart(old_tree: Path, tmp_path: Path) -> None:
    """Upgrade divergences and a golden the new version itself recorded, then damaged: two causes, two groups."""
    tree = tmp_path / "mixed"
    shutil.copytree(old_tree, tree)
    store = GoldenStore(tree)
    same = _picked()[len(CHANGED)]["case_id"]
    (tree / f"{same}.safetensors").unlink()
    _record_as_builder(store, NEW, _cross_records()[same])
    golden = store.read(same)
    golden.call.outputs["work_indptr"][1] += 1  # inside the written region
    assert store.write(Golden(same, golden.call), update=True).value == "updated"
    code, report = cli_json("diff", tree, "--backend", f"reference@{NEW}")
    assert code == 1
    groups = {g["label"]: g for g in report["by_cause"]}
    assert groups[UPGRADE]["count"] == len(CHANGED) and groups[UPGRADE]["keys"] == sorted(CHANGED)
    damaged = groups["values only (the same elements written, other values)"]
    assert damaged == {"label": damaged["label"], "causes": [Cause.VALUES], "planner": None, "count": 1, "keys": [same]}
    assert [g["count"] for g in report["by_cause"]] == [len(CHANGED), 1], "largest group first"
    code, out, _ = run("diff", tree, "--backend", f"reference@{NEW}")
    first, second = out.index(f"== {UPGRADE}: {len(CHANGED)} call(s)"), out.index("== values only (the same elements written, other values): 1 call(s)")
    assert first < second and out.index(f"DIVERGED {same}") > second


def test_goldens_older_than_versions_read_as_the_version_they_name() -> None:
    """The shipped goldens were recorded on the reference before it had versions ('reference_of': aiter e4048607a535)."""
    shipped = ROOT / "goldens"
    code, listed = cli_json("list", shipped)
    assert code == 0 and len(listed["goldens"]) == 120
    assert {row["planner"] for row in listed["goldens"]} == {f"reference@{NEW}"}
    code, report = cli_json("diff", next(GoldenStore(shipped).paths()), "--backend", "reference")
    assert code == 0 and report["results"][0]["notes"][0] == (
        f"replayed on reference@{NEW}, the planner version that recorded this golden"
    )


@pytest.mark.slow
def test_the_readme_upgrade_preview_is_what_a_run_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README "What changes if we bump aiter?": its commands give the counts and cause it shows, and its snippet runs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## What changes if we bump aiter?") :]
    section = section[: section.index("\n## ")]
    monkeypatch.chdir(tmp_path)
    code, _, _ = run("record", "--backend", "reference@v0.1.16.post2", "--out", "goldens-0.1.16", "--quiet")
    assert code == 0
    code, report = cli_json("diff", "goldens-0.1.16", "--backend", "reference@v0.1.20")
    label = "planner behaviour change reference@62028796 -> reference@e4048607"
    resized = "buffer sizes changed; written contents equal"
    assert code == 1 and report["summary"] == {"equal": 111, "resized": 3, "diverged": 6}
    assert [(g["label"], g["count"]) for g in report["by_cause"]] == [(label, 6), (resized, 3)]
    code, quiet, _ = run("diff", "goldens-0.1.16", "--backend", "reference@v0.1.20", "--quiet")
    assert code == 1 and quiet.splitlines()[0] in section.splitlines()  # the counts and the soundness lead
    assert quiet.splitlines()[0].endswith("6 diverged, all sound on both sides")
    shown = re.sub(r"\s+", " ", section)
    assert "│ equal │ 111 │" in shown and "│ resized │ 3 │" in shown and "│ diverged │ 6 │" in shown
    assert f"│ {label} │ 6 │" in shown and f"│ {resized} │ 3 │" in shown
    # what a caller sees after the bump: the matrix recorded afresh on v0.1.20, sized by its own helper
    code, _, _ = run("record", "--backend", "reference@v0.1.20", "--out", "goldens-0.1.20", "--quiet")
    assert code == 0
    code, fresh = cli_json("diff", "goldens-0.1.20", "--against", "goldens-0.1.16")
    assert {r["key"]: r["status"] for r in fresh["results"]} == {r["key"]: r["status"] for r in report["results"]}
    snippet = block('resolve("reference@v0.1.20")')
    namespace: dict[str, Any] = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    assert str(namespace["preview"].planner) == "reference@62028796 -> reference@e4048607"


def _mtp3_tree(tmp_path: Path, version: str) -> Path:
    """The MATRIX's gfx950 fp8 32-head qlen-3 case recorded on ``version``."""
    (tmp_path / "m.toml").write_text(MATRIX)
    out = tmp_path / f"on-{version}"
    code, _ = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", f"reference@{version}", "--out", out)
    assert code == 0
    return out


def test_a_preview_sizes_the_buffers_as_a_caller_on_the_new_version_would(tmp_path: Path) -> None:
    """e4048607's helper allocates fewer query tiles at gfx950 fp8 32 heads qlen 3 than aded0f84 plans:
    replayed on aded0f84 in the golden's buffers, the planner would not fit; sized by aded0f84's helper it does."""
    new_tree = _mtp3_tree(tmp_path, NEW)
    code, report = cli_json("diff", new_tree, "--backend", f"reference@{OLD}")
    results = {r["key"].split("/")[1]: r for r in report["results"]}
    mtp3, plain = results["mtp3"], results["plain"]
    assert code == 1 and plain["status"] == "equal"
    assert mtp3["status"] == "diverged" and mtp3["diff"]["error"] is None, "no BufferTooSmallError"
    assert mtp3["cause_label"] == f"planner behaviour change reference@{NEW} -> reference@{OLD}"
    # the sizes a caller on OLD gets are OLD's helper's: what a fresh recording on OLD holds
    old_tree = _mtp3_tree(tmp_path, OLD)
    fresh = load(next(p for p in GoldenStore(old_tree).paths() if "mtp3" in p.parts)).call
    assert {f["name"]: f["actual_shape"] for f in mtp3["diff"]["fields"]} == {n: b["shape"] for n, b in fresh.buffers.items()}
    recorded = load(next(p for p in GoldenStore(new_tree).paths() if "mtp3" in p.parts)).call
    changed = [f"{n} {recorded.buffers[n]['shape']} -> {fresh.buffers[n]['shape']}" for n in OUTPUTS if fresh.buffers[n] != recorded.buffers[n]]
    assert changed and any(name.startswith("reduce_indptr") for name in changed)
    assert f"actual: buffers sized by reference@{OLD}'s get_mla_metadata_info_v1, as a caller on it allocates them: {', '.join(changed)}" in mtp3["notes"]
    # and it compares as the two fresh recordings do
    code, against = cli_json("diff", old_tree, "--against", new_tree)
    pair = next(r for r in against["results"] if "mtp3" in r["key"])
    assert [(f["name"], f["status"], f["count"]) for f in pair["diff"]["fields"]] == [
        (f["name"], f["status"], f["count"]) for f in mtp3["diff"]["fields"]
    ]


def test_a_sizing_only_change_is_its_own_status(tmp_path: Path) -> None:
    """gfx950 bf16 64 heads: v0.1.16.post2 and e4048607 plan alike, e4048607's helper sizes for 64-row tiles."""
    matrix = tmp_path / "m.toml"
    matrix.write_text(MATRIX.split("[[decode]]")[0] + """[[decode]]
name = "bf16"
heads = 64
dtype = "bf16"
batch = 4
context = "jitter:2000"
devices = ["gfx950:256"]
""")
    code, _ = cli_json("record", "--matrix", matrix, "--backend", "reference@v0.1.16.post2", "--out", tmp_path / "g")
    assert code == 0
    code, report = cli_json("diff", tmp_path / "g", "--backend", f"reference@{NEW}")
    [result] = report["results"]
    assert code == 1 and report["summary"] == {"resized": 1}
    assert result["status"] == "resized" and result["cause"] == Cause.RESIZED
    fields = [f for f in result["diff"]["fields"] if f["status"] != "equal"]
    assert fields and all(f["status"] == "resized" for f in fields)
    assert [(g["label"], g["count"]) for g in report["by_cause"]] == [(Cause.RESIZED.value, 1)]
    sizes = ", ".join(f"{f['name']} {f['expected_shape']} -> {f['actual_shape']}" for f in fields)
    assert result["notes"][-1].endswith(sizes) or any(n.endswith(sizes) for n in result["notes"])
    code, out, _ = run("diff", tmp_path / "g", "--backend", f"reference@{NEW}")
    assert code == 1 and re.search(r"│ resized +│ +1 │", out)
    assert "reduce_indptr: buffer [" in out


def test_replaying_on_the_recording_version_keeps_the_goldens_buffers(old_tree: Path) -> None:
    code, report = cli_json("diff", old_tree, "--backend", f"reference@{OLD}")
    assert code == 0 and report["summary"] == {"equal": len(CHANGED) + SAME_COUNT}
    assert not any("buffers sized by" in note for r in report["results"] for note in r["notes"])


PAGED = """\
format = "mla-golden-matrix/1"

[[decode]]
name = "paged"
heads = 16
dtype = "fp8"
batch = 4
context = "jitter:2000"
page_size = 16
devices = ["gfx942:304"]

[[decode]]
name = "mtp3"
heads = 32
dtype = "fp8"
qlen = 3
batch = 4
context = "jitter:2000"
devices = ["gfx950:256"]
"""


def test_a_call_the_version_cannot_express_is_not_comparable_and_listed_apart(tmp_path: Path) -> None:
    """33d168a0 has no kv_last_page_lens / page_size: a paged golden is not comparable there, not a divergence."""
    (tmp_path / "m.toml").write_text(PAGED)
    code, _ = cli_json("record", "--matrix", tmp_path / "m.toml", "--backend", f"reference@{NEW}", "--out", tmp_path / "g")
    assert code == 0
    paged = next(p for p in GoldenStore(tmp_path / "g").paths() if "paged" in p.parts)
    code, report = cli_json("diff", paged, "--backend", "reference@33d168a0")
    [result] = report["results"]
    assert code == 0, "nothing was compared: no divergence"
    assert result["status"] == "not-comparable" and report["summary"] == {"not-comparable": 1}
    assert result["message"].startswith("not comparable on reference@33d168a0: it cannot express this call (")
    assert "kv_last_page_lens" in result["message"] or "page_size" in result["message"]
    assert report["by_cause"] == []
    assert report["not_comparable"] == [
        {"label": "not comparable on reference@33d168a0", "causes": [], "planner": None, "count": 1, "keys": [result["key"]]}
    ]
    # beside a real divergence: exit 1 for that one, the paged golden still apart
    code, report = cli_json("diff", tmp_path / "g", "--backend", "reference@33d168a0")
    assert code == 1 and report["summary"] == {"not-comparable": 1, "diverged": 1}
    assert [g["count"] for g in report["by_cause"]] == [1] and report["by_cause"][0]["label"].startswith("planner behaviour change")
    assert [g["keys"] for g in report["not_comparable"]] == [[result["key"]]]
    code, out, _ = run("diff", tmp_path / "g", "--backend", "reference@33d168a0")
    divergence = out.index("== planner behaviour change")
    apart = out.index("== not comparable on reference@33d168a0 (no divergence: nothing to compare): 1 call(s)")
    assert divergence < apart < out.index(f"NOT-COMPARABLE {result['key']}")
    assert "not comparable (no divergence" in out[out.index("mla-golden diff") :]
