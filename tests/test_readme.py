"""Every Python snippet in README.md runs: the fenced ```python blocks, each with the small fixtures it names."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import mla_golden
from mla_golden import reference

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)

#: What the snippets leave to the reader: a builder that makes one decode planner call through ``aiter``.
BUILDER = textwrap.dedent(
    """
    import sys

    import torch

    from mla_golden import reference


    class Builder:
        def build(self, common_attn_metadata):
            aiter = sys.modules["aiter"]
            with reference.device("gfx942", 304):
                shapes = aiter.get_mla_metadata_info_v1(3, 1, 16, torch.bfloat16, torch.bfloat16, False)
                wm, wi, wis, ri, rfm, rpm = (torch.empty(s, dtype=d) for s, d in shapes)
                aiter.get_mla_metadata_v1(
                    torch.tensor([0, 1, 2, 3], dtype=torch.int32), common_attn_metadata, torch.ones(3, dtype=torch.int32),
                    16, 1, True, wm, wis, wi, ri, rfm, rpm, max_seqlen_qo=1, uni_seqlen_qo=1,
                    dtype_q=torch.bfloat16, dtype_kv=torch.bfloat16)


    builder = Builder()
    common_attn_metadata = torch.tensor([0, 50, 200, 210], dtype=torch.int32)
    """
)


def _block(marker: str) -> str:
    """The one README block holding ``marker``."""
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"expected one README python block with {marker!r}, found {len(found)}"
    return found[0]


PYTEST_SNIPPET = "def test_decode_metadata(mla_golden)"
LIBRARY_SNIPPET = "with mla_golden.spy() as spy:"
REFERENCE_SNIPPET = "reference.get_mla_metadata_v1(qo_indptr"


def test_the_pytest_snippet(pytester, monkeypatch):
    monkeypatch.setitem(sys.modules, "aiter", reference)  # the snippet's `import aiter`
    pytester.makepyfile(builder_fixture=BUILDER, test_readme_snippet="from builder_fixture import builder, common_attn_metadata\n" + _block(PYTEST_SNIPPET))
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_library_snippet(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "aiter", reference)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(BUILDER, "builder", "exec"), namespace)

    def build() -> None:
        namespace["builder"].build(namespace["common_attn_metadata"])

    with mla_golden.spy() as spy:  # the known-good golden the snippet compares against
        build()
    mla_golden.assert_matches_golden(spy.calls.one(), "goldens", name="deepseek-tp8-decode", update=True)
    exec(compile(_block(LIBRARY_SNIPPET), "README.md", "exec"), {"build": build})
    assert re.search(r'"equal":\s*true', capsys.readouterr().out)


def test_the_reference_snippet(capsys):
    namespace: dict = {}
    exec(compile(_block(REFERENCE_SNIPPET), "README.md", "exec"), namespace)
    indptr, info = namespace["indptr"], namespace["info"]
    assert indptr.dtype == torch.int32 and int(indptr[0]) == 0 and info.shape[1] == 8
    assert "tensor(" in capsys.readouterr().out


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_every_snippet_compiles(index):
    compile(BLOCKS[index], f"README.md block {index}", "exec")
