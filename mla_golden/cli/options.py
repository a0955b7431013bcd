"""The options and arguments the commands share, declared once (typer ``Annotated`` aliases) so their names, help and limits agree.

Options only one command takes are declared beside that command.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_GOLDENS = Path("goldens")
BACKEND_METAVAR = "SPEC"
BACKEND_HELP = (
    "Planner to {what}. SPEC is auto (aiter when it works, else the reference), aiter, reference (the newest ported "
    "aiter version), reference@VERSION (an aiter commit prefix, release tag or date; see mla-golden versions), "
    "python:MODULE[:ATTR] (a plug-in object with the planner and sizing functions in aiter's signatures), "
    "or aiter's own planner built from a source tree on the CPU: aiter-src:PATH (a checkout, a git archive, an "
    "installed aiter with csrc/) or aiter-src@REV (a revision of --aiter-repo; needs g++)."
)
AITER_REPO_HELP = "Git clone of aiter that aiter-src@REV takes REV from, and reference@COMMIT finds the port of COMMIT's planner by."
AITER_REPO_ENV = "MLA_GOLDEN_AITER_REPO"
REPLAY_HELP = (
    " Plain reference replays each golden on the version that recorded it; reference@NEW replays all of them "
    "on NEW, in the buffers NEW's sizing helper gives (what changes if we bump aiter). Not with --against."
)
RUN_FORMAT_HELP = (
    "text for people, json for machines, github: the text with its reports folded (per cause where a diff gives "
    "one), an annotation per golden not ok (::error, ::warning for a diff's resize; 10 a level, a notice counts the "
    "rest) and a step summary."
)
JUNIT_HELP = "Also write the results as JUnit XML (one testcase per golden) for CI test reports."


class Format(str, enum.Enum):
    text = "text"
    json = "json"


class RunFormat(str, enum.Enum):
    """``diff`` and ``check`` also speak GitHub Actions: the text report, one ``::error`` line per golden not ok."""

    text = "text"
    json = "json"
    github = "github"


FormatOption = Annotated[Format, typer.Option(metavar="text|json", help="text for people, json for machines.")]
RunFormatOption = Annotated[RunFormat, typer.Option(metavar="text|json|github", help=RUN_FORMAT_HELP)]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")]
JobsOption = Annotated[int, typer.Option(min=1, metavar="N", help="Worker processes.")]
MaxItemsOption = Annotated[int, typer.Option(min=1, metavar="N", help="Divergent items shown per diff.")]
RecordBackendOption = Annotated[str, typer.Option(help=BACKEND_HELP.format(what="record from"), metavar=BACKEND_METAVAR)]
ReplayBackendOption = Annotated[
    str | None,
    typer.Option(help=BACKEND_HELP.format(what="replay on (default: auto)") + REPLAY_HELP, metavar=BACKEND_METAVAR, show_default=False),
]
AiterRepoOption = Annotated[Path | None, typer.Option(help=AITER_REPO_HELP, envvar=AITER_REPO_ENV, metavar="DIR")]
JunitOption = Annotated[Path | None, typer.Option("--junit-xml", metavar="FILE", help=JUNIT_HELP)]
GoldenPathsArgument = Annotated[
    list[Path] | None,
    typer.Argument(metavar="PATH", help="Golden files or folders (default: ./goldens).", show_default=False),
]
GoldenArgument = Annotated[Path, typer.Argument(metavar="GOLDEN", help="A golden file.")]
