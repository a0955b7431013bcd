"""What the commands print: lines for people on stderr, reports on stdout, one JSON document under --format json.

rich is imported inside the functions, so ``mla-golden --help`` stays instant.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import typer

from mla_golden.cli.options import Format, RunFormat
from mla_golden.cli.stops import interrupted_by
from mla_golden.render.sanitize import inline, json_text, log_lines, visible
from mla_golden.runs import (
    EXIT_BAD,
    STATUS_EXIT,
    CauseGroup,
    Result,
    by_cause,
    exit_code,
    exit_words,
    not_comparable,
    soundness_verdict,
)

#: The summary tables fit a 100-column terminal or review page, whatever the console's width.
SUMMARY_WIDTH = 100
#: Columns the "not ok" table keeps beside its status and key columns: borders and padding (10), 24 for the first difference.
KEY_TABLE_REST = 34
#: Calls drawn in an HTML report of diff or check (the summary table lists every call).
HTML_MAX_PICTURES = 50


#: The exit code of output cut off by its reader (``| head``): the shell's for SIGPIPE. rich and click exit 1,
#: which here means a divergence.
EXIT_PIPE = 128 + signal.SIGPIPE


@functools.cache
def _console_class() -> Any:
    from rich.console import Console
    from rich.segment import Segment


    class PipedConsole(Console):
        """rich's console, ending a run whose reader closed the pipe with :data:`EXIT_PIPE`, and writing only
        text that shows: a golden's or plug-in's string that reaches it cannot send the terminal an escape or
        start a CI workflow command (``mla_golden.render.sanitize``)."""

        def on_broken_pipe(self) -> None:
            try:
                super().on_broken_pipe()
            except SystemExit:
                raise SystemExit(EXIT_PIPE) from None

        def print(self, *objects: Any, **kwargs: Any) -> None:
            # a string's CR and BEL escaped before rich sees them (its Text drops them without a word)
            super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)

        def _render_buffer(self, buffer: Any) -> str:
            # rich's own styles and cursor moves are added after this (a segment's style, a control segment)
            shown = (segment if segment.control else Segment(visible(segment.text), segment.style) for segment in buffer)
            return log_lines(super()._render_buffer(shown))

    return PipedConsole


#: How the commands' consoles print: strings as text (a key's ``[/]`` is no markup, its ``:smile:`` no emoji).
_PLAIN = {"highlight": False, "markup": False, "emoji": False, "soft_wrap": True}


def stderr() -> Any:
    return _console_class()(stderr=True, **_PLAIN)


def stdout() -> Any:
    """Where reports go; piped output gets a wide page so tables keep their columns."""
    console = _console_class()(**_PLAIN)
    if not console.is_terminal:
        console = _console_class()(width=200, **_PLAIN)
    return console


def say(message: str, quiet: bool = False) -> None:
    """A line for people, on stderr (stdout stays data under --format json)."""
    if not quiet:
        stderr().print(message, markup=False)


def echo_json(document: Any) -> None:
    """One JSON document on stdout, as a CI log may show it (``sanitize.json_text``)."""
    typer.echo(json_text(document))


@contextlib.contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """A report file that cannot be written is exit 2 with the reason (atomic_write leaves no temp file)."""
    try:
        yield
    except OSError as exc:
        say(f"error: {option} {path}: cannot write: {exc.strerror or exc}")
        raise typer.Exit(EXIT_BAD) from exc



def _group_counts(title: str, column: str, groups: list[CauseGroup]) -> Any:
    """A table of groups (label, how many results)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column(column, overflow="fold")
    table.add_column("count", justify="right")
    for group in groups:
        table.add_row(inline(group.label), str(len(group.results)))
    return table


def emit(
    command: str, results: list[Result], fmt: Format | RunFormat, quiet: bool, header: dict[str, Any], wrote: Sequence[str] = ()
) -> int:
    """Print the counts, per-result reports and the summary (text, github) or one JSON document; return the exit status.
    ``wrote``: where the run wrote its files (--html, --junit-xml, ...), said after the report, so the verdict comes first.

    A run stopped by a signal reports what it did and exits 128 + the signal (130 Ctrl-C, 143 SIGTERM).
    """
    stopped_by = interrupted_by()
    code = exit_code(results) if stopped_by is None else 128 + stopped_by
    if stopped_by is not None:
        import signal

        header = {**header, "interrupted": signal.Signals(stopped_by).name}
        say(
            f"interrupted by {signal.Signals(stopped_by).name}: stopped after {len(results)} result(s); "
            "everything it started was stopped, nothing more is written"
        )
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    groups = by_cause(results)
    apart = not_comparable(results)
    if fmt.value == "json":
        echo_json({
            "format": "mla-golden-run/1", "command": command, **header, "results": [r.to_dict() for r in results],
            "summary": counts, "soundness": soundness_verdict(results), "by_cause": [g.to_dict() for g in groups],
            "not_comparable": [g.to_dict() for g in apart], "exit_code": code,
        })  # fmt: skip
        for line in wrote:
            say(line, quiet)
        return code
    from rich.table import Table


    out = stdout()
    tally = ", ".join(f"{counts[status]} {status}" for status in STATUS_EXIT if counts.get(status))
    judged = soundness_verdict(results)
    tally += f", {judged}" if judged else ""
    out.print(inline(f"mla-golden {command}: {len(results)} result(s): {tally or 'none'}"))  # CI logs: counts first
    if not quiet:
        fold = command if fmt.value == "github" else None  # a long report folded in the log, a group per cause
        for group in groups:
            _print_group(out, group, headed=len(groups) > 1 or bool(group.causes), fold=fold)
        for group in apart:  # after the divergences: nothing was compared
            _print_group(out, group, headed=True, suffix=" (no divergence: nothing to compare)", fold=fold)
    table = Table(title=f"mla-golden {command}", title_justify="left")
    table.add_column("status")
    table.add_column("count", justify="right")
    for status in STATUS_EXIT:
        if counts.get(status):
            table.add_row(status, str(counts[status]))
    table.add_row("total", str(len(results)), style="bold")
    out.print(table, width=min(out.width, SUMMARY_WIDTH))
    if any(g.causes for g in groups):
        out.print(_group_counts("not ok, by cause", "cause", groups), width=min(out.width, SUMMARY_WIDTH))
    if apart:
        title = "not comparable (no divergence: the planner cannot express these calls)"
        out.print(_group_counts(title, "planner", apart), width=min(out.width, SUMMARY_WIDTH))
    problems = [r for r in results if not r.status.ok]
    if problems and not quiet:
        _print_not_ok(out, problems)
    for line in wrote:
        say(line, quiet)
    out.print(exit_line(code, command), markup=False)
    if fmt.value == "github":
        _github(command, results, code)
    return code


def exit_line(code: int, command: str) -> str:
    """The last line of a command's text report: ``exit 1 (divergence)`` (:func:`runs.exit_words`)."""
    return f"exit {code} ({exit_words(code, command)})"


def _print_not_ok(out: Any, problems: list[Result]) -> None:
    """The results that are not ok, one row each: whole keys, the table growing up to the terminal's width; the
    first difference folds instead."""
    from rich.table import Table
    from rich.text import Text

    from mla_golden.runs.ci import headline

    status_width = max(len("status"), *(len(r.status) for r in problems))
    longest = max(len(inline(r.key)) for r in problems)
    width = min(out.width, max(SUMMARY_WIDTH, status_width + longest + KEY_TABLE_REST))
    key_width = max(min(longest, width - status_width - KEY_TABLE_REST), 8)
    where = Table(title="not ok", title_justify="left")
    where.add_column("status", no_wrap=True, width=status_width)
    where.add_column("key", overflow="fold", width=key_width)
    where.add_column("first difference", overflow="fold", width=max(width - status_width - key_width - 10, 8))
    for r in problems:
        where.add_row(r.status, Text(inline(r.key)), Text(headline(r)))
    out.print(where, width=width)


def _print_group(out: Any, group: CauseGroup, headed: bool, suffix: str = "", fold: str | None = None) -> None:
    """One group of results: its heading, then each result; ``fold`` (the command) folds it in a GitHub log."""
    heading = f"{inline(group.label)}{suffix}: {len(group.results)} call(s)"
    if fold is not None:
        from mla_golden.runs.ci import github_group

        typer.echo(github_group(f"mla-golden {fold}: {heading}"))
    if headed:
        out.print(f"== {heading}", markup=False)
    for r in group.results:
        _print_result(out, r)
    if fold is not None:
        from mla_golden.runs.ci import GITHUB_END_GROUP

        typer.echo(GITHUB_END_GROUP)


def _print_result(out: Any, r: Result) -> None:
    """One result: its status and key, then its message and report; the verdict is said once."""
    report = r.report.rstrip() if r.report else ""  # its lines are one line each already (report.py)
    verdict = f"{r.status.upper()} "
    if report.startswith(verdict):  # the rendered diff leads with the verdict too: fold it into this line
        out.print(f"{verdict}{inline(r.key)}", markup=False)
        report = "  " + report[len(verdict) :]
    else:
        out.print(f"{verdict}{inline(r.key)}" + (f" ({inline(r.path)})" if r.path and r.path != r.key else ""), markup=False)
    if r.message:
        out.print(f"  {inline(r.message)}", markup=False)
    if report:
        out.print(report, markup=False)
    out.print()


def _github(command: str, results: list[Result], code: int) -> None:
    """GitHub Actions: an annotation per golden not ok (:func:`mla_golden.runs.ci.github_annotations`); the markdown
    summary into $GITHUB_STEP_SUMMARY."""
    from mla_golden.runs.ci import github_annotations, github_summary

    for line in github_annotations(command, results):
        typer.echo(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as file:  # appended, as each step adds its part
                file.write(github_summary(command, results, code))
        except OSError as exc:
            say(f"warning: GITHUB_STEP_SUMMARY {summary}: cannot append: {exc.strerror or exc}")


def write_junit(path: Path, command: str, results: list[Result], seconds: float) -> str:
    """Write the run's results as JUnit XML (--junit-xml), atomically; ``seconds`` the run took. Returns the line
    that says so (for :func:`emit`'s ``wrote``)."""
    from mla_golden.files import atomic_write
    from mla_golden.runs.ci import junit_xml

    with writing(path, "--junit-xml"):
        atomic_write(path, junit_xml(command, results, seconds))
    return f"JUnit XML: {path}"
