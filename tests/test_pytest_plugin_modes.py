"""The plugin's update modes and what a run it fails tells pytest: its summary and its JUnit XML count the failure,
a deleting update leaves no empty folder, and every hint names an option of the plugin's."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

# pytester's in-process runs drop modules imported during them; torch cannot be imported twice in one
# process, so it must already be loaded before the first inner run.
import torch  # noqa: F401, I001
from helpers.plugin_project import STANDINS, TEST_FILE

FOLDER = Path("goldens") / "test_builder.py" / "test_decode_metadata"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """The builder test with its two goldens written."""
    pytester.makepyfile(standins=STANDINS, test_builder=TEST_FILE)
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    return pytester


def _stale(project: pytest.Pytester) -> list[Path]:
    """Goldens no test reads: one beside the test's, one of a removed test two folders down, one of a deleted file."""
    golden = (project.path / FOLDER / "decode.safetensors").read_bytes()
    stale = [
        project.path / FOLDER / "gone.safetensors",
        project.path / "goldens" / "test_builder.py" / "test_removed" / "case" / "x.safetensors",
        project.path / "goldens" / "test_deleted_file.py" / "test_any" / "0.safetensors",
    ]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(golden)
    return stale


def _junit(path: Path) -> tuple[ET.Element, dict[str, ET.Element]]:
    """(the suite, testcases by classname::name) of a pytest JUnit XML file."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return suite, {f"{case.get('classname')}::{case.get('name')}": case for case in suite.iter("testcase")}


def test_unused_goldens_fail_the_run_in_pytests_summary_and_junit(project: pytest.Pytester) -> None:
    stale = _stale(project)
    junit = project.path / "junit.xml"
    result = project.runpytest("--junitxml", str(junit))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)  # pytest's own counts: "1 failed, 1 passed"
    result.stdout.fnmatch_lines(["*FAILED mla-golden::unused-goldens - 3 golden(s) under *", "*1 failed, 1 passed*"])
    suite, cases = _junit(junit)
    assert suite.get("failures") == "1" and suite.get("tests") == "2" and suite.get("errors") == "0"
    failure = cases["mla-golden::unused-goldens"].find("failure")
    assert failure is not None and cases["test_builder::test_decode_metadata"].find("failure") is None
    text = failure.text or ""
    assert text.startswith("3 golden(s) under ") and "that no test read or wrote" in text
    assert all(str(p.relative_to(project.path / "goldens")) in text for p in stale), text
    assert "--mla-golden-update deletes them" in text and "--mla-golden-warn-unused" in text
    # only warned: no failure anywhere
    warned = project.runpytest("--junitxml", str(junit), "--mla-golden-warn-unused")
    assert warned.ret == pytest.ExitCode.OK
    warned.assert_outcomes(passed=1)
    suite, cases = _junit(junit)
    assert suite.get("failures") == "0" and list(cases) == ["test_builder::test_decode_metadata"]


def test_a_deleting_update_leaves_no_empty_folder(project: pytest.Pytester) -> None:
    stale = _stale(project)
    beside = project.path / "goldens" / "test_deleted_file.py" / "notes.txt"  # not a golden: its folder stays
    result = project.runpytest("--mla-golden-update")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*mla-golden: deleted 3 unused golden(s)*"])
    assert not any(p.exists() for p in stale)
    assert not (project.path / "goldens" / "test_builder.py" / "test_removed").exists(), "its folders went with it"
    assert not (project.path / "goldens" / "test_deleted_file.py").exists()
    assert sorted(p.name for p in (project.path / FOLDER).iterdir()) == ["0.safetensors", "decode.safetensors"]
    _stale(project)
    beside.write_text("kept")
    project.runpytest("--mla-golden-update")
    assert beside.exists() and not (beside.parent / "test_any").exists()


def test_update_fail_rewrites_what_changed_and_fails_those_tests(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden = project.path / FOLDER / "decode.safetensors"
    before = golden.read_bytes()
    monkeypatch.setenv("BUILDER_DTYPE", "none")  # the builder now drops the dtypes: both calls change
    junit = project.path / "junit.xml"
    result = project.runpytest("--mla-golden-update-fail", "--junitxml", str(junit))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*dtype_kv_nope: 'torch.float8_e4m3fn' -> None*",
            f"*the golden *{golden.name} was updated with this call (--mla-golden-update-fail): review the change*",
            "*mla-golden: goldens 1 updated*",
        ]
    )
    assert golden.read_bytes() != before
    assert not list((project.path / FOLDER).glob("*.obtained.safetensors")), "the call is the golden now"
    _, cases = _junit(junit)
    assert cases["test_builder::test_decode_metadata"].find("failure") is not None
    # the test stopped at its first golden, as a failing assertion does: the next run rewrites the second
    second = project.runpytest("--mla-golden-update-fail")
    second.assert_outcomes(failed=1)
    second.stdout.fnmatch_lines(["*the golden *0.safetensors was updated with this call*"])
    project.runpytest().assert_outcomes(passed=1)  # both rewritten: a plain run passes
    result = project.runpytest("--mla-golden-update-fail")  # nothing to change: it passes
    assert result.ret == pytest.ExitCode.OK and "mla-golden: goldens" not in result.stdout.str(), "nothing written"
    golden.unlink()  # a missing golden is written, and the test fails too
    result = project.runpytest("--mla-golden-update-fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*no golden for key * at *{golden.name}", "*was written with this call*"])
    assert golden.exists()


def test_update_fail_fails_a_run_that_deleted_unused_goldens(project: pytest.Pytester) -> None:
    stale = _stale(project)
    junit = project.path / "junit.xml"
    result = project.runpytest("--mla-golden-update-fail", "--junitxml", str(junit))
    assert result.ret == pytest.ExitCode.TESTS_FAILED and not any(p.exists() for p in stale)
    result.assert_outcomes(passed=1, failed=1)
    failure = _junit(junit)[1]["mla-golden::unused-goldens"].find("failure")
    assert failure is not None and (failure.text or "").startswith("deleted 3 unused golden(s) under ")
    assert project.runpytest("--mla-golden-update-fail").ret == pytest.ExitCode.OK


def test_update_new_writes_only_missing_goldens(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    missing, kept = project.path / FOLDER / "decode.safetensors", project.path / FOLDER / "0.safetensors"
    stale = _stale(project)
    missing.unlink()
    result = project.runpytest("--mla-golden-update-new")
    result.stdout.fnmatch_lines(["*mla-golden: goldens 1 written*"])
    assert missing.exists()
    assert all(p.exists() for p in stale), "it deletes nothing: the unused goldens still fail the run"
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for path in stale:
        path.unlink()
    missing.unlink()
    before = kept.read_bytes()
    monkeypatch.setenv("BUILDER_DTYPE", "none")  # an existing golden that differs is checked, not rewritten
    result = project.runpytest("--mla-golden-update-new")
    result.assert_outcomes(failed=1)
    assert missing.exists() and kept.read_bytes() == before
    result.stdout.fnmatch_lines(["*dtype_kv_nope: 'torch.float8_e4m3fn' -> None*"])


def test_one_update_mode_at_a_time(project: pytest.Pytester) -> None:
    result = project.runpytest("--mla-golden-update", "--mla-golden-update-new")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mla-golden-update and --mla-golden-update-new: give one of them*"])


def test_hints_name_the_plugins_options(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = project.runpytest("--mla-golden-dir", "elsewhere")
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*no golden for key*", "*create it from a known-good build with --mla-golden-update-new*"])
    assert "mla-golden record" not in missing.stdout.str() and "update=True" not in missing.stdout.str()
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    cut = project.runpytest("--mla-golden-max-items", "1")
    cut.assert_outcomes(failed=1)
    out = cut.stdout.str()
    assert "not shown (raise --mla-golden-max-items to see them)" in out
    assert "raise max items" not in out and "max_items" not in out and "update=True" not in out
    cut.stdout.fnmatch_lines(["*to accept it, rerun with --mla-golden-update or rename it over decode.safetensors*"])
