"""A picture of a schedule: one self-contained HTML file (inline CSS and SVG, no network).

Each CU part is a row of its work items drawn to scale by kv length and
coloured by batch; split works carry a dark left edge; divergent works are outlined
in red, beside the text report. Every work rect carries ``data-work`` (its
work_info_set row) and ``data-side``, so the file can be checked by parsing.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import torch

from mla_golden.call import Call
from mla_golden.differ import Diff
from mla_golden.geometry import batch_colour, works_by_cu
from mla_golden.report import render_text

_WIDTH = 880
_ROW = 7
_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:28px}
.pair{display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap}
.side{flex:0 0 auto} pre{background:#f6f6f6;padding:8px;overflow:auto;max-width:900px;font-size:11px}
table.summary td,table.summary th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
.equal{color:#2a7a2a} .diverged{color:#b00020} .bad{color:#8a5a00}
rect.work.divergent{stroke:#e00000;stroke-width:1.5}
.legend span{display:inline-block;margin-right:12px}
"""


@dataclass
class Entry:
    """One call on the summary page: what was compared and the verdict."""

    name: str
    diff: Diff | None = None
    expected: Call | None = None
    actual: Call | None = None
    problem: str | None = None  # a golden that could not be used


def divergent_rows(expected: Call, actual: Call) -> set[int]:
    """work_info_set rows written or valued differently on the two sides (all of them, not a sample)."""
    if expected.error is not None or actual.error is not None:
        return set()
    ve, va = expected.outputs["work_info_set"], actual.outputs["work_info_set"]
    we, wa = expected.written["work_info_set"], actual.written["work_info_set"]
    rows = max(ve.shape[0], va.shape[0])

    def pad(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t, torch.zeros((rows - t.shape[0], t.shape[1]), dtype=t.dtype)]) if t.shape[0] < rows else t

    ve, va, we, wa = pad(ve), pad(va), pad(we), pad(wa)
    bad = (we != wa) | (we & wa & (ve != va))
    return set(bad.any(dim=1).nonzero().reshape(-1).tolist())


def _colour(batch: int) -> str:
    hue, saturation, lightness = batch_colour(batch)
    return f"hsl({hue:.0f},{saturation:.0%},{lightness:.0%})"


def schedule_svg(call: Call, side: str, highlight: AbstractSet[int] = frozenset()) -> str:
    """The SVG of one call's schedule."""
    if call.error is not None:
        return f'<p class="bad">{side}: the planner raised: {html.escape(call.error)}</p>'
    per_cu = works_by_cu(call)
    longest = max((sum(max(w.kv_len, 1) for w in works) for works in per_cu), default=1) or 1
    scale = (_WIDTH - 60) / longest
    height = len(per_cu) * _ROW + 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" data-side="{side}">']
    parts.append(f'<text x="0" y="10" font-size="10">{side}: {len(per_cu)} CU parts, widest {longest} kv</text>')
    for cu, works in enumerate(per_cu):
        y = 16 + cu * _ROW
        if cu % 16 == 0:
            parts.append(f'<text x="0" y="{y + _ROW - 1}" font-size="7">{cu}</text>')
        x = 40.0
        for w in works:
            width = max(max(w.kv_len, 1) * scale, 1.0)
            cls = "work divergent" if w.index in highlight else "work"
            tip = (
                f"work {w.index} cu {cu}: batch {w.batch_idx} q [{w.qo_start},{w.qo_end}) "
                f"kv [{w.kv_start},{w.kv_end}) offset {w.kv_offset} partial {w.partial_qo_loc}"
            )
            parts.append(
                f'<rect class="{cls}" data-work="{w.index}" data-side="{side}" data-cu="{cu}" x="{x:.1f}" y="{y}" '
                f'width="{width:.1f}" height="{_ROW - 1}" fill="{_colour(w.batch_idx)}"><title>{html.escape(tip)}</title></rect>'
            )
            if w.split:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{min(width, 3.0):.1f}" height="{_ROW - 1}" fill="#333"/>')
            x += width
    parts.append("</svg>")
    return "".join(parts)


def _section(entry: Entry, anchor: str) -> str:
    out = [f'<h2 id="{anchor}">{html.escape(entry.name)}</h2>']
    if entry.problem:
        out.append(f'<p class="bad">{html.escape(entry.problem)}</p>')
        return "".join(out)
    highlight = divergent_rows(entry.expected, entry.actual) if entry.expected and entry.actual else set()
    out.append('<div class="pair">')
    for side, call in (("expected", entry.expected), ("actual", entry.actual)):
        if call is not None:
            out.append(f'<div class="side">{schedule_svg(call, side, highlight)}</div>')
    if entry.diff is not None:
        out.append(f"<pre>{html.escape(render_text(entry.diff))}</pre>")
    out.append("</div>")
    return "".join(out)


def _verdict(entry: Entry) -> tuple[str, str]:
    if entry.problem:
        return "bad", "unusable"
    if entry.diff is None or entry.diff.equal:
        return "equal", "equal"
    return "diverged", f"diverged: {entry.diff.cause_label}"


def render_html(entries: Iterable[Entry], title: str = "mla-golden report") -> str:
    """A summary table of every entry, then each entry's picture and report."""
    entries = list(entries)
    rows, sections = [], []
    for i, entry in enumerate(entries):
        cls, text = _verdict(entry)
        rows.append(f'<tr><td><a href="#e{i}">{html.escape(entry.name)}</a></td><td class="{cls}">{html.escape(text)}</td></tr>')
        sections.append(_section(entry, f"e{i}"))
    legend = (
        '<p class="legend"><span>width = kv length</span><span>colour = batch</span>'
        '<span>dark left edge = split work</span><span style="color:#e00000">red outline = divergent work</span></p>'
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>{legend}"
        f"<table class='summary'><tr><th>call</th><th>verdict</th></tr>{''.join(rows)}</table>"
        f"{''.join(sections)}</body></html>"
    )
