"""``mla-golden diff``: replay goldens on a backend, or compare two golden trees call by call; HTML and PNG pictures."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mla_golden.cli.options import (
    DEFAULT_GOLDENS,
    AiterRepoOption,
    GoldenPathsArgument,
    JobsOption,
    JunitOption,
    MaxItemsOption,
    QuietOption,
    ReplayBackendOption,
    RunFormat,
    RunFormatOption,
)
from mla_golden.cli.output import HTML_MAX_PICTURES, emit, say, write_junit, writing
from mla_golden.cli.running import check_outputs, progress, require_goldens, resolve_backend, run_with_progress
from mla_golden.cli.stops import interruptible
from mla_golden.runs import EXIT_BAD, Result, Status, exit_code, exit_words

#: Results with a diff worth drawing.
_DIFFERED = (Status.DIVERGED, Status.RESIZED)


def diff(
    paths: GoldenPathsArgument = None,
    backend: ReplayBackendOption = None,
    aiter_repo: AiterRepoOption = None,
    against: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Compare with this golden tree (expected) instead of replaying; PATH is then one tree (actual)."),
    ] = None,
    format: RunFormatOption = RunFormat.text,
    max_items: MaxItemsOption = 20,
    jobs: JobsOption = 1,
    quiet: QuietOption = False,
    html: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Also write a self-contained HTML report (schedules drawn, divergent works marked).")
    ] = None,
    junit_xml: JunitOption = None,
    png: Annotated[Path | None, typer.Option(metavar="FILE", help="Also draw the first divergent call as a PNG (needs the plot extra).")] = None,
) -> None:
    """Diff goldens: replay their inputs on a backend, or compare two golden trees call by call.

    \b
    mla-golden diff goldens --backend reference
    mla-golden diff goldens --backend reference@v0.1.20       # what changes if we bump aiter
    mla-golden diff goldens --backend aiter-src@REV --aiter-repo AITER_REPO   # any aiter commit
    mla-golden diff goldens-aiter-new --against goldens-aiter-old
    """
    from mla_golden.golden.store import GoldenFile
    from mla_golden.runs import GoldenPair, diff_trees, golden_files, misplaced, pair_worker, replay_worker

    started = time.monotonic()  # the run's wall time, for JUnit
    check_outputs(("--html", html), ("--png", png), ("--junit-xml", junit_xml))
    roots = list(paths or [DEFAULT_GOLDENS])
    render = format is not RunFormat.json and not quiet
    keep = html is not None or png is not None
    if against is not None:
        if backend is not None:
            say("error: --backend does not apply with --against (two recorded trees are compared, nothing is replayed)")
            raise typer.Exit(EXIT_BAD)
        require_goldens(roots)
        require_goldens([against], "--against ")
        two_files = len(roots) == 1 and roots[0].is_file() and against.is_file()
        if not two_files and (len(roots) != 1 or not roots[0].is_dir() or not against.is_dir()):
            say("error: --against compares two folders or two golden files: mla-golden diff ACTUAL --against EXPECTED")
            raise typer.Exit(EXIT_BAD)
        if two_files:  # e.g. a failing test's <name>.obtained.safetensors against its golden
            pair = GoldenPair(roots[0].stem, GoldenFile(str(against), None), GoldenFile(str(roots[0]), None), False)
            results = pair_worker([pair], max_items, render, keep)
        else:
            with progress(quiet, "comparing") as advance:
                results = interruptible(
                    lambda: diff_trees(roots[0], against, max_items=max_items, render=render, keep=keep, jobs=jobs, advance=advance)
                )
        header: dict[str, Any] = {"mode": "against", "expected": str(against), "actual": str(roots[0])}
    else:
        require_goldens(roots)
        chosen = resolve_backend(backend or "auto", quiet, aiter_repo, replay=True)
        files, results = golden_files(roots)
        results += run_with_progress(replay_worker, files, (chosen.spec, max_items, render, keep), jobs, quiet, "replaying")
        misplaced(results)
        header = {"mode": "replay", "backend": chosen.to_dict()}
    wrote: list[str] = []  # where the files went, said after the report
    if html is not None:
        if against is not None:
            compared = f"{roots[0]} (actual) against {against} (expected), call by call"
        else:
            compared = f"goldens under {', '.join(map(str, roots))} replayed on {chosen.label} ({chosen.reason})"
        replay = [*(["--backend", backend] if backend else []), *(["--aiter-repo", str(aiter_repo)] if aiter_repo else [])]
        wrote.append(_write_html(html, results, compared, None if against is not None else replay))
    if png is not None:
        wrote.append(_write_png(png, results))
    if junit_xml is not None:
        wrote.append(write_junit(junit_xml, "diff", results, time.monotonic() - started))
    raise typer.Exit(emit("diff", results, format, quiet, header, wrote))


def drawn(results: list[Result], limit: int) -> list[Result]:
    """``limit`` diverged results whose diff and calls the run kept: behaviour changes first, resize-only ones last."""
    from mla_golden.diff_data import Cause

    kept = [r for r in results if r.status in _DIFFERED and r.diff is not None and r.calls is not None]
    # stable: file order within each
    kept.sort(key=lambda r: r.status is Status.RESIZED or (r.diff is not None and r.diff.cause is Cause.RESIZED))
    return kept[:limit]


def alone_command(result: Result, replay: list[str] | None) -> tuple[str, ...]:
    """The command that diffs ``result``'s golden alone, for the page to offer where it leaves something out:
    ``replay`` holds the run's ``--backend`` / ``--aiter-repo`` options, None for two trees compared."""
    if result.path is None:
        return ()
    if replay is None:
        return () if result.against_path is None else ("mla-golden", "diff", result.path, "--against", result.against_path)
    return ("mla-golden", "diff", result.path, *replay)


def _write_html(path: Path, results: list[Result], compared: str = "", replay: list[str] | None = None) -> str:
    """Write the HTML report of a diff run: every result in the summary, divergent ones drawn from their diffs.
    Returns the line that says so."""
    from mla_golden.files import atomic_write
    from mla_golden.render.html import Entry, cause_group, render_diff_page

    pictured = {id(r) for r in drawn(results, HTML_MAX_PICTURES)}
    entries = []
    for r in results:
        command = alone_command(r, replay) if r.status in _DIFFERED else ()
        if id(r) in pictured and r.calls is not None:
            entries.append(Entry(r.key, r.status, r.message, r.diff, *r.calls, command=command))
        elif r.status in _DIFFERED and r.diff_json is not None:
            not_drawn = f"not drawn: the page draws {HTML_MAX_PICTURES} calls, behaviour changes before resize-only ones"
            group = cause_group(r.diff_json)
            entries.append(Entry(r.key, r.status, not_drawn, group=group, soundness=r.diff_json.get("soundness"), command=command))
        else:
            entries.append(Entry(r.key, r.status, r.message))
    code = exit_code(results)
    with writing(path, "--html"):
        atomic_write(path, render_diff_page(entries, compared=compared, exit_status=code, exit_word=exit_words(code, "diff")))
    return f"HTML report: {path}"


def _write_png(path: Path, results: list[Result]) -> str:
    """Draw the first divergent call, expected beside actual (the plot extra). Returns the line that says what it
    wrote (or why nothing)."""
    from mla_golden.errors import PlotExtraMissing
    from mla_golden.render.plot import save_png
    from mla_golden.render.sanitize import inline

    first = drawn(results, 1)
    if not first or first[0].calls is None:
        return f"no divergent call to draw; {path} not written"
    expected, actual = first[0].calls
    try:
        with writing(path, "--png"):
            save_png(path, expected, actual, title=first[0].key)
    except PlotExtraMissing as exc:
        say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    return f"PNG of {inline(first[0].key)}: {path}"
