"""Golden assertions for tests: compare a captured call with its golden, or create it."""

from __future__ import annotations

from pathlib import Path

from mla_golden.call import Call
from mla_golden.differ import diff
from mla_golden.errors import GoldenError
from mla_golden.report import render_text
from mla_golden.store import Golden, GoldenStore, WriteOutcome, derived_key


def golden_key(call: Call, name: str | None = None) -> str:
    """The key a call is stored under: the owner's name for it, else one derived from the call."""
    return name if name else derived_key(call)


def assert_matches_golden(
    call: Call, golden_dir: Path | str, *, name: str | None = None, update: bool = False
) -> WriteOutcome | None:
    """Fail with a pinpointed report unless ``call`` matches its golden.

    ``name`` (a test id, a matrix case) keys the golden, so changed arguments
    show as a params diff; without it the key is derived from the call.
    ``update=True`` writes the golden instead and returns the write outcome.
    """
    __tracebackhide__ = True
    store = GoldenStore(golden_dir)
    key = golden_key(call, name)
    if update:
        return store.write(Golden(key, call), update=True)
    path = store.path_for(key)
    if not path.exists():
        raise AssertionError(_missing_message(store, key, call))
    golden = store.read(key)  # GoldenError propagates: a corrupt golden is not a mismatch
    result = diff(golden.call, call, expected_name=f"golden {path}", actual_name="this call")
    if not result.equal:
        raise AssertionError(render_text(result))
    return None


def _missing_message(store: GoldenStore, key: str, call: Call) -> str:
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
        lines.append(render_text(diff(nearest.call, call, expected_name=f"golden {nearest.path}", actual_name="this call")))
    return "\n".join(lines)
