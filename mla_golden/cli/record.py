"""``mla-golden record``: every case of the matrix, or every planner call a command makes, into goldens."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mla_golden.cli.options import (
    DEFAULT_GOLDENS,
    AiterRepoOption,
    Format,
    FormatOption,
    JobsOption,
    MaxItemsOption,
    QuietOption,
    RecordBackendOption,
)
from mla_golden.cli.output import emit, say
from mla_golden.cli.running import resolve_backend, run_with_progress
from mla_golden.cli.stops import note_stop
from mla_golden.cli.usage import Command
from mla_golden.runs import EXIT_BAD, Result, Status


def _clean_stale_temps(out: Path, quiet: bool) -> None:
    """Remove temp files a killed earlier run left in ``out``, and say so."""
    from mla_golden.golden.store import GoldenStore

    removed = GoldenStore(out).clean_stale_temps()
    if removed:
        shown = ", ".join(str(p) for p in removed[:3]) + (" ..." if len(removed) > 3 else "")
        say(f"removed {len(removed)} temp file(s) left by an interrupted run: {shown}", quiet)


def _record_command(command: list[str], out: Path, update: bool, allow_empty: bool, fmt: Format, quiet: bool) -> int:
    from mla_golden.capture.import_hook import run
    from mla_golden.errors import HookError

    _clean_stale_temps(out, quiet)
    say(f"recording planner calls of: {' '.join(command)}", quiet)
    try:
        status, entries, stopped_by = run(command, out, update=update)
    except HookError as exc:
        say(f"error: {exc}")
        return EXIT_BAD
    from mla_golden.runs import command_results

    results = command_results(entries, command, status)
    if stopped_by is not None:
        note_stop(stopped_by)
    entries = [e for e in entries if e.get("outcome") != "missed"]
    if not entries and len(results) == (status != 0):
        nothing = "the command made no aiter planner calls (did it import aiter? python -S / -I skip the sitecustomize that installs the hook)"
        if allow_empty:
            say(f"note: {nothing}", quiet)
        else:
            say(f"error: {nothing}; --allow-empty accepts that")
            results.append(Result(" ".join(command), Status.BAD, None, f"no planner call captured: {nothing}"))
    distinct = len({entry.get("key") for entry in entries})
    say(f"{len(entries)} planner call(s) captured, {distinct} distinct", quiet)
    return emit("record", results, fmt, quiet, {"out": str(out), "command_line": command, "command_status": status})


class RecordCommand(Command):
    """``record``: a ``--`` with nothing after it is a usage error, not a request to record the whole matrix."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[-1] == "--" and "--" not in args[:-1]:
            raise typer.BadParameter("'--' must be followed by a command to record (or leave '--' out to record the matrix)", ctx)
        parsed: list[str] = super().parse_args(ctx, args)
        return parsed


def record(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="COMMAND",
            help="After --: a program to run with interception installed (records every planner call it makes).",
        ),
    ] = None,
    matrix: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Case matrix TOML (default: the one shipped in the package).")
    ] = None,
    out: Annotated[Path, typer.Option(metavar="DIR", help="Folder the goldens are written to.")] = DEFAULT_GOLDENS,
    backend: RecordBackendOption = "auto",
    aiter_repo: AiterRepoOption = None,
    device: Annotated[
        list[str] | None,
        typer.Option(metavar="ARCH:CU", help="ARCH:CU to plan every case for instead of the matrix's devices (repeatable)."),
    ] = None,
    update: Annotated[bool, typer.Option("--update", help="Replace existing goldens that differ instead of refusing.")] = False,
    allow_empty: Annotated[
        bool, typer.Option("--allow-empty", help="With a COMMAND: a command that makes no planner call is not an error.")
    ] = False,
    jobs: JobsOption = 1,
    max_items: MaxItemsOption = 20,
    format: FormatOption = Format.text,
    quiet: QuietOption = False,
) -> None:
    """Record goldens: every case of the matrix, or every planner call of COMMAND.

    \b
    mla-golden record --backend reference --out goldens
    mla-golden record --out my-goldens -- python -m pytest tests/test_mla.py
    """
    if command:
        if matrix is not None or device:
            say("error: --matrix and --device do not apply when recording a command")
            raise typer.Exit(EXIT_BAD)
        raise typer.Exit(_record_command(command, out, update, allow_empty, format, quiet))
    if allow_empty:
        say("error: --allow-empty applies to recording a command (record ... -- COMMAND)")
        raise typer.Exit(EXIT_BAD)
    from mla_golden.errors import MatrixError
    from mla_golden.matrix import load_matrix

    _clean_stale_temps(out, quiet)
    chosen = resolve_backend(backend, quiet, aiter_repo)
    devices = list(device or [])
    if chosen.name == "aiter":
        live = "{}:{}".format(*chosen.live_device())
        if any(d != live for d in devices):
            say(f"error: aiter plans for the GPU it runs on ({live}) only; drop --device or use --backend reference")
            raise typer.Exit(EXIT_BAD)
        devices = [live]
        say(f"aiter plans for this GPU: every case is planned for {live}", quiet)
    try:
        cases = load_matrix(matrix, devices or None)
    except MatrixError as exc:
        say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    say(f"{len(cases)} case(s) from {matrix or 'the default matrix'} -> {out}", quiet)
    render = format is Format.text and not quiet
    from mla_golden.runs import record_worker

    results = run_with_progress(record_worker, cases, (chosen.spec, str(out), update, max_items, render), jobs, quiet, "recording")
    header = {"backend": chosen.to_dict(), "out": str(out)}
    raise typer.Exit(emit("record", results, format, quiet, header))
