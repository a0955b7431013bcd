"""``mla-golden list``: one row per golden of a folder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from mla_golden.cli.options import DEFAULT_GOLDENS, Format, FormatOption
from mla_golden.cli.output import echo_json, say, stdout
from mla_golden.cli.running import require_goldens
from mla_golden.runs import EXIT_BAD, EXIT_OK

#: Columns the ``list`` table keeps beside its key column.
LIST_TABLE_REST = 70


def list_goldens(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="Golden folder.")] = DEFAULT_GOLDENS,
    format: FormatOption = Format.text,
) -> None:
    """List goldens: one row per golden (op, device, shape/dtype, the planner that recorded it, error)."""
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import GoldenStore, load_placed, shape_label
    from mla_golden.planner_id import planner_label
    from mla_golden.runs import PlacedGolden, misplaced_files

    require_goldens([folder])
    if not folder.is_dir():
        say(f"error: {folder}: not a folder (list takes a golden folder; mla-golden show FILE shows one golden)")
        raise typer.Exit(EXIT_BAD)
    rows: list[dict[str, Any]] = []
    placed: list[PlacedGolden] = []
    for path in GoldenStore(folder).paths():
        under = path.relative_to(folder).as_posix()
        try:
            golden = load_placed(path, under)
        except GoldenError as exc:
            rows.append({"path": str(path), "problem": exc.problem})
            continue
        placed.append(PlacedGolden(str(folder), str(path), golden.key))
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
    outliers = {path: why for (_, path), why in misplaced_files(placed).items()}
    rows = [{"path": r["path"], "problem": outliers[r["path"]]} if r["path"] in outliers else r for r in rows]
    code = EXIT_BAD if any("problem" in r for r in rows) else EXIT_OK
    if format is Format.json:
        echo_json({"format": "mla-golden-list/1", "folder": str(folder), "goldens": rows})
        raise typer.Exit(code)
    from rich.table import Table
    from rich.text import Text

    from mla_golden.render.sanitize import inline

    keys = Counter(r.get("key") for r in rows)
    for r in rows:  # one key held by goldens of two trees (a sweep's a/ and b/ reproducers): named by where each lies
        if "key" in r and keys[r["key"]] > 1:
            r["key"] = Path(r["path"]).relative_to(folder).with_suffix("").as_posix()
    out = stdout()
    table = Table(title=f"{len(rows)} golden(s) in {folder}", title_justify="left")
    longest = max((len(inline(r.get("key", r["path"]))) for r in rows), default=0)
    table.add_column("key", overflow="fold", min_width=max(min(longest, out.width - LIST_TABLE_REST), 1))  # whole keys when there is room
    for header in ("op", "device", "shape/dtype", "planner", "error"):
        table.add_column(header, overflow="fold")
    for r in rows:
        if "problem" in r:
            cells = [r["path"], "(unreadable)", "", "", "", r["problem"]]
        else:
            error = (r["error"][:60] + "...") if r["error"] and len(r["error"]) > 60 else (r["error"] or "")
            cells = [r["key"], r["op"], r["device"], r["shape"], r["planner"], error]
        table.add_row(*(Text(inline(c)) for c in cells))
    out.print(table)
    raise typer.Exit(code)
