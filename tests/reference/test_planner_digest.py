"""Planner digests by meaning (mla_golden.reference.planner_digest) and `mla-golden versions --aiter`.

The normaliser must call equal what only reformats or re-annotates the planner
(aiter v0.1.19 against aded0f84) and keep apart any change in what it computes.
The release-mapping test over the real aiter history is gated on
MLA_GOLDEN_AITER_REPO (a git clone of ROCm/aiter, bare is fine).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mla_golden.cli import app
from mla_golden.reference import planner_digest as pd
from mla_golden.reference import versions

ANNOTATED = '''
import math

@compile_ops("module_mla_metadata", fc_name="get_mla_metadata_v1")
def _get_mla_metadata_v1_impl(seqlens: torch.Tensor, dtype_q: torch.dtype | None = None) -> None:
    """Compiled binding."""

def get_mla_metadata_info_v1(batch_size: int, packed: int) -> tuple[int, int]:
    """Sizing helper."""
    tiles: int = math.ceil(packed / 16)
    return batch_size, tiles

def get_mla_metadata_v1(seqlens, dtype_q=None):
    _get_mla_metadata_v1_impl(seqlens, dtype_q)

def unrelated(x):
    return x + 1
'''

#: ANNOTATED with other annotations, a `...` body, `int(math.ceil(..))`, no docstrings, other layout.
REWRITTEN = '''
import math
from typing import Optional

@compile_ops("module_mla_metadata", fc_name="get_mla_metadata_v1")
def _get_mla_metadata_v1_impl(seqlens: "torch.Tensor", dtype_q: Optional[torch.dtype] = None):
    ...

def get_mla_metadata_info_v1(batch_size, packed):
    tiles = int(math.ceil(packed / 16))
    return (batch_size, tiles)

def get_mla_metadata_v1(seqlens: torch.Tensor, dtype_q: Optional[torch.dtype] = None) -> None:
    """Wrapper."""
    _get_mla_metadata_v1_impl(seqlens, dtype_q)

def unrelated(x):
    return x + 2  # not called by the ops: not part of the planner
'''

CPP = """
// the planner
#include "v1_comm.cuh"
void get_mla_metadata_v1(int* out, int n) {
    /* fill */ for (int i = 0; i < n; ++i) { out[i] = i * 2; }
    AITER_CHECK(n > 0, "get_mla_metadata_v1: n must be positive");
}
"""
CPP_REFORMATTED = """#include "v1_comm.cuh"
void get_mla_metadata_v1(int *out, int n)
{
    for (int i = 0; i < n; ++i)
    {
        out[i] = i*2;   // doubled
    }
    AITER_CHECK(n > 0,
                "get_mla_metadata_v1: n must be positive");
}
"""


def test_annotations_docstrings_ellipsis_and_int_of_ceil_do_not_count() -> None:
    assert pd.planner_functions(ANNOTATED) == pd.planner_functions(REWRITTEN)
    assert pd.planner_digest({}, ANNOTATED) == pd.planner_digest({}, REWRITTEN)


def test_only_the_ops_functions_and_what_they_call_count() -> None:
    assert set(pd.planner_functions(ANNOTATED)) == {
        "_get_mla_metadata_v1_impl",
        "get_mla_metadata_info_v1",
        "get_mla_metadata_v1",
    }


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("math.ceil(packed / 16)", "math.ceil(packed / 64)"),  # another tile size
        ("math.ceil(packed / 16)", "math.floor(packed / 16)"),
        ("return batch_size, tiles", "return batch_size, tiles + 1"),
        ('fc_name="get_mla_metadata_v1"', 'fc_name="get_mla_metadata_v2"'),  # decorators bind the C++ op
        ("dtype_q: torch.dtype | None = None) -> None", "dtype_q: torch.dtype | None = 0) -> None"),  # a default
        ("_get_mla_metadata_v1_impl(seqlens, dtype_q)", "_get_mla_metadata_v1_impl(seqlens, None)"),
    ],
)
def test_a_real_python_change_differs(old: str, new: str) -> None:
    assert old in ANNOTATED
    assert pd.planner_digest({}, ANNOTATED) != pd.planner_digest({}, ANNOTATED.replace(old, new, 1))


def test_int_of_other_calls_still_counts() -> None:
    """Only int() of math.ceil is neutral: int() of a true division is not."""
    a = ANNOTATED.replace("math.ceil(packed / 16)", "packed / 16")
    b = ANNOTATED.replace("math.ceil(packed / 16)", "int(packed / 16)")
    assert pd.planner_digest({}, a) != pd.planner_digest({}, b)


def test_cpp_comments_and_formatting_do_not_count() -> None:
    assert pd.normalise_cpp(CPP) == pd.normalise_cpp(CPP_REFORMATTED)
    path = "csrc/kernels/mla/metadata.cu"
    assert pd.planner_digest({path: CPP}, None) == pd.planner_digest({path: CPP_REFORMATTED}, None)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("i * 2", "i * 3"),
        ("i < n", "i <= n"),
        ('"get_mla_metadata_v1: n must be positive"', '"get_mla_metadata_v1: n  must be positive"'),  # inside a string
        ("n > 0", "n >= 0"),
    ],
)
def test_a_real_cpp_change_differs(old: str, new: str) -> None:
    assert old in CPP
    assert pd.normalise_cpp(CPP) != pd.normalise_cpp(CPP.replace(old, new, 1))


def test_the_end_of_a_preprocessor_directive_counts() -> None:
    """A line break ends a macro: moving code into it changes the program; a continuation does not."""
    assert pd.normalise_cpp("#define TILE 16\nint x = TILE;\n") != pd.normalise_cpp("#define TILE 16 int x = TILE;\n")
    assert pd.normalise_cpp("#define MAX(a, b) \\\n    ((a) > (b) ? (a) : (b))\nint y;") == pd.normalise_cpp(
        "#define MAX(a,b) ((a)>(b)?(a):(b))   // larger\n\nint y;"
    )
    assert pd.normalise_cpp("x = a\n# b;\nc;") != pd.normalise_cpp("x = a # b;\nc;"), "only a # at a line start opens a directive"


def test_a_comment_marker_inside_a_string_is_text() -> None:
    assert pd.normalise_cpp('s = "a // b";') != pd.normalise_cpp('s = "a ";')


# ------------------------------------------------------------- versions --aiter over small trees


def _tree(root: Path, cpp: str = CPP, attention: str = ANNOTATED) -> Path:
    (root / "csrc/kernels/mla/metadata").mkdir(parents=True)
    (root / "csrc/kernels/mla/metadata.cu").write_text(cpp)
    (root / "csrc/kernels/mla/metadata/v1_comm.cuh").write_text("#pragma once\nconstexpr int kTile = 16;\n")
    (root / "aiter/ops").mkdir(parents=True)
    (root / "aiter/ops/attention.py").write_text(attention)
    return root


@pytest.fixture
def ported_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A small tree whose digest the (stand-in) digests file gives to version aded0f84."""
    tree = _tree(tmp_path / "ported")
    digests = tmp_path / "planner_digests.json"
    aded = next(v.commit for v in versions() if v.name == "aded0f84")
    digests.write_text(json.dumps({"normalisation": pd.NORMALISATION, "versions": {aded: pd.tree_digest(tree)}}))
    monkeypatch.setattr(pd, "DIGESTS_FILE", digests)
    pd._ported_digests.cache_clear()
    yield tree
    monkeypatch.undo()
    pd._ported_digests.cache_clear()


def _versions(tree: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["versions", "--aiter", str(tree), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_versions_aiter_names_the_ported_version_of_a_reformatted_tree(ported_tree: Path, tmp_path: Path) -> None:
    reformatted = _tree(tmp_path / "reformatted", CPP_REFORMATTED, REWRITTEN)
    for tree in (ported_tree, reformatted):
        code, out, _ = _versions(tree)
        assert code == 0 and out.startswith("exact: reference@aded0f84"), out
    code, out, _ = _versions(reformatted, "--format", "json")
    document = json.loads(out)
    assert code == 0
    assert (document["verdict"], document["version"], document["backend"]) == ("exact", "aded0f84", "reference@aded0f84")
    assert document["planner_digest"] == pd.tree_digest(ported_tree)


def test_versions_aiter_sends_a_changed_tree_to_aiter_src(ported_tree: Path, tmp_path: Path) -> None:
    changed = _tree(tmp_path / "changed", CPP.replace("i * 2", "i * 4"))
    code, out, _ = _versions(changed)
    assert code == 1
    assert out.startswith(f"not ported: use --backend aiter-src:{changed}"), out
    code, out, _ = _versions(changed, "--format", "json")
    document = json.loads(out)
    assert code == 1
    assert (document["verdict"], document["version"], document["backend"]) == ("not ported", None, f"aiter-src:{changed}")


def test_versions_aiter_refuses_what_is_no_aiter_tree(ported_tree: Path, tmp_path: Path) -> None:
    no_python = _tree(tmp_path / "no-python")
    (no_python / "aiter/ops/attention.py").unlink()
    broken = _tree(tmp_path / "broken", attention="def get_mla_metadata_v1(:\n")
    cases = [
        (tmp_path / "missing", "not a directory"),
        (no_python, "aiter/ops/attention.py is missing"),
        (ported_tree / "csrc", "csrc/kernels/mla/metadata.cu is missing"),
        (broken, "not valid Python"),
    ]
    for tree, reason in cases:
        code, out, err = _versions(tree)
        assert code == 2 and out == "", (tree, out)
        assert f"--aiter {tree}" in err or f"--aiter {tree / 'aiter/ops/attention.py'}" in err, err
        assert reason in err, err


# ------------------------------------------------------------- the real aiter history (gated)

AITER_REPO = os.environ.get("MLA_GOLDEN_AITER_REPO")


@pytest.mark.skipif(not AITER_REPO, reason="set MLA_GOLDEN_AITER_REPO to a git clone of ROCm/aiter")
@pytest.mark.parametrize(
    ("tag", "code", "verdict"),
    [
        ("v0.1.19", 0, "exact: reference@aded0f84"),  # annotations, int(math.ceil(..)) and `...` apart
        ("v0.1.20", 0, "exact: reference@e4048607"),
        ("v0.1.16.post5", 0, "exact: reference@72eedddd"),  # the release-branch parallel planner, ported
        ("v0.1.17", 1, "not ported: use --backend aiter-src:"),  # main of 07-08: no ported version plans like it
    ],
)
def test_versions_aiter_on_archived_release_trees(tmp_path: Path, tag: str, code: int, verdict: str) -> None:
    assert AITER_REPO is not None
    archive = subprocess.run(
        ["git", "-C", AITER_REPO, "archive", tag, "csrc/kernels/mla", "aiter/ops/attention.py"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    got, out, _ = _versions(tmp_path)
    assert got == code and out.startswith(verdict), out
