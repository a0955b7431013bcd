"""What a failing golden test prints under pytest: the golden report first, none of mla-golden's own frames."""

from __future__ import annotations

import re
import textwrap

import pytest

# pytester's in-process runs drop modules imported during them; torch cannot be imported twice in one
# process, so it must already be loaded before the first inner run.
import torch  # noqa: F401, I001
from helpers.repo import TESTS

BUILDER_TESTS = textwrap.dedent(
    """
    import importlib, os, sys
    import pytest
    from mla_golden import reference

    def builder():
        sys.modules.pop("helpers.vllm_builder", None)
        return importlib.import_module("helpers.vllm_builder").MlaMetadataBuilder(
            num_heads=64, pass_dtypes=os.environ.get("DROP") is None)

    @pytest.mark.parametrize("step", range(4))
    def test_expect(step, mla_golden):
        with reference.as_aiter(), reference.device("gfx942"):
            with mla_golden.expect(name="step"):
                builder().build([3000] * 8, [1] * 8)

    def test_spy_then_assert(mla_golden):
        with reference.as_aiter(), reference.device("gfx942"):
            import aiter
            made = builder()
            with mla_golden.spy(aiter) as spy:
                made.build([3000] * 8, [1] * 8)
            mla_golden.assert_matches(spy.calls.one(), name="step")
    """
)


def _failures(stdout: str) -> dict[str, list[str]]:
    """Each failure's lines, by test name, from pytest's ``____ name ____`` headers to the next header."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        header = re.fullmatch(r"_{3,} (\S+) _{3,}", line)
        if header:
            current = sections.setdefault(header.group(1), [])
        elif line.startswith("=") and current is not None:
            current = None
        elif current is not None:
            current.append(line)
    return sections


def test_raising_planners_fail_with_the_golden_report_and_none_of_mla_goldens_frames(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.syspathinsert(str(TESTS))
    pytester.makepyfile(test_builder=BUILDER_TESTS)
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=5)
    monkeypatch.setenv("DROP", "1")  # the builder drops the dtypes: the folded plan outgrows its buffers
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=5)
    failures = _failures(result.stdout.str())
    assert sorted(failures) == ["test_expect[0]", "test_expect[1]", "test_expect[2]", "test_expect[3]", "test_spy_then_assert"]
    for name, lines in failures.items():
        text = "\n".join(lines)
        assert len(lines) <= 70, (name, len(lines), text)
        # the golden report comes first, naming the dropped dtypes and how to accept the new call
        assert lines[0].startswith("mla_golden.errors.GoldenMismatch: call 0 of the block: DIVERGED"), (name, text)
        assert "dtype_kv_nope: 'torch.float8_e4m3fnuz' -> None" in text
        assert "--mla-golden-update" in text and "step.obtained.safetensors" in text
        assert text.index("dtype_kv_nope") < text.index("BufferTooSmallError: output buffer 'reduce_indptr'")
        # no frame of mla-golden itself: not the recorder, not the reference planner's source or its buffers
        for internal in ("mla_golden/capture/recorder.py", "mla_golden/capture/canary.py", "mla_golden/reference", "fill_mla_metadata_v1", "tensor(["):
            assert internal not in text, (name, internal)
    assert (pytester.path / "goldens" / "test_builder.py" / "test_spy_then_assert" / "step.obtained.safetensors").is_file()


MISMATCH_TEST = textwrap.dedent(
    """
    import os, torch, standins

    def test_decode(mla_golden):
        aiter = standins.fake_aiter()
        bufs = standins.toy_buffers(6, 2000)
        dtype = None if os.environ.get("DROP") else torch.float8_e4m3fn
        with mla_golden.spy(aiter) as spy:
            standins.toy_decode(aiter, bufs, dtype_q=dtype, dtype_kv=dtype)
        mla_golden.assert_matches(spy.calls.one(), name="decode")
    """
)


def test_a_mismatch_raises_golden_mismatch_decoding_a_screenful_of_work_items(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(standins=(TESTS / "helpers" / "standins.py").read_text(), test_mismatch=MISMATCH_TEST)
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    monkeypatch.setenv("DROP", "1")
    failures: dict[str, list[int]] = {}
    for args in ((), ("--mla-golden-max-items", "40")):
        result = pytester.runpytest(*args)
        result.assert_outcomes(failed=1)
        (lines,) = _failures(result.stdout.str()).values()
        text = "\n".join(lines)
        assert re.search(r"^E +mla_golden.errors.GoldenMismatch: DIVERGED get_mla_metadata_v1", text, re.M), text
        assert "--mla-golden-update" in text and "assertions.py" not in text
        failures[" ".join(args)] = [len(lines), text.count("│ expected │")]
    (default_lines, default_items), (more_lines, more_items) = failures.values()
    assert default_items == 5 < more_items  # five divergent work items decoded by default, more when asked
    assert default_lines <= 60 < more_lines
