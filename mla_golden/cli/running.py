"""Around a command's run: refuse bad paths and backends before any work, then run items with a progress bar."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from mla_golden.cli.output import say, stderr
from mla_golden.cli.stops import interruptible
from mla_golden.runs import EXIT_BAD, Advance, Result, run_items

#: Runs at least this long get a progress bar.
PROGRESS_MIN_ITEMS = 20


@contextlib.contextmanager
def progress(quiet: bool, label: str, total: int | None = None) -> Iterator[Advance]:
    """A progress bar on stderr for long runs (``total`` items, or unknown); yields its advance."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = stderr()
    show = not quiet and (total is None or total >= PROGRESS_MIN_ITEMS) and console.is_terminal
    bar = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True,
        disable=not show,
    )  # fmt: skip
    with bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.advance(task, done)


def run_with_progress(
    worker: Callable[..., list[Result]], items: list[Any], args: tuple[Any, ...], jobs: int, quiet: bool, label: str
) -> list[Result]:
    """:func:`runs.run_items` with a progress bar on long runs; ``jobs`` capped at the CPU count, with a note."""
    from mla_golden.workers import cap_jobs

    jobs, note = cap_jobs(jobs)
    if note:
        say(f"note: {note}", quiet)
    with progress(quiet, label, len(items)) as advance:
        return interruptible(lambda: run_items(worker, items, args, jobs, advance))


def require_goldens(paths: list[Path], option: str = "") -> None:
    """Exit 2 before any work on a path that is missing or a folder without goldens: one wording in every command."""
    from mla_golden.runs import path_problem

    for path in paths:
        problem = path_problem(path)
        if problem:
            say(f"error: {option}{path}: {problem}")
            raise typer.Exit(EXIT_BAD)


def resolve_backend(spec: str, quiet: bool, aiter_repo: Path | None = None, replay: bool = False) -> Any:
    """Resolve the backend or exit 2 saying why not; say which one runs (``replay``: goldens are replayed on it)."""
    from mla_golden.backends import resolve
    from mla_golden.errors import BackendError

    try:  # an aiter-src tree's first use compiles it: the build says so on stderr, --quiet or not (build.announce)
        chosen = resolve(spec, aiter_repo=None if aiter_repo is None else str(aiter_repo))
    except BackendError as exc:
        say(f"error: --backend {spec}: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    if replay and chosen.name == "reference" and not chosen.pinned:  # see Backend.for_golden
        say(f"backend: reference (each golden replayed on the ported version that recorded it, else on the newest: "
            f"{chosen.reason})", quiet)  # fmt: skip
    else:
        say(f"backend: {chosen.label} ({chosen.reason})", quiet)
    return chosen


def _output_problem(path: Path) -> str | None:
    """Why ``path`` cannot take a report file (checked before any work), or None."""
    if path.is_dir():
        return "is a folder; give a file name"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is not a folder"
    return None


def check_outputs(*options: tuple[str, Path | None]) -> None:
    """Exit 2 before doing any work when an output option names a path no file can be written to."""
    for option, path in options:
        problem = None if path is None else _output_problem(path)
        if problem:
            say(f"error: {option} {path}: {problem}")
            raise typer.Exit(EXIT_BAD)
