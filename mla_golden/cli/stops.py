"""The signal that stopped a command's run, kept until the report says so (one command per process)."""

from __future__ import annotations

from collections.abc import Callable

from mla_golden.runs import Result

#: The signal that stopped this command's run (output.emit takes it out).
_STOPPED_BY: list[int] = []


def note_stop(signum: int) -> None:
    """Remember that signal ``signum`` stopped the run, for the report to say so and exit 128 + it."""
    _STOPPED_BY.append(signum)


def interruptible(run: Callable[[], list[Result]]) -> list[Result]:
    """``run()``'s results; when a signal stopped it, the results so far (and :func:`output.emit` says so)."""
    from mla_golden.errors import Interrupted

    try:
        return run()
    except Interrupted as exc:
        note_stop(exc.signum)
        return list(exc.results)


def interrupted_by() -> int | None:
    """The signal that stopped this command's run, if one did (and forget it: the next command starts clean)."""
    came = _STOPPED_BY[:1]
    _STOPPED_BY.clear()
    return came[0] if came else None
