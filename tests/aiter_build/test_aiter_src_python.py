"""aiter-src runs a tree's Python in a process of its own, bounded in memory and time (aiter_build.python_process).

The trees are small synthetic ones: their C++ is "built" by a stand-in
compiler (the harness never runs), and their sizing helpers are the Python
under test, called as ``module.get_mla_metadata_info_v1(...)``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.aiter_trees import entry_point, fake_compiler, tree_at
from helpers.processes import wait_gone

from mla_golden import AiterSourceError, aiter_src
from mla_golden.aiter_build import python_process, wire
from mla_golden.aiter_build.tree import CACHE_ENV
from mla_golden.schema import ATTENTION_PY, CPP_FILE

#: One tree's sizing helper, misbehaving as its batch size says (the others plan nothing here).
MISBEHAVING = """
def get_mla_metadata_info_v1(batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse, fast_mode=True,
                             dtype=torch.bfloat16, made_by=__import__("os").getpid()):
    import os, sys
    if batch_size == 1:  # a helper that never returns
        while True:
            pass
    if batch_size == 2:
        return len(bytearray(MEMORY * 2))
    if batch_size == 3:
        sys.stderr.write("last words")
        sys.stderr.flush()
        os._exit(3)
    if batch_size == 4:
        print("x" * 100000)
        os.write(1, b"junk")
        sys.stderr.write("noise")
    if batch_size == 5:
        return (object(),)
    if batch_size >= 100:
        raise RAISED[batch_size - 100]
    return ((2, torch.uint64), ((batch_size, 8), torch.int32), os.getpid(), 1.5, [q_dtype])
"""
#: What batch size 100 + i raises.
RAISED = [
    "ValueError('heads must be a multiple of 8')",
    "AssertionError()",
    "SystemExit(0)",
    "KeyboardInterrupt()",
    "type('Planted', (Exception,), {})('its own')",
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """The misbehaving tree (its folder, its module), built by a stand-in compiler (its harness never runs)."""
    root = tmp_path_factory.mktemp("aiter")
    fake = fake_compiler(root)
    source = MISBEHAVING.replace("MEMORY", str(python_process.MEMORY_BYTES)).replace("RAISED", f"[{', '.join(RAISED)}]")
    tree_at(root, {CPP_FILE: entry_point(), ATTENTION_PY: source})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CXX", str(fake))
        env.setenv(CACHE_ENV, str(root / "cache"))
        module = aiter_src(root)
        yield root, module
    module.python_process.close()


def _size(module: Any, batch: int = 8) -> Any:
    return module.get_mla_metadata_info_v1(batch, 1, 16, torch.bfloat16, torch.bfloat16, False)


def test_the_trees_python_runs_in_another_process_and_its_answers_come_back_as_values(tree: tuple[Path, Any]) -> None:
    module = tree[1]
    pointers, info, pid, half, dtypes = _size(module)
    assert pid != os.getpid() and pid == module.python_process.pid()
    assert pointers == (2, torch.uint64) and info == ((8, 8), torch.int32) and half == 1.5 and dtypes == [torch.bfloat16]


def test_the_signature_is_the_trees_read_in_its_process(tree: tuple[Path, Any]) -> None:
    import inspect

    params = inspect.signature(tree[1].get_mla_metadata_info_v1).parameters
    assert list(params)[-4:] == ["is_sparse", "fast_mode", "dtype", "made_by"]
    assert params["fast_mode"].default is True and params["dtype"].default is torch.bfloat16
    assert params["made_by"].default != os.getpid(), "the default was evaluated in the tree's process"


@pytest.mark.slow
def test_a_helper_that_never_returns_is_killed_and_the_next_call_gets_a_new_process(
    tree: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tree[1]
    first = module.python_process.pid()
    monkeypatch.setattr(python_process, "CALL_TIMEOUT_S", 1.0)
    with pytest.raises(AiterSourceError, match=r"did not finish get_mla_metadata_info_v1 within 1 s: its process was killed"):
        _size(module, 1)
    wait_gone([first])
    assert _size(module)[0] == (2, torch.uint64)
    assert module.python_process.pid() != first


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="the bound is RLIMIT_AS over /proc's mapped size")
def test_a_helper_that_takes_too_much_memory_fails_that_call_only(tree: tuple[Path, Any]) -> None:
    module = tree[1]
    pid = module.python_process.pid()
    with pytest.raises(AiterSourceError, match="get_mla_metadata_info_v1: the tree's Python ran out of memory"):
        _size(module, 2)
    assert _size(module)[0] == (2, torch.uint64) and module.python_process.pid() == pid


@pytest.mark.slow
def test_a_helper_that_ends_its_process_fails_that_call_and_says_how(tree: tuple[Path, Any]) -> None:
    module = tree[1]
    with pytest.raises(AiterSourceError, match=r"ended during get_mla_metadata_info_v1 \(exit status 3\): last words"):
        _size(module, 3)
    assert _size(module)[0] == (2, torch.uint64)


def test_prints_cannot_garble_the_answers(tree: tuple[Path, Any]) -> None:
    assert _size(tree[1], 4)[1] == ((4, 8), torch.int32)


@pytest.mark.parametrize(
    ("which", "kind", "name", "message"),
    [
        (0, ValueError, "ValueError", "heads must be a multiple of 8"),
        (1, AssertionError, "AssertionError", ""),
        (2, SystemExit, "SystemExit", "0"),
        (3, KeyboardInterrupt, "KeyboardInterrupt", ""),
        (4, RuntimeError, "Planted", "its own"),
    ],
    ids=["builtin", "assert", "SystemExit", "KeyboardInterrupt", "the-trees-own"],
)
def test_what_the_trees_code_raises_is_raised_here_by_type_and_message(
    tree: tuple[Path, Any], which: int, kind: type[BaseException], name: str, message: str
) -> None:
    module = tree[1]
    pid = module.python_process.pid()
    with pytest.raises(kind) as info:
        _size(module, 100 + which)
    assert type(info.value).__name__ == name and str(info.value) == message
    assert module.python_process.pid() == pid, "the process lives on"


def test_an_answer_outside_the_vocabulary_is_refused_by_name(tree: tuple[Path, Any]) -> None:
    with pytest.raises(AiterSourceError, match="get_mla_metadata_info_v1 of the tree passed or returned a object"):
        _size(tree[1], 5)


@pytest.mark.slow
def test_the_trees_process_ends_with_mla_goldens(tree: tuple[Path, Any]) -> None:
    root = tree[0]
    script = (
        "import sys, time, mla_golden\n"
        f"m = mla_golden.aiter_src({str(root)!r})\n"
        "print(m.python_process.pid(), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)  # the cached build
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    wait_gone([child])  # it notices its parent is gone: a survivor keeps this waiting


@pytest.mark.parametrize(
    "reply",
    [
        {"tensor": {"dtype": "torch.int32", "shape": [3], "data": "AAAA"}},  # 3 bytes for three int32
        {"view": 0, "offset": 0, "shape": [100], "stride": [1]},  # past the end of what was sent
        {"ref": 5},
        {"dtype": "os.system"},
        {"pickle": "gASV"},
        {"tuple": [1], "extra": 2},
        [[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]],
    ],
    ids=["short-data", "view-out-of-bounds", "unknown-ref", "not-a-dtype", "unknown-tag", "extra-key", "too-deep"],
)
def test_a_reply_outside_the_vocabulary_is_malformed(reply: Any) -> None:
    with pytest.raises(wire.Malformed):
        wire.from_wire(reply, [torch.zeros(4, dtype=torch.int32)])


def test_tensors_come_back_as_the_callers_own_or_views_of_them() -> None:
    caller = torch.arange(8, dtype=torch.int32)
    data, _ = wire.dump_request({"args": (caller,)})
    request, made = wire.load_request(data)
    theirs = request["args"][0]
    assert torch.equal(theirs, caller) and theirs is not caller
    back = wire.from_wire(wire.to_wire((theirs, theirs[2:6].view(2, 2), theirs + 1), made), [caller])
    same, view, new = back
    assert same is caller
    assert torch.equal(new, torch.arange(1, 9, dtype=torch.int32)) and new.untyped_storage().data_ptr() != caller.untyped_storage().data_ptr()
    view[0, 0] = 100
    assert int(caller[2]) == 100, "a view of the caller's tensor writes into it"


def test_output_buffers_travel_as_their_layout_only() -> None:
    buffer = torch.full((1000, 8), 7, dtype=torch.int32)
    data, _ = wire.dump_request({"args": (buffer,)}, outputs=frozenset({id(buffer)}))
    assert len(data) < 1000, "32 KB of values were not sent"
    request, _ = wire.load_request(data)
    assert request["args"][0].shape == (1000, 8) and request["args"][0].dtype == torch.int32
