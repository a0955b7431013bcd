"""README.md's ```python blocks and the one test that runs each (every snippet runs).

A runner fetches its block with :func:`block`; :data:`RUNNERS` names, per block, the marker that
finds it and the test that runs it. ``tests/test_readme.py`` fails when a block has no runner.
"""

from __future__ import annotations

import re

from helpers.repo import ROOT

README = ROOT / "README.md"
BLOCKS: list[str] = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)

#: marker (text found in exactly one block) -> the test, ``file::function``, that executes that block.
RUNNERS: dict[str, str] = {
    "def test_decode_metadata(mla_golden)": "test_readme.py::test_the_pytest_snippet",
    'mla_golden.expect(name="step")': "test_readme.py::test_the_expect_snippet",
    "with mla_golden.spy() as spy:": "test_readme.py::test_the_library_snippet",
    "def build_decode(seq_lens": "test_readme_vllm_recipe.py::test_the_library_form_prints_the_dtype_diff_of_the_raising_planner",
    '@pytest.mark.parametrize("arch"': "test_readme_vllm_recipe.py::test_the_fixture_form_writes_then_matches_goldens_with_each_archs_fp8",
    "reference.get_mla_metadata_v1(qo_indptr": "test_readme.py::test_the_reference_snippet",
    "reference.get_ps_metadata_v1(qo_indptr": "test_readme.py::test_the_prefill_snippet_plans_as_on_buffers_sized_for_its_batch",
    'reference.at("v0.1.16.post2")': "test_readme.py::test_the_versions_snippet",
    'resolve("reference@v0.1.20")': "test_upgrade_preview.py::test_the_readme_upgrade_preview_is_what_a_run_shows",
    'mla_golden.aiter_src("v0.1.19"': "aiter_build/test_aiter_src.py::test_the_readme_snippet_plans_as_the_port",
}


def block(marker: str) -> str:
    """The one README block holding ``marker``, a marker :data:`RUNNERS` lists (so the claim check sees the runner)."""
    assert marker in RUNNERS, f"{marker!r} is not in tests/helpers/readme_blocks.py RUNNERS"
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"expected one README python block with {marker!r}, found {len(found)}"
    return found[0]
