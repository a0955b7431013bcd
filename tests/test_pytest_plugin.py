"""The pytest plugin end to end, through pytester: create, pass, fail with a pinpointed report, xdist."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest

# pytester's in-process runs drop modules imported during them; torch cannot be imported twice in one
# process, so it must already be loaded before the first inner run.
import torch  # noqa: F401, I001
from helpers.plugin_project import STANDINS, TEST_FILE


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(standins=STANDINS, test_builder=TEST_FILE)
    return pytester


def test_update_writes_goldens_named_after_the_test_then_check_passes(project: pytest.Pytester) -> None:
    result = project.runpytest("--mla-golden-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mla-golden: goldens 2 written*"])
    root = project.path / "goldens"
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.safetensors"))
    assert written == ["test_builder.py/test_decode_metadata/0.safetensors", "test_builder.py/test_decode_metadata/decode.safetensors"]
    project.runpytest().assert_outcomes(passed=1)


def test_a_builder_that_drops_dtypes_fails_naming_them(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*dtype_kv_nope: 'torch.float8_e4m3fn' -> None*", "*divergent work items*"])
    # the failure points at the user's test, not at the plugin's internals
    assert "assertions.py" not in result.stdout.str()


def test_missing_golden_says_how_to_create_it(project: pytest.Pytester) -> None:
    result = project.runpytest("--mla-golden-dir", "elsewhere")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no golden for key*", "*--mla-golden-update*"])


@pytest.mark.slow
def test_concurrent_xdist_workers_writing_the_same_goldens_end_with_valid_files(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(
        test_many=textwrap.dedent(
            """
            import pytest, torch, standins

            @pytest.mark.parametrize("i", range(8))
            def test_same_golden(i, mla_golden):
                aiter = standins.fake_aiter()
                bufs = standins.toy_buffers(3, 200)
                with mla_golden.spy(aiter) as spy:
                    standins.toy_decode(aiter, bufs)
                from mla_golden import assert_matches_golden
                assert_matches_golden(spy.calls.one(), mla_golden.golden_dir, name="shared", update=True)
            """
        )
    )
    result = project.runpytest("-n", "2", "test_many.py")
    result.assert_outcomes(passed=8)
    import mla_golden

    golden = mla_golden.load(project.path / "goldens" / "shared.safetensors")
    assert golden.key == "shared"
    assert not list((project.path / "goldens").rglob("*.tmp"))


@pytest.mark.slow
def test_update_summary_is_printed_under_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest("-n", "2", "--mla-golden-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mla-golden: goldens 2 written*"])


def test_a_call_the_spy_could_not_record_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        standins=STANDINS,
        test_missed=textwrap.dedent(
            """
            import torch, standins

            def test_float_buffer(mla_golden):
                aiter = standins.fake_aiter()
                bufs = standins.toy_buffers(3, 200)
                bufs["reduce_final_map"] = bufs["reduce_final_map"].float()
                with mla_golden.spy(aiter):
                    standins.toy_decode(aiter, bufs)
            """
        ),
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 planner call(s) made but not recorded*reduce_final_map is torch.float32*"])


# --- golden paths: the test file's path mirrored, parametrize ids readable ---------------------

NESTED_TEST = textwrap.dedent(
    """
    import pytest, torch, standins

    @pytest.mark.parametrize("dtype", ["fp8", "bf16"])
    @pytest.mark.parametrize("heads", [16, 128])
    def test_decode(dtype, heads, mla_golden):
        aiter = standins.fake_aiter()
        bufs = standins.toy_buffers(3, 200)
        with mla_golden.spy(aiter) as spy:
            standins.toy_decode(aiter, bufs, heads)
        mla_golden.assert_matches(spy.calls.one(), name="decode")

    class TestOdd:
        @pytest.mark.parametrize("shape", ["a/b", "x y"])
        def test_ids_with_illegal_characters(self, shape, mla_golden):
            aiter = standins.fake_aiter()
            bufs = standins.toy_buffers(3, 200)
            with mla_golden.spy(aiter) as spy:
                standins.toy_decode(aiter, bufs)
            mla_golden.assert_matches(spy.calls.one())
    """
)


def test_golden_paths_mirror_the_test_file_and_keep_parametrize_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(standins=STANDINS)
    (pytester.path / "tests" / "kernels").mkdir(parents=True)
    (pytester.path / "tests" / "kernels" / "test_mla.py").write_text(NESTED_TEST)
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=6)
    root = pytester.path / "goldens"
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.safetensors"))
    odd = [w for w in written if "TestOdd" in w]
    assert [w for w in written if "TestOdd" not in w] == [
        f"tests/kernels/test_mla.py/test_decode[{heads}-{dtype}]/decode.safetensors"
        for heads, dtype in [("128", "bf16"), ("128", "fp8"), ("16", "bf16"), ("16", "fp8")]
    ]
    # a '/' or a space cannot stay in a folder name: sanitised, with a hash of the id so ids stay distinct
    prefix = "tests/kernels/test_mla.py/TestOdd/test_ids_with_illegal_characters"
    assert re.fullmatch(re.escape(prefix) + r"\[a_2Fb\]-[0-9a-f]{8}/0\.safetensors", odd[0]), odd
    assert re.fullmatch(re.escape(prefix) + r"\[x_y\]-[0-9a-f]{8}/0\.safetensors", odd[1]), odd
    pytester.runpytest().assert_outcomes(passed=6)


# --- the old name of assert_matches keeps working, with a warning -------------------------------


# --- obtained files ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_failure_writes_the_obtained_call_next_to_the_golden_and_a_pass_removes_it(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import mla_golden

    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    folder = project.path / "goldens" / "test_builder.py" / "test_decode_metadata"
    golden = folder / "decode.safetensors"
    obtained = folder / "decode.obtained.safetensors"
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*this call was written to {obtained}*"])
    assert obtained.is_file() and not list(folder.glob(".*.tmp"))
    assert mla_golden.load(obtained).call.params["dtype_kv_nope"] is None
    assert mla_golden.load(golden).call.params["dtype_kv_nope"] == "torch.float8_e4m3fn"
    # the obtained file is never taken for a golden by the CLI's tree walk
    assert golden in list(mla_golden.GoldenStore(project.path / "goldens").paths())
    assert obtained not in list(mla_golden.GoldenStore(project.path / "goldens").paths())
    # promote it by renaming: that golden now passes, so the test reaches its second one, fails, keeps it too
    obtained.rename(golden)
    project.runpytest().assert_outcomes(failed=1)
    (folder / "0.obtained.safetensors").rename(folder / "0.safetensors")
    project.runpytest().assert_outcomes(passed=1)
    # and back: the good build fails, then passes once its goldens are back, removing the stale obtained files
    monkeypatch.setenv("BUILDER_DTYPE", "fp8")
    project.runpytest().assert_outcomes(failed=1)
    assert obtained.is_file()
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    assert not obtained.exists() and not (folder / "0.obtained.safetensors").exists()
    project.runpytest().assert_outcomes(passed=1)


# --- unused goldens ----------------------------------------------------------------------------


def _add_unused(project: pytest.Pytester) -> list[Any]:
    folder = project.path / "goldens" / "test_builder.py" / "test_decode_metadata"
    stale = [
        folder / "gone.safetensors",
        project.path / "goldens" / "test_builder.py" / "test_removed" / "x.safetensors",
        project.path / "goldens" / "test_deleted_file.py" / "test_any" / "0.safetensors",
    ]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((folder / "decode.safetensors").read_bytes())
    return stale


def test_a_full_run_lists_unused_goldens_and_a_full_update_run_deletes_them(project: pytest.Pytester) -> None:
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    stale = _add_unused(project)
    elsewhere = project.path / "goldens" / "written_by_other_means.safetensors"
    elsewhere.write_bytes(stale[0].read_bytes())
    result = project.runpytest()
    result.assert_outcomes(passed=1, failed=1)  # the tests passed, the unused goldens fail the run: a failure
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*3 golden(s) under * that no test read or wrote:",
            "  test_builder.py/test_decode_metadata/gone.safetensors",
            "  test_builder.py/test_removed/x.safetensors",
            "  test_deleted_file.py/test_any/0.safetensors",
            "*mla-golden: 3 golden(s) under * that no test read or wrote fail this run*",
        ]
    )
    assert "written_by_other_means" not in result.stdout.str()  # outside the folders of the test files that ran
    assert all(p.exists() for p in stale)
    warned = project.runpytest("--mla-golden-warn-unused")
    assert warned.ret == pytest.ExitCode.OK
    warned.stdout.fnmatch_lines(["*3 golden(s) under * that no test read or wrote (--mla-golden-warn-unused: a warning only)*"])
    # a subset never deletes, nor fails for goldens it did not judge
    result = project.runpytest("--mla-golden-update", "-k", "decode")
    assert "golden(s) under" not in result.stdout.str() and all(p.exists() for p in stale)
    assert project.runpytest("-k", "decode").ret == pytest.ExitCode.OK
    result = project.runpytest("--mla-golden-update", "test_builder.py::test_decode_metadata")
    assert "golden(s) under" not in result.stdout.str() and all(p.exists() for p in stale)
    obtained = stale[2].with_name("0.obtained.safetensors")  # a failure of the deleted test file left it
    obtained.write_bytes(stale[2].read_bytes())
    result = project.runpytest("--mla-golden-update")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*mla-golden: deleted 3 unused golden(s)*"])
    assert not any(p.exists() for p in stale) and elsewhere.exists()
    assert not obtained.exists()  # it went with its golden
    assert (project.path / "goldens" / "test_builder.py" / "test_decode_metadata" / "decode.safetensors").exists()
    after = project.runpytest()
    assert "golden(s) under" not in after.stdout.str() and after.ret == pytest.ExitCode.OK


def test_goldens_of_a_failed_or_skipped_test_are_never_called_unused(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    in_failing_test, removed_test, deleted_file = _add_unused(project)
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    result = project.runpytest()
    result.assert_outcomes(failed=2)  # the test, and the unused goldens; it stopped at its first golden: the rest
    # of its folder is not judged
    result.stdout.fnmatch_lines(["*2 golden(s) under * that no test read or wrote:", "  test_builder.py/test_removed/x.safetensors"])
    assert "gone.safetensors" not in result.stdout.str()
    monkeypatch.setenv("BUILDER_DTYPE", "fp8")
    project.makepyfile(
        test_skipped=textwrap.dedent(
            """
            import pytest

            @pytest.mark.skip(reason="no GPU")
            def test_gpu(mla_golden):
                pass
            """
        )
    )
    kept = project.path / "goldens" / "test_skipped.py" / "test_gpu" / "decode.safetensors"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(in_failing_test.read_bytes())
    result = project.runpytest("--mla-golden-update")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*mla-golden: deleted 3 unused golden(s)*"])
    assert kept.exists() and not in_failing_test.exists() and not removed_test.exists() and not deleted_file.exists()


@pytest.mark.slow
def test_unused_goldens_under_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    stale = _add_unused(project)
    result = project.runpytest("-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*mla-golden: 3 golden(s) under * that no test read or wrote fail this run*"])
    project.runpytest("-n", "2", "--mla-golden-update").stdout.fnmatch_lines(["*deleted 3 unused golden(s)*"])
    assert not any(p.exists() for p in stale)


def test_an_obtained_file_opens_with_the_cli(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from mla_golden.cli import app

    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    project.runpytest().assert_outcomes(failed=1)
    folder = project.path / "goldens" / "test_builder.py" / "test_decode_metadata"
    obtained, golden, page = folder / "decode.obtained.safetensors", folder / "decode.safetensors", project.path / "diff.html"
    shown = CliRunner().invoke(app, ["show", str(obtained)])
    assert shown.exit_code == 0 and "get_mla_metadata_v1" in shown.stdout
    diffed = CliRunner().invoke(app, ["diff", str(obtained), "--against", str(golden), "--html", str(page)])
    assert diffed.exit_code == 1 and "dtype_kv_nope: 'torch.float8_e4m3fn' -> None" in diffed.stdout
    assert page.is_file() and "dtype_kv_nope" in page.read_text()


@pytest.mark.slow
def test_a_crashed_xdist_worker_keeps_every_golden_and_is_named(project: pytest.Pytester) -> None:
    """A worker that dies never reports what its passing tests read: deleting "unused" goldens then loses valid ones."""
    pytest.importorskip("xdist")
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    dies_once = """
    def test_zz_dies(tmp_path_factory):
        import os
        marker = tmp_path_factory.getbasetemp().parent.parent / "died"
        if not marker.exists():
            marker.touch()
            os._exit(3)
    """
    project.makepyfile(test_builder=TEST_FILE + textwrap.dedent(dies_once))
    goldens = sorted((project.path / "goldens").rglob("*.safetensors"))
    assert len(goldens) == 2
    # --dist loadfile: the passing test and the one that kills its worker run on the same worker, in order
    result = project.runpytest("-n", "2", "--dist", "loadfile", "--mla-golden-update")
    assert result.parseoutcomes()["failed"] == 1
    result.stdout.fnmatch_lines(["*mla-golden: worker gw* did not report the goldens its tests read*nothing deleted*"])
    assert "deleted" not in result.stdout.str().replace("nothing deleted", "")
    assert all(p.exists() for p in goldens)


# --- a test file outside the rootdir -----------------------------------------------------------


def test_a_test_file_outside_the_rootdir_keeps_its_goldens_inside_the_goldens_folder(pytester: pytest.Pytester) -> None:
    """pytest names such a test ``::test_decode_metadata`` (no file part): its keys take the file's path relative
    to the rootdir, ``..`` escaped, and stay relative; a full update run finds its unused goldens without crashing."""
    root, other = pytester.path / "root", pytester.path / "other"
    root.mkdir()
    other.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    (other / "standins.py").write_text(STANDINS)
    (other / "test_outside.py").write_text(TEST_FILE)
    args = ["--rootdir", str(root), str(other / "test_outside.py")]
    result = pytester.runpytest(*args, "--mla-golden-update")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.OK
    goldens = root / "goldens"
    written = sorted(p.relative_to(goldens).as_posix() for p in goldens.rglob("*.safetensors"))
    folder = r"\[\.\.\]/other/test_outside\.py/test_decode_metadata"
    assert len(written) == 2 and all(re.fullmatch(folder + r"/(0|decode)\.safetensors", w) for w in written), written
    assert not list(pytester.path.glob("*.safetensors")) and not list(other.rglob("*.safetensors"))
    pytester.runpytest(*args).assert_outcomes(passed=1)
    stale = goldens / written[0].rsplit("/", 1)[0] / "gone.safetensors"
    stale.write_bytes((goldens / written[0]).read_bytes())
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()  # unused: the run fails, it does not crash
    result.stdout.fnmatch_lines(["*1 golden(s) under * that no test read or wrote:", "*/test_decode_metadata/gone.safetensors", "*fail this run*"])
    result = pytester.runpytest(*args, "--mla-golden-update")
    assert result.ret == pytest.ExitCode.OK and not stale.exists()
    result.stdout.fnmatch_lines(["*mla-golden: deleted 1 unused golden(s)*"])
