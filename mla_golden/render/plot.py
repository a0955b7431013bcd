"""The schedule picture as a PNG (the ``plot`` extra: matplotlib), for places HTML does not go.

Same drawing as :mod:`mla_golden.render.html`: one row per CU part, works to scale by
kv length, coloured by batch, split works with a dark left edge, divergent
works outlined in red.
"""

from __future__ import annotations

import colorsys
import io
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from mla_golden.call import Call
from mla_golden.errors import PlotExtraMissing as PlotExtraMissing  # re-exported: importable from here too
from mla_golden.files import atomic_write
from mla_golden.geometry import batch_colour, works_by_cu
from mla_golden.render.views import diff_marks

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _pyplot() -> ModuleType:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotExtraMissing("PNG output needs matplotlib (mla-golden's plot extra): pip install matplotlib") from exc
    return plt


def _colour(batch: int) -> tuple[float, float, float]:
    hue, saturation, lightness = batch_colour(batch)
    return colorsys.hls_to_rgb(hue / 360, lightness, saturation)


def _draw(ax: Axes, call: Call, title: str, highlight: set[int]) -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("kv length (tokens or pages)", fontsize=8)
    ax.set_ylabel("CU part", fontsize=8)
    if call.error is not None:
        ax.text(0.5, 0.5, f"the planner raised:\n{call.error[:200]}", ha="center", va="center", fontsize=7, wrap=True)
        return
    per_cu = works_by_cu(call)
    for cu, works in enumerate(per_cu):
        x = 0
        for w in works:
            width = max(w.kv_len, 1)
            edge = "red" if w.index in highlight else "none"
            ax.barh(cu, width, left=x, height=0.85, color=_colour(w.batch_idx), edgecolor=edge, linewidth=0.8)
            if w.split:
                ax.barh(cu, min(width, max(width * 0.05, 1)), left=x, height=0.85, color="#333333")
            x += width
    ax.set_ylim(len(per_cu), -1)
    ax.tick_params(labelsize=7)


def save_png(path: Path | str, expected: Call, actual: Call | None = None, title: str = "") -> None:
    """Draw ``expected`` (and ``actual`` beside it, divergent works marked) into a PNG, atomically."""
    plt = _pyplot()
    highlight = set(diff_marks(expected, actual)) if actual is not None else set()
    panels = [("expected", expected)] + ([("actual", actual)] if actual is not None else [])
    rows = max(len(works_by_cu(c)) if c.error is None else 1 for _, c in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), max(3.0, rows * 0.06 + 1.5)), squeeze=False)
    for ax, (side, call) in zip(axes[0], panels):
        _draw(ax, call, f"{title} ({side})" if title else side, highlight)
    fig.tight_layout()
    picture = io.BytesIO()
    try:
        fig.savefig(picture, format="png", dpi=110)
    finally:
        plt.close(fig)
    atomic_write(path, picture.getvalue())
