"""``mla-golden versions``: the aiter planner versions the reference speaks, or which one an aiter tree plans as."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mla_golden.cli.options import Format, FormatOption
from mla_golden.cli.output import echo_json, say, stdout
from mla_golden.runs import EXIT_BAD, EXIT_DIVERGED, EXIT_OK


def versions(
    format: FormatOption = Format.text,
    aiter: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
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
        echo_json({"format": "mla-golden-versions/1", "versions": rows})
        return
    out = stdout()
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
        say(f"error: --aiter {error}")
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
        echo_json(document)
    elif version is not None:
        typer.echo(f"exact: {backend} (the planner sources of {tree} mean the same as aiter {version.commit[:10]}'s)")
    else:
        typer.echo(f"not ported: use --backend {backend} (no ported version has the planner of {tree})")
    return EXIT_OK if version is not None else EXIT_DIVERGED
