"""Golden assertions for tests: compare a captured call with its golden, or create it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from mla_golden.call import Call
from mla_golden.differ import DEFAULT_MAX_ITEMS, diff
from mla_golden.errors import GoldenError, GoldenMismatch
from mla_golden.report import render_text
from mla_golden.store import Golden, GoldenStore, WriteOutcome, derived_key, obtained_path, write


def golden_key(call: Call, name: str | None = None) -> str:
    """The key a call is stored under: the owner's name for it, else one derived from the call."""
    return name if name else derived_key(call)


@dataclass
class Comparison:
    """One call held against its golden: where the golden is and what came of it."""

    key: str
    path: Path
    #: The write's outcome when updating, else None.
    outcome: WriteOutcome | None = None
    #: The report when the call has no golden or does not match it; None when it matches.
    failure: str | None = None


def compare_with_golden(
    call: Call,
    golden_dir: Path | str,
    *,
    name: str | None = None,
    update: bool = False,
    keep_obtained: bool = False,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> Comparison:
    """Compare ``call`` with its golden (or write it when ``update``); a mismatch is returned, not raised.

    ``keep_obtained`` writes the call next to its golden as
    ``<name>.obtained.safetensors`` when it fails (rename it over the golden
    to accept it) and removes a stale one when it passes or is written.
    ``max_items``: divergent work items and reduce groups the report decodes.
    """
    store = GoldenStore(golden_dir)
    key = golden_key(call, name)
    path = store.path_for(key)
    result = Comparison(key, path)
    if update:
        result.outcome = store.write(Golden(key, call), update=True)
    elif not path.exists():
        result.failure = _missing_message(store, key, call, max_items)
    else:
        golden = store.read(key)  # GoldenError propagates: a corrupt golden is not a mismatch
        outcome = diff(golden.call, call, expected_name=f"golden {path}", actual_name="this call", max_items=max_items)
        if not outcome.equal:
            result.failure = render_text(outcome)
    if keep_obtained:
        obtained = obtained_path(path)
        if result.failure is None:
            with contextlib.suppress(FileNotFoundError):
                obtained.unlink()
        else:
            write(obtained, Golden(key, call), update=True)
            result.failure = result.failure.rstrip() + (
                f"\nthis call was written to {obtained}: mla-golden diff it --against the golden; to accept it, "
                f"rerun with --mla-golden-update (update=True) or rename it over {path.name}"
            )
    return result


def assert_matches_golden(
    call: Call, golden_dir: Path | str, *, name: str | None = None, update: bool = False
) -> WriteOutcome | None:
    """Fail with a pinpointed report unless ``call`` matches its golden.

    ``name`` (a test id, a matrix case) keys the golden, so changed arguments
    show as a params diff; without it the key is derived from the call.
    ``update=True`` writes the golden instead and returns the write outcome.
    A mismatch raises :class:`GoldenMismatch` (an ``AssertionError``); a
    golden that cannot be read raises :class:`GoldenError` (it is not a mismatch).
    """
    __tracebackhide__ = True
    result = compare_with_golden(call, golden_dir, name=name, update=update)
    if result.failure is not None:
        raise GoldenMismatch(result.failure)
    return result.outcome


def _missing_message(store: GoldenStore, key: str, call: Call, max_items: int) -> str:
    lines = [
        f"no golden for key {key!r} at {store.path_for(key)}",
        "create it from a known-good build with update=True "
        "(pytest: --mla-golden-update; CLI: mla-golden record --update)",
    ]
    try:
        nearest = next(iter(store.same_inputs(call)), None)
    except GoldenError:
        nearest = None
    if nearest is not None:
        lines.append(f"a golden with the same op and input tensors exists under key {nearest.key!r}:")
        report = diff(nearest.call, call, expected_name=f"golden {nearest.path}", actual_name="this call", max_items=max_items)
        lines.append(render_text(report))
    return "\n".join(lines)
