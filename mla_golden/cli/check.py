"""``mla-golden check``: goldens against what the kernels rely on, with no golden to compare with."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from mla_golden.cli.options import (
    DEFAULT_GOLDENS,
    GoldenPathsArgument,
    JobsOption,
    JunitOption,
    QuietOption,
    RunFormat,
    RunFormatOption,
)
from mla_golden.cli.output import HTML_MAX_PICTURES, emit, say, write_junit, writing
from mla_golden.cli.running import check_outputs, require_goldens, run_with_progress
from mla_golden.runs import Result, exit_code, exit_words


def check(
    paths: GoldenPathsArgument = None,
    format: RunFormatOption = RunFormat.text,
    jobs: JobsOption = 1,
    quiet: QuietOption = False,
    html: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Also write a self-contained HTML report (works that break an invariant marked).")
    ] = None,
    junit_xml: JunitOption = None,
) -> None:
    """Check goldens against what the kernels rely on (coverage, splits, reduce groups), no golden to compare with.

    \b
    mla-golden check goldens
    """
    from mla_golden.render.sanitize import inline
    from mla_golden.runs import check_worker, golden_files, misplaced, note_copies

    started = time.monotonic()  # the run's wall time, for JUnit
    check_outputs(("--html", html), ("--junit-xml", junit_xml))
    roots = list(paths or [DEFAULT_GOLDENS])
    require_goldens(roots)
    files, results = golden_files(roots)
    results += run_with_progress(check_worker, files, (html is not None,), jobs, quiet, "checking")
    misplaced(results)
    for group in note_copies(results):
        shown = ", ".join(inline(r.key) for r in group[:10]) + (f" and {len(group) - 10} more" if len(group) > 10 else "")
        say(f"warning: the same content under {len(group)} keys: {shown}")
    wrote: list[str] = []  # where the files went, said after the report
    if html is not None:
        wrote.append(_write_check_html(html, results, f"goldens under {', '.join(map(str, roots))} against what aiter's kernels rely on"))
    if junit_xml is not None:
        wrote.append(write_junit(junit_xml, "check", results, time.monotonic() - started))
    raise typer.Exit(emit("check", results, format, quiet, {}, wrote))


def _write_check_html(path: Path, results: list[Result], checked: str) -> str:
    """Write the HTML report of a check run: every result in the summary, the violated goldens drawn (as many as the
    page holds, the rest naming the command that draws each). Returns the line that says so."""
    from mla_golden.files import atomic_write
    from mla_golden.render.html import CheckEntry, render_check_page

    entries = []
    for r in results:
        alone = ("mla-golden", "check", r.path) if r.path is not None and r.checked is not None else ()
        call, found = r.checked or (None, None)
        entries.append(CheckEntry(r.key, r.status, r.message, call, found, command=alone))
    code = exit_code(results)
    with writing(path, "--html"):
        atomic_write(path, render_check_page(
            entries, checked=checked, exit_status=code, exit_word=exit_words(code, "check"), most=HTML_MAX_PICTURES
        ))
    return f"HTML report: {path}"
