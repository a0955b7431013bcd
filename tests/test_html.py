"""The HTML picture: self-contained, every divergent work present and marked."""

from __future__ import annotations

import copy
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
import torch

import mla_golden
from mla_golden import reference
from mla_golden.html import Entry, render_html


class _Rects(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.works: dict[tuple[str, int], str] = {}
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "rect" and "data-work" in a:
            self.works[(a["data-side"], int(a["data-work"]))] = a["class"]
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http", "//")):
                self.external.append(a[key])


def _decode_call(heads=16, kv=(0, 700, 1900, 2000, 9000)):
    fp8 = torch.float8_e4m3fn
    batch = len(kv) - 1
    with reference.device("gfx950", 256):
        shapes = reference.get_mla_metadata_info_v1(batch, 1, heads, fp8, fp8, False)
        bufs = [torch.empty(s, dtype=d) for s, d in shapes]
        with mla_golden.spy(reference) as spy:
            reference.get_mla_metadata_v1(
                torch.arange(batch + 1, dtype=torch.int32), torch.tensor(kv, dtype=torch.int32),
                torch.ones(batch, dtype=torch.int32), heads, 1, True, bufs[0], bufs[2], bufs[1], bufs[3], bufs[4],
                bufs[5], max_seqlen_qo=1, uni_seqlen_qo=1, dtype_q=fp8, dtype_kv=fp8,
            )  # fmt: skip
    return spy.calls.one()


def test_every_divergent_work_is_drawn_and_marked():
    expected = _decode_call()
    actual = _decode_call(kv=(0, 700, 1900, 2100, 9000))  # batch 2 grew: later splits move
    page = render_html([Entry("decode", mla_golden.diff(expected, actual), expected, actual)])
    parser = _Rects()
    parser.feed(page)
    assert not parser.external and "<script" not in page
    truth = set()
    we, wa = expected.written["work_info_set"], actual.written["work_info_set"]
    for row in range(we.shape[0]):
        if not torch.equal(we[row], wa[row]) or not torch.equal(expected.outputs["work_info_set"][row], actual.outputs["work_info_set"][row]):
            truth.add(row)
    assert truth
    for row in truth:
        for side, call in (("expected", expected), ("actual", actual)):
            if call.written["work_info_set"][row].all():
                assert "divergent" in parser.works[(side, row)], (side, row)
    marked = {row for (side, row), cls in parser.works.items() if "divergent" in cls}
    assert marked == truth
    assert len({row for side, row in parser.works if side == "expected"}) == int(we.all(1).sum())


def test_equal_calls_mark_nothing_and_summary_lists_problems():
    call = _decode_call()
    page = render_html([Entry("same", mla_golden.diff(call, copy.deepcopy(call)), call, call), Entry("broken", problem="x.safetensors: truncated")])
    parser = _Rects()
    parser.feed(page)
    assert parser.works and not any("divergent" in c for c in parser.works.values())
    assert "x.safetensors: truncated" in page and ">equal<" in page


def _browser() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(_browser() is None, reason="no headless browser installed")
def test_headless_browser_renders_the_page(tmp_path):
    expected = _decode_call()
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"][1, 5] += 1
    page = tmp_path / "report.html"
    page.write_text(render_html([Entry("decode", mla_golden.diff(expected, actual), expected, actual)]))
    shot = tmp_path / "shot.png"
    subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
         "--window-size=1400,1000", page.as_uri()],
        check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    assert shot.stat().st_size > 10_000
