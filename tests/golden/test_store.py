"""The golden store: exact format, atomic no-clobber writes, and one clear error for every bad file."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import standins
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save

import mla_golden
from mla_golden.errors import GoldenError
from mla_golden.golden import store as store_module
from mla_golden.golden.store import (
    FORMAT,
    Golden,
    GoldenFile,
    GoldenStore,
    WriteOutcome,
    derived_key,
    key_path,
    load,
    load_pair,
    to_bytes,
    write,
)
from mla_golden.schema import OUTPUTS


@pytest.fixture(scope="module")
def call() -> mla_golden.Call:
    aiter = standins.fake_aiter()
    bufs = standins.toy_buffers(3, 200)
    with mla_golden.spy(aiter) as spy:
        aiter.get_mla_metadata_v1(
            torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.tensor([0, 50, 200, 210], dtype=torch.int32),
            torch.ones(3, dtype=torch.int32), 16, 1, True, *bufs.values(), dtype_q=torch.bfloat16,
            dtype_kv=torch.bfloat16,
        )  # fmt: skip
    return spy.calls.one()


@pytest.fixture(scope="module")
def golden_bytes(call: mla_golden.Call) -> bytes:
    return to_bytes(Golden("case/one", call))


def test_file_holds_exactly_the_documented_format(tmp_path: Path, call: mla_golden.Call) -> None:
    path = tmp_path / "g.safetensors"
    assert write(path, Golden("case/one", call)) is WriteOutcome.WRITTEN
    from safetensors import safe_open

    with safe_open(str(path), "pt") as fh:
        keys = set(fh.keys())
        meta = fh.metadata()
    assert keys == {f"input.{n}" for n in ("seqlens_qo_indptr", "seqlens_kv_indptr", "kv_last_page_lens")} | {
        f"{k}.{n}" for k in ("written", "data", "values") for n in OUTPUTS
    }
    assert meta["format"] == FORMAT == "mla-golden/2" and meta["digest"].startswith("sha256:")
    assert meta["format"] == FORMAT and meta["op"] == "get_mla_metadata_v1" and meta["key"] == "case/one"
    assert json.loads(meta["params"])["dtype_kv_nope"] == "torch.bfloat16"
    assert json.loads(meta["device"])["arch"] == "gfx942"
    assert json.loads(meta["buffers"])["work_info_set"]["shape"] == list(call.outputs["work_info_set"].shape)
    assert json.loads(meta["provenance"])["backend"] == "helpers.standins"
    assert "error" not in meta


def test_roundtrip_is_lossless(tmp_path: Path, call: mla_golden.Call) -> None:
    path = tmp_path / "g.safetensors"
    write(path, Golden("k", call))
    back = load(path)
    assert back.key == "k" and back.path == path
    assert mla_golden.diff(call, back.call).equal
    for name, tensor in call.outputs.items():
        assert back.call.outputs[name].dtype == tensor.dtype and torch.equal(back.call.outputs[name], tensor)


def test_error_golden_roundtrips_without_outputs(tmp_path: Path, call: mla_golden.Call) -> None:
    failed = mla_golden.Call(op=call.op, params=call.params, inputs=call.inputs, buffers=call.buffers,
                             device=call.device, env=call.env, provenance={}, error="boom")  # fmt: skip
    write(tmp_path / "e.safetensors", Golden("e", failed))
    back = load(tmp_path / "e.safetensors").call
    assert back.error == "boom" and back.outputs == {}


def test_identical_write_is_unchanged_different_is_refused_unless_update(tmp_path: Path, call: mla_golden.Call) -> None:
    store = GoldenStore(tmp_path)
    assert store.write(Golden("k", call)) is WriteOutcome.WRITTEN
    before = store.path_for("k").read_bytes()
    assert store.write(Golden("k", call)) is WriteOutcome.UNCHANGED
    changed = mla_golden.Call(**{**call.__dict__, "params": {**call.params, "topk": 7}})
    assert store.write(Golden("k", changed)) is WriteOutcome.REFUSED
    assert store.path_for("k").read_bytes() == before  # untouched
    assert store.write(Golden("k", changed), update=True) is WriteOutcome.UPDATED
    assert store.read("k").call.params["topk"] == 7
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_corrupt_existing_golden_is_never_silently_replaced(tmp_path: Path, call: mla_golden.Call) -> None:
    path = tmp_path / "k.safetensors"
    path.write_bytes(b"garbage")
    assert write(path, Golden("k", call)) is WriteOutcome.REFUSED
    assert path.read_bytes() == b"garbage"


def test_failed_write_leaves_existing_golden_and_no_temp(tmp_path: Path, call: mla_golden.Call, monkeypatch: pytest.MonkeyPatch) -> None:
    store = GoldenStore(tmp_path)
    store.write(Golden("k", call))
    before = store.path_for("k").read_bytes()

    def disk_full(fd: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    changed = mla_golden.Call(**{**call.__dict__, "params": {**call.params, "topk": 9}})
    with pytest.raises(mla_golden.GoldenError, match="No space left"):
        store.write(Golden("k", changed), update=True)
    assert store.path_for("k").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["k.safetensors"]


def test_unwritable_folder_is_a_clear_error(tmp_path: Path, call: mla_golden.Call, monkeypatch: pytest.MonkeyPatch) -> None:
    import mla_golden.files

    def denied(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(mla_golden.files, "temp_name", denied)  # a read-only folder, even for root
    with pytest.raises(mla_golden.GoldenError, match="cannot write in .*Permission denied"):
        write(tmp_path / "k.safetensors", Golden("k", call))
    assert list(tmp_path.iterdir()) == []


def test_folder_that_cannot_be_created_is_a_clear_error(tmp_path: Path, call: mla_golden.Call) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(mla_golden.GoldenError, match="cannot create folder"):
        write(tmp_path / "file" / "sub" / "k.safetensors", Golden("k", call))


def test_missing_folders_are_created(tmp_path: Path, call: mla_golden.Call) -> None:
    assert write(tmp_path / "a" / "b" / "k.safetensors", Golden("k", call)) is WriteOutcome.WRITTEN


def test_keys_never_escape_the_root(tmp_path: Path) -> None:
    for key in ("tests/test_x.py::test_y[a-b]", "a b/c", "_x", "x" * 150):
        path = key_path(tmp_path, key).resolve()
        assert tmp_path.resolve() in path.parents, key
    assert key_path(tmp_path, "a:b") != key_path(tmp_path, "a;b")  # sanitising keeps keys apart


@pytest.mark.parametrize(
    "key, match",
    [("../../etc/passwd", "'..' part"), ("/abs/path", "absolute"), ("a/./b", "empty, '\\.'"), ("..", "'..'"),
     ("", "non-empty"), ("a\x00b", "NUL"), ("a/" * 600, "characters"), ("x" * 201, "longer than"), ("a//b", "empty")],
    ids=["dotdot", "absolute", "dot", "bare-dotdot", "empty", "nul", "too-long", "long-part", "empty-part"],
)  # fmt: skip
def test_bad_names_are_golden_errors(tmp_path: Path, call: mla_golden.Call, key: Any, match: str) -> None:
    with pytest.raises(mla_golden.GoldenError, match=match):
        GoldenStore(tmp_path).write(Golden(key, call))
    assert list(tmp_path.iterdir()) == []


def test_a_write_never_leaves_the_golden_folder_through_a_symlink(tmp_path: Path, call: mla_golden.Call) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "goldens"
    root.mkdir()
    (root / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(mla_golden.GoldenError, match="outside the golden folder"):
        GoldenStore(root).write(Golden("sub/x", call))
    assert list(outside.iterdir()) == []


def test_derived_key_is_stable_and_separates_calls(call: mla_golden.Call) -> None:
    key = derived_key(call)
    assert key.startswith("get_mla_metadata_v1/gfx942-cu304/b3-h16-")
    assert derived_key(call) == key
    other = mla_golden.Call(**{**call.__dict__, "params": {**call.params, "dtype_kv_nope": None}})
    assert derived_key(other) != key


# ---------------------------------------------------------------- every corruption -> GoldenError


def _expect_golden_error(tmp_path: Path, data: bytes, match: str | None = None) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(mla_golden.GoldenError) as info:
        load(path)
    assert str(path) in str(info.value)
    if match:
        assert match in str(info.value)


def test_truncated_at_every_offset(tmp_path: Path, golden_bytes: bytes) -> None:
    step = max(1, len(golden_bytes) // 97)
    for cut in range(0, len(golden_bytes), step):
        _expect_golden_error(tmp_path, golden_bytes[:cut])


def test_not_a_safetensors_file(tmp_path: Path) -> None:
    _expect_golden_error(tmp_path, b"PK\x03\x04 this is a zip file", "header")


def test_huge_header_claim_is_refused_without_reading(tmp_path: Path) -> None:
    _expect_golden_error(tmp_path, struct.pack("<Q", 100 * 1024 * 1024) + b"{}", "header size")


def test_a_foreign_safetensors_file_is_named_as_no_golden(tmp_path: Path) -> None:
    weights = save({"embed": torch.zeros(4, 3, dtype=torch.bfloat16), "head": torch.zeros(2, dtype=torch.float16)},
                   metadata={"format": "pt"})  # fmt: skip
    path = tmp_path / "model.safetensors"
    path.write_bytes(weights)
    with pytest.raises(mla_golden.NotAGoldenError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}: not an mla-golden file: a safetensors file of 2 tensors (BF16, F16), {len(weights)} bytes, metadata format 'pt'"
    )
    _expect_golden_error(tmp_path, save({"weight": torch.zeros(3)}), "not an mla-golden file: a safetensors file of 1 tensor (F32)")
    _expect_golden_error(tmp_path, save({"x": torch.zeros(3, dtype=torch.int32)}, metadata={"a": "b"}), "no mla-golden metadata")
    lfs = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"ab" * 32 + b"\nsize 14000000000\n"
    _expect_golden_error(tmp_path, lfs, f"not an mla-golden file: a Git LFS pointer to sha256:{'ab' * 32}, size 14000000000")
    _expect_golden_error(tmp_path, b"PK\x03", "not an mla-golden file: not a safetensors file (only 3 bytes)")


def test_a_corrupt_golden_is_no_foreign_file(tmp_path: Path, golden_bytes: bytes) -> None:
    """A file with mla-golden's metadata that breaks a rule keeps the rule's own message, not 'no golden'."""
    half = _rewrite(golden_bytes, lambda t, m: t.update({"input.seqlens_qo_indptr": t["input.seqlens_qo_indptr"].half()}), redigest=False)
    for data, problem in [
        (half, "tensor 'input.seqlens_qo_indptr': unsupported dtype or malformed shape/offsets in header"),
        (_rewrite(golden_bytes, lambda t, m: m.update(format="mla-golden/9")), "unknown format 'mla-golden/9'"),
    ]:
        path = tmp_path / "bad.safetensors"
        path.write_bytes(data)
        with pytest.raises(GoldenError) as info:
            load(path)
        assert problem in str(info.value) and not isinstance(info.value, mla_golden.NotAGoldenError)


def _rewrite(golden_bytes: bytes, edit: Any, *, redigest: bool = True) -> bytes:
    """Re-encode a golden after ``edit(tensors, metadata)``; with ``redigest`` a forger who also fixed the digest."""
    from safetensors.torch import load as st_load

    from mla_golden.golden.format import content_digest

    n = struct.unpack("<Q", golden_bytes[:8])[0]
    metadata = json.loads(golden_bytes[8 : 8 + n])["__metadata__"]
    tensors = st_load(golden_bytes)
    edit(tensors, metadata)
    if redigest and "digest" in metadata:
        codes = {torch.int32: "I32", torch.int64: "I64", torch.uint64: "U64", torch.bool: "BOOL"}
        raw = {k: (codes[t.dtype], list(t.shape), t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b"")
               for k, t in tensors.items()}  # fmt: skip
        metadata["digest"] = content_digest(metadata, raw)
    return save(tensors, metadata=metadata)


def test_any_edit_without_a_new_digest_is_a_digest_mismatch(tmp_path: Path, golden_bytes: bytes) -> None:
    edits = [
        lambda t, m: m.update(key="case/two"),
        lambda t, m: m.update(provenance=m["provenance"].replace("standins", "standinz")),
        lambda t, m: t["values.work_indptr"].add_(1),
        lambda t, m: t["input.seqlens_kv_indptr"].add_(1),
    ]
    for edit in edits:
        _expect_golden_error(tmp_path, _rewrite(golden_bytes, edit, redigest=False), "content digest mismatch")


def _drop_data(t: Any, m: Any, name: Any) -> None:
    t[f"data.{name}"] = t[f"data.{name}"][:0]
    t[f"values.{name}"] = t[f"values.{name}"][:0]


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda t, m: m.update(format="mla-golden/99"), "unknown format"),
        (lambda t, m: m.update(op="get_foo"), "unknown op"),
        (lambda t, m: m.pop("params"), "missing params"),
        (lambda t, m: m.update(extra="1"), "unexpected extra"),
        (lambda t, m: m.update(device="{not json"), "'device' is not valid JSON"),
        (lambda t, m: m.update(env="[]"), "'env' should be a JSON object"),
        (lambda t, m: t.pop("values.work_indptr"), "missing tensors: values.work_indptr"),
        (lambda t, m: t.update(extra=torch.zeros(1, dtype=torch.int32)), "unexpected tensors: extra"),
        (lambda t, m: t.update({"values.work_indptr": t["values.work_indptr"].long()}), "values.work_indptr"),
        (lambda t, m: t.update({"input.seqlens_qo_indptr": t["input.seqlens_qo_indptr"].reshape(1, -1)}), "1-D int32"),
        (lambda t, m: t.update({"input.seqlens_qo_indptr": t["input.seqlens_qo_indptr"].long()}), "1-D int32"),
        (lambda t, m: t.update({"written.work_indptr": t["written.work_indptr"].int()}), "int64 runs"),
        (lambda t, m: t.update({"written.work_indptr": torch.tensor([[5, 10], [0, 3]])}), "sorted"),
        (lambda t, m: t.update({"written.work_indptr": t["written.work_indptr"] + 10**6}), "outside the buffer"),
        (lambda t, m: t.update({"written.work_info_set": torch.tensor([[0, 8]]), "data.work_info_set": torch.tensor([[4, 12]]),
                                "values.work_info_set": torch.ones(8, dtype=torch.int32)}), "outside the written runs"),
        (lambda t, m: t.update({"written.work_metadata_ptrs": torch.tensor([[0, 2]]),
                                "data.work_metadata_ptrs": torch.tensor([[0, 1]]),
                                "values.work_metadata_ptrs": torch.tensor([5], dtype=torch.uint64)}), "pointer"),
        (lambda t, m: m.update(buffers=json.dumps({"work_indptr": {"shape": [10**12], "dtype": "torch.int32"}})), "buffers"),
        (lambda t, m: m.update(buffers=m["buffers"].replace('"torch.int32"', '"torch.int64"', 1)), "aiter's planner takes"),
        (lambda t, m: m.update(buffers=json.dumps({n: {**s, "shape": [2**24] if s["dtype"] == "torch.int32" else s["shape"]}
                                                    for n, s in json.loads(m["buffers"]).items()})), "elements in all"),
        (lambda t, m: m.update(key="other/name"), None),  # a renamed key is still a valid golden; the tree checks paths
    ],
    ids=["format", "op", "no-params", "extra-meta", "bad-json", "wrong-json-type", "missing-tensor", "extra-tensor",
         "wrong-dtype", "input-rank", "input-int64", "runs-dtype", "runs-unsorted", "runs-out-of-range",
         "data-outside-written", "pointer-values", "absurd-buffers", "int64-buffer", "buffers-total", "renamed-key"],  # fmt: skip
)
def test_bad_content_is_named(tmp_path: Path, golden_bytes: bytes, edit: Any, match: str | None) -> None:
    if match is None:
        path = tmp_path / "k.safetensors"
        path.write_bytes(_rewrite(golden_bytes, edit))
        assert load(path).key == "other/name"
        return
    _expect_golden_error(tmp_path, _rewrite(golden_bytes, edit), match)


def test_safetensors_layout_rules(tmp_path: Path, golden_bytes: bytes) -> None:
    _expect_golden_error(tmp_path, golden_bytes + b"\x00", "trailing bytes")
    n = struct.unpack("<Q", golden_bytes[:8])[0]
    header = json.loads(golden_bytes[8 : 8 + n])
    name = next(k for k in header if k != "__metadata__" and header[k]["data_offsets"][0] > 0)
    start, end = header[name]["data_offsets"]
    header[name]["data_offsets"] = [start - 4, end - 4]  # overlaps the tensor before it
    raw = json.dumps(header).encode()
    _expect_golden_error(tmp_path, struct.pack("<Q", len(raw)) + raw + golden_bytes[8 + n :], "overlaps")
    dup = golden_bytes[8 : 8 + n].replace(b'"__metadata__"', b'"__metadata__":{},"__metadata__"', 1)
    _expect_golden_error(tmp_path, struct.pack("<Q", len(dup)) + dup + golden_bytes[8 + n :], "repeats the key")
    _expect_golden_error(tmp_path, struct.pack("<Q", 1) + b"{", "header size")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_byte_flips_only_ever_raise_golden_error(tmp_path: Path, golden_bytes: bytes, data: Any) -> None:
    raw = bytearray(golden_bytes)
    for _ in range(data.draw(st.integers(1, 8))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "flip.safetensors"
    path.write_bytes(bytes(raw))
    try:
        load(path)  # a flip in tensor data may still be a valid golden
    except mla_golden.GoldenError as exc:
        assert str(path) in str(exc)


@pytest.mark.parametrize(
    "header, match",
    [
        (b'{"a":' + b"[" * 200_000, "RecursionError"),
        (b'{"a": ' + b"9" * 5000 + b"}", "not JSON"),
    ],
    ids=["deep-nesting", "huge-number"],
)
def test_hostile_headers_are_golden_errors(tmp_path: Path, header: Any, match: str) -> None:
    _expect_golden_error(tmp_path, struct.pack("<Q", len(header)) + header, match)


def _params(m: Any, **changes: Any) -> None:
    m["params"] = json.dumps({**json.loads(m["params"]), **changes})


def _device(m: Any, **changes: Any) -> None:
    m["device"] = json.dumps({**json.loads(m["device"]), **changes})


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda t, m: _params(m, dtype_q_nope="torch.notadtype"), "unknown torch dtype"),
        (lambda t, m: _params(m, no_such_param=1), "unknown parameter(s) 'no_such_param'"),
        (lambda t, m: _params(m, topk=[1, 2]), "topk should be int"),
        (lambda t, m: _params(m, num_heads_per_head_k=16.0), "num_heads_per_head_k should be int, got 16.0"),
        (lambda t, m: _params(m, is_causal=1), "is_causal should be bool"),
        (lambda t, m: m.update(params=json.dumps({k: v for k, v in json.loads(m["params"]).items() if k != "page_size"})),
         "params: missing page_size"),
        (lambda t, m: m.update(device=json.dumps({"arch": "gfx942"})), "cu_num should be an int"),
        (lambda t, m: _device(m, arch=7), "arch should look like"),
        (lambda t, m: _device(m, arch="gfx000"), "arch should look like"),
        (lambda t, m: _device(m, arch="NVIDIA H200"), "arch should look like"),
        (lambda t, m: _device(m, name="\x00"), "device: name should be"),
        (lambda t, m: _device(m, warp_size=7), "warp_size"),
        (lambda t, m: _device(m, lds_bytes=1), "lds_bytes"),
        (lambda t, m: _device(m, cu_num=10**9), "cu_num"),
        (lambda t, m: m.update(env=json.dumps({"AITER_ENABLE_EXPERIMENTAL": 1})), "mapped to a string or null"),
        (lambda t, m: m.update(env=json.dumps({"PATH": "/bin"})), "not a planner variable"),
    ],
    ids=["bad-dtype", "unknown-param", "list-param", "float-heads", "int-bool", "missing-param", "no-cu-num",
         "arch-type", "arch-zero", "arch-product-name", "name-unprintable", "warp-size", "lds-bytes", "cu-num-range", "env-type", "env-unknown"],  # fmt: skip
)
def test_loadable_but_unusable_context_is_named(tmp_path: Path, golden_bytes: bytes, edit: Any, match: str) -> None:
    _expect_golden_error(tmp_path, _rewrite(golden_bytes, edit), match)


def test_a_capture_on_a_cuda_device_is_a_valid_golden(tmp_path: Path, call: mla_golden.Call) -> None:
    """What the recorder records for a tensor on an NVIDIA GPU (the recorder's GPU path is tested on one)."""
    device = {"arch": "sm_90", "cu_num": 132, "name": "NVIDIA H200", "warp_size": 32, "lds_bytes": 233472}
    on_cuda = mla_golden.Call(**{**call.__dict__, "device": device})
    path = tmp_path / "cuda.safetensors"
    write(path, Golden("cuda", on_cuda))
    assert load(path).call.device == device


def test_error_golden_with_absurd_buffers_is_refused_at_write(call: mla_golden.Call) -> None:
    failed = mla_golden.Call(op=call.op, params=call.params, inputs=call.inputs, device=call.device, env=call.env,
                             buffers={**call.buffers, "work_info_set": {"shape": [2**20, 2**10], "dtype": "torch.int32"}},
                             provenance={}, error="boom")  # fmt: skip
    with pytest.raises(mla_golden.GoldenError, match="cannot be stored as a golden: buffers"):
        to_bytes(Golden("e", failed))


def test_a_huge_foreign_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**28], "data_offsets": [0, 2**30]}}).encode()
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
        fh.truncate(8 + len(header) + 2**30)  # sparse: 1 GiB of data that is never read
    with pytest.raises(mla_golden.NotAGoldenError, match="a safetensors file of 1 tensor"):
        load(path)


def test_the_writer_refuses_what_the_reader_would_reject(tmp_path: Path, call: mla_golden.Call) -> None:
    store = GoldenStore(tmp_path)
    store.write(Golden("k", call))
    as_int = mla_golden.Call(**{**call.__dict__, "params": {**call.params, "is_causal": 1}})
    with pytest.raises(mla_golden.GoldenError, match="is_causal should be bool"):
        store.write(Golden("k2", as_int))
    for name, bad in (("seqlens_qo_indptr", torch.tensor([0.0, 1.0])), ("seqlens_kv_indptr", torch.zeros(2, 2, dtype=torch.int32)),
                      ("kv_last_page_lens", torch.tensor(1, dtype=torch.int32))):  # fmt: skip
        wrong = mla_golden.Call(**{**call.__dict__, "inputs": {**call.inputs, name: bad}})
        with pytest.raises(mla_golden.GoldenError, match=f"input {name}: expected a 1-D int32"):
            store.write(Golden("k3", wrong))
    wide = mla_golden.Call(**{**call.__dict__, "outputs": {**call.outputs, "work_indptr": call.outputs["work_indptr"].long()},
                              "buffers": {**call.buffers, "work_indptr": {**call.buffers["work_indptr"], "dtype": "torch.int64"}}})  # fmt: skip
    with pytest.raises(mla_golden.GoldenError, match="work_indptr is torch.int64"):
        store.write(Golden("k4", wide))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.safetensors"]


def test_same_golden_means_what_the_differ_calls_the_same(tmp_path: Path, call: mla_golden.Call) -> None:
    """Provenance and capture hazards never make a rewrite a different golden; a written value does."""
    import copy

    store = GoldenStore(tmp_path)
    assert store.write(Golden("k", call)) is WriteOutcome.WRITTEN
    shaky = copy.deepcopy(call)
    shaky.provenance = {**shaky.provenance, "created": "another time", "capture": {**call.facts, "ptrs_ok": False}}
    assert mla_golden.diff(call, shaky).same_content and not mla_golden.diff(call, shaky).equal
    assert store.write(Golden("k", shaky)) is WriteOutcome.UNCHANGED
    moved = copy.deepcopy(call)
    moved.outputs["work_indptr"][1] += 1
    assert not mla_golden.diff(call, moved).same_content
    assert store.write(Golden("k", moved)) is WriteOutcome.REFUSED


def _variants(call: mla_golden.Call) -> dict[str, mla_golden.Call]:
    """``call`` changed in one part each: some the differ counts as content, some it does not."""
    import copy

    failed = mla_golden.Call(op=call.op, params=call.params, inputs=call.inputs, buffers=call.buffers,
                             device=call.device, env=call.env, provenance={}, error="boom")  # fmt: skip
    found: dict[str, mla_golden.Call] = {"itself": copy.deepcopy(call), "raised": failed}
    for name, edit in {
        "provenance": lambda c: setattr(c, "provenance", {"created": "another time"}),
        "device name": lambda c: setattr(c, "device", {**c.device, "name": "AMD Instinct MI300X"}),
        "cu_num": lambda c: setattr(c, "device", {**c.device, "cu_num": 80}),
        "param": lambda c: setattr(c, "params", {**c.params, "num_heads_per_head_k": 32}),
        "env": lambda c: setattr(c, "env", {"AITER_MLA_META_USE_PARALLEL": "0"}),
        "strides": lambda c: setattr(c, "strides", {"seqlens_kv_indptr": [2]}),
        "input": lambda c: c.inputs["kv_last_page_lens"].add_(1),
        "output value": lambda c: c.outputs["work_indptr"][1].add_(1),
        "written mask": lambda c: c.written["work_indptr"][-1].logical_not_(),
        "raised otherwise": lambda c: setattr(c, "error", "bang"),
        "raised with other buffers": lambda c: setattr(c, "buffers", {**c.buffers, "work_indptr": {"shape": [7], "dtype": "torch.int32"}}),
    }.items():
        changed = copy.deepcopy(failed if name.startswith("raised") else call)
        edit(changed)
        found[name] = changed
    return found


def test_content_key_is_same_content_as_a_key(call: mla_golden.Call) -> None:
    """One notion of the same golden: two calls share a content key exactly when the differ calls them the same."""
    from mla_golden.differ import same_content
    from mla_golden.golden.store import content_key

    variants = _variants(call)
    keys = {name: content_key(c) for name, c in variants.items()}
    verdicts = {}
    for first, one in variants.items():
        for second, two in variants.items():
            verdicts[first, second] = same_content(one, two)
            assert (keys[first] == keys[second]) is verdicts[first, second], (first, second)
    same_as_call = {name for name in variants if verdicts["itself", name]}
    assert same_as_call == {"itself", "provenance", "device name"}, "what the differ leaves out of a call's content"
    assert {name for name in variants if verdicts["raised", name]} == {"raised", "raised with other buffers"}


def _pair(tmp_path: Path, first: bytes, second: bytes, key: str = "case/one") -> tuple[Any, Any]:
    paths = []
    for side, data in (("a", first), ("b", second)):
        path = key_path(tmp_path / side, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(GoldenFile(str(path), path.relative_to(tmp_path / side).as_posix()))
    return load_pair(*paths)


def test_a_pair_of_identical_files_decodes_once_and_each_keeps_its_own_path(
    tmp_path: Path, golden_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mla_golden.golden.format import decode

    decoded: list[Path] = []

    def counted(path: Path, raw: Any) -> Any:
        decoded.append(path)
        return decode(path, raw)

    monkeypatch.setattr(store_module, "decode", counted)
    one, two = _pair(tmp_path, golden_bytes, golden_bytes)
    assert isinstance(one, Golden) and isinstance(two, Golden)
    assert len(decoded) == 1 and two.call is one.call
    assert one.path == key_path(tmp_path / "a", "case/one") and two.path == key_path(tmp_path / "b", "case/one")


def test_a_pair_that_differs_in_any_byte_decodes_and_checks_both(tmp_path: Path, golden_bytes: bytes) -> None:
    edited = _rewrite(golden_bytes, lambda t, m: m.update(op="get_nonexistent_op"), redigest=False)
    changed = golden_bytes[:-1] + bytes([golden_bytes[-1] ^ 1])  # the last tensor byte: the digest no longer matches
    for second, match in ((changed, "digest"), (edited, None)):
        one, two = _pair(tmp_path, golden_bytes, second)
        assert isinstance(one, Golden) and isinstance(two, GoldenError), two
        assert match is None or match in two.problem
    one, two = _pair(tmp_path, changed, changed)  # both refused, each for itself
    assert isinstance(one, GoldenError) and isinstance(two, GoldenError)


def test_a_copy_under_another_key_is_refused_for_its_path(tmp_path: Path, golden_bytes: bytes) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "case" / "one.safetensors", tmp_path / "b" / "other.safetensors"
    first.parent.mkdir()
    first.write_bytes(golden_bytes)
    second.write_bytes(golden_bytes)
    one, two = load_pair(GoldenFile(str(first), "case/one.safetensors"), GoldenFile(str(second), "other.safetensors"))
    assert isinstance(one, Golden) and isinstance(two, GoldenError) and "does not match the file's path" in two.problem
    one, two = load_pair(GoldenFile(str(first), None), GoldenFile(str(second), None))  # files named on their own: no place to match
    assert isinstance(one, Golden) and isinstance(two, Golden) and two.key == "case/one"


def test_a_store_refuses_a_golden_copied_by_hand_under_another_key(tmp_path: Path, call: mla_golden.Call) -> None:
    store = GoldenStore(tmp_path)
    store.write(Golden("tests/test_a", call))
    store.path_for("tests/test_b").write_bytes(store.path_for("tests/test_a").read_bytes())
    assert store.read("tests/test_a").key == "tests/test_a"
    with pytest.raises(GoldenError, match="holds the golden of key 'tests/test_a', not 'tests/test_b'"):
        store.read("tests/test_b")


@pytest.mark.parametrize("size", [16, 3 << 20])  # a golden of tens of KiB, and one past the joined-update bound
def test_the_content_digest_is_sha256_of_the_documented_bytes_whatever_the_size(size: int) -> None:
    from mla_golden.golden.format import content_digest

    metadata = {"key": "case/one", "digest": "ignored", "format": "mla-golden/2"}
    raw = {"values.b": ("I32", [size // 4], bytes(range(256)) * (size // 256) + bytes(size % 256)), "input.a": ("I64", [0], b"")}
    plain = json.dumps({"key": "case/one", "format": "mla-golden/2"}, sort_keys=True, separators=(",", ":")).encode()
    joined = b"mla-golden content digest 1\n" + plain
    for name in ("input.a", "values.b"):
        code, shape, data = raw[name]
        joined += b"\n" + json.dumps([name, code, shape, len(data)]).encode() + b"\n" + data
    assert content_digest(metadata, raw) == "sha256:" + hashlib.sha256(joined).hexdigest()
