"""The pure-Python parts of tools/aiter_oracle and the build it shares with aiter-src (mla_golden.aiter_build).

Covered here: the line-preserving source rewrites, the C++ signature parser
that drives the generated harness, the record encoding of written runs, and the
comparison rules used to report match counts.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers.repo import ROOT

sys.path.insert(0, str(ROOT / "tools" / "aiter_oracle"))

import compare  # noqa: E402
import oracle  # noqa: E402

from mla_golden.aiter_build import build  # noqa: E402


def test_kernel_launch_becomes_an_emulated_launch_on_the_same_lines() -> None:
    src = "    kn_get<Traits<1, 2>>\n        <<<grid, dev_prop.warpSize, lds_size, stream>>>(\n            params);\n"
    out = build.rewrite_launches(src)
    assert out.count("\n") == src.count("\n")
    assert "<<<" not in out
    assert "::emu::launch(dim3(grid), dim3(dev_prop.warpSize), (size_t)(lds_size), [&]() { kn_get<Traits<1, 2>>(\n            params); })\n;\n" in out


def test_dynamic_lds_becomes_a_pointer_to_the_emulated_lds() -> None:
    out = build.rewrite_shared("    extern __shared__ uint8_t p_smem[];\n")
    assert out == "    uint8_t* p_smem = reinterpret_cast<uint8_t*>(::emu::lds());\n"


def test_signature_parser_reads_the_definition_not_the_declaration() -> None:
    src = """
void get_mla_metadata_v1(const aiter_tensor_t& a, int32_t n);  // declaration only
void get_mla_metadata_v1(
    const torch::Tensor& seqlens_qo_indptr, // [batch + 1]
    const int32_t num_heads_k,
    const bool is_causal,
    torch::Tensor& work_indptr,
    const MlaVersion mla_version,
    const std::optional<at::ScalarType> dtype_q,
    const std::optional<int64_t> dtype_q_nope = std::nullopt)
{
}
"""
    params = build.parse_signature(src, "get_mla_metadata_v1")
    assert [(p.name, p.kind) for p in params] == [
        ("seqlens_qo_indptr", "tensor"),
        ("num_heads_k", "int"),
        ("is_causal", "bool"),
        ("work_indptr", "tensor"),
        ("mla_version", "enum"),
        ("dtype_q", "opt_scalar_type"),
        ("dtype_q_nope", "opt_int"),
    ]
    assert params[4].ctype == "MlaVersion"


def test_signature_parser_rejects_a_type_the_harness_cannot_pass() -> None:
    with pytest.raises(build.BuildError, match="not supported"):
        build.parse_signature("void f(const std::vector<int>& v) {}", "f")


def test_runs_are_half_open_and_merge_neighbours() -> None:
    assert oracle._runs([True, True, False, True]) == [[0, 2], [3, 4]]
    assert oracle._runs([]) == []
    assert oracle._runs_of_indices([5, 6, 7, 9]) == [[5, 8], [9, 10]]


def _record(values: list[int], written: list[list[int]], indeterminate: list[list[int]] | None = None) -> dict[str, Any]:
    out = {"shape": [4], "dtype": "torch.int32", "values": values, "written": written}
    if indeterminate:
        out["indeterminate"] = indeterminate
    return {"result": "ok", "buffers": {"work_indptr": {"shape": [4], "dtype": "torch.int32"}}, "outputs": {"work_indptr": out}}


def test_compare_skips_indeterminate_elements_but_not_written_ones() -> None:
    expected = _record([1, 2, 0, 4], [[0, 2], [3, 4]], [[2, 3]])
    assert compare.differences(_record([1, 2, 9, 4], [[0, 4]]), expected) == []
    assert compare.differences(_record([1, 3, 0, 4], [[0, 2], [3, 4]]), expected) == [
        "work_indptr: 1 values differ, first [1] 3 != 2"
    ]
    assert compare.differences(_record([1, 2], [[0, 2]]), expected)[0].startswith("work_indptr: written mask differs")


def test_compare_checks_error_messages_and_buffer_shapes() -> None:
    err = {"result": "error", "error": {"message": "m"}}
    assert compare.differences(err, err) == []
    assert compare.differences({**err, "error": {"message": "other"}}, err) == ["error message 'other' != 'm'"]
    small = _record([1], [[0, 1]])
    small["buffers"]["work_indptr"]["shape"] = [3]
    assert compare.differences(small, _record([1], [[0, 1]])) == ["buffer work_indptr: shape [3] != [4]"]
