"""Two golden trees compared call by call: goldens paired by key, else by same op and inputs, and each pair diffed."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from mla_golden.runs.placement import misplaced, placements
from mla_golden.runs.pool import Advance, run_items
from mla_golden.runs.results import Result, Status
from mla_golden.runs.work import diff_result, each_timed, guard, single_threaded
from mla_golden.workers import stop_requested

if TYPE_CHECKING:
    from mla_golden.golden.store import Golden, GoldenFile

def pair_worker(pairs: list[GoldenPair], max_items: int, render: bool, keep: bool = False) -> list[Result]:
    """Diff goldens pairwise (see :data:`GoldenPair`); ``keep`` the calls of divergent pairs."""
    single_threaded()
    results: list[Result] = []
    with _no_cycle_collection():
        for key, expected, actual, by_inputs in each_timed(pairs, results):
            if stop_requested():
                break
            _pair_paths(key, expected, actual, by_inputs, max_items, render, keep, results)
    return results


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cyclic garbage collector over a chunk of pairs, then restore it.

    Loading builds thousands of small acyclic objects per golden (headers,
    metadata, lists); the collector rescanning them cost a tenth of a tree
    diff. What a chunk leaves behind is freed by reference counting, and any
    cycle at the next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pair_paths(
    key: str,
    expected_file: GoldenFile,
    actual_file: GoldenFile,
    by_inputs: bool,
    max_items: int,
    render: bool,
    keep: bool,
    results: list[Result],
) -> None:
    """Load one pair and diff it into ``results`` (a 'bad' result for each side that does not load)."""
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import load_pair

    expected_path, actual_path = expected_file.path, actual_file.path
    loaded = []
    for path, golden in zip((expected_path, actual_path), load_pair(expected_file, actual_file)):
        if isinstance(golden, GoldenError):
            results.append(Result(key, Status.BAD, path, golden.problem))
        else:
            loaded.append(golden)
    if len(loaded) < 2:
        return
    expected, actual = loaded
    start = len(results)
    if expected.call.op != actual.call.op:
        results.append(Result(key, Status.DIVERGED, actual_path, f"op {expected.call.op} -> {actual.call.op}"))
    else:
        with guard(key, actual_path, results):
            results.append(_pair_one(key, expected, actual, expected_path, actual_path, by_inputs, max_items, render, keep))
    for result in results[start:]:
        result.placed += placements([(expected_file, expected.key), (actual_file, actual.key)])


def _pair_one(
    key: str,
    expected: Golden,
    actual: Golden,
    expected_path: str,
    actual_path: str,
    by_inputs: bool,
    max_items: int,
    render: bool,
    keep: bool,
) -> Result:
    """Diff one expected/actual pair of goldens (``by_inputs``: paired by same op and input tensors, not by path)."""
    from mla_golden.differ import diff

    found = diff(expected.call, actual.call, expected_name=expected_path, actual_name=actual_path, max_items=max_items)
    result = diff_result(key, actual_path, found, render, (expected.call, actual.call) if keep else None)
    result.against_path = expected_path
    if expected.key != actual.key:
        how = "by same op and input tensors" if by_inputs else "by path"
        result.notes.insert(0, f"paired {how}; keys {expected.key!r} vs {actual.key!r}")
        if result.status is Status.EQUAL:
            alike = "same inputs and outputs" if by_inputs else "the same call"
            result.status, result.message = Status.DIVERGED, f"{alike}, but recorded under another key"
        elif by_inputs:
            result.message = "same inputs, params changed" if found.params else "same inputs, recorded under another key"
        else:
            result.message = "recorded under another key"
    return result


class GoldenPair(NamedTuple):
    """Two goldens to diff under one key."""

    key: str
    expected: GoldenFile
    actual: GoldenFile
    #: Paired by same op and input tensors (a renamed call) rather than by path.
    by_inputs: bool


def pair_trees(actual_root: Path, expected_root: Path) -> tuple[list[GoldenPair], list[Result]]:
    """Pair goldens of two trees by key (= relative path); pair the rest by same op and input tensors.

    Returns the pairs and results for goldens left on one side (and unreadable ones).
    """
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import SUFFIX, GoldenFile, GoldenStore, inputs_digest, load_placed

    def index(root: Path) -> dict[str, Path]:
        return {p.relative_to(root).as_posix().removesuffix(SUFFIX): p for p in GoldenStore(root).paths()}

    def found(tree: dict[str, Path], rel: str) -> GoldenFile:
        return GoldenFile(str(tree[rel]), rel + SUFFIX)

    expected, actual = index(expected_root), index(actual_root)
    pairs = [GoldenPair(rel, found(expected, rel), found(actual, rel), False) for rel in sorted(expected.keys() & actual.keys())]
    results: list[Result] = []
    lonely: dict[str, list[tuple[str, Golden]]] = {"expected": [], "actual": []}
    for side, tree, other in (("expected", expected, actual), ("actual", actual, expected)):
        for rel in sorted(tree.keys() - other.keys()):
            try:
                lonely[side].append((rel, load_placed(tree[rel], rel + SUFFIX)))
            except GoldenError as exc:
                results.append(Result(rel, Status.BAD, str(tree[rel]), exc.problem))
    unmatched = {rel: golden for rel, golden in lonely["expected"]}
    by_inputs: dict[tuple[str, str], list[str]] = {}
    for rel, golden in unmatched.items():
        by_inputs.setdefault((golden.call.op, inputs_digest(golden.call)), []).append(rel)
    for rel, golden in lonely["actual"]:
        twins = by_inputs.get((golden.call.op, inputs_digest(golden.call)), [])
        twin = twins.pop(0) if twins else None
        if twin is None:
            results.append(Result(golden.key, Status.ONLY_ACTUAL, str(actual[rel]), f"no golden for this call in {expected_root}"))
            continue
        pairs.append(GoldenPair(golden.key, found(expected, twin), found(actual, rel), True))
        del unmatched[twin]
    for rel, golden in unmatched.items():
        results.append(Result(golden.key, Status.ONLY_EXPECTED, str(expected[rel]), f"no golden for this call in {actual_root}"))
    return pairs, results


def diff_trees(
    actual: Path | str,
    expected: Path | str,
    *,
    max_items: int = 20,
    render: bool = False,
    keep: bool = False,
    jobs: int = 1,
    advance: Advance | None = None,
) -> list[Result]:
    """Compare the golden tree ``actual`` with ``expected``, call by call; results sorted by key.

    Goldens pair by key, else by same op and input tensors (a renamed call);
    the rest are ONLY_ACTUAL / ONLY_EXPECTED. ``render`` adds text reports,
    ``keep`` the diffs and calls of divergent pairs (to draw them).
    """
    pairs, results = pair_trees(Path(actual), Path(expected))
    results += run_items(pair_worker, pairs, (max_items, render, keep), jobs, advance)
    misplaced(results)
    return sorted(results, key=lambda r: r.key)
