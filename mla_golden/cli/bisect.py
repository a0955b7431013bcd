"""``mla-golden bisect`` and ``mla-golden history``: whose change was it, in aiter's own history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mla_golden.cli.options import (
    AiterRepoOption,
    Format,
    FormatOption,
    GoldenPathsArgument,
    JobsOption,
    MaxItemsOption,
    QuietOption,
)
from mla_golden.cli.output import echo_json, say, stdout, writing
from mla_golden.cli.running import check_outputs, require_goldens
from mla_golden.runs import EXIT_BAD

REV_HELP = "A revision of --aiter-repo: a release tag, a commit or a branch."


def bisect(
    paths: GoldenPathsArgument = None,
    good: Annotated[str, typer.Option(help="The aiter whose plans are the good ones. " + REV_HELP, metavar="REV", show_default=False)] = "",
    bad: Annotated[str, typer.Option(help="The aiter that plans some calls otherwise. " + REV_HELP, metavar="REV", show_default=False)] = "",
    aiter_repo: AiterRepoOption = None,
    jobs: JobsOption = 1,
    max_items: MaxItemsOption = 5,
    format: FormatOption = Format.text,
    quiet: QuietOption = False,
    html: Annotated[Path | None, typer.Option(metavar="FILE", help="Also write a self-contained HTML page: each commit, its calls and one call's diff drawn.")] = None,
) -> None:
    """For each call, the first aiter commit between --good and --bad whose planner plans it differently.

    Calls are grouped by that commit: its date, subject and pull request, the
    planner files it touched, one call's diff and whether both plans pass
    check. Only commits that change the planner by meaning are tried; a port
    plans those it can, the rest are built for the CPU (about a minute each,
    cached; --jobs builds at once). Exit 0 no call changes, 1 a changing
    commit found, 2 bad input.

    \b
    mla-golden bisect goldens-0.1.16 --good v0.1.16.post2 --bad v0.1.20 --aiter-repo AITER_REPO
    mla-golden bisect sweep-out/a --good aded0f84 --bad main --html bisect.html
    """
    from mla_golden.cli.options import DEFAULT_GOLDENS
    from mla_golden.errors import MlaGoldenError
    from mla_golden.triage.bisect import bisect as run_bisect
    from mla_golden.triage.render import render_bisection

    for option, value in (("--good", good), ("--bad", bad)):
        if not value:
            say(f"error: {option} REV is required (mla-golden bisect PATH... --good REV --bad REV)")
            raise typer.Exit(EXIT_BAD)
    check_outputs(("--html", html))
    roots = list(paths or [DEFAULT_GOLDENS])
    require_goldens(roots)
    try:
        result = run_bisect(roots, good=good, bad=bad, repo=aiter_repo, jobs=jobs, max_items=max_items, progress=lambda p: say(f"bisect: {p}"))
    except (MlaGoldenError, ValueError) as error:
        say(f"error: {error}")
        raise typer.Exit(EXIT_BAD) from error
    if html is not None:
        from mla_golden.files import atomic_write
        from mla_golden.triage.page import render_bisect_page

        with writing(html, "--html"):
            atomic_write(html, render_bisect_page(result))
        say(f"HTML report: {html}", quiet)
    if format is Format.json:
        echo_json(result.to_dict())
    else:
        stdout().print(render_bisection(result, quiet=quiet), markup=False, end="")
    raise typer.Exit(result.exit_code)


def history(
    rev_range: Annotated[str, typer.Argument(metavar="A..B", help="The range: B's first-parent line after A (tags, commits, branches).")],
    goldens: Annotated[
        list[Path] | None,
        typer.Option(help="Also plan these goldens (files or folders) at each changing commit and the planner before it, "
                     "and say which each commit changes (builds every changing commit a port does not plan).", metavar="PATH"),
    ] = None,  # fmt: skip
    aiter_repo: AiterRepoOption = None,
    jobs: JobsOption = 1,
    format: FormatOption = Format.text,
) -> None:
    """The planner changelog of a range of aiter's history: every commit that changes the planner by meaning.

    Each with its date, subject and pull request, the planner files it
    touched and the ported reference version it equals, if any. Commits that
    do not touch the planner cost nothing; the others a digest of their
    sources. Exit 0, or 2 for bad input.

    \b
    mla-golden history v0.1.16..v0.1.20 --aiter-repo AITER_REPO
    mla-golden history v0.1.19..main --goldens goldens --jobs 2
    """
    from mla_golden.errors import MlaGoldenError
    from mla_golden.triage.changelog import history as run_history
    from mla_golden.triage.render import render_changelog

    if goldens:
        require_goldens(list(goldens), "--goldens ")
    try:
        log = run_history(rev_range, repo=aiter_repo, goldens=list(goldens or []), jobs=jobs, progress=lambda p: say(f"history: {p}"))
    except (MlaGoldenError, ValueError) as error:
        say(f"error: {error}")
        raise typer.Exit(EXIT_BAD) from error
    if format is Format.json:
        echo_json(log.to_dict())
    else:
        stdout().print(render_changelog(log), markup=False, end="")
    raise typer.Exit(EXIT_BAD if log.unreadable else 0)
