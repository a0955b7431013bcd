"""The ``mla-golden`` command line: record, diff, check, show, list and textconv goldens; list planner versions.

A thin typer layer over the library: the runs themselves (workers, tree
pairing, results, the exit policy) are :mod:`mla_golden.runs`; this module
parses options, refuses those that do not apply, and prints. Nothing heavy
(torch) is imported at module level, so ``mla-golden --help`` is instant.

Exit status everywhere: 0 all equal (or written), 1 some divergence or a
refused write, 2 bad input or usage; a bad golden never stops the others from
being checked.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from mla_golden.runs import (
    EXIT_BAD,
    EXIT_DIVERGED,
    EXIT_OK,
    STATUS_EXIT,
    Advance,
    CauseGroup,
    Result,
    Status,
    by_cause,
    exit_code,
    not_comparable,
    run_items,
)

#: Runs at least this long get a progress bar.
PROGRESS_MIN_ITEMS = 20
DEFAULT_GOLDENS = Path("goldens")
BACKEND_METAVAR = "auto|aiter|reference[@VERSION]|python:MODULE[:ATTR]|aiter-src:PATH|aiter-src@REV"
BACKEND_HELP = (
    "Planner to {what}: auto (aiter when it works, else the reference), aiter, reference (the newest ported "
    "aiter version), reference@VERSION (an aiter commit prefix, release tag or date; see mla-golden versions), "
    "python:MODULE[:ATTR] (a plug-in object with the planner and sizing functions in aiter's signatures), "
    "or aiter's own planner built from a source tree on the CPU: aiter-src:PATH (a checkout, a git archive, an "
    "installed aiter with csrc/) or aiter-src@REV (a revision of --aiter-repo; needs g++)."
)
AITER_REPO_HELP = "Git clone of aiter that --backend aiter-src@REV takes REV from."
AITER_REPO_ENV = "MLA_GOLDEN_AITER_REPO"
REPLAY_HELP = (
    " Plain reference replays each golden on the version that recorded it; reference@NEW replays all of them "
    "on NEW, in the buffers NEW's sizing helper gives (what changes if we bump aiter). Not with --against."
)

app = typer.Typer(
    name="mla-golden",
    help="Record aiter MLA planner calls into safetensors goldens, and diff them field by field.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich's help formatter costs ~100 ms of imports, and --help must be instant.
    rich_markup_mode=None,
)


class Format(str, enum.Enum):
    text = "text"
    json = "json"


class RunFormat(str, enum.Enum):
    """``diff`` and ``check`` also speak GitHub Actions: the text report, one ``::error`` line per golden not ok."""

    text = "text"
    json = "json"
    github = "github"


RUN_FORMAT_HELP = "text for people, json for machines, github: text plus one ::error annotation per golden not ok and a step summary."
JUNIT_HELP = "Also write the results as JUnit XML (one testcase per golden) for CI test reports."


# ---------------------------------------------------------------- output


def _stderr() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


#: The summary tables fit a 100-column terminal or review page, whatever the console's width.
SUMMARY_WIDTH = 100


def _stdout() -> Any:
    """Where reports go; piped output gets a wide page so tables keep their columns."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=200)
    return console


def _say(message: str, quiet: bool = False) -> None:
    """A line for people, on stderr (stdout stays data under --format json)."""
    if not quiet:
        _stderr().print(message, markup=False)


def _emit(command: str, results: list[Result], fmt: Format | RunFormat, quiet: bool, header: dict[str, Any]) -> int:
    """Print the counts, per-result reports and the summary (text, github) or one JSON document; return the exit status.

    A run stopped by a signal reports what it did and exits 128 + the signal (130 Ctrl-C, 143 SIGTERM).
    """
    stopped_by = _interrupted_by()
    code = exit_code(results) if stopped_by is None else 128 + stopped_by
    if stopped_by is not None:
        import signal

        header = {**header, "interrupted": signal.Signals(stopped_by).name}
        _say(
            f"interrupted by {signal.Signals(stopped_by).name}: stopped after {len(results)} result(s); "
            "everything it started was stopped, nothing more is written"
        )
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    groups = by_cause(results)
    apart = not_comparable(results)
    if fmt.value == "json":
        document = {
            "format": "mla-golden-run/1",
            "command": command,
            **header,
            "results": [r.to_dict() for r in results],
            "summary": counts,
            "by_cause": [g.to_dict() for g in groups],
            "not_comparable": [g.to_dict() for g in apart],
            "exit_code": code,
        }
        typer.echo(json.dumps(document, indent=2, default=str))
        return code
    from rich.table import Table

    from mla_golden.ci import headline

    out = _stdout()
    tally = ", ".join(f"{counts[status]} {status}" for status in STATUS_EXIT if counts.get(status))
    out.print(f"mla-golden {command}: {len(results)} result(s): {tally or 'none'}", markup=False)  # CI logs: counts first
    if not quiet:
        for group in groups:
            _print_group(out, group, headed=len(groups) > 1 or bool(group.causes))
        for group in apart:  # after the divergences: nothing was compared
            _print_group(out, group, headed=True, suffix=" (no divergence: nothing to compare)")
    table = Table(title=f"mla-golden {command}", title_justify="left")
    table.add_column("status")
    table.add_column("count", justify="right")
    for status in STATUS_EXIT:
        if counts.get(status):
            table.add_row(status, str(counts[status]))
    table.add_row("total", str(len(results)), style="bold")
    out.print(table, width=min(out.width, SUMMARY_WIDTH))
    if any(g.causes for g in groups):
        causes = Table(title="not ok, by cause", title_justify="left")
        causes.add_column("cause", overflow="fold")
        causes.add_column("count", justify="right")
        for group in groups:
            causes.add_row(group.label, str(len(group.results)))
        out.print(causes, width=min(out.width, SUMMARY_WIDTH))
    if apart:
        table = Table(title="not comparable (no divergence: the planner cannot express these calls)", title_justify="left")
        table.add_column("planner", overflow="fold")
        table.add_column("count", justify="right")
        for group in apart:
            table.add_row(group.label, str(len(group.results)))
        out.print(table, width=min(out.width, SUMMARY_WIDTH))
    problems = [r for r in results if not r.status.ok]
    if problems and not quiet:
        from rich.text import Text

        status_width = max(len("status"), *(len(r.status) for r in problems))
        longest = max(len(r.key) for r in problems)
        # whole keys, growing the table up to the terminal's width; the first difference folds instead
        width = min(out.width, max(SUMMARY_WIDTH, status_width + longest + KEY_TABLE_REST))
        key_width = max(min(longest, width - status_width - KEY_TABLE_REST), 8)
        where = Table(title="not ok", title_justify="left")
        where.add_column("status", no_wrap=True, width=status_width)
        where.add_column("key", overflow="fold", width=key_width)
        where.add_column("first difference", overflow="fold", width=max(width - status_width - key_width - 10, 8))
        for r in problems:
            where.add_row(r.status, Text(r.key), Text(headline(r)))
        out.print(where, width=width)
    verdict = {EXIT_OK: "ok", EXIT_DIVERGED: "divergence", EXIT_BAD: "bad input"}.get(code, "interrupted")
    out.print(f"exit {code} ({verdict})", markup=False)
    if fmt.value == "github":
        _github(command, results, code)
    return code


#: Columns the "not ok" table keeps beside its status and key columns: borders and padding (10), 24 for the first difference.
KEY_TABLE_REST = 34
#: Columns the ``list`` table keeps beside its key column.
LIST_TABLE_REST = 70


def _print_group(out: Any, group: CauseGroup, headed: bool, suffix: str = "") -> None:
    """One group of results: its heading, then each result."""
    if headed:
        out.print(f"== {group.label}{suffix}: {len(group.results)} call(s)", markup=False)
    for r in group.results:
        _print_result(out, r)


def _print_result(out: Any, r: Result) -> None:
    """One result: its status and key, then its message and report; the verdict is said once."""
    report = r.report.rstrip() if r.report else ""
    verdict = f"{r.status.upper()} "
    if report.startswith(verdict):  # the rendered diff leads with the verdict too: fold it into this line
        out.print(f"{verdict}{r.key}", markup=False)
        report = "  " + report[len(verdict) :]
    else:
        out.print(f"{verdict}{r.key}" + (f" ({r.path})" if r.path else ""), markup=False)
    if r.message:
        out.print(f"  {r.message}", markup=False)
    if report:
        out.print(report, markup=False)
    out.print()


def _github(command: str, results: list[Result], code: int) -> None:
    """GitHub Actions: one ::error annotation per golden not ok; the markdown summary into $GITHUB_STEP_SUMMARY."""
    from mla_golden.ci import github_annotations, github_summary

    for line in github_annotations(command, results):
        typer.echo(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as file:  # appended, as each step adds its part
                file.write(github_summary(command, results, code))
        except OSError as exc:
            _say(f"warning: GITHUB_STEP_SUMMARY {summary}: cannot append: {exc.strerror or exc}")


def _write_junit(path: Path | None, command: str, results: list[Result], quiet: bool) -> None:
    """Write the run's results as JUnit XML (--junit-xml), atomically."""
    if path is None:
        return
    from mla_golden.ci import junit_xml
    from mla_golden.files import atomic_write

    with _writing(path, "--junit-xml"):
        atomic_write(path, junit_xml(command, results))
    _say(f"JUnit XML: {path}", quiet)


@contextlib.contextmanager
def _progress(quiet: bool, label: str, total: int | None = None) -> Iterator[Advance]:
    """A progress bar on stderr for long runs (``total`` items, or unknown); yields its advance."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = _stderr()
    show = not quiet and (total is None or total >= PROGRESS_MIN_ITEMS) and console.is_terminal
    progress = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True,
        disable=not show,
    )  # fmt: skip
    with progress:
        task = progress.add_task(label, total=total)
        yield lambda done: progress.advance(task, done)


#: The signal that stopped this command's run (one command per process; _emit takes it out).
_STOPPED_BY: list[int] = []


def _interruptible(run: Callable[[], list[Result]]) -> list[Result]:
    """``run()``'s results; when a signal stopped it, the results so far (and :func:`_emit` says so)."""
    from mla_golden.errors import Interrupted

    try:
        return run()
    except Interrupted as exc:
        _STOPPED_BY.append(exc.signum)
        return list(exc.results)


def _interrupted_by() -> int | None:
    """The signal that stopped this command's run, if one did (and forget it: the next command starts clean)."""
    came = _STOPPED_BY[:1]
    _STOPPED_BY.clear()
    return came[0] if came else None


def _run_items(
    worker: Callable[..., list[Result]], items: list[Any], args: tuple[Any, ...], jobs: int, quiet: bool, label: str
) -> list[Result]:
    """:func:`runs.run_items` with a progress bar on long runs; ``jobs`` capped at the CPU count, with a note."""
    from mla_golden.workers import cap_jobs

    jobs, note = cap_jobs(jobs)
    if note:
        _say(f"note: {note}", quiet)
    with _progress(quiet, label, len(items)) as advance:
        return _interruptible(lambda: run_items(worker, items, args, jobs, advance))


def _require_goldens(paths: list[Path], option: str = "") -> None:
    """Exit 2 before any work on a path that is missing or a folder without goldens: one wording in every command."""
    from mla_golden.runs import path_problem

    for path in paths:
        problem = path_problem(path)
        if problem:
            _say(f"error: {option}{path}: {problem}")
            raise typer.Exit(EXIT_BAD)


def _backend(spec: str, quiet: bool, aiter_repo: Path | None = None) -> Any:
    """Resolve the backend or exit 2 saying why not; say which one runs."""
    from mla_golden.backends import AITER_SRC, BackendError, resolve

    if spec.strip().startswith(AITER_SRC):  # the first use of a tree compiles it: minutes on a busy machine, not a hang
        _say(f"{spec}: building aiter's planner for the host unless this tree is in the cache (first use: a minute or more)", quiet)
    try:
        backend = resolve(spec, aiter_repo=None if aiter_repo is None else str(aiter_repo))
    except BackendError as exc:
        _say(f"error: --backend {spec}: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"backend: {backend.label} ({backend.reason})", quiet)
    return backend


# ---------------------------------------------------------------- record


def _clean_stale_temps(out: Path, quiet: bool) -> None:
    """Remove temp files a killed earlier run left in ``out``, and say so."""
    from mla_golden.store import GoldenStore

    removed = GoldenStore(out).clean_stale_temps()
    if removed:
        shown = ", ".join(str(p) for p in removed[:3]) + (" ..." if len(removed) > 3 else "")
        _say(f"removed {len(removed)} temp file(s) left by an interrupted run: {shown}", quiet)


def _record_command(command: list[str], out: Path, update: bool, allow_empty: bool, fmt: Format, quiet: bool) -> int:
    from mla_golden.import_hook import HookError, run

    _clean_stale_temps(out, quiet)
    _say(f"recording planner calls of: {' '.join(command)}", quiet)
    try:
        status, entries, stopped_by = run(command, out, update=update)
    except HookError as exc:
        _say(f"error: {exc}")
        return EXIT_BAD
    from mla_golden.runs import command_results

    results = command_results(entries, command, status)
    if stopped_by is not None:
        _STOPPED_BY.append(stopped_by)
    entries = [e for e in entries if e.get("outcome") != "missed"]
    if not entries and len(results) == (status != 0):
        nothing = "the command made no aiter planner calls (did it import aiter? python -S / -I skip the sitecustomize that installs the hook)"
        if allow_empty:
            _say(f"note: {nothing}", quiet)
        else:
            _say(f"error: {nothing}; --allow-empty accepts that")
            results.append(Result(" ".join(command), Status.BAD, None, f"no planner call captured: {nothing}"))
    distinct = len({entry.get("key") for entry in entries})
    _say(f"{len(entries)} planner call(s) captured, {distinct} distinct", quiet)
    return _emit("record", results, fmt, quiet, {"out": str(out), "command_line": command, "command_status": status})


class _RecordCommand(TyperCommand):
    """``record``: a ``--`` with nothing after it is a usage error, not a request to record the whole matrix."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[-1] == "--" and "--" not in args[:-1]:
            raise typer.BadParameter("'--' must be followed by a command to record (or leave '--' out to record the matrix)", ctx)
        return super().parse_args(ctx, args)


@app.command(cls=_RecordCommand, context_settings={"allow_interspersed_args": False})
def record(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="After --: a program to run with interception installed (records every planner call it makes)."),
    ] = None,
    matrix: Annotated[Path | None, typer.Option(help="Case matrix TOML (default: the one shipped in the package).")] = None,
    out: Annotated[Path, typer.Option(help="Folder the goldens are written to.")] = DEFAULT_GOLDENS,
    backend: Annotated[str, typer.Option(help=BACKEND_HELP.format(what="record from"), metavar=BACKEND_METAVAR)] = "auto",
    aiter_repo: Annotated[Path | None, typer.Option(help=AITER_REPO_HELP, envvar=AITER_REPO_ENV, metavar="DIR")] = None,
    device: Annotated[
        list[str] | None, typer.Option(help="ARCH:CU to plan every case for instead of the matrix's devices (repeatable).")
    ] = None,
    update: Annotated[bool, typer.Option("--update", help="Replace existing goldens that differ instead of refusing.")] = False,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="With a COMMAND: a command that makes no planner call is not an error.")
    ] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    max_items: Annotated[int, typer.Option(min=1, help="Divergent items shown per diff.")] = 20,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
) -> None:
    """Record goldens: every case of the matrix, or every planner call of COMMAND.

    \b
    mla-golden record --backend reference --out goldens
    mla-golden record --out my-goldens -- python -m pytest tests/test_mla.py
    """
    if command:
        if matrix is not None or device:
            _say("error: --matrix and --device do not apply when recording a command")
            raise typer.Exit(EXIT_BAD)
        raise typer.Exit(_record_command(command, out, update, allow_empty, format, quiet))
    if allow_empty:
        _say("error: --allow-empty applies to recording a command (record ... -- COMMAND)")
        raise typer.Exit(EXIT_BAD)
    from mla_golden.matrix import MatrixError, load

    _clean_stale_temps(out, quiet)
    chosen = _backend(backend, quiet, aiter_repo)
    devices = list(device or [])
    if chosen.name == "aiter":
        live = "{}:{}".format(*chosen.live_device())
        if any(d != live for d in devices):
            _say(f"error: aiter plans for the GPU it runs on ({live}) only; drop --device or use --backend reference")
            raise typer.Exit(EXIT_BAD)
        devices = [live]
        _say(f"aiter plans for this GPU: every case is planned for {live}", quiet)
    try:
        cases = load(matrix, devices or None)
    except MatrixError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"{len(cases)} case(s) from {matrix or 'the default matrix'} -> {out}", quiet)
    render = format is Format.text and not quiet
    from mla_golden.runs import record_worker

    results = _run_items(record_worker, cases, (chosen.spec, str(out), update, max_items, render), jobs, quiet, "recording")
    header = {"backend": chosen.to_dict(), "out": str(out)}
    raise typer.Exit(_emit("record", results, format, quiet, header))


# ---------------------------------------------------------------- diff


@app.command()
def diff(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Golden files or folders (default: ./goldens).", show_default=False)
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(help=BACKEND_HELP.format(what="replay on (default: auto)") + REPLAY_HELP, metavar=BACKEND_METAVAR, show_default=False),
    ] = None,
    aiter_repo: Annotated[Path | None, typer.Option(help=AITER_REPO_HELP, envvar=AITER_REPO_ENV, metavar="DIR")] = None,
    against: Annotated[
        Path | None,
        typer.Option(help="Compare with this golden tree (expected) instead of replaying; PATHS is then one tree (actual)."),
    ] = None,
    format: Annotated[RunFormat, typer.Option(help=RUN_FORMAT_HELP)] = RunFormat.text,
    max_items: Annotated[int, typer.Option(min=1, help="Divergent items shown per diff.")] = 20,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
    html: Annotated[
        Path | None, typer.Option(help="Also write a self-contained HTML report (schedules drawn, divergent works marked).")
    ] = None,
    junit_xml: Annotated[Path | None, typer.Option("--junit-xml", help=JUNIT_HELP)] = None,
    png: Annotated[Path | None, typer.Option(help="Also draw the first divergent call as a PNG (needs the plot extra).")] = None,
) -> None:
    """Diff goldens: replay their inputs on a backend, or compare two golden trees call by call.

    \b
    mla-golden diff goldens --backend reference
    mla-golden diff goldens --backend reference@v0.1.20       # what changes if we bump aiter
    mla-golden diff goldens --backend aiter-src@REV --aiter-repo AITER_REPO   # any aiter commit
    mla-golden diff goldens-aiter-new --against goldens-aiter-old
    """
    from mla_golden.runs import diff_trees, golden_files, pair_worker, replay_worker

    _check_outputs(("--html", html), ("--png", png), ("--junit-xml", junit_xml))
    roots = list(paths or [DEFAULT_GOLDENS])
    render = format is not RunFormat.json and not quiet
    keep = html is not None or png is not None
    if against is not None:
        if backend is not None:
            _say("error: --backend does not apply with --against (two recorded trees are compared, nothing is replayed)")
            raise typer.Exit(EXIT_BAD)
        _require_goldens(roots)
        _require_goldens([against], "--against ")
        two_files = len(roots) == 1 and roots[0].is_file() and against.is_file()
        if not two_files and (len(roots) != 1 or not roots[0].is_dir() or not against.is_dir()):
            _say("error: --against compares two folders or two golden files: mla-golden diff ACTUAL --against EXPECTED")
            raise typer.Exit(EXIT_BAD)
        if two_files:  # e.g. a failing test's <name>.obtained.safetensors against its golden
            results = pair_worker([(roots[0].stem, str(against), str(roots[0]))], max_items, render, keep)
        else:
            with _progress(quiet, "comparing") as advance:
                results = _interruptible(
                    lambda: diff_trees(roots[0], against, max_items=max_items, render=render, keep=keep, jobs=jobs, advance=advance)
                )
        header: dict[str, Any] = {"mode": "against", "expected": str(against), "actual": str(roots[0])}
    else:
        chosen = _backend(backend or "auto", quiet, aiter_repo)
        _require_goldens(roots)
        files, results = golden_files(roots)
        results += _run_items(replay_worker, files, (chosen.spec, max_items, render, keep), jobs, quiet, "replaying")
        header = {"mode": "replay", "backend": chosen.to_dict()}
    if html is not None:
        if against is not None:
            compared = f"{roots[0]} (actual) against {against} (expected), call by call"
        else:
            compared = f"goldens under {', '.join(map(str, roots))} replayed on {chosen.label} ({chosen.reason})"
        _write_html(html, results, quiet, compared)
    if png is not None:
        _write_png(png, results, quiet)
    _write_junit(junit_xml, "diff", results, quiet)
    raise typer.Exit(_emit("diff", results, format, quiet, header))


#: Divergent calls drawn in an HTML report (the summary table lists every call).
HTML_MAX_PICTURES = 50
#: Results with a diff worth drawing.
_DIFFERED = (Status.DIVERGED, Status.RESIZED)


def _drawn(results: list[Result], limit: int) -> list[Result]:
    """``limit`` diverged results whose diff and calls the run kept: behaviour changes first, resize-only ones last."""
    from mla_golden.differ import Cause

    kept = [r for r in results if r.status in _DIFFERED and r.found is not None and r.calls is not None]
    # stable: file order within each
    kept.sort(key=lambda r: r.status is Status.RESIZED or (r.found is not None and r.found.cause is Cause.RESIZED))
    return kept[:limit]


def _write_html(path: Path, results: list[Result], quiet: bool, compared: str = "") -> None:
    """Write the HTML report of a diff run: every result in the summary, divergent ones drawn from their diffs."""
    from mla_golden.files import atomic_write
    from mla_golden.html import Entry, cause_group, render_diff_page

    drawn = {id(r) for r in _drawn(results, HTML_MAX_PICTURES)}
    entries = []
    for r in results:
        if id(r) in drawn and r.calls is not None:
            entries.append(Entry(r.key, r.status, r.message, r.found, *r.calls))
        elif r.status in _DIFFERED and r.diff is not None:
            not_drawn = f"not drawn: the page draws {HTML_MAX_PICTURES} calls, behaviour changes before resize-only ones"
            entries.append(Entry(r.key, r.status, not_drawn, group=cause_group(r.diff)))
        else:
            entries.append(Entry(r.key, r.status, r.message))
    with _writing(path, "--html"):
        atomic_write(path, render_diff_page(entries, compared=compared))
    _say(f"HTML report: {path}", quiet)


def _write_png(path: Path, results: list[Result], quiet: bool) -> None:
    """Draw the first divergent call, expected beside actual (the plot extra)."""
    from mla_golden.plot import PlotExtraMissing, save_png

    first = _drawn(results, 1)
    if not first or first[0].calls is None:
        _say(f"no divergent call to draw; {path} not written", quiet)
        return
    expected, actual = first[0].calls
    try:
        with _writing(path, "--png"):
            save_png(path, expected, actual, title=first[0].key)
    except PlotExtraMissing as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"PNG of {first[0].key}: {path}", quiet)


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


def _check_outputs(*options: tuple[str, Path | None]) -> None:
    """Exit 2 before doing any work when an output option names a path no file can be written to."""
    for option, path in options:
        problem = None if path is None else _output_problem(path)
        if problem:
            _say(f"error: {option} {path}: {problem}")
            raise typer.Exit(EXIT_BAD)


@contextlib.contextmanager
def _writing(path: Path, option: str) -> Iterator[None]:
    """A report file that cannot be written is exit 2 with the reason (atomic_write leaves no temp file)."""
    try:
        yield
    except OSError as exc:
        _say(f"error: {option} {path}: cannot write: {exc.strerror or exc}")
        raise typer.Exit(EXIT_BAD) from exc


# ---------------------------------------------------------------- check


@app.command("check")
def check_(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Golden files or folders (default: ./goldens).", show_default=False)
    ] = None,
    format: Annotated[RunFormat, typer.Option(help=RUN_FORMAT_HELP)] = RunFormat.text,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
    html: Annotated[
        Path | None, typer.Option(help="Also write a self-contained HTML report (works that break an invariant marked).")
    ] = None,
    junit_xml: Annotated[Path | None, typer.Option("--junit-xml", help=JUNIT_HELP)] = None,
) -> None:
    """Check goldens against what the kernels rely on (coverage, splits, reduce groups), no golden to compare with.

    \b
    mla-golden check goldens
    """
    from mla_golden.runs import check_worker, golden_files, note_copies

    _check_outputs(("--html", html), ("--junit-xml", junit_xml))
    roots = list(paths or [DEFAULT_GOLDENS])
    _require_goldens(roots)
    files, results = golden_files(roots)
    results += _run_items(check_worker, files, (html is not None,), jobs, quiet, "checking")
    for group in note_copies(results):
        shown = ", ".join(r.key for r in group[:10]) + (f" and {len(group) - 10} more" if len(group) > 10 else "")
        _say(f"warning: the same content under {len(group)} keys: {shown}")
    if html is not None:
        _write_check_html(html, results, quiet)
    _write_junit(junit_xml, "check", results, quiet)
    raise typer.Exit(_emit("check", results, format, quiet, {}))


def _write_check_html(path: Path, results: list[Result], quiet: bool) -> None:
    """Write the HTML report of a check run: every result in the summary, the first violated goldens drawn."""
    from mla_golden.files import atomic_write
    from mla_golden.html import CheckEntry, render_check_page

    entries, drawn = [], 0
    for r in results:
        if r.checked is not None and drawn < HTML_MAX_PICTURES:
            entries.append(CheckEntry(r.key, r.status, r.message, *r.checked))
            drawn += 1
        elif r.checked is not None:
            not_drawn = f"not drawn: the page draws the first {HTML_MAX_PICTURES}"
            entries.append(CheckEntry(r.key, r.status, not_drawn, result=r.checked[1]))
        else:
            entries.append(CheckEntry(r.key, r.status, r.message))
    with _writing(path, "--html"):
        atomic_write(path, render_check_page(entries))
    _say(f"HTML report: {path}", quiet)


# ---------------------------------------------------------------- show and list


def _show_data(golden: Any, cu: int | None, work: int | None) -> dict[str, Any]:
    """Everything ``show`` prints, as plain data; work items grouped by CU part."""
    from mla_golden.geometry import describe_schedule
    from mla_golden.planner_id import planner_label
    from mla_golden.schema import OUTPUTS

    call = golden.call
    data: dict[str, Any] = {
        "key": golden.key,
        "path": str(golden.path),
        "format": golden.format,
        "notes": golden.notes,
        "op": call.op,
        "params": call.params,
        "device": call.device,
        "env": call.env,
        "provenance": call.provenance,
        "planner": planner_label(call.provenance),
        "error": call.error,
        "inputs": {name: t.tolist() for name, t in call.inputs.items()},
        "buffers": {
            name: {**call.buffers[name], "written": int(call.written[name].sum()) if call.written else 0}
            for name in OUTPUTS
        },
        "cu_parts": [],
        "reduce_groups": [],
    }
    if call.error is None:
        data.update(describe_schedule(call, cu=cu, work=work))
    return data


def _clip(values: list[int], limit: int = 16) -> str:
    return str(values) if len(values) <= limit else f"{values[:limit]} ... ({len(values)} values)"


@app.command()
def show(
    golden: Annotated[Path, typer.Argument(help="A golden file.")],
    cu: Annotated[int | None, typer.Option(min=0, help="Only this CU part's work items.")] = None,
    work: Annotated[int | None, typer.Option(min=0, help="Only this work item (and its CU part).")] = None,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    html: Annotated[Path | None, typer.Option(help="Also write the schedule as a self-contained HTML picture.")] = None,
    png: Annotated[Path | None, typer.Option(help="Also draw the schedule as a PNG (needs the plot extra).")] = None,
) -> None:
    """Show one golden: header, params, device, provenance, inputs, work items by CU part, reduce groups."""
    from mla_golden.errors import GoldenError
    from mla_golden.geometry import INDPTRS, indptr_problem
    from mla_golden.store import load

    _check_outputs(("--html", html), ("--png", png))
    _require_goldens([golden])
    try:
        loaded = load(golden)
        for name in INDPTRS if loaded.call.error is None else ():
            problem = indptr_problem(loaded.call, name)
            if problem:  # show walks these ranges: a wild one is refused, `check` names it as a violation
                raise GoldenError(golden, f"cannot show: {problem}")
    except GoldenError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    if html is not None:
        from mla_golden.files import atomic_write
        from mla_golden.html import render_show_page

        with _writing(html, "--html"):
            atomic_write(html, render_show_page(loaded.key, loaded.call, cu=cu, work=work))
        _say(f"HTML picture: {html}")
    if png is not None:
        from mla_golden.plot import PlotExtraMissing, save_png

        try:
            with _writing(png, "--png"):
                save_png(png, loaded.call, title=loaded.key)
        except PlotExtraMissing as exc:
            _say(f"error: {exc}")
            raise typer.Exit(EXIT_BAD) from exc
        _say(f"PNG picture: {png}")
    data = _show_data(loaded, cu, work)
    if format is Format.json:
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.table import Table

    out = _stdout()
    p = out.print
    p(f"{data['key']}  ({data['op']}, {data['path']})", markup=False)
    prov = data["provenance"]
    p(f"recorded by {data['planner']} at {prov.get('created')}, torch {prov.get('torch')}", markup=False)
    p(f"device: {json.dumps(data['device'])}", markup=False)
    p(f"env: {json.dumps(data['env'])}", markup=False)
    p("params: " + ", ".join(f"{k}={v}" for k, v in data["params"].items()), markup=False)
    for note in [*data["notes"], *prov.get("capture", {}).get("notes", [])]:
        p(f"note: {note}", markup=False)
    for name, values in data["inputs"].items():
        p(f"input {name}: {_clip(values)}", markup=False)
    if data["error"] is not None:
        p(f"the planner raised: {data['error']}", markup=False)
        return
    for name, spec in data["buffers"].items():
        p(f"buffer {name}: {spec['dtype']} {spec['shape']}, {spec['written']} element(s) written", markup=False)
    from mla_golden.schema import format_cell, schema_for

    columns = schema_for(data["op"]).work_columns
    table = Table(title="work items by CU part", title_justify="left", show_edge=False)
    for header in ("cu part", "work", *columns):
        table.add_column(header, justify="right")
    for part in data["cu_parts"]:
        if not part["items"] and (cu is None and work is None):
            continue
        for i, item in enumerate(part["items"]):
            cells = [format_cell(c, item["columns"][c]) for c in columns] if item["columns"] else ["(not written)"] + [""] * (len(columns) - 1)
            table.add_row(str(part["cu_part"]) if i == 0 else "", str(item["work"]), *cells)
        if not part["items"]:
            table.add_row(str(part["cu_part"]), "-", "(no work)", *[""] * (len(columns) - 1))
    out.print(table)
    if data["reduce_groups"]:
        p("reduce groups:", markup=False)
        for g in data["reduce_groups"]:
            p(f"  group {g['group']}: qo {g['qo_range']} <- partials {g['partials']}", markup=False)


@app.command("list")
def list_(
    folder: Annotated[Path, typer.Argument(help="Golden folder.")] = DEFAULT_GOLDENS,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
) -> None:
    """List goldens: one row per golden (op, device, shape/dtype, the planner that recorded it, error)."""
    from mla_golden.errors import GoldenError
    from mla_golden.planner_id import planner_label
    from mla_golden.store import GoldenStore, load_placed, shape_label

    _require_goldens([folder])
    if not folder.is_dir():
        _say(f"error: {folder}: not a folder (list takes a golden folder; mla-golden show FILE shows one golden)")
        raise typer.Exit(EXIT_BAD)
    rows: list[dict[str, Any]] = []
    for path in GoldenStore(folder).paths():
        try:
            golden = load_placed(path)
        except GoldenError as exc:
            rows.append({"path": str(path), "problem": exc.problem})
            continue
        call = golden.call
        aiter = call.provenance.get("aiter") or {}
        rows.append(
            {
                "key": golden.key,
                "path": str(path),
                "op": call.op,
                "device": f"{call.device.get('arch')}-cu{call.device.get('cu_num')}",
                "shape": shape_label(call),
                "backend": call.provenance.get("backend"),
                "aiter": aiter.get("version") or aiter.get("commit"),
                "planner": planner_label(call.provenance),
                "error": call.error,
            }
        )
    code = EXIT_BAD if any("problem" in r for r in rows) else EXIT_OK
    if format is Format.json:
        typer.echo(json.dumps({"format": "mla-golden-list/1", "folder": str(folder), "goldens": rows}, indent=2))
        raise typer.Exit(code)
    from rich.table import Table
    from rich.text import Text

    out = _stdout()
    table = Table(title=f"{len(rows)} golden(s) in {folder}", title_justify="left")
    longest = max((len(r.get("key", r["path"])) for r in rows), default=0)
    table.add_column("key", overflow="fold", min_width=max(min(longest, out.width - LIST_TABLE_REST), 1))  # whole keys when there is room
    for header in ("op", "device", "shape/dtype", "planner", "error"):
        table.add_column(header, overflow="fold")
    for r in rows:
        if "problem" in r:
            cells = [r["path"], "(unreadable)", "", "", "", r["problem"]]
        else:
            error = (r["error"][:60] + "...") if r["error"] and len(r["error"]) > 60 else (r["error"] or "")
            cells = [r["key"], r["op"], r["device"], r["shape"], r["planner"], error]
        table.add_row(*(Text(c) for c in cells))
    out.print(table)
    raise typer.Exit(code)


@app.command()
def textconv(golden: Annotated[Path, typer.Argument(help="A golden file.")]) -> None:
    """Print a golden as stable text, one line per row, for git diff (params, device, written runs, rows).

    \b
    echo '*.safetensors diff=mla-golden' >> .gitattributes
    git config diff.mla-golden.textconv "mla-golden textconv"
    """
    from mla_golden.errors import GoldenError
    from mla_golden.store import load
    from mla_golden.textconv import golden_text

    _require_goldens([golden])
    try:
        text = golden_text(load(golden))
    except GoldenError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    typer.echo(text, nl=False)


# ---------------------------------------------------------------- versions


@app.command()
def versions(
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    aiter: Annotated[
        Path | None,
        typer.Option(
            help="An aiter tree (a checkout, or a `git archive` of csrc and aiter): say which ported version "
            "plans exactly as it does. Exit 0 exact, 1 not ported, 2 not an aiter tree.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List the aiter planner versions the reference speaks (oldest first) and what changed at each step.

    \b
    mla-golden versions
    mla-golden versions --aiter AITER_TREE        # exact: reference@aded0f84, or not ported
    mla-golden diff goldens --backend reference@e4048607   # what changes if we bump aiter to it
    """
    from mla_golden import reference

    if aiter is not None:
        raise typer.Exit(_aiter_tree_verdict(aiter, format))
    known = reference.versions()
    if format is Format.json:
        rows = [
            {"name": v.name, "commit": v.commit, "date": v.date, "tags": list(v.tags), "changes": list(v.changes),
             "backend": f"reference@{v.name}", "newest": v == known[-1]}  # fmt: skip
            for v in known
        ]
        typer.echo(json.dumps({"format": "mla-golden-versions/1", "versions": rows}, indent=2))
        return
    out = _stdout()
    out.print(f"{len(known)} aiter planner versions, oldest first (--backend reference@NAME; plain reference = the newest)", markup=False)
    for v in known:
        newest = "  (newest)" if v == known[-1] else ""
        out.print(f"\n{v.name}  {v.date}  {v.commit}  [{', '.join(v.tags) or 'no release tag'}]{newest}", markup=False)
        for change in v.changes:
            out.print(f"  - {change}", markup=False)


def _aiter_tree_verdict(tree: Path, fmt: Format) -> int:
    """Print whether the planner of the aiter tree at ``tree`` is a ported version's; return the exit status."""
    from mla_golden.reference.planner_digest import ported_version, tree_digest

    try:
        digest = tree_digest(tree)
        version = ported_version(digest)
    except ValueError as error:
        _say(f"error: --aiter {error}")
        return EXIT_BAD
    backend = f"reference@{version.name}" if version is not None else f"aiter-src:{tree}"
    if fmt is Format.json:
        document = {
            "format": "mla-golden-versions-aiter/1",
            "aiter": str(tree),
            "planner_digest": digest,
            "verdict": "exact" if version is not None else "not ported",
            "version": version.name if version is not None else None,
            "backend": backend,
        }
        typer.echo(json.dumps(document, indent=2))
    elif version is not None:
        typer.echo(f"exact: {backend} (the planner sources of {tree} mean the same as aiter {version.commit[:10]}'s)")
    else:
        typer.echo(f"not ported: use --backend {backend} (no ported version has the planner of {tree})")
    return EXIT_OK if version is not None else EXIT_DIVERGED


# ---------------------------------------------------------------- sweep


@app.command()
def sweep(
    a: Annotated[str, typer.Option("--a", help="Planner A: BACKEND[@VERSION][:ARCH[:CU]][+ENV=VALUE...]; BACKEND reference, aiter or python:MODULE[:ATTR].", show_default=False)],
    b: Annotated[str, typer.Option("--b", help="Planner B, same notation.", show_default=False)],
    address: Annotated[
        str | None, typer.Argument(metavar="[ADDRESS]", help="After --ray: the Ray cluster's address.", show_default=False)
    ] = None,
    space: Annotated[Path | None, typer.Option(help="Space TOML (default: the one shipped, spanning the default matrix).")] = None,
    cases: Annotated[int | None, typer.Option(min=1, help="Budget: this many cases (default 500).")] = None,
    time: Annotated[float | None, typer.Option("--time", min=0.001, help="Budget: this many seconds.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sampled cases.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Folder for the reproducer goldens (a/, b/) and the journal a rerun resumes.")] = None,
    jobs: Annotated[int, typer.Option(min=1, help="Local worker processes (at most the CPU count).")] = 1,
    ray: Annotated[bool, typer.Option("--ray", help="Run on Ray: a local instance, or the cluster at ADDRESS.")] = False,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    html: Annotated[Path | None, typer.Option(help="Also write a self-contained HTML report.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the verdict and the regions.")] = False,
) -> None:
    """Sweep a space of planner calls on two planners; shrink and write every divergence.

    \b
    mla-golden sweep --a reference@aded0f84 --b reference@e4048607 --out sweep-out
    mla-golden sweep --a reference+AITER_MLA_META_USE_PARALLEL=0 --b reference+AITER_MLA_META_USE_PARALLEL=1
    mla-golden sweep --a reference --b reference:gfx942:80 --space docs/sweep-spaces/gfx942.toml --time 60 --ray ray://head:10001
    """
    if address is not None and not ray:
        _say(f"error: unexpected argument {address!r} (a Ray address goes after --ray)")
        raise typer.Exit(EXIT_BAD)
    if cases is not None and time is not None:
        _say("error: give one budget: --cases N or --time SECONDS")
        raise typer.Exit(EXIT_BAD)
    from mla_golden.errors import MlaGoldenError
    from mla_golden.files import atomic_write
    from mla_golden.sweeper import sweep as run_sweep
    from mla_golden.sweeper.render import render_html, render_text

    try:
        with _sweep_progress(quiet) as progress:
            findings = run_sweep(
                a, b, space, cases=cases, seconds=time, seed=seed, out=out, jobs=jobs,
                ray=(address or "local") if ray else None, progress=progress,
            )  # fmt: skip
    except MlaGoldenError as exc:  # bad specs, space, journal, an executor that cannot start
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    if format is Format.json:
        typer.echo(json.dumps(findings.to_dict(), indent=2))
    else:
        _stdout().print(render_text(findings, quiet=quiet), markup=False)
    if html is not None:
        atomic_write(html, render_html(findings))
        _say(f"HTML report: {html}", quiet)
    raise typer.Exit(EXIT_DIVERGED if findings.diverged else EXIT_OK)


@contextlib.contextmanager
def _sweep_progress(quiet: bool) -> Iterator[Callable[[int, int | None, int], None]]:
    """A progress bar on stderr (a terminal only) that the sweep advances as chunks come back."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _stderr()
    bar = Progress(
        TextColumn("sweeping"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[diverged]} diverged"),
        TimeElapsedColumn(), console=console, transient=True, disable=quiet or not console.is_terminal,
    )  # fmt: skip
    with bar:
        task = bar.add_task("sweep", total=None, diverged=0)

        def advance(done: int, total: int | None, diverged: int) -> None:
            bar.update(task, completed=done, total=total, diverged=diverged)

        yield advance


def main() -> None:
    """Entry point for ``python -m mla_golden.cli``."""
    app(prog_name="mla-golden")


if __name__ == "__main__":
    main()
