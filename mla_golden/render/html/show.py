"""The show page: one golden decoded, its schedule drawn, what text ``show`` prints beside it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mla_golden.call import Call
from mla_golden.geometry import ReduceGroup, geometry
from mla_golden.render.html.common import _e, _group_text, _page, _pair, _span, _table, _td
from mla_golden.render.html.diff import _call_facts, _recorded_by
from mla_golden.render.svg import draw
from mla_golden.render.views import Marks, focus, parts_of, schedule
from mla_golden.schema import format_cell, schema_for


def _clipped(values: list[Any], limit: int = 16) -> str:
    """An input's values as ``show`` prints them: the first ``limit``, then how many in all."""
    return str(values) if len(values) <= limit else f"{values[:limit]} ... ({len(values)} values)"


def _show_facts(call: Call, notes: Sequence[str], path: str) -> str:
    """What the text ``show`` prints before the schedule: the file, who recorded it, params, device, env, the notes
    on how the golden was read and how it was captured, inputs and buffers, one table."""
    prov = call.provenance
    rows = [[_td("golden", "l"), _td("file", "l"), _td(path, "l")]] if path else []
    rows.append([_td("recorded", "l"), _td("by", "l"), _td(f"{_recorded_by(call)} at {prov.get('created')}, torch {prov.get('torch')}", "l")])
    rows += [[_td(kind, "l"), _td(key, "l"), _td(value, "l")]
             for kind, items in (("param", call.params), ("device", call.device), ("env", call.env)) for key, value in items.items()]  # fmt: skip
    rows += [[_td("note", "l"), _td("golden", "l"), _td(note, "l")] for note in notes]
    rows += [[_td("note", "l"), _td("capture", "l"), _td(note, "l")] for note in prov.get("capture", {}).get("notes", [])]
    rows += [[_td("input", "l"), _td(name, "l"), _td(_clipped(t.reshape(-1).tolist()), "l")] for name, t in call.inputs.items()]
    if call.error is None:
        for name, spec in call.buffers.items():
            written = int(call.written[name].sum()) if call.written and name in call.written else 0
            rows.append([_td("buffer", "l"), _td(name, "l"), _td(f"{spec.get('dtype')} {spec.get('shape')}, {written} element(s) written", "l")])
    return f"<h3>Params, device, env, inputs and buffers</h3>{_table(['', 'name', 'value'], rows, 'call')}"


def _show_works(call: Call, cu: int | None, work: int | None) -> str:
    """The work items by CU part (those of ``cu`` / ``work`` only, when given) and the split reduce groups, as the
    text ``show`` lists them; folded, open when narrowed to a few."""
    from mla_golden.geometry import describe_schedule

    columns = schema_for(call.op).work_columns
    described = describe_schedule(call, cu=cu, work=work)
    rows = []
    for part in described["cu_parts"]:
        for i, item in enumerate(part["items"]):
            cells = [_td(format_cell(c, item["columns"][c])) for c in columns] if item["columns"] else [_td("(not written)", "l")]
            rows.append([_td(part["cu_part"] if i == 0 else ""), _td(item["work"]), *cells])
        if not part["items"] and (cu is not None or work is not None):
            rows.append([_td(part["cu_part"]), _td("-"), _td("(no work)", "l")])
    narrowed = cu is not None or work is not None
    out = (f'<details class="works"{" open" if narrowed else ""}><summary>Work items by CU part ({len(rows)})</summary>'
           f"{_table(['cu part', 'work', *columns], rows, 'works')}</details>")  # fmt: skip
    groups = described["reduce_groups"]
    if groups:
        items = "".join(
            f"<li>group {g['group']}: {_e(_group_text(ReduceGroup(g['qo_range'], g['partials'])))}</li>" for g in groups
        )
        out += f'<details class="reduce"><summary>Reduce groups of split tiles ({len(groups)})</summary><ul>{items}</ul></details>'
    return out


def render_show_page(
    name: str, call: Call, *, cu: int | None = None, work: int | None = None, notes: Sequence[str] = (), path: str = ""
) -> str:
    """One golden: what the text ``show`` prints (its file, the notes on how it was read, params, inputs, work
    items), the chosen CU part or work enlarged and outlined, then every CU part. ``notes``: the loaded golden's
    (``Golden.notes``: an old format's missing digest)."""
    geo = geometry(call)
    shown = "; ".join(_call_facts([call], [f"recorded by {_recorded_by(call)}"]))
    lead = [
        f'<p class="compared">shown: {_e(name)}; {_e(shown)}</p>',
        f"<p><b>{_e(call.op)}</b> on {_e(call.device.get('arch'))} with {_e(call.device.get('cu_num'))} CUs: "
        f"{geo.works} works over {geo.cu_parts} CU parts ({geo.idle_cu_parts} idle), {geo.split_works} split, "
        f"{geo.reduce_groups} reduce group(s), {geo.partial_tiles} partial tile(s)</p>",
    ]
    if call.error is not None:
        lead.append(f'<p class="bad">The planner raised: {_e(call.error)}</p>')
        return _page(f"mla-golden show {name}", lead, [_show_facts(call, notes, path)], "selected work")
    per_cu = schedule(call)
    marks: Marks = {work: ["selected"]} if work is not None else {}
    if cu is not None and cu < len(per_cu):  # --cu N: every work of that CU part is the selection
        marks.update({w.index: [f"CU part {cu}"] for w in per_cu[cu]})
    chosen = parts_of(per_cu, marks) | ({cu} if cu is not None else set())
    body = []
    if chosen:
        rows, _ = focus(chosen, len(per_cu))
        idle = f" (CU part {cu} holds no work)" if cu is not None and cu < len(per_cu) and not per_cu[cu] else ""
        body.append(
            f'<div class="where"><h3>CU part(s) {_span(sorted(chosen))}, enlarged with neighbours{idle}</h3>'
            f"{_pair(draw({'golden': call}, marks, rows, enlarged=True))}</div>"
        )
    works = _show_works(call, cu, work)
    narrowed = cu is not None or work is not None  # the few chosen work items next to their picture
    body += [works] if narrowed else []
    body.append(_show_facts(call, notes, path))
    body.append(
        f'<details class="full" open><summary>Full schedule: {len(per_cu)} CU parts</summary>'
        f"{_pair(draw({'golden': call}, marks))}</details>"
    )
    body += [] if narrowed else [works]
    return _page(f"mla-golden show {name}", lead, body, "selected work")
