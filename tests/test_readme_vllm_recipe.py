"""README's recipe "mla-golden in vLLM's tests" runs as written: the library form, then the fixture form under pytest."""

from __future__ import annotations

import contextlib
import io

import pytest
from helpers.readme_blocks import README, block

import mla_golden
from mla_golden.reference.dtypes import FP8_BY_ARCH


def _recipe_blocks() -> list[str]:
    """The recipe's library block and its pytest block."""
    return [block("def build_decode(seq_lens"), block('@pytest.mark.parametrize("arch"')]


def test_the_library_form_prints_the_dtype_diff_of_the_raising_planner() -> None:
    library, _ = _recipe_blocks()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(library, str(README), "exec"), {"__name__": "readme_recipe"})
    printed = out.getvalue()
    assert "dtype_q_nope: 'torch.float8_e4m3fnuz' -> None" in printed
    assert printed.startswith("call 0 of the block: DIVERGED get_mla_metadata_v1")
    assert "error status changed: None -> " in printed


@pytest.mark.slow
def test_the_fixture_form_writes_then_matches_goldens_with_each_archs_fp8(pytester: pytest.Pytester) -> None:
    library, tests = _recipe_blocks()
    pytester.makepyfile(test_recipe=library + "\n\n" + tests)
    # a real pytest process, as vLLM's suite would run it
    pytester.runpytest_subprocess("--mla-golden-update", "-p", "no:cacheprovider").assert_outcomes(passed=2)
    for arch in ("gfx942", "gfx950"):
        golden = mla_golden.load(
            pytester.path / "goldens" / "test_recipe.py" / f"test_decode_metadata[{arch}]" / "decode.safetensors"
        )
        assert golden.call.device["arch"] == arch and golden.call.params["dtype_kv_nope"] == str(FP8_BY_ARCH[arch])
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
