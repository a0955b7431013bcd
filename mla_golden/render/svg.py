"""Schedules drawn as inline SVG: a row per CU part, works to scale by kv length, marked works outlined.

Both sides of a comparison are drawn with one scale and aligned rows, so the
same CU part sits at the same height on each. An enlarged picture shows a few
CU parts with the work index inside each work and a label under every marked
work; the full picture shows every CU part with its index. Every work rect
carries ``data-work``, ``data-cu`` and ``data-side`` and a hover title.
"""

from __future__ import annotations

from dataclasses import dataclass

from mla_golden.call import Call
from mla_golden.geometry import Work, batch_colour
from mla_golden.render.sanitize import html_text
from mla_golden.render.views import Marks, schedule
from mla_golden.schema import format_cell

#: Width of one side's picture (two fit side by side in a 1400 px window).
SIDE_WIDTH = 660
#: Labels written under one enlarged row before "+N more".
MAX_LABELS = 4
#: Facts in one label (all of them are in the hover text).
LABEL_FACTS = 2
_CHAR = 6.1  # average glyph width of the 11 px label font, for placing labels
_LABEL_CHARS = int(SIDE_WIDTH / _CHAR) - 2  # longer labels are cut (the hover text has it all)


@dataclass(frozen=True)
class _Style:
    row: int  # height of a row without labels
    bar: int  # height of a work rect
    gutter: int  # room for the CU index on the left
    font: int
    label_line: int  # height of one label line under a row (enlarged only)


_FULL = _Style(row=10, bar=8, gutter=30, font=8, label_line=0)
_ENLARGED = _Style(row=26, bar=20, gutter=52, font=11, label_line=15)
_HEADER = 18
#: Each picture carries its own style, so it reads the same on any page (the sweep's too).
_STYLE = (
    "<style>svg.schedule text{font-family:system-ui,sans-serif}"
    " svg.schedule .head{font-size:11px;fill:#444} svg.schedule .gap{font-size:10px;fill:#777}"
    " svg.schedule .cu{fill:#555} svg.schedule .cu.marked{fill:#d00000;font-weight:bold}"
    " svg.schedule .stripe{fill:#f3f3f3} svg.schedule .split{fill:#333;pointer-events:none}"
    " svg.schedule .outline{fill:none;stroke:#e00000;stroke-width:2;pointer-events:none}"
    " svg.schedule .wi{font-size:10px;fill:#222;pointer-events:none}"
    " svg.schedule .mark-label{font-size:11px;fill:#a00000;paint-order:stroke;stroke:#fff;stroke-width:3px}"
    " svg.schedule .leader{stroke:#e00000;stroke-width:1}</style>"
)
_GAP = 16


def colour(batch: int) -> str:
    """The fill of a batch's works."""
    hue, saturation, lightness = batch_colour(batch)
    return f"hsl({hue:.0f},{saturation:.0%},{lightness:.0%})"


def _extent(works: list[Work]) -> int:
    return sum(max(w.kv_len, 1) for w in works)


@dataclass
class _Band:
    """One horizontal band of the picture: a CU part's row, or a gap standing for parts not shown."""

    cu: int | None
    y: float
    height: float
    hidden: int = 0  # for a gap: how many CU parts it stands for


def _bands(rows: list[int], total: int, labels: dict[int, int], style: _Style, gaps: bool) -> tuple[list[_Band], float]:
    bands: list[_Band] = []
    y = float(_HEADER)
    previous = -1
    for cu in rows:
        if gaps and cu > previous + 1:
            bands.append(_Band(None, y, _GAP, hidden=cu - previous - 1))
            y += _GAP
        lines = min(labels.get(cu, 0), MAX_LABELS + 1)
        height = style.row + lines * style.label_line
        bands.append(_Band(cu, y, height))
        y += height
        previous = cu
    if gaps and rows and rows[-1] < total - 1:
        bands.append(_Band(None, y, _GAP, hidden=total - 1 - rows[-1]))
        y += _GAP
    return bands, y + 4


def _tip(w: Work, op: str, what: list[str] | None) -> str:
    fields = " · ".join(f"{name} {format_cell(name, value)}" for name, value in w.columns(op).items())
    text = f"work {w.index} · CU part {w.cu_part} · {fields}"
    return f"{text} · {', '.join(what)}" if what else text


def _label(w: Work, what: list[str]) -> str:
    """What a marked work's label says: its place and up to LABEL_FACTS facts, cut to the picture's width."""
    facts = ", ".join(what[:LABEL_FACTS]) + (f" +{len(what) - LABEL_FACTS} more" if len(what) > LABEL_FACTS else "")
    text = f"work {w.index} · batch {w.batch_idx} · kv [{w.kv_start}, {w.kv_end}) · {facts}"
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _row(out: list[str], side: str, op: str, band: _Band, works: list[Work], marks: Marks, scale: float, style: _Style) -> None:
    cu = band.cu
    enlarged = style is _ENLARGED
    x0 = float(style.gutter)
    marked = [w for w in works if w.index in marks]
    if cu is not None and cu % 2:
        out.append(f'<rect class="stripe" x="0" y="{band.y}" width="{SIDE_WIDTH}" height="{style.row}"/>')
    cls = "cu marked" if marked else "cu"
    out.append(
        f'<text class="{cls}" x="{style.gutter - 4}" y="{band.y + (style.bar + style.font) / 2 - 1:.1f}" font-size="{style.font}" '
        f'text-anchor="end">{cu}</text>'
    )
    outlines, places = [], {}
    x = x0
    for w in works:
        width = max(max(w.kv_len, 1) * scale, 1.0)
        what = marks.get(w.index)
        klass = "work marked" if what is not None else "work"
        out.append(
            f'<rect class="{klass}" data-work="{w.index}" data-side="{side}" data-cu="{cu}" x="{x:.1f}" y="{band.y}" '
            f'width="{width:.1f}" height="{style.bar}" fill="{colour(w.batch_idx)}">'
            f"<title>{html_text(_tip(w, op, what))}</title></rect>"
        )
        if w.split:
            out.append(f'<rect class="split" x="{x:.1f}" y="{band.y}" width="{min(width, 3.0):.1f}" height="{style.bar}"/>')
        if enlarged and width >= _CHAR * len(str(w.index)) + 4:
            out.append(f'<text class="wi" x="{x + 2:.1f}" y="{band.y + style.bar - 6}">{w.index}</text>')
        if what is not None:
            outlines.append(f'<rect class="outline" x="{x:.1f}" y="{band.y}" width="{width:.1f}" height="{style.bar}"/>')
            places[w.index] = (x, width)
        x += width
    out.extend(outlines)  # on top of the neighbours drawn after them
    if not enlarged:
        return
    for i, w in enumerate(marked[:MAX_LABELS]):
        text = _label(w, marks[w.index])
        x, width = places[w.index]
        lead = x + min(width / 2, 6)
        base = band.y + style.row + i * style.label_line + 9
        out.append(f'<line class="leader" x1="{lead:.1f}" y1="{band.y + style.bar}" x2="{lead:.1f}" y2="{base - 3:.1f}"/>')
        room = len(text) * _CHAR
        lx = lead + 3 if lead + 3 + room <= SIDE_WIDTH else max(SIDE_WIDTH - room, 2.0)
        out.append(f'<text class="mark-label" data-work="{w.index}" x="{lx:.1f}" y="{base:.1f}">{html_text(text)}</text>')
    if len(marked) > MAX_LABELS:
        base = band.y + style.row + MAX_LABELS * style.label_line + 9
        out.append(f'<text class="mark-label" x="{x0}" y="{base:.1f}">+{len(marked) - MAX_LABELS} more marked works</text>')


def draw(sides: dict[str, Call], marks: Marks, rows: list[int] | None = None, *, enlarged: bool = False) -> dict[str, str]:
    """One picture per side (SVG, or a line saying the planner raised), aligned and at one scale.

    ``rows``: the CU parts to draw (None: all); ``marks``: work index -> what to say about it.
    """
    per_cu = {side: schedule(call) for side, call in sides.items()}
    total = max((len(p) for p in per_cu.values()), default=0)
    shown = [r for r in (range(total) if rows is None else rows) if 0 <= r < total]
    style = _ENLARGED if enlarged else _FULL

    def row_works(side: str, cu: int) -> list[Work]:
        return per_cu[side][cu] if cu < len(per_cu[side]) else []

    longest = max((_extent(row_works(s, cu)) for s in sides for cu in shown), default=1) or 1
    scale = (SIDE_WIDTH - style.gutter - 4) / longest
    labels = {cu: max(sum(1 for w in row_works(s, cu) if w.index in marks) for s in sides) for cu in shown} if enlarged else {}
    bands, height = _bands(shown, total, labels, style, gaps=rows is not None)
    pictures = {}
    for side, call in sides.items():
        if call.error is not None:
            pictures[side] = f'<p class="bad">{side}: the planner raised: {html_text(call.error)}</p>'
            continue
        n_marked = sum(1 for cu in range(len(per_cu[side])) for w in per_cu[side][cu] if w.index in marks)
        title = f"{side}: {len(per_cu[side])} CU parts" + (f", {n_marked} marked work(s)" if marks else "")
        title += f" · full width = {longest} kv"
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="schedule" width="{SIDE_WIDTH}" height="{height:.0f}" '
            f'data-side="{side}" data-view="{"enlarged" if enlarged else "full"}">{_STYLE}',
            f'<text class="head" x="0" y="12">{html_text(title)}</text>',
        ]
        for band in bands:
            if band.cu is None:
                out.append(
                    f'<text class="gap" x="{style.gutter}" y="{band.y + 11}">⋯ {band.hidden} CU part(s) not shown ⋯</text>'
                )
                continue
            _row(out, side, call.op, band, row_works(side, band.cu), marks, scale, style)
        out.append("</svg>")
        pictures[side] = "".join(out)
    return pictures
