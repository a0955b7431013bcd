"""The pytest plugin end to end, through pytester: create, pass, fail with a pinpointed report, xdist."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

# pytester's in-process runs drop modules imported during them; torch cannot be imported twice in one
# process, so it must already be loaded before the first inner run.
import torch  # noqa: F401, I001

STANDINS = Path(__file__).with_name("standins.py").read_text()

TEST_FILE = textwrap.dedent(
    """
    import os
    import torch
    import standins

    DTYPE = {"fp8": torch.float8_e4m3fn, "none": None}[os.environ.get("BUILDER_DTYPE", "fp8")]

    def build(aiter):
        bufs = standins.toy_buffers(3, 200)
        aiter.get_mla_metadata_v1(
            torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor([0, 50, 200, 210], dtype=torch.int32),
            torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values(), dtype_q=DTYPE, dtype_kv=DTYPE)

    def test_decode_metadata(mla_golden):
        aiter = standins.fake_aiter()
        with mla_golden.spy(aiter) as spy:
            build(aiter)
            build(aiter)
        first, second = spy.calls.all()
        mla_golden.check(first, name="decode")
        mla_golden.check(second)
    """
)


@pytest.fixture
def project(pytester):
    pytester.makepyfile(standins=STANDINS, test_builder=TEST_FILE)
    return pytester


def test_update_writes_goldens_named_after_the_test_then_check_passes(project):
    result = project.runpytest("--mla-golden-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mla-golden: goldens 2 written*"])
    root = project.path / "goldens" / "tests"
    written = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.safetensors"))
    assert written == ["test_builder.py/test_decode_metadata/0.safetensors", "test_builder.py/test_decode_metadata/decode.safetensors"]
    project.runpytest().assert_outcomes(passed=1)


def test_a_builder_that_drops_dtypes_fails_naming_them(project, monkeypatch):
    project.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    monkeypatch.setenv("BUILDER_DTYPE", "none")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*dtype_kv_nope: 'torch.float8_e4m3fn' -> None*", "*divergent work items*"])
    # the failure points at the user's test, not at the plugin's internals
    assert "assertions.py" not in result.stdout.str()


def test_missing_golden_says_how_to_create_it(project):
    result = project.runpytest("--mla-golden-dir", "elsewhere")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no golden for key*", "*--mla-golden-update*"])


def test_concurrent_xdist_workers_writing_the_same_goldens_end_with_valid_files(project):
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
                    aiter.get_mla_metadata_v1(
                        torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor([0, 50, 200, 210], dtype=torch.int32),
                        torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values())
                from mla_golden import assert_matches_golden
                assert_matches_golden(spy.calls.one(), mla_golden.golden_dir, name="shared", update=True)
            """
        )
    )
    result = project.runpytest("-n", "2", "test_many.py")
    result.assert_outcomes(passed=8)
    import mla_golden

    golden = mla_golden.load(project.path / "goldens" / "tests" / "shared.safetensors")
    assert golden.key == "shared"
    assert not list((project.path / "goldens").rglob("*.tmp"))


def test_update_summary_is_printed_under_xdist(project):
    pytest.importorskip("xdist")
    result = project.runpytest("-n", "2", "--mla-golden-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mla-golden: goldens 2 written*"])


def test_a_call_the_spy_could_not_record_fails_the_test(pytester):
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
                    aiter.get_mla_metadata_v1(
                        torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor([0, 50, 200, 210], dtype=torch.int32),
                        torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values())
            """
        ),
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*1 planner call(s) made but not recorded*reduce_final_map is torch.float32*"])
