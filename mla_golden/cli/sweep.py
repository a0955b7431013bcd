"""``mla-golden sweep``: a space of planner calls on two planners; every divergence shrunk and written."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import typer

from mla_golden.cli.options import AiterRepoOption, Format, FormatOption
from mla_golden.cli.output import echo_json, exit_line, say, stderr, stdout
from mla_golden.runs import EXIT_BAD


def sweep(
    a: Annotated[str, typer.Option("--a", metavar="PLANNER", help="Planner A: BACKEND[@VERSION][:ARCH[:CU]][+ENV=VALUE...]; BACKEND reference, aiter, python:MODULE[:ATTR], aiter-src:PATH or aiter-src@REV.", show_default=False)],
    b: Annotated[str, typer.Option("--b", metavar="PLANNER", help="Planner B, same notation.", show_default=False)],
    space: Annotated[Path | None, typer.Option(metavar="FILE", help="Space TOML (default: the one shipped, spanning the default matrix).")] = None,
    cases: Annotated[int | None, typer.Option(min=1, metavar="N", help="Budget: this many cases (default 500).")] = None,
    time: Annotated[float | None, typer.Option("--time", min=0.001, metavar="SECONDS", help="Budget: this many seconds.")] = None,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the sampled cases.")] = 0,
    out: Annotated[Path | None, typer.Option(metavar="DIR", help="Folder for the reproducer goldens (a/, b/) and the journal a rerun resumes.")] = None,
    jobs: Annotated[int, typer.Option(min=1, metavar="N", help="Local worker processes (at most the CPU count).")] = 1,
    ray: Annotated[bool, typer.Option("--ray", help="Run on a local Ray instance (--ray-address for a cluster).")] = False,
    ray_address: Annotated[
        str | None,
        typer.Option(metavar="ADDR", help="Run on the Ray cluster at ADDR: auto (the one `ray start` joined here) or ray://HEAD:10001."),
    ] = None,
    format: FormatOption = Format.text,
    html: Annotated[Path | None, typer.Option(metavar="FILE", help="Also write a self-contained HTML report.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the verdict and the regions.")] = False,
    aiter_repo: AiterRepoOption = None,
) -> None:
    """Sweep a space of planner calls on two planners; shrink and write every divergence.

    \b
    mla-golden sweep --a reference@aded0f84 --b reference@e4048607 --out sweep-out
    mla-golden sweep --a reference+AITER_MLA_META_USE_PARALLEL=0 --b reference+AITER_MLA_META_USE_PARALLEL=1
    mla-golden sweep --a reference --b reference:gfx942:80 --space docs/sweep-spaces/gfx942.toml --time 60 --ray-address ray://head:10001
    """
    if cases is not None and time is not None:
        say("error: give one budget: --cases N or --time SECONDS")
        raise typer.Exit(EXIT_BAD)
    from mla_golden.errors import MlaGoldenError
    from mla_golden.files import atomic_write
    from mla_golden.sweeper import sweep as run_sweep
    from mla_golden.sweeper.render import render_html, render_text
    from mla_golden.workers import cap_jobs

    jobs, note = cap_jobs(jobs)  # as record and diff do: the workers would only share the CPUs
    on_ray = ray_address or ("local" if ray else None)
    if note and on_ray is None:
        say(f"note: {note}", quiet)

    try:
        with _progress(quiet) as progress:
            findings = run_sweep(
                a, b, space, cases=cases, seconds=time, seed=seed, out=out, jobs=jobs,
                ray=on_ray, progress=progress, aiter_repo=aiter_repo,
            )  # fmt: skip
    except MlaGoldenError as exc:  # bad specs, space, journal, an executor that cannot start
        say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    code = findings.exit_code
    if format is Format.json:
        echo_json(findings.to_dict())
    else:
        stdout().print(render_text(findings, quiet=quiet), markup=False)
    if html is not None:
        atomic_write(html, render_html(findings))
        say(f"HTML report: {html}", quiet)
    if format is not Format.json:  # last, as record, diff and check end theirs
        stdout().print(exit_line(code, "sweep"), markup=False)
    raise typer.Exit(code)


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[int, int | None, int], None]]:
    """A progress bar on stderr (a terminal only) that the sweep advances as chunks come back."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = stderr()
    bar = Progress(
        TextColumn("sweeping"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[diverged]} diverged"),
        TimeElapsedColumn(), console=console, transient=True, disable=quiet or not console.is_terminal,
    )  # fmt: skip
    with bar:
        task = bar.add_task("sweep", total=None, diverged=0)

        def advance(done: int, total: int | None, diverged: int) -> None:
            bar.update(task, completed=done, total=total, diverged=diverged)

        yield advance
