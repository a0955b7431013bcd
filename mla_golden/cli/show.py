"""``mla-golden show`` and ``textconv``: one golden, as a report for people (or JSON), or as stable text for git diff."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mla_golden.cli.options import Format, FormatOption, GoldenArgument
from mla_golden.cli.output import echo_json, say, stdout, writing
from mla_golden.cli.running import check_outputs, require_goldens
from mla_golden.runs import EXIT_BAD

if TYPE_CHECKING:
    from rich.table import Table

    from mla_golden.golden.store import Golden

#: Work items (and split reduce groups) ``show`` prints at each end of a longer schedule, unless ``--all``.
SHOW_ENDS = 50


def _show_data(golden: Any, cu: int | None, work: int | None, limit: int | None) -> dict[str, Any]:
    """Everything ``show`` prints, as plain data; work items grouped by CU part (``limit`` at each end)."""
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
        "work_items": 0,
        "reduce_group_count": 0,
    }
    if call.error is None:
        data.update(describe_schedule(call, cu=cu, work=work, limit=limit))
    return data


def _clip(values: list[int], limit: int = 16) -> str:
    return str(values) if len(values) <= limit else f"{values[:limit]} ... ({len(values)} values)"


def show(
    golden: GoldenArgument,
    cu: Annotated[int | None, typer.Option(min=0, metavar="N", help="Only this CU part's work items.")] = None,
    work: Annotated[int | None, typer.Option(min=0, metavar="N", help="Only this work item (and its CU part).")] = None,
    format: FormatOption = Format.text,
    html: Annotated[Path | None, typer.Option(metavar="FILE", help="Also write the schedule as a self-contained HTML picture.")] = None,
    png: Annotated[Path | None, typer.Option(metavar="FILE", help="Also draw the schedule as a PNG (needs the plot extra).")] = None,
    all_items: Annotated[
        bool, typer.Option("--all", help=f"Every work item and reduce group (default: the first and last {SHOW_ENDS} of each).")
    ] = False,
) -> None:
    """Show one golden: header, params, device, provenance, inputs, work items by CU part, reduce groups.

    A schedule of more than 2 x 50 work items (or split reduce groups) shows the first and last 50 and counts the
    rest; --all shows every one.
    """
    check_outputs(("--html", html), ("--png", png))
    require_goldens([golden])
    loaded = _showable(golden)
    _in_range(loaded, cu, work)
    _pictures(loaded, html, png, cu, work)
    data = _show_data(loaded, cu, work, None if all_items else SHOW_ENDS)
    if format is Format.json:
        echo_json(data)
    else:
        _print_text(data, cu, work)


def _in_range(loaded: Golden, cu: int | None, work: int | None) -> None:
    """Exit 2 for a --cu or --work the golden does not have (an empty table read as "nothing there")."""
    from mla_golden.geometry import bounded_indptr

    if cu is None and work is None:
        return
    call = loaded.call
    indptr = bounded_indptr(call, "work_indptr") if call.error is None and call.outputs else []
    parts, works = max(len(indptr) - 1, 0), (indptr[-1] if indptr else 0)
    for option, value, count, what in (("--cu", cu, parts, "CU part"), ("--work", work, works, "work item")):
        if value is not None and value >= count:
            has = f"{count} {what}s (0..{count - 1})" if count else f"no {what}s" + (" (its call raised)" if call.error else "")
            say(f"error: {option} {value}: {loaded.path} has {has}")
            raise typer.Exit(EXIT_BAD)


def _showable(golden: Path) -> Golden:
    """The golden at ``golden``, refused (exit 2) when it does not load or holds an indptr show cannot walk."""
    from mla_golden.errors import GoldenError
    from mla_golden.geometry import INDPTRS, indptr_problem
    from mla_golden.golden.store import load

    try:
        loaded = load(golden)
        for name in INDPTRS if loaded.call.error is None else ():
            problem = indptr_problem(loaded.call, name)
            if problem:  # show walks these ranges: a wild one is refused, `check` names it as a violation
                raise GoldenError(golden, f"cannot show: {problem}")
    except GoldenError as exc:
        say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    return loaded


def _pictures(loaded: Golden, html: Path | None, png: Path | None, cu: int | None, work: int | None) -> None:
    """The --html page and the --png picture, where asked for."""
    if html is not None:
        from mla_golden.files import atomic_write
        from mla_golden.render.html import render_show_page

        with writing(html, "--html"):
            atomic_write(html, render_show_page(loaded.key, loaded.call, cu=cu, work=work, notes=loaded.notes, path=str(loaded.path)))
        say(f"HTML picture: {html}")
    if png is not None:
        from mla_golden.errors import PlotExtraMissing
        from mla_golden.render.plot import save_png

        try:
            with writing(png, "--png"):
                save_png(png, loaded.call, title=loaded.key)
        except PlotExtraMissing as exc:
            say(f"error: {exc}")
            raise typer.Exit(EXIT_BAD) from exc
        say(f"PNG picture: {png}")


def _print_text(data: dict[str, Any], cu: int | None, work: int | None) -> None:
    """The text show: the golden's facts, its inputs and buffers, then its work items and reduce groups."""
    from mla_golden.render.sanitize import inline
    from mla_golden.schema import span

    out = stdout()

    def p(line: str) -> None:
        """One line, whatever the golden's strings in it hold."""
        out.print(inline(line))

    p(f"{data['key']}  ({data['op']}, {data['path']})")
    prov = data["provenance"]
    p(f"recorded by {data['planner']} at {prov.get('created')}, torch {prov.get('torch')}")
    p(f"device: {json.dumps(data['device'])}")
    p(f"env: {json.dumps(data['env'])}")
    p("params: " + ", ".join(f"{k}={v}" for k, v in data["params"].items()))
    for note in [*data["notes"], *prov.get("capture", {}).get("notes", [])]:
        p(f"note: {note}")
    for name, values in data["inputs"].items():
        p(f"input {name}: {_clip(values)}")
    if data["error"] is not None:
        p(f"the planner raised: {data['error']}")
        return
    for name, spec in data["buffers"].items():
        p(f"buffer {name}: {spec['dtype']} {spec['shape']}, {spec['written']} element(s) written")
    out.print(_work_table(data, cu, work))
    omitted = data["work_items"] - sum(len(part["items"]) for part in data["cu_parts"])
    if omitted:
        p(f"... {omitted} of {data['work_items']} work items not shown (the first and last {SHOW_ENDS}): --all shows every one")
    if data["reduce_groups"]:
        p("reduce groups:")
        left_out = data["reduce_group_count"] - len(data["reduce_groups"])
        for i, g in enumerate(data["reduce_groups"]):
            if left_out and i == SHOW_ENDS:
                p(f"  ... ({left_out} of {data['reduce_group_count']} reduce groups not shown: --all shows every one)")
            qo = "(not written)" if g["qo_range"] is None else span(g["qo_range"])
            p(f"  group {g['group']}: qo {qo} <- partials {g['partials']}")


def _work_table(data: dict[str, Any], cu: int | None, work: int | None) -> Table:
    """The work items by CU part, a '...' row where the shown ends meet."""
    from rich.table import Table

    from mla_golden.schema import format_cell, schema_for

    columns = schema_for(data["op"]).work_columns
    table = Table(title="work items by CU part", title_justify="left", show_edge=False)
    for header in ("cu part", "work", *columns):
        table.add_column(header, justify="right")
    shown, omitted = 0, data["work_items"] - sum(len(part["items"]) for part in data["cu_parts"])
    for part in data["cu_parts"]:
        if not part["items"] and (cu is None and work is None):
            continue
        for i, item in enumerate(part["items"]):
            gap = bool(omitted) and shown == SHOW_ENDS
            if gap:
                table.add_row("...", "...", *["..."] * len(columns))
            shown += 1
            cells = [format_cell(c, item["columns"][c]) for c in columns] if item["columns"] else ["(not written)"] + [""] * (len(columns) - 1)
            table.add_row(str(part["cu_part"]) if i == 0 or gap else "", str(item["work"]), *cells)
        if not part["items"]:
            table.add_row(str(part["cu_part"]), "-", "(no work)", *[""] * (len(columns) - 1))
    return table


def textconv(
    golden: GoldenArgument,
    all_lines: Annotated[
        bool, typer.Option("--all", help="Every row (default: a section of more than 10000 lines keeps its first and last 5000).")
    ] = False,
) -> None:
    """Print a golden as stable text, one line per row, for git diff (params, device, written runs, rows).

    A section of more than 10000 lines keeps its first and last 5000 and one line counting the rest with a digest
    of them, so a change there still shows; --all prints every line.

    A file that is no golden (model weights) or a golden that does not load is one line saying so, exit 0:
    git dies on a textconv that fails.

    \b
    echo '*.safetensors diff=mla-golden' >> .gitattributes
    git config diff.mla-golden.textconv "mla-golden textconv"
    """
    import os

    from mla_golden.errors import GoldenError, NotAGoldenError
    from mla_golden.golden.safetensors_file import open_regular
    from mla_golden.golden.store import load
    from mla_golden.render.sanitize import inline, log_lines
    from mla_golden.render.textconv import TEXT_ENDS, golden_text

    require_goldens([golden])
    try:
        os.close(open_regular(golden))  # a file git could not have handed over (a folder, unreadable) is exit 2
    except GoldenError as exc:
        say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    try:
        text = golden_text(load(golden), ends=None if all_lines else TEXT_ENDS)
    except NotAGoldenError as exc:  # not the path: git names its own temp files
        text = f"{inline(exc.problem)}\n"
    except GoldenError as exc:
        say(f"warning: {inline(exc)}")
        text = f"unreadable mla-golden file: {inline(exc.problem)}\n"
    typer.echo(log_lines(text), nl=False)
