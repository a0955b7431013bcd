"""Every Python snippet in README.md runs: the fenced ```python blocks, each with the small fixtures it names."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.readme_blocks import BLOCKS, RUNNERS, block
from helpers.repo import TESTS

import mla_golden
from mla_golden import reference

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


def test_the_pytest_snippet(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiter", reference)  # the snippet's `import aiter`
    pytester.makepyfile(
        builder_fixture=BUILDER,
        test_readme_snippet="from builder_fixture import builder, common_attn_metadata\n"
        + block("def test_decode_metadata(mla_golden)"),
    )
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_library_snippet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "aiter", reference)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(BUILDER, "builder", "exec"), namespace)

    def build() -> None:
        namespace["builder"].build(namespace["common_attn_metadata"])

    with mla_golden.spy() as spy:  # the known-good golden the snippet compares against
        build()
    mla_golden.assert_matches_golden(spy.calls.one(), "goldens", name="deepseek-tp8-decode", update=True)
    exec(compile(block("with mla_golden.spy() as spy:"), "README.md", "exec"), {"build": build})
    assert re.search(r'"equal":\s*true', capsys.readouterr().out)


def test_the_reference_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block("reference.get_mla_metadata_v1(qo_indptr"), "README.md", "exec"), namespace)
    indptr, info = namespace["indptr"], namespace["info"]
    assert indptr.dtype == torch.int32 and int(indptr[0]) == 0 and info.shape[1] == 8
    assert "tensor(" in capsys.readouterr().out


def test_the_prefill_snippet_plans_as_on_buffers_sized_for_its_batch(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block("reference.get_ps_metadata_v1(qo_indptr"), "README.md", "exec"), namespace)
    assert "CU parts with work;" in capsys.readouterr().out
    qo, lens = namespace["qo_indptr"], namespace["context_lens"]
    with reference.device("gfx950", cu_num=256):
        snug = [torch.empty(s, dtype=d) for s, d in reference.get_ps_metadata_info_v1(3, 16, 3000)]
        ptrs, indptr, info, r_indptr, r_final, r_partial = snug
        reference.get_ps_metadata_v1(qo, qo, lens, 1, 16, ptrs, indptr, info, r_indptr, r_final, r_partial, 1, 256, 128, 1, True)
    works = int(snug[1][-1])
    assert works > 0 and torch.equal(namespace["indptr"][: len(snug[1])], snug[1])
    assert torch.equal(namespace["info"][:works], snug[2][:works])  # the same work items, whatever the buffers' size


def test_the_expect_snippet(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiter", reference)  # expect()'s default module, "aiter"
    pytester.makepyfile(
        builder_fixture=BUILDER,
        test_readme_expect="from builder_fixture import builder, common_attn_metadata\n"
        + block('mla_golden.expect(name="step")'),
    )
    pytester.runpytest("--mla-golden-update").assert_outcomes(passed=1)
    assert len(list((pytester.path / "goldens").rglob("*.safetensors"))) == 1
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_versions_snippet(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(block('reference.at("v0.1.16.post2")'), "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "62028796 2026-06-25"  # what the snippet's comments promise
    assert reference.at("v0.1.16.post2").version.tags == ("v0.1.16", "v0.1.16.post1", "v0.1.16.post2", "v0.1.16.post3")
    names = [v.name for v in reference.versions()]
    assert [line.split()[0] for line in printed if not line.startswith(" ")][-len(names) :] == names
    assert int(namespace["info"][0][0]) == 0  # work item 0 serves batch 0


def test_every_block_has_exactly_one_runner() -> None:
    """A new ```python block in README.md fails here until a test runs it and RUNNERS names that test."""
    for index, text in enumerate(BLOCKS):
        claims = [marker for marker in RUNNERS if marker in text]
        assert len(claims) == 1, f"README python block {index} ({text.splitlines()[0]!r}) is claimed by {claims}"
    for marker, runner in RUNNERS.items():
        assert sum(marker in text for text in BLOCKS) == 1, f"RUNNERS marker {marker!r} is not in exactly one block"
        file, function = runner.split("::")
        source = (TESTS / file).read_text(encoding="utf-8")
        defined = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
        assert function in defined, f"{runner} (the runner of {marker!r}) does not exist"
        assert repr(marker) in source or f'"{marker}"' in source, f"{runner} never fetches its block {marker!r}"
