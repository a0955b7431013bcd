"""Run orchestration as a library: tree pairing, statuses, the exit policy, HTML from the diffs already computed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import small_tree
from helpers.cli import cli, cli_json
from helpers.small_tree import KEY_16, KEY_128, rewrite

import mla_golden
from mla_golden.golden.store import GoldenStore, load
from mla_golden.runs import EXIT_BAD, EXIT_DIVERGED, EXIT_OK, Result, Status, diff_trees, exit_code

#: The small matrix's tree (module-scoped) and a fresh copy of it per test.
recorded, tree = small_tree.recorded, small_tree.tree


def test_exit_policy_is_the_worst_status() -> None:
    assert exit_code([]) == EXIT_OK
    assert exit_code([Result("a", Status.EQUAL), Result("b", Status.SKIPPED)]) == EXIT_OK
    assert exit_code([Result("a", Status.EQUAL), Result("b", Status.ONLY_ACTUAL)]) == EXIT_DIVERGED
    assert exit_code([Result("a", Status.DIVERGED), Result("b", Status.BAD)]) == EXIT_BAD
    assert {s for s in Status if s.ok} == {"written", "unchanged", "updated", "equal", "passed", "skipped", "not-comparable"}
    assert exit_code([Result("a", Status.NOT_COMPARABLE), Result("b", Status.RESIZED)]) == EXIT_DIVERGED


def test_diff_trees_is_public_and_pairs_by_key(tree: Any, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    rewrite(other, KEY_16, lambda call: call.params.__setitem__("kv_granularity", 32))
    GoldenStore(other).path_for(KEY_128).unlink()
    results = mla_golden.diff_trees(other, tree)
    by_key = {r.key: r for r in results}
    assert by_key[KEY_16].status is Status.DIVERGED and by_key[KEY_16].report is None
    assert by_key[KEY_128].status is Status.ONLY_EXPECTED
    assert [r.key for r in results] == sorted(r.key for r in results)
    assert json.loads(json.dumps(by_key[KEY_16].to_dict()))["status"] == "diverged"
    kept = {r.key: r for r in diff_trees(other, tree, keep=True, render=True)}[KEY_16]
    assert kept.diff is not None and not kept.diff.equal and kept.calls is not None
    assert "kv_granularity: 16 -> 32" in (kept.report or "")
    document = kept.to_dict()  # the JSON a run writes: the diff's document under "diff", the Diff itself left out
    assert list(document) == ["key", "status", "path", "message", "against_path", "report", "diff", "check", "notes", "cause", "cause_label"]
    assert document["check"] is None, "a check's document under 'check': none for a diff"
    assert document["diff"] == kept.diff.to_dict()


def test_diff_against_refuses_backend(tree: Any, tmp_path: Path) -> None:
    code, _ = cli("diff", tree, "--against", tree, "--backend", "reference")
    assert code == 2


def test_tree_diff_html_and_png_come_from_the_diffs_already_computed(tree: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    shutil.copytree(tree, other)
    rewrite(other, KEY_16, lambda call: call.params.__setitem__("kv_granularity", 32))
    import mla_golden.golden.store
    from mla_golden.golden.format import decode

    loads: list[str] = []

    def counting_decode(path: Any, raw: Any) -> Any:
        loads.append(str(path))
        return decode(path, raw)

    monkeypatch.setattr(mla_golden.golden.store, "decode", counting_decode)
    html = tmp_path / "report.html"
    code, _ = cli("diff", other, "--against", tree, "--html", html)
    assert code == 1 and "kv_granularity" in html.read_text()
    # Each golden decoded once, none again for the report; of the three pairs only the rewritten one differs in
    # its bytes, so the other two actual goldens are their byte-identical expected ones' decodings.
    assert len(loads) == len(set(loads)) == 3 + 1 and sum(str(other) in path for path in loads) == 1


def test_list_takes_the_shape_from_the_golden(tree: Any) -> None:
    code, listing = cli_json("list", tree)
    by_key = {g["key"]: g for g in listing["goldens"]}
    assert by_key[KEY_128]["shape"] == mla_golden.golden.store.shape_label(load(GoldenStore(tree).path_for(KEY_128)).call)
    assert by_key[KEY_128]["shape"].startswith("b4-h128-q1-p1-")


@pytest.mark.parametrize("status", list(Status))
def test_every_status_has_an_exit_code(status: Any) -> None:
    assert status.exit_code in (EXIT_OK, EXIT_DIVERGED, EXIT_BAD)
