"""The case matrix: the shipped one covers the deployments the project targets (MI300X and MI355X, DeepSeek-V3/R1 and Kimi-K2 head counts); bad files name line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from mla_golden.backends import resolve
from mla_golden.call import Call
from mla_golden.cases import vllm_max_split_per_batch
from mla_golden.matrix import (
    MatrixError,
    capture,
    load_matrix,
    parse,
)

GOOD = """\
format = "mla-golden-matrix/1"
devices = ["gfx942:304"]

[[decode]]
name = "tiny"
heads = [128, 8]
dtype = ["bf16", "fp8"]
qlen = [1, 2]
batch = 3
context = "jitter:300"

[[prefill]]
name = "tiny-prefill"
heads = 16
seq_lens = [[300, 7]]
"""


def test_shipped_matrix_covers_the_real_deployments() -> None:
    cases = load_matrix()
    decode = [c for c in cases if c.op == "get_mla_metadata_v1"]
    prefill = [c for c in cases if c.op == "get_ps_metadata_v1"]
    assert 50 <= len(cases) <= 150, "small enough for a fast record + diff of the whole tree"
    assert {(c.arch, c.cu_num) for c in cases} == {("gfx942", 304), ("gfx950", 256)}
    assert {c.heads for c in decode} >= {128, 64, 32, 16, 8}
    assert {c.kernel_heads for c in decode if c.heads == 8} == {16}, "8 heads per rank padded to 16"
    assert {c.dtype for c in decode} == {"bf16", "fp8"}
    assert {c.qlen for c in decode} == {1, 2, 3, 4}
    assert {c.page_size for c in decode} == {1, 16, 64}
    assert min(c.batch for c in decode) == 1 and max(c.batch for c in decode) == 512
    assert max(max(c.seq_lens) for c in decode) == 128 * 1024
    assert any(len(set(c.seq_lens)) > 1 for c in decode) and any(len(set(c.seq_lens)) == 1 for c in decode)
    assert any(c.env["AITER_ENABLE_EXPERIMENTAL"] == "1" for c in decode)
    assert any(c.env["AITER_MLA_META_USE_PARALLEL"] == "0" for c in decode)
    assert any(c.max_split_per_batch > 0 for c in decode) and any(c.max_split_per_batch == -1 for c in decode)
    assert any(len(set(c.seq_lens)) > 1 for c in prefill), "prefill batches of mixed sequence lengths"
    assert len({c.name for c in cases}) == len(cases)


def test_max_split_per_batch_is_what_vllm_computes() -> None:
    assert vllm_max_split_per_batch(128, 1, 304) == 32  # capped at vLLM's 32 kv splits
    assert vllm_max_split_per_batch(128, 64, 304) == 5  # ceil(304 / 64)
    assert vllm_max_split_per_batch(128, 512, 256) == 1
    assert vllm_max_split_per_batch(64, 8, 304) == -1  # under 128 heads vLLM passes no cap
    assert vllm_max_split_per_batch(8, 8, 304) == -1


def test_cases_expand_every_combination_and_run_like_vllm() -> None:
    cases = parse(GOOD, "good.toml")
    assert len(cases) == 2 * 2 * 2 + 1
    case = next(c for c in cases if c.name == "decode/tiny/gfx942-cu304/h8-fp8-q2-b3-jitter300-p1")
    assert case.kernel_heads == 16 and case.batch == 3 and all(2 <= n <= 300 for n in case.seq_lens)
    assert parse(GOOD, "good.toml") == cases, "jittered lengths are seeded: same matrix, same cases"
    (_, call), (_, prefill) = capture([case, cases[-1]], resolve("reference"))
    assert isinstance(call, Call) and isinstance(prefill, Call), (call, prefill)
    assert call.params["num_heads_per_head_k"] == 16
    assert call.params["kv_granularity"] == 16 and call.params["uni_seqlen_qo"] == 2
    assert call.params["dtype_q_nope"] == call.params["dtype_kv_rope"] == "torch.float8_e4m3fnuz"
    assert call.device["arch"] == "gfx942" and call.device["cu_num"] == 304
    assert call.env == {"AITER_ENABLE_EXPERIMENTAL": None, "AITER_MLA_META_USE_PARALLEL": None}
    assert prefill.params == {
        "gqa_ratio": 1, "num_heads_k": 16, "qhead_granularity": 1, "qlen_granularity": 256,
        "kvlen_granularity": 128, "block_size": 1, "is_causal": True,
    }  # fmt: skip
    assert prefill.inputs["seqlens_qo_indptr"].tolist() == prefill.inputs["pages_kv_indptr"].tolist() == [0, 300, 307]


def test_devices_option_replans_every_case() -> None:
    cases = parse(GOOD, "good.toml", devices=["gfx950:256", "gfx942:80"])
    assert {(c.arch, c.cu_num) for c in cases} == {("gfx950", 256), ("gfx942", 80)}
    with pytest.raises(MatrixError, match="ARCH:CU"):
        parse(GOOD, "good.toml", devices=["mi300"])


@pytest.mark.parametrize(
    ("edit", "line", "key"),
    [
        (("heads = [128, 8]", "heads = [128, \"x\"]"), 6, "heads"),
        (("heads = [128, 8]", "heads = [128, 12]"), 6, "heads"),
        (("qlen = [1, 2]", "q_len = [1, 2]"), 8, "q_len"),
        (("dtype = [\"bf16\", \"fp8\"]", "dtype = \"fp16\""), 7, "dtype"),
        (("context = \"jitter:300\"", "context = \"jitter:1\""), 10, "context"),
        (("context = \"jitter:300\"", "context = \"300\""), 10, "context"),
        (("batch = 3\n", "batch = 3\nenv = { AITER_FOO = \"1\" }\n"), 10, "env.AITER_FOO"),
        (("batch = 3\n", "batch = 3\nmax_split_per_batch = 0\n"), 10, "max_split_per_batch"),
        (("devices = [\"gfx942:304\"]", "devices = [\"gfx942\"]"), 2, "devices"),
        (("seq_lens = [[300, 7]]", "seq_lens = [300, 7]"), 15, "seq_lens"),
        (("format = \"mla-golden-matrix/1\"", "format = \"mla-golden-matrix/9\""), 1, "format"),
    ],
)
def test_bad_matrix_errors_name_file_line_and_key(edit: Any, line: int, key: str) -> None:
    old, new = edit
    assert old in GOOD
    with pytest.raises(MatrixError) as err:
        parse(GOOD.replace(old, new, 1), "bad.toml")
    message = str(err.value)
    assert message.startswith(f"bad.toml:{line}:"), message
    assert f"key {key!r}" in message, message


def test_missing_key_names_the_table_and_key() -> None:
    text = GOOD.replace('batch = 3\n', '')
    with pytest.raises(MatrixError, match=r"bad.toml:4: \[\[decode\]\] #1 \('tiny'\): key 'batch': missing"):
        parse(text, "bad.toml")


def test_toml_syntax_error_names_the_line() -> None:
    with pytest.raises(MatrixError, match=r"bad.toml: not valid TOML: .*line 3"):
        parse("format = 'mla-golden-matrix/1'\n\n[[decode]\nname = 'x'\n", "bad.toml")


def test_duplicate_case_names_are_refused() -> None:
    text = GOOD + textwrap.dedent(
        """
        [[prefill]]
        name = "tiny-prefill"
        heads = 16
        seq_lens = [[300, 7]]
        """
    )
    with pytest.raises(MatrixError, match="two cases named 'prefill/tiny-prefill/"):
        parse(text, "dup.toml")


def test_unreadable_matrix_file(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match="cannot read"):
        load_matrix(tmp_path / "missing.toml")


def test_an_aiter_before_paged_kv_records_the_unpaged_cases_and_names_what_the_paged_ones_need(tmp_path: Path) -> None:
    """33d168a0's planner has no kv_last_page_lens / page_size: its builders called it by keyword without them."""
    from helpers.cli import cli_json

    from mla_golden.planner_id import planner_label

    matrix = tmp_path / "matrix.toml"
    matrix.write_text(textwrap.dedent("""\
        format = "mla-golden-matrix/1"
        devices = ["gfx942:304"]

        [[decode]]
        name = "pages"
        heads = 16
        dtype = "fp8"
        batch = 3
        context = "jitter:700"
        page_size = [1, 16]
        """))
    code, document = cli_json("record", "--matrix", matrix, "--backend", "reference@33d168a0", "--out", tmp_path / "g")
    by_page = {r["key"].rsplit("-p", 1)[1]: r for r in document["results"]}
    assert code == 2 and by_page["1"]["status"] == "written", document
    assert by_page["16"]["status"] == "failed" and "kv_last_page_lens" in by_page["16"]["message"]
    from mla_golden.golden.store import load

    assert planner_label(load(Path(by_page["1"]["path"])).call.provenance) == "reference@33d168a0"
