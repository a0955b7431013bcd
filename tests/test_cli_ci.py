"""``diff`` and ``check`` in CI: GitHub annotations and step summary, JUnit XML, counts first, DIVERGED once."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.store import Golden, GoldenStore, load

SHIPPED = Path(__file__).resolve().parent.parent / "goldens" / "decode" / "dsv3-tp" / "gfx942-cu304"


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


def _parse_annotation(line: str) -> tuple[dict[str, str], str]:
    """``::error k=v,k=v::message`` -> (properties, message), undoing GitHub's escapes."""
    assert line.startswith("::error ")
    props_text, message = line[len("::error ") :].split("::", 1)
    unescape = lambda text: text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")  # noqa: E731
    props = dict(p.split("=", 1) for p in props_text.split(","))
    return {k: unescape(v) for k, v in props.items()}, unescape(message)


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
    annotations = [_parse_annotation(line) for line in lines if line.startswith("::")]
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
    suite = ET.parse(junit).getroot()
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
    (annotation,) = [_parse_annotation(line) for line in ran.stdout.splitlines() if line.startswith("::")]
    assert annotation[0]["title"] == f"mla-golden check: violated {key}" and "work 0" in annotation[1]
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert len(cases) == 4 and cases[key].find("failure") is not None
    assert all(case.find("failure") is None for name, case in cases.items() if name != key)


def test_a_junit_path_that_cannot_be_written_is_refused_before_any_work(trees: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    actual, expected, _ = trees
    ran = CliRunner().invoke(app, ["diff", str(actual), "--against", str(expected), "--junit-xml", str(tmp_path)])
    assert ran.exit_code == 2 and "--junit-xml" in ran.output and "is a folder" in ran.output
