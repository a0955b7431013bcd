"""check flags only what aiter's kernels mis-handle: calls the planner handles pass (or carry a precise note)."""

from __future__ import annotations

from pathlib import Path

from helpers.calls import decode_call, prefill_call

import mla_golden
from mla_golden.golden.store import Golden, GoldenStore, load_placed
from mla_golden.render.report import render_check_text


def test_a_flat_work_info_set_is_checked_as_the_rows_aiter_makes_of_it() -> None:
    """aiter takes work_info_set as a raw pointer: a 1-D buffer of 8 x #work elements is planned and read alike."""
    flat = decode_call([100, 200, 300], flat_work_info=True)
    assert flat.outputs["work_info_set"].dim() == 1
    result = mla_golden.invariants(flat)
    assert result.ok, render_check_text(result)
    # the same plan as a 2-D buffer gives, works and all
    assert flat.outputs["work_info_set"].tolist() == decode_call([100, 200, 300]).outputs["work_info_set"].reshape(-1).tolist()


def test_a_flat_work_info_set_that_is_wrong_is_still_flagged() -> None:
    flat = decode_call([100, 200, 300], flat_work_info=True)
    flat.outputs["work_info_set"][5] += 1  # work 0's kv_end
    assert not mla_golden.invariants(flat).ok


def test_a_prefill_buffer_that_fits_the_plan_exactly_passes() -> None:
    """The host planner fills vectors sized by the caller's buffers: one smaller than the helper's but holding the plan is fine."""
    exact = prefill_call([600, 7, 300], exact=True)
    helper_sized = prefill_call([600, 7, 300])
    assert exact.outputs["work_info_set"].numel() < helper_sized.outputs["work_info_set"].numel()
    result = mla_golden.invariants(exact)
    assert result.ok, render_check_text(result)


def test_a_prefill_buffer_cut_short_of_its_plan_is_flagged() -> None:
    call = prefill_call([600, 7, 300], exact=True)
    rows = call.outputs["work_info_set"].shape[0]
    for name in ("outputs", "written"):
        getattr(call, name)["work_info_set"] = getattr(call, name)["work_info_set"][: rows - 1].clone()
    call.buffers["work_info_set"]["shape"] = [rows - 1, 8]
    assert not mla_golden.invariants(call).ok


def test_a_request_with_no_kv_tokens_passes_with_a_note_saying_what_the_kernel_does() -> None:
    for kv_lens in ([100, 0, 300], [100, 300, 0], [0, 0, 5]):
        result = mla_golden.invariants(decode_call(kv_lens))
        assert result.ok, render_check_text(result)
        assert any("no kv tokens" in s and "aiter plans none" in s for s in result.skipped), result.skipped


def test_a_missing_work_for_a_request_with_kv_tokens_is_still_flagged() -> None:
    call = decode_call([100, 0, 300])
    call.inputs["seqlens_kv_indptr"][2:] += 5  # batch 1 now has 5 kv tokens, and still no work
    result = mla_golden.invariants(call)
    assert any(v.invariant == "coverage" and v.where.startswith("batch 1 ") for v in result.violations), result.violations


def test_a_symlink_named_like_one_key_leading_to_another_keys_golden_is_refused(tmp_path: Path) -> None:
    """The key-vs-path check uses the path the user named, never where a link leads."""
    store = GoldenStore(tmp_path)
    store.write(Golden("decode/a", decode_call([100, 200])))
    store.write(Golden("decode/b", decode_call([100, 300])))
    named_b = store.path_for("decode/b")
    named_b.unlink()
    named_b.symlink_to(store.path_for("decode/a"))
    try:
        load_placed(named_b, named_b.relative_to(tmp_path).as_posix())
    except mla_golden.GoldenError as exc:
        assert "does not match the file's path" in exc.problem
    else:
        raise AssertionError("a golden of key decode/a was taken as decode/b")
    assert load_placed(store.path_for("decode/a"), "decode/a.safetensors").key == "decode/a"
