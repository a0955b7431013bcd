"""Golden assertions for tests: compare a captured call with its golden, or create it."""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass
from pathlib import Path

from mla_golden.call import Call
from mla_golden.differ import DEFAULT_MAX_ITEMS, diff
from mla_golden.errors import GoldenError, GoldenMismatch
from mla_golden.golden.store import Golden, GoldenStore, WriteOutcome, derived_key, obtained_path, write
from mla_golden.render.report import render_text


def golden_key(call: Call, name: str | None = None) -> str:
    """The key a call is stored under: the owner's name for it, else one derived from the call."""
    return name if name else derived_key(call)


class Update(enum.Enum):
    """What a comparison does with its golden."""

    #: Compare; a missing golden fails.
    CHECK = "check"
    #: Write the golden, whatever it held (``update=True``).
    ALL = "all"
    #: Write a golden that does not exist yet; compare with one that does (syrupy's --snapshot-update-new-only).
    NEW = "new"
    #: Write a golden that is missing or differs, and fail anyway, so the change is reviewed before it passes
    #: (pytest-regressions' --force-regen).
    FAIL = "fail"

    @classmethod
    def of(cls, update: bool | Update) -> Update:
        """``update`` as a mode: True is :attr:`ALL`, False :attr:`CHECK`."""
        if isinstance(update, Update):
            return update
        return cls.ALL if update else cls.CHECK


@dataclass(frozen=True)
class Hints:
    """The words a failure's hints use for what to do, as they apply where it is read (Python by default; the
    pytest plugin names its options)."""

    #: How to write a missing golden.
    create: str = "update=True"
    #: How to accept a call that differs from its golden.
    accept: str = "update=True"
    #: The setting that decodes more work items and reduce groups.
    more: str = "max_items"
    #: How the mode that rewrites goldens and fails (:attr:`Update.FAIL`) is asked for.
    rewrite: str = "update=Update.FAIL"


#: The hints of a report read in Python (the library's arguments).
PYTHON_HINTS = Hints()


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
    update: bool | Update = False,
    keep_obtained: bool = False,
    max_items: int = DEFAULT_MAX_ITEMS,
    hints: Hints = PYTHON_HINTS,
) -> Comparison:
    """Compare ``call`` with its golden (or write it, as ``update`` says: :class:`Update`); a mismatch is
    returned, not raised.

    ``keep_obtained`` writes the call next to its golden as
    ``<name>.obtained.safetensors`` when it fails (rename it over the golden
    to accept it) and removes a stale one when it passes or is written.
    ``max_items``: divergent work items and reduce groups the report decodes;
    ``hints``: how the failure names what to do.
    """
    mode = Update.of(update)
    store = GoldenStore(golden_dir)
    key = golden_key(call, name)
    path = store.path_for(key)
    result = Comparison(key, path)
    if mode is Update.ALL or (mode is Update.NEW and not path.exists()):
        result.outcome = store.write(Golden(key, call), update=True)
    elif not path.exists():
        result.failure = f"no golden for key {key!r} at {path}" if mode is Update.FAIL else _missing_message(store, key, call, max_items, hints)
    else:
        golden = store.read(key)  # GoldenError propagates: a corrupt golden is not a mismatch
        outcome = diff(golden.call, call, expected_name=f"golden {path}", actual_name="this call", max_items=max_items)
        if not outcome.equal:
            result.failure = render_text(outcome, more=hints.more)
    if mode is Update.FAIL and result.failure is not None:
        result.outcome = store.write(Golden(key, call), update=True)
        result.failure = result.failure.rstrip() + (
            f"\nthe golden {path} was {result.outcome.value} with this call ({hints.rewrite}): review the change "
            f"(git diff), then rerun without {hints.rewrite}"
        )
    if keep_obtained:
        obtained = obtained_path(path)
        if result.failure is None or result.outcome is not None:  # passed, or the call is the golden now
            with contextlib.suppress(FileNotFoundError):
                obtained.unlink()
        else:
            write(obtained, Golden(key, call), update=True)
            result.failure = result.failure.rstrip() + (
                f"\nthis call was written to {obtained}: mla-golden diff it --against the golden; to accept it, "
                f"rerun with {hints.accept} or rename it over {path.name}"
            )
    return result


def assert_matches_golden(
    call: Call, golden_dir: Path | str, *, name: str | None = None, update: bool | Update = False
) -> WriteOutcome | None:
    """Fail with a pinpointed report unless ``call`` matches its golden.

    ``name`` (a test id, a matrix case) keys the golden, so changed arguments
    show as a params diff; without it the key is derived from the call.
    ``update=True`` writes the golden instead and returns the write outcome (an :class:`Update` picks another mode).
    A mismatch raises :class:`GoldenMismatch` (an ``AssertionError``); a
    golden that cannot be read raises :class:`GoldenError` (it is not a mismatch).
    """
    __tracebackhide__ = True
    result = compare_with_golden(call, golden_dir, name=name, update=update)
    if result.failure is not None:
        raise GoldenMismatch(result.failure)
    return result.outcome


def _missing_message(store: GoldenStore, key: str, call: Call, max_items: int, hints: Hints) -> str:
    lines = [f"no golden for key {key!r} at {store.path_for(key)}", f"create it from a known-good build with {hints.create}"]
    try:
        nearest = next(iter(store.same_inputs(call)), None)
    except GoldenError:
        nearest = None
    if nearest is not None:
        lines.append(f"a golden with the same op and input tensors exists under key {nearest.key!r}:")
        report = diff(nearest.call, call, expected_name=f"golden {nearest.path}", actual_name="this call", max_items=max_items)
        lines.append(render_text(report, more=hints.more))
    return "\n".join(lines)
