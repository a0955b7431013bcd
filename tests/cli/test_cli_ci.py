"""``diff`` and ``check`` in CI: GitHub annotations and step summary, JUnit XML, counts first, DIVERGED once."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.golden.store import Golden, GoldenStore, load

SHIPPED = ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx942-cu304"


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """(actual, expected, keys changed in actual): four shipped goldens, two of them changed on the actual side."""
    expected = tmp_path / "expected"
    for path in sorted(SHIPPED.glob("h1*-fp8-*.safetensors"))[:4]:
        golden = load(path)
        GoldenStore(expected).write(Golden(golden.key, golden.call))
    actual = tmp_path / "a-long-folder-name-so-that-paths-would-overflow-a-narrow-table" / "actual"
    shutil.copytree(expected, actual)
    store = GoldenStore(actual)
    changed = [load(p).key for p in store.paths()][:2]
    for key in changed:
        golden = store.read(key)
        golden.call.outputs["work_info_set"][0, 5] += 1  # work 0's kv_end
        store.write(Golden(key, golden.call), update=True)
    return actual, expected, changed


def _unescape(text: str) -> str:
    """Undo GitHub's escapes of a workflow command's message or property."""
    return text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")


def _parse_annotation(line: str) -> tuple[dict[str, str], str]:
    """``::error k=v,k=v::message`` -> (properties, message), undoing GitHub's escapes."""
    assert line.startswith("::error ")
    props_text, message = line[len("::error ") :].split("::", 1)
    props = dict(p.split("=", 1) for p in props_text.split(","))
    return {k: _unescape(v) for k, v in props.items()}, _unescape(message)


def test_diff_in_github_format_annotates_each_divergent_golden_and_writes_a_summary(trees: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    actual, expected, changed = trees
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit = tmp_path / "reports" / "junit.xml"
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--format", "github", "--junit-xml", str(junit)])
    assert ran.exit_code == 1, ran.output
    lines = ran.stdout.splitlines()
    # the counts lead, then whether the new plans still pass check: work 0's kv_end moved alone breaks its kv_offset
    assert lines[0].startswith("mla-golden diff: 4 result(s): 2 equal, 2 diverged, 2 unsound: "), lines[0]
    assert f"{sorted(changed)[0]}: the new plan breaks work.kv_offset at work 0" in lines[0], lines[0]
    annotations = [_parse_annotation(line) for line in lines if line.startswith("::error ")]
    assert sorted(props["title"] for props, _ in annotations) == sorted(f"mla-golden diff: diverged {k}" for k in changed)
    for props, message in annotations:
        key = props["title"].rsplit(" ", 1)[1]
        assert Path(props["file"]) == GoldenStore(actual).path_for(key)
        assert message.startswith("work_info_set[0, 5]: ") and "(1 element(s))" in message
    # each divergent call says DIVERGED once (its report's verdict is folded into the result's line)
    for key in changed:
        assert sum(line.startswith("DIVERGED") and key in line for line in lines) == 1
    assert sum(line.startswith("DIVERGED") for line in lines) == 2
    # the tables keep every key whole
    table = ran.stdout[ran.stdout.index("not ok") : ran.stdout.index("exit 1 (divergence)")]
    assert all(key in table for key in changed)
    # the step summary is appended to, as markdown
    text = summary.read_text()
    assert text.startswith("earlier step\n### mla-golden diff: exit 1")
    rows = [line for line in text.splitlines() if line.startswith("| diverged | `")]
    assert sorted(row.split("`")[1] for row in rows) == sorted(changed)
    # JUnit: one testcase per golden, the divergent ones failed with their report
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "2"
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("tests") == "4" and suite.get("failures") == "2"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert len(cases) == 4
    for name, case in cases.items():
        failure = case.find("failure")
        assert (failure is not None) == (name in changed)
        if failure is not None:
            assert failure.get("type") == "diverged" and "divergent work items" in (failure.text or "")


def test_check_annotates_a_violated_golden_and_writes_junit(trees: tuple[Path, Path, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, expected, _ = trees
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    store = GoldenStore(expected)
    key = load(next(store.paths())).key
    golden = store.read(key)
    golden.call.outputs["work_info_set"][0, 5] += 10_000  # work 0's kv range runs past its batch's end
    store.write(Golden(key, golden.call), update=True)
    junit = tmp_path / "check.xml"
    ran = CliRunner().invoke(app, ["check", str(expected), "--format", "github", "--junit-xml", str(junit)])
    assert ran.exit_code == 1, ran.output
    assert ran.stdout.splitlines()[0] == "mla-golden check: 4 result(s): 3 passed, 1 violated"
    (annotation,) = [_parse_annotation(line) for line in ran.stdout.splitlines() if line.startswith("::error ")]
    assert annotation[0]["title"] == f"mla-golden check: violated {key}" and "work 0" in annotation[1]
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert len(cases) == 4 and cases[key].find("failure") is not None
    assert all(case.find("failure") is None for name, case in cases.items() if name != key)


def test_a_junit_path_that_cannot_be_written_is_refused_before_any_work(trees: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    actual, expected, _ = trees
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--junit-xml", str(tmp_path)])
    assert ran.exit_code == 2 and "--junit-xml" in ran.output and "is a folder" in ran.output


@pytest.fixture
def many(tmp_path: Path) -> tuple[Path, Path, list[str], str]:
    """(actual, expected, diverged keys, resized key): every shipped golden of one folder, 12 of them diverged and
    one whose work_info_set buffer only grew."""
    import torch

    expected = tmp_path / "expected"
    for path in sorted(SHIPPED.glob("*.safetensors")):
        golden = load(path)
        GoldenStore(expected).write(Golden(golden.key, golden.call))
    actual = tmp_path / "actual"
    shutil.copytree(expected, actual)
    store = GoldenStore(actual)
    keys = sorted(load(p).key for p in store.paths())
    assert len(keys) > 13
    diverged, resized = keys[:12], keys[12]
    for key in diverged:
        golden = store.read(key)
        golden.call.outputs["work_info_set"][0, 5] += 1
        store.write(Golden(key, golden.call), update=True)
    golden = store.read(resized)
    for table in (golden.call.outputs, golden.call.written):  # only the buffer's size changes
        old = table["work_info_set"]
        table["work_info_set"] = torch.cat([old, torch.zeros(5, old.shape[1], dtype=old.dtype)])
    golden.call.buffers["work_info_set"]["shape"][0] += 5
    store.write(Golden(resized, golden.call), update=True)
    return actual, expected, diverged, resized


def _workflow_commands(stdout: str) -> list[tuple[str, dict[str, str], str]]:
    """(command, properties, message) of each workflow command line, GitHub's escapes undone."""
    found = []
    for line in stdout.splitlines():
        if not line.startswith("::"):
            continue
        head, message = line[2:].split("::", 1)
        name, _, props_text = head.partition(" ")
        props = dict(p.split("=", 1) for p in props_text.split(",")) if props_text else {}
        found.append((name, {k: _unescape(v) for k, v in props.items()}, _unescape(message)))
    return found


def test_github_format_caps_annotations_a_level_says_how_many_were_left_out_and_warns_on_a_resize(
    many: tuple[Path, Path, list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mla_golden.runs.ci import ANNOTATIONS_PER_LEVEL

    actual, expected, diverged, resized = many
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--format", "github"])
    assert ran.exit_code == 1, ran.output
    commands = _workflow_commands(ran.stdout)
    errors = [props["title"] for name, props, _ in commands if name == "error"]
    warnings = [props["title"] for name, props, _ in commands if name == "warning"]
    assert ANNOTATIONS_PER_LEVEL == 10 and len(errors) == 10
    assert all(title.startswith("mla-golden diff: diverged ") and title.split()[-1] in diverged for title in errors)
    assert warnings == [f"mla-golden diff: resized {resized}"], "a resize is no schedule failure: a warning"
    (notice,) = [(props, message) for name, props, message in commands if name == "notice"]
    assert notice[0]["title"] == "mla-golden diff: annotations left out"
    assert notice[1].startswith("2 error(s) not annotated (GitHub shows 10 a level in a step)")
    # the notice comes after the annotations it counts, and nothing is annotated twice
    names = [name for name, _, _ in commands if name in ("error", "warning", "notice")]
    assert names[-1] == "notice" and len(set(errors)) == 10


def test_github_format_folds_each_group_of_reports_and_leaves_the_verdict_outside(
    many: tuple[Path, Path, list[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    actual, expected, diverged, resized = many
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--format", "github"])
    lines = ran.stdout.splitlines()
    opened = [i for i, line in enumerate(lines) if line.startswith("::group::")]
    closed = [i for i, line in enumerate(lines) if line == "::endgroup::"]
    assert len(opened) == len(closed) == 2, "one fold per cause: the diverged calls, the resized one"
    assert all(o < c for o, c in zip(opened, closed)) and all(c < o for c, o in zip(closed, opened[1:])), "not nested"
    titles = [lines[i][len("::group::") :] for i in opened]
    assert any(t.startswith("mla-golden diff: ") and t.endswith(": 12 call(s)") for t in titles), titles
    assert any(t.endswith(": 1 call(s)") for t in titles), titles
    folded = {i for o, c in zip(opened, closed) for i in range(o, c + 1)}
    for key in diverged + [resized]:  # each report inside a fold
        (verdict,) = [i for i, line in enumerate(lines) if line.split(" ")[:2] in (["DIVERGED", key], ["RESIZED", key])]
        assert verdict in folded
    # the counts, the summary tables and the exit line stay outside, where a reader lands
    assert lines[0].startswith("mla-golden diff: ") and 0 not in folded
    exit_line = lines.index("exit 1 (divergence)")
    assert exit_line not in folded and exit_line > max(closed)
    text = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected)])
    assert not any(line.startswith("::") for line in text.stdout.splitlines()), "the text format folds nothing"


DOCS = ROOT / "docs" / "cli.md"


def _documented_mapping() -> dict[str, tuple[str | None, str | None]]:
    """status -> (JUnit element, GitHub annotation level) as docs/cli.md's table names them (None: nothing)."""
    text = DOCS.read_text()
    table = text[text.index("| status | JUnit testcase holds | GitHub annotation |") :].split("\n\n", 1)[0]
    mapping = {}
    for row in table.splitlines()[2:]:
        statuses, element, level = (cell.strip() for cell in row.strip("|").split("|"))
        for status in re.findall(r"`([a-z-]+)`", statuses):
            held, annotated = re.match(r"`<(\w+)>`", element), re.fullmatch(r"`::(\w+)`", level)
            mapping[status] = (held and held.group(1), annotated and annotated.group(1))
    return mapping


def test_each_status_gets_the_junit_element_and_annotation_level_the_docs_name() -> None:
    from mla_golden.runs import Result, Status
    from mla_golden.runs.ci import github_annotations, junit_xml

    documented = _documented_mapping()
    assert sorted(documented) == sorted(s.value for s in Status), "the table names every status once"
    results = [Result(f"op/{s.value}", s, f"goldens/op/{s.value}.safetensors", message=f"why {s.value}") for s in Status]
    cases = {case.get("name"): case for case in ET.fromstring(junit_xml("diff", results, 1.5)).iter("testcase")}
    levels = {}
    for line in github_annotations("diff", results, limit=len(results)):
        level, rest = line[2:].split(" ", 1)
        levels[_unescape(rest.split("title=", 1)[1].split("::", 1)[0]).split()[-1]] = level
    for status in Status:
        element, annotated = documented[status.value]
        held = [child.tag for child in cases[f"op/{status.value}"]]
        assert held == ([element] if element else []), (status, held)
        assert levels.get(f"op/{status.value}") == annotated, status
    assert documented["resized"] == ("failure", "warning"), "a resize is no bad golden"


def test_junit_has_a_testsuites_root_and_times_and_counts_a_resize_as_a_failure(
    many: tuple[Path, Path, list[str], str], tmp_path: Path
) -> None:
    actual, expected, diverged, resized = many
    (actual / "decode" / "broken.safetensors").write_bytes(b"not a golden")
    junit = tmp_path / "junit.xml"
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--junit-xml", str(junit)])
    assert ran.exit_code == 2, ran.output  # the unreadable golden
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = list(suite.iter("testcase"))
    number = re.compile(r"\d+\.\d{3}")
    for element in (root, suite, *cases):  # measured by the run: seconds, to the millisecond
        assert number.fullmatch(element.get("time") or ""), (element.tag, element.attrib)
    assert float(suite.get("time") or 0) >= max(float(case.get("time") or 0) for case in cases)
    by_name = {case.get("name"): case for case in cases}
    assert [child.tag for child in by_name[resized]] == ["failure"] and by_name[resized][0].get("type") == "resized"
    assert all([child.tag for child in by_name[key]] == ["failure"] for key in diverged)
    (bad,) = [case for case in cases if case.find("error") is not None]
    assert "broken" in (bad.get("name") or "") and bad[0].get("type") == "bad"
    for element in (root, suite):
        assert element.get("tests") == str(len(cases)) and element.get("failures") == str(len(diverged) + 1)
        assert element.get("errors") == "1"
    assert suite.get("skipped") == "0"


@pytest.mark.parametrize("command", ["diff", "check"])
def test_where_the_files_went_is_said_after_the_report_and_before_the_exit_line(
    command: str, trees: tuple[Path, Path, list[str]], tmp_path: Path
) -> None:
    actual, expected, _ = trees
    junit, html = tmp_path / "r.xml", tmp_path / "r.html"
    args = [command, str(actual), *(["--against", str(expected)] if command == "diff" else [])]
    ran = CliRunner().invoke(app, [*args, "--junit-xml", str(junit), "--html", str(html)])
    lines = ran.output.splitlines()
    assert lines[0].startswith(f"mla-golden {command}: 4 result(s)"), "the verdict comes first"
    wrote = [i for i, line in enumerate(lines) if line in (f"JUnit XML: {junit}", f"HTML report: {html}")]
    total = next(i for i, line in enumerate(lines) if "total" in line and "4" in line)
    assert len(wrote) == 2 and total < min(wrote) and max(wrote) == len(lines) - 2
    assert lines[-1].startswith(f"exit {ran.exit_code} ")
    assert junit.is_file() and html.is_file()
