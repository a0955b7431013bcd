"""The ``mla-golden`` command line: record, diff, check, show, list and textconv goldens; list planner versions; sweep;
bisect aiter's history and list its planner changes.

A thin typer layer over the library: the runs themselves (workers, tree
pairing, results, the exit policy) are :mod:`mla_golden.runs`; each command's
module parses its options, refuses those that do not apply, and prints. The
options the commands share are declared once, in :mod:`mla_golden.cli.options`.
Nothing heavy (torch) is imported at module level, so ``mla-golden --help`` is
instant.

Exit status everywhere: 0 all equal (or written), 1 some divergence or a
refused write, 2 bad input or usage; a bad golden never stops the others from
being checked.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from mla_golden.allocator import keep_freed_memory
from mla_golden.cli.bisect import bisect, history
from mla_golden.cli.check import check
from mla_golden.cli.diff import diff
from mla_golden.cli.listing import list_goldens
from mla_golden.cli.output import EXIT_PIPE, say
from mla_golden.cli.record import RecordCommand, record
from mla_golden.cli.show import show, textconv
from mla_golden.cli.sweep import sweep
from mla_golden.cli.usage import Command
from mla_golden.cli.versions import versions
from mla_golden.errors import WorkerDied
from mla_golden.runs import EXIT_BAD

app = typer.Typer(
    name="mla-golden",
    help="Record aiter MLA planner calls into safetensors goldens, and diff them field by field.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich's help formatter costs ~100 ms of imports, and --help must be instant.
    rich_markup_mode=None,
)


def _version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"mla-golden {version('mla-golden')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("mla-golden (not installed: no version recorded)")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print mla-golden's version and exit.")
    ] = False,
) -> None:
    """Record aiter MLA planner calls into safetensors goldens, and diff them field by field."""


#: Each command's line in ``mla-golden --help``, whole (click cuts a docstring's first sentence to fit, with "...").
SUMMARIES = {
    "record": "Record goldens from the matrix or from a program's calls.",
    "diff": "Replay goldens on a planner, or compare two golden trees.",
    "check": "Check goldens against what the kernels rely on.",
    "show": "Show one golden: params, inputs, work items by CU part.",
    "list": "List goldens, one row each.",
    "textconv": "Print a golden as stable text for git diff.",
    "versions": "List the aiter planner versions the reference speaks.",
    "sweep": "Sweep planner calls on two planners; shrink each divergence.",
    "bisect": "Find the aiter commit that changed each call's plan.",
    "history": "List the aiter commits that change the planner.",
}
app.command(cls=RecordCommand, short_help=SUMMARIES["record"], context_settings={"allow_interspersed_args": False})(record)
for name, function in (("diff", diff), ("check", check), ("show", show), ("list", list_goldens), ("textconv", textconv),
                       ("versions", versions), ("sweep", sweep), ("bisect", bisect), ("history", history)):  # fmt: skip
    app.command(name, cls=Command, short_help=SUMMARIES[name])(function)


def main() -> None:
    """Entry point (``mla-golden``, ``python -m mla_golden.cli``).

    Output into a pipe its reader closed (``mla-golden versions | head -1``)
    ends with ``EXIT_PIPE``, 141, as other tools do; the reports' consoles do
    that themselves, and here click's own output (help, usage) does too. The
    process is the command's own, so freed memory is kept for reuse
    (:mod:`mla_golden.allocator`).
    """
    keep_freed_memory()
    try:
        app(prog_name="mla-golden")
    except WorkerDied as exc:  # record, diff and check (sweep says it with its other errors)
        say(f"error: {exc}")
        raise SystemExit(EXIT_BAD) from None
    except SystemExit as exc:
        if exc.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__:  # click's mark of a closed pipe
            raise SystemExit(EXIT_PIPE) from None
        raise


__all__ = ["app", "main"]
