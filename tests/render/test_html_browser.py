"""The HTML reports as a reader sees them: loaded in headless Chromium, layout measured from the rendered page.

Needs a browser (``make test`` installs Debian's ``chromium`` where it is
missing). Without one these tests fail under CI=true and skip elsewhere with
the reason; screenshots are kept in ``.artifacts/browser/``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from helpers.browser import ARTIFACTS, Browser, find_browser
from helpers.cli import run
from helpers.repo import ROOT
from helpers.small_tree import rewrite

import mla_golden
from mla_golden.diff_data import Cause
from mla_golden.geometry import works_by_cu
from mla_golden.golden.store import GoldenStore

SCREEN = (1400, 900)
#: A shipped 256-CU decode golden (gfx950) and two neighbours for the tree.
FOLDER = "decode/dsv3-tp/gfx950-cu256"
KEY = f"{FOLDER}/h16-fp8-q1-b128-jitter8192-p1"
OTHERS = [f"{FOLDER}/h{h}-{dtype}-q1-b128-jitter8192-p1" for h, dtype in ((32, "fp8"), (64, "fp8"), (16, "bf16"), (32, "bf16"))]
KV_END = 5  # work_info_set column


def _require_browser() -> str:
    """The browser to use; without one, fail under CI=true and skip (saying why) elsewhere."""
    executable = find_browser()
    if executable is None:
        message = "no headless browser (chromium) found: the HTML layout is NOT tested. Install it: apt-get install chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: CI must have one; make test installs it as root)")
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser(_require_browser()) as b:
        yield b


def _copy_tree(dest: Path, keys: list[str]) -> Path:
    for key in keys:
        target = dest / f"{key}.safetensors"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "goldens" / f"{key}.safetensors", target)
    return dest


def _box(b: Browser, selector: str) -> dict[str, Any]:
    """The bounding box of the first element matching ``selector`` (page coordinates, at scroll 0)."""
    box = b.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                     "return e && JSON.parse(JSON.stringify(e.getBoundingClientRect())); })()")  # fmt: skip
    assert box is not None, f"nothing matches {selector}"
    return cast(dict[str, Any], box)


def _boxes(b: Browser, selector: str) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], b.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => "
                      "Object.assign(JSON.parse(JSON.stringify(e.getBoundingClientRect())), "
                      "{work: e.getAttribute('data-work'), cu: e.getAttribute('data-cu'), text: e.textContent}))"))  # fmt: skip


def _visible(box: dict[str, Any], width: int = SCREEN[0]) -> bool:
    """Whether ``box`` lies whole in the first screen of a window ``width`` wide."""
    return bool(box["width"] > 0 and box["height"] > 0 and box["left"] >= 0 and box["top"] >= 0 and \
        box["right"] <= width and box["bottom"] <= SCREEN[1])  # fmt: skip


def _open(b: Browser, page: Path, shot: str) -> None:
    b.open(page.as_uri(), *SCREEN)
    assert b.evaluate("[window.scrollY, innerWidth, innerHeight]") == [0, *SCREEN]
    b.screenshot(ARTIFACTS / f"{shot}.png")


@pytest.fixture
def flipped(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """Trees A (expected) and B (actual): one kv_end in CU part 127 of a 256-CU golden made longer; returns (A, B, work, cu)."""
    expected = _copy_tree(tmp_path / "A", [KEY, *OTHERS])
    actual = _copy_tree(tmp_path / "B", [KEY, *OTHERS])
    call = GoldenStore(expected).read(KEY).call
    per_cu = works_by_cu(call)
    assert len(per_cu) == 256
    work = per_cu[127][0].index

    def longer(c: Any) -> None:
        c.outputs["work_info_set"][work, KV_END] += 400

    rewrite(actual, KEY, longer)
    return expected, actual, work, 127


def test_one_element_change_is_answered_in_the_first_screen(browser: Browser, flipped: tuple[Path, Path, int, int], tmp_path: Path) -> None:
    expected, actual, work, cu = flipped
    page = tmp_path / "report.html"
    assert run("diff", actual, "--against", expected, "--html", page).code == 1
    _open(browser, page, "diff-one-element")

    summary, verdict = _box(browser, ".summary"), _box(browser, "section.call .verdict")
    left, right = _box(browser, ".where figure[data-side=expected]"), _box(browser, ".where figure[data-side=actual]")
    # the answer first: summary, then the verdict in words, then the pictures
    assert summary["bottom"] <= verdict["top"] and verdict["bottom"] <= min(left["top"], right["top"])
    assert "kv_end" in browser.evaluate("document.querySelector('section.call .verdict').innerText")
    # expected beside actual, both whole at 1400 px
    assert abs(left["top"] - right["top"]) < 1 and left["right"] <= right["left"] and right["right"] <= SCREEN[0]
    # the divergent work: outlined on both sides, in the first screen, labelled with what changed
    marked = _boxes(browser, ".where rect.work.marked")
    assert {(m["work"], m["cu"]) for m in marked} == {(str(work), str(cu))} and len(marked) == 2
    assert all(_visible(m) for m in marked)
    labels = _boxes(browser, ".where text.mark-label")
    assert len(labels) == 2 and all(_visible(label) for label in labels)
    assert all(f"work {work}" in label["text"] and "kv_end" in label["text"] for label in labels)
    # a row per CU part with its index: the divergent part and its neighbours
    rows = {int(t["text"]) for t in _boxes(browser, ".where figure[data-side=expected] text.cu")}
    assert rows == set(range(cu - 2, cu + 3))
    # one scale: the longer kv range is drawn longer by the same kv-per-pixel as the rest
    by_side = {m["work"] + side: m["width"] for side in ("expected", "actual")
               for m in _boxes(browser, f".where rect.work[data-side={side}][data-cu='{cu + 1}']")}  # fmt: skip
    assert by_side and all(by_side[k] == by_side[k.replace("expected", "actual")] for k in by_side if "expected" in k)
    e_work, a_work = (m for m in marked if m["left"] < right["left"]), (m for m in marked if m["left"] >= right["left"])
    assert next(a_work)["width"] > next(e_work)["width"]
    # the full schedule is there, folded away
    assert browser.evaluate("document.querySelector('details.full').open") is False
    assert _box(browser, "details.full")["top"] > left["bottom"]


def test_tree_diff_opens_with_divergences_grouped_by_cause(browser: Browser, flipped: tuple[Path, Path, int, int], tmp_path: Path) -> None:
    expected, actual, work, _ = flipped
    h32, h64, bf16, _ = OTHERS

    def params(c: Any) -> None:
        c.params["num_heads_per_head_k"] = 99

    def unwritten(c: Any) -> None:  # geometry: a work no longer written
        c.written["work_info_set"][3] = False
        c.outputs["work_info_set"][3] = 0

    def other_planner(c: Any) -> None:  # same params, another planner, other values
        c.provenance["backend"] = "aiter"
        c.outputs["work_info_set"][0, KV_END] += 1

    rewrite(actual, h32, params)
    rewrite(actual, h64, unwritten)
    rewrite(actual, bf16, other_planner)
    page = tmp_path / "tree.html"
    assert run("diff", actual, "--against", expected, "--html", page).code == 1
    _open(browser, page, "diff-tree-grouped")

    groups = browser.evaluate("Array.from(document.querySelectorAll('table.groups tr')).slice(1).map(r => "
                              "[r.cells[0].innerText, +r.cells[1].innerText, Array.from(r.querySelectorAll('a')).map(a => a.getAttribute('href'))])")  # fmt: skip
    labels = {label: (count, links) for label, count, links in groups}
    # the two planners by name: the shipped golden's reference version, and aiter (its version unrecorded here)
    behaviour = next(label for label in labels if label.startswith("planner behaviour change "))
    assert re.fullmatch(r"planner behaviour change reference@[0-9a-f]{8} -> aiter.*", behaviour), behaviour
    assert set(labels) == {"params changed: num_heads_per_head_k", behaviour, "geometry", "values only"}
    assert all(count == len(links) == 1 for count, links in labels.values())
    # each link leads to its call's section
    for label, (_, (href,)) in labels.items():
        name = browser.evaluate(f"document.querySelector({json.dumps(href)}).querySelector('h2').innerText")
        wanted = {"params changed: num_heads_per_head_k": h32, behaviour: bf16, "geometry": h64, "values only": KEY}[label]
        assert name == wanted
    # the equal call is a count, folded; it gets no section
    assert browser.evaluate("document.querySelector('details.equal-calls summary').innerText") == "1 equal call(s)"
    assert browser.evaluate("document.querySelector('details.equal-calls').open") is False
    assert browser.evaluate("document.querySelectorAll('section.call').length") == 4
    summary = _box(browser, ".summary")
    assert _visible(summary) and summary["bottom"] <= _box(browser, "section.call")["top"]


def test_show_page_draws_every_cu_part_with_its_index_and_a_title_on_every_work(browser: Browser, tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path / "A", [KEY])
    call = GoldenStore(tree).read(KEY).call
    work = works_by_cu(call)[200][0].index
    page = tmp_path / "show.html"
    assert run("show", tree / f"{KEY}.safetensors", "--work", work, "--html", page).code == 0
    _open(browser, page, "show-work")

    chosen = _boxes(browser, ".where rect.work.marked")
    assert [(m["work"], m["cu"]) for m in chosen] == [(str(work), "200")] and _visible(chosen[0])
    full = "details.full svg"
    assert sorted(int(t["text"]) for t in _boxes(browser, f"{full} text.cu")) == list(range(256))
    rects = browser.evaluate(
        f"Array.from(document.querySelectorAll('{full} rect.work')).map(r => r.querySelector('title') ? r.querySelector('title').textContent : null)"
    )
    written = int(call.written["work_info_set"].all(1).sum())
    assert len(rects) == written and all(t and t.startswith("work ") for t in rects)
    # rows are readable: the index labels of neighbouring CU parts do not overlap
    tops = [t["top"] for t in _boxes(browser, f"{full} text.cu")]
    heights = [t["height"] for t in _boxes(browser, f"{full} text.cu")]
    assert all(b - a >= h * 0.9 for a, b, h in zip(tops, tops[1:], heights))


def test_check_page_shows_the_work_that_breaks_an_invariant_on_the_first_screen(browser: Browser, flipped: tuple[Path, Path, int, int], tmp_path: Path) -> None:
    _, actual, work, cu = flipped  # the longer kv range runs past its batch's end
    page = tmp_path / "check.html"
    assert run("check", actual, "--html", page).code == 1
    _open(browser, page, "check-violation")

    groups = browser.evaluate(
        "Array.from(document.querySelectorAll('table.groups tr')).slice(1).map(r => [r.cells[0].innerText, +r.cells[1].innerText])"
    )
    assert groups == [["work.kv_range", 1]]
    assert browser.evaluate("document.querySelector('details.equal-calls summary').innerText") == f"{len(OTHERS)} passed call(s)"
    verdict, figure = _box(browser, "section.call .verdict"), _box(browser, ".where figure[data-side=golden]")
    assert verdict["bottom"] <= figure["top"]
    marked = _boxes(browser, ".where rect.work.marked")
    assert [(m["work"], m["cu"]) for m in marked] == [(str(work), str(cu))] and _visible(marked[0])
    (label,) = _boxes(browser, ".where text.mark-label")
    assert _visible(label) and f"work {work}" in label["text"] and "work.kv_range" in label["text"]


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_without_a_browser_the_tests_say_so(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: Any) -> None:
    """No browser: a failure under CI=true, a skip naming the reason elsewhere; never a silent pass."""
    monkeypatch.setenv("MLA_GOLDEN_BROWSER", "/nonexistent/chromium")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="no headless browser"):
        _require_browser()


@pytest.mark.slow
def test_sweep_page_answers_in_the_first_screen_with_groups_folded_and_zoomed(browser: Browser, tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import mla_golden
    from mla_golden.sweeper.render import render_html

    findings = mla_golden.sweep("reference", "python:helpers.planted_planners:two_bugs", cases=1000)
    assert len(findings.groups) == 2
    page = tmp_path / "sweep.html"
    page.write_text(render_html(findings), encoding="utf-8")
    tally = ", ".join(f"{n} {status}" for status, n in sorted(findings.counts.items(), key=lambda kv: -kv[1]))
    assert findings.verdict == "diverged"
    for width in WIDTHS:
        _first_screen(browser, page, width, "sweep-groups")
        # the answer and the causes in the first screen, what was compared named, the verdict in the title
        for selector in (".verdict", "table.groups", ".compared"):
            assert _visible(_box(browser, selector), width), (selector, width)
        assert "python:helpers.planted_planners:two_bugs" in browser.evaluate("document.querySelector('.compared').innerText")
        assert browser.evaluate("document.title") == f"mla-golden sweep: diverged ({tally})"
        # nothing wider than the screen; every link lands on what it names, in view
        assert browser.evaluate("document.documentElement.scrollWidth") <= width
        assert _links_that_miss(browser, SCREEN[1]) == [], width
    browser.open(page.as_uri(), *SCREEN)
    # every in-page link resolves, and each group is folded
    hrefs = browser.evaluate("Array.from(document.querySelectorAll('a[href^=\"#\"]')).map(a => a.getAttribute('href'))")
    assert len(hrefs) == 2 and all(browser.evaluate(f"!!document.querySelector({json.dumps(h)})") for h in hrefs)
    assert browser.evaluate("Array.from(document.querySelectorAll('details.group')).map(d => d.open)") == [False, False]
    # following a reproducer's link opens its group and brings the reproducer into the window (no script)
    for n, href in enumerate(hrefs):
        browser.open(page.as_uri(), *SCREEN)
        browser.evaluate(f"document.querySelector('a[href=\"{href}\"]').click()")
        opened = browser.evaluate("Array.from(document.querySelectorAll('details.group')).map(d => d.open)")
        assert opened == [i == n for i in range(len(hrefs))], (href, opened)
        top = browser.evaluate(f"document.querySelector({json.dumps(href)}).getBoundingClientRect().top")
        assert -2 <= top < SCREEN[1] / 2, (href, top)
    browser.open(page.as_uri(), *SCREEN)
    # opened, the decode reproducer (one request) is drawn zoomed: a few CU parts, not the whole 304 / 256
    browser.evaluate("document.querySelectorAll('details.group').forEach(d => d.open = true)")
    assert browser.evaluate("document.documentElement.scrollWidth") <= SCREEN[0]
    rows = browser.evaluate("Array.from(document.querySelectorAll('details.group svg.schedule[data-side=A]')).map("
                            "s => s.querySelectorAll('text.cu').length)")  # fmt: skip
    assert len(rows) == 2 and min(rows) <= 8, rows
    for width in WIDTHS:  # nothing broken in a narrow window either, every fold open
        browser.open(page.as_uri(), width, SCREEN[1])
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _layout_problems(browser, width) == [], width


@pytest.mark.slow
def test_upgrade_preview_of_the_shipped_goldens_stays_small_and_inside_the_screen(browser: Browser, tmp_path: Path) -> None:
    # 120 goldens replayed on the oldest port: 45 divergent calls, most of them drawn.
    page = tmp_path / "preview.html"
    assert run("diff", ROOT / "goldens", "--backend", "reference@33d168a0", "--html", page, "-q").code == 1
    assert page.stat().st_size < 2_000_000, page.stat().st_size
    _open(browser, page, "diff-upgrade-preview")
    compared = browser.evaluate("document.querySelector('.compared').innerText")
    assert "reference@33d168a0" in compared and "devices gfx942:304" in compared and "heads" in compared
    # the planner's changes split by what they changed, as the run's JSON counts them (each result's Cause)
    labels = browser.evaluate("Array.from(document.querySelectorAll('table.groups tr')).slice(1).map(r => [r.cells[0].innerText, +r.cells[1].innerText])")
    planner = {label.rsplit(": ", 1)[1]: n for label, n in labels if label.startswith("planner behaviour change")}
    replayed = run("diff", ROOT / "goldens", "--backend", "reference@33d168a0", "--format", "json")
    kinds = {Cause.PLANNER_ERROR.value: "error", Cause.PLANNER_GEOMETRY.value: "geometry", Cause.PLANNER_VALUES.value: "values only"}
    causes = Counter(kinds[r["diff"]["cause"]] for r in json.loads(replayed.stdout)["results"] if r.get("diff") and r["diff"]["cause"] in kinds)
    assert planner == dict(causes) and sum(causes.values()) > 10, (labels, causes)
    # every in-page link leads somewhere (the verdicts' "pictures" links included)
    hrefs = browser.evaluate("Array.from(document.querySelectorAll('a[href^=\"#\"]')).map(a => a.getAttribute('href'))")
    dead = [h for h in hrefs if not browser.evaluate(f"!!document.querySelector({json.dumps(h)})")]
    assert hrefs and not dead, dead[:5]
    # every diverged call keeps its full schedule or names the command that draws it
    kept = browser.evaluate("Array.from(document.querySelectorAll('section.call')).filter(s => s.querySelector('.headline')).map(s => "
                            "[!!s.querySelector('details.full'), Array.from(s.querySelectorAll('.left-out code.command')).map(c => c.innerText)])")  # fmt: skip
    assert len(kept) == sum(causes.values())
    for full, commands in kept:
        assert full or any(c.startswith("mla-golden diff ") and c.endswith(".html") and "--backend reference@33d168a0" in c for c in commands)
    for width in WIDTHS:
        # the verdict in the title and the first screen, every link landing on what it names, nothing broken
        _first_screen(browser, page, width, "diff-upgrade-preview")
        assert browser.evaluate("document.title") == f"mla-golden diff: {sum(causes.values())} diverged", width
        assert _visible(_box(browser, ".summary table.groups"), width), width
        assert browser.evaluate("document.documentElement.scrollWidth") <= width, "no horizontal overflow"
        assert _layout_problems(browser, width) == [], width
        assert _links_that_miss(browser, SCREEN[1]) == [], width
        browser.open(page.as_uri(), width, SCREEN[1])
        # open everything: still nothing wider than the screen, nothing broken
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _layout_problems(browser, width) == [], width


@pytest.mark.slow
def test_the_v0_1_20_upgrade_preview_answers_first_and_keeps_or_names_every_changed_schedule(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README's "What changes if we bump aiter?": the matrix recorded as v0.1.16.post2 plans it, previewed on v0.1.20
    (CPU ports of both: no aiter clone needed, and the page reads the same with one set)."""
    old = tmp_path / "goldens-0.1.16"
    assert run("record", "--backend", "reference@v0.1.16.post2", "--out", old, "--quiet").code == 0
    page = tmp_path / "preview.html"
    ran = run("diff", old, "--backend", "reference@v0.1.20", "--html", page, "--format", "json")
    summary = json.loads(ran.stdout)["summary"]
    assert ran.code == 1 and summary == {"equal": 111, "resized": 3, "diverged": 6}, summary  # as README shows it
    assert page.stat().st_size < 2_000_000
    left_out: dict[str, list[str]] = {}
    for width in WIDTHS:
        _first_screen(browser, page, width, "upgrade-preview-v0.1.20")
        assert browser.evaluate("document.title") == "mla-golden diff: 6 diverged, 3 resized"
        first = _box(browser, ".summary")
        assert first["bottom"] <= SCREEN[1] and first["bottom"] <= _box(browser, ".legend")["top"], width
        said = browser.evaluate("document.querySelector('.summary p').innerText")
        assert said.startswith("120 call(s): 6 diverged, 3 resized, 111 equal") and "exit 1 (divergence)" in said, said
        # every changed call keeps its full schedule or names the command that draws it alone
        sections = browser.evaluate("Array.from(document.querySelectorAll('section.call')).map(s => [s.getAttribute('data-status'), "
                                    "s.querySelector('h2').innerText, !!s.querySelector('details.full'), "
                                    "Array.from(s.querySelectorAll('.left-out code.command')).map(c => c.innerText)])")  # fmt: skip
        assert [status for status, *_ in sections] == ["diverged"] * 6 + ["resized"] * 3  # the behaviour changes first
        for _, name, full, commands in sections:  # (with an aiter clone set the command also names it: --aiter-repo)
            split = [shlex.split(c) for c in commands]
            assert full or any(w[:5] == ["mla-golden", "diff", f"{old / name}.safetensors", "--backend", "reference@v0.1.20"]
                               and w[-2:] == ["--html", f"{name.rsplit('/', 1)[1]}.html"] for w in split), (name, commands)  # fmt: skip
        assert sections[0][2], "the first diverged call keeps its schedule"
        left_out.update({name: next(w for c in commands if (w := shlex.split(c))[-2] == "--html") for _, name, full, commands in sections if not full})
        # each group counts what it links, and the equal calls are named in their fold
        rows = browser.evaluate("Array.from(document.querySelectorAll('table.groups tr')).slice(1).map(r => "
                                "[+r.cells[1].innerText, r.querySelectorAll('a').length])")  # fmt: skip
        assert rows == [[6, 6], [3, 3]], rows
        assert browser.evaluate("document.querySelectorAll('details.equal-calls li').length") == 111
        assert _layout_problems(browser, width) == [], width
        assert _links_that_miss(browser, SCREEN[1]) == [], width
        browser.open(page.as_uri(), width, SCREEN[1])
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _layout_problems(browser, width) == [], f"{width}, every fold open"
    # the command named where a schedule is left out draws it: that call alone, its full schedule on its page
    assert left_out, "the budget leaves some schedule out (else this test shows nothing)"
    name, words = next(iter(left_out.items()))
    monkeypatch.chdir(tmp_path)
    assert run(*words[1:]).code == 1
    alone = (tmp_path / words[-1]).read_text()
    assert alone.count('<section class="call"') == 1 and '<details class="full">' in alone and "left out:" not in alone, name


def test_the_drawing_cap_is_spent_on_behaviour_changes_before_resize_only_calls() -> None:
    from types import SimpleNamespace

    from mla_golden.cli.diff import drawn
    from mla_golden.diff_data import Cause
    from mla_golden.runs import Status

    def result(name: str, cause: Cause) -> Any:  # a stand-in for a Result: what _drawn reads
        return SimpleNamespace(key=name, status=Status.DIVERGED, diff=SimpleNamespace(cause=cause), calls=("a", "b"))

    results = [result(f"resized{i}", Cause.RESIZED) for i in range(5)] + [result("geometry", Cause.PLANNER_GEOMETRY),
                                                                          result("values", Cause.VALUES)]  # fmt: skip
    assert [r.key for r in drawn(results, 3)] == ["geometry", "values", "resized0"]


WIDTHS = (1400, 800)
#: Each cell's text laid out: its lines, the cell's width, and for a whitespace-free text over several lines the
#: character before each break (a path breaking after '/' or '-' is not broken mid-word).
_CELLS = """Array.from(document.querySelectorAll('td,th')).filter(c => c.getClientRects().length).map(c => {
  const r = document.createRange(); r.selectNodeContents(c);
  const lines = new Set(Array.from(r.getClientRects()).filter(q => q.width > 0).map(q => Math.round(q.top))).size;
  const text = c.innerText.trim(), before = [];
  if (lines > 1 && !/\\s/.test(text)) {
    const walk = document.createTreeWalker(c, NodeFilter.SHOW_TEXT); let top = null, last = '';
    for (let n = walk.nextNode(); n; n = walk.nextNode()) for (let i = 0; i < n.length; i++) {
      const q = document.createRange(); q.setStart(n, i); q.setEnd(n, i + 1); const box = q.getBoundingClientRect();
      if (!box.width) continue;
      if (top !== null && Math.round(box.top) > top) before.push(last);
      top = Math.round(box.top); last = n.data[i]; }
  }
  return [c.closest('table').className, text, lines, c.getBoundingClientRect().width, before]; })"""
#: Where a whitespace-free text may break: after a path's separator or a hyphen.
_BREAKS = set("/-_.,")


def _layout_problems(b: Browser, width: int) -> list[str]:
    """What a reader would call broken at ``width``: the page wider than the window, a table wider than its box,
    a word broken across lines in a cell, or a column squeezed so that a long text stands in a narrow strip."""
    problems = []
    if b.evaluate("document.documentElement.scrollWidth") > width:
        problems.append(f"page {b.evaluate('document.documentElement.scrollWidth')} px wide")
    tables = b.evaluate("Array.from(document.querySelectorAll('table')).filter(t => t.getClientRects().length)"
                        ".filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.className)")  # fmt: skip
    problems += [f"table {t} scrolls sideways" for t in tables]
    for table, text, lines, cell, before in b.evaluate(_CELLS):
        if text and not re.search(r"\s", text) and lines > 1 and not (before and set(before) <= _BREAKS):
            problems.append(f"table {table}: {text!r} broken over {lines} lines")
        if len(text) > 20 and cell < 120:
            problems.append(f"table {table}: {text[:30]!r} squeezed to {cell:.0f} px")
    return problems


def _links_that_miss(b: Browser, height: int) -> list[str]:
    """In-page links whose target is missing, or not visible in the window once followed (inside a closed fold,
    empty)."""
    misses = []
    for href in b.evaluate("Array.from(new Set(Array.from(document.querySelectorAll('a[href^=\"#\"]')).map(a => a.getAttribute('href'))))"):
        box = b.evaluate(f"(() => {{ const t = document.getElementById({json.dumps(href[1:])}); if (!t) return null; "
                         f"location.hash = {json.dumps(href)}; const r = t.getBoundingClientRect(); "
                         "return [r.top, r.height, t.innerText.trim().length]; })()")  # fmt: skip
        if box is None or not (-2 <= box[0] < height and box[1] > 0 and box[2] > 0):  # scrolled to: at the top, give or take a rounding
            misses.append(f"{href}: {box}")
    return misses


def _first_screen(b: Browser, page: Path, width: int, shot: str) -> None:
    b.open(page.as_uri(), width, SCREEN[1])
    b.screenshot(ARTIFACTS / f"{shot}-{width}.png")


def _resized(c: Any) -> None:
    rows, written = c.outputs["work_info_set"], c.written["work_info_set"]
    c.outputs["work_info_set"] = torch.cat([rows, torch.zeros((8, rows.shape[1]), dtype=rows.dtype)])
    c.written["work_info_set"] = torch.cat([written, torch.zeros((8, written.shape[1]), dtype=written.dtype)])
    c.buffers["work_info_set"]["shape"] = list(c.outputs["work_info_set"].shape)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 2-golden tree diff (one diverged, one resized), the check of its actual tree, a dropped-dtype diff and a
    ``show --cu 3``."""
    import importlib
    import sys

    from mla_golden import reference
    from mla_golden.render.html import Entry, render_diff_page

    tmp = tmp_path_factory.mktemp("pages")
    keys = [KEY, OTHERS[0]]
    expected, actual = _copy_tree(tmp / "A", keys), _copy_tree(tmp / "B", keys)

    def values(c: Any) -> None:
        c.outputs["work_info_set"][:40, KV_END] += 3  # 40 works in 26 CU parts: more than are enlarged

    rewrite(actual, KEY, values)
    rewrite(actual, OTHERS[0], _resized)
    out = {name: tmp / f"{name}.html" for name in ("tree", "check", "dtype", "show")}
    assert run("diff", actual, "--against", expected, "--html", out["tree"], "-q").code == 1
    assert run("check", actual, "--html", out["check"], "-q").code == 1
    assert run("show", expected / f"{KEY}.safetensors", "--cu", 3, "--html", out["show"]).code == 0
    sys.path.insert(0, str(ROOT / "tests"))
    with reference.as_aiter(), reference.device("gfx942", 304):
        calls = []
        for dtypes in (True, False):  # DeepSeek-V3 at TP 1; False drops the dtypes, the regression the page shows
            builder = importlib.import_module("helpers.vllm_builder").MlaMetadataBuilder(
                num_heads=128, max_num_reqs=4, pass_dtypes=dtypes, size_with_dtypes=dtypes)
            with mla_golden.spy() as spy:
                builder.build([700, 1900, 100, 3000], [1] * 4)
            calls.append(spy.calls.one("get_mla_metadata_v1"))
    sys.modules.pop("helpers.vllm_builder", None)
    good, bad = calls
    found = mla_golden.diff(good, bad)
    assert found.reduce_groups, "the dropped-dtype call's reduce groups differ"
    out["dtype"].write_text(render_diff_page([Entry("deepseek-v3-tp1-decode", "diverged", "", found, good, bad)], exit_status=1, exit_word="divergence"))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_each_page_says_its_verdict_first_and_nothing_on_it_is_broken(browser: Browser, pages: dict[str, Path], width: int) -> None:
    titles = {"tree": "mla-golden diff: 1 diverged, 1 resized", "check": "mla-golden check: 1 violated",
              "dtype": "mla-golden diff: 1 diverged", "show": f"mla-golden show {KEY}"}  # fmt: skip
    for name, page in pages.items():
        _first_screen(browser, page, width, f"page-{name}")
        assert browser.evaluate("document.title") == titles[name]
        first = _box(browser, ".summary" if name != "show" else ".compared")
        assert first["top"] < _box(browser, ".legend")["top"] and first["bottom"] <= SCREEN[1], name
        if name != "show":
            said = "exit 1 (violation)" if name == "check" else "exit 1 (divergence)"  # as each command's text ends
            assert said in browser.evaluate("document.querySelector('.summary').innerText")
        assert _layout_problems(browser, width) == [], name
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _layout_problems(browser, width) == [], f"{name}, every fold open"
        browser.open(page.as_uri(), width, SCREEN[1])
        assert _links_that_miss(browser, SCREEN[1]) == [], name


def test_a_tree_diff_keeps_its_diverged_schedule_and_heads_the_resized_call_as_resized(browser: Browser, pages: dict[str, Path]) -> None:
    _first_screen(browser, pages["tree"], SCREEN[0], "tree-statuses")
    sections = browser.evaluate("Array.from(document.querySelectorAll('section.call')).map(s => [s.querySelector('h2').innerText, "
                                "s.querySelector('.headline span').innerText, getComputedStyle(s.querySelector('.headline span')).color, "
                                "!!s.querySelector('details.full'), !!s.querySelector('a.jump')])")  # fmt: skip
    (diverged, d_word, d_colour, d_full, d_jump), (resized, r_word, r_colour, _, r_jump) = sections
    assert (diverged, d_word, d_full, d_jump) == (KEY, "DIVERGED", True, True)
    assert (resized, r_word, r_jump) == (OTHERS[0], "RESIZED", False) and r_colour != d_colour
    # the counts colour each status as its section does
    counts = browser.evaluate("Array.from(document.querySelectorAll('.summary p span')).map(s => [s.innerText, getComputedStyle(s).color])")
    assert dict(counts)["1 diverged"] == d_colour and dict(counts)["1 resized"] == r_colour
    # more marked CU parts than are enlarged: promised in the full schedule, which is on the page
    heading = browser.evaluate("document.querySelector('[id$=\"-where\"] h3').innerText")
    assert "more marked CU part(s) in the full schedule below" in heading


def test_status_filters_show_only_the_calls_of_one_status_without_script(browser: Browser, pages: dict[str, Path]) -> None:
    _first_screen(browser, pages["tree"], SCREEN[0], "tree-filters")
    assert browser.evaluate("document.querySelectorAll('script').length") == 0
    shown = "Array.from(document.querySelectorAll('section.call')).filter(s => s.getClientRects().length).map(s => s.querySelector('h2').innerText)"
    links = browser.evaluate("Array.from(document.querySelectorAll('.filters a')).map(a => a.innerText)")
    assert links == ["1 diverged", "1 resized", "all 2"]
    for link, wanted in (("1 resized", [OTHERS[0]]), ("1 diverged", [KEY]), ("all 2", [KEY, OTHERS[0]])):
        browser.evaluate(f"Array.from(document.querySelectorAll('.filters a')).find(a => a.innerText === {json.dumps(link)}).click()")
        assert browser.evaluate(shown) == wanted, link
        assert _visible(_box(browser, ".filters")), link  # the bar stays in view to pick another


def _plant_violations(root: Path, keys: list[str]) -> None:
    """Each golden under ``keys``: the first work from its middle CU part on runs 400 kv past its batch's end."""

    def longer(c: Any) -> None:
        per_cu = works_by_cu(c)
        part = next(p for p in per_cu[len(per_cu) // 2 :] + per_cu if p)
        c.outputs["work_info_set"][part[0].index, KV_END] += 400

    for key in keys:
        rewrite(root, key, longer)


@pytest.mark.slow
def test_a_check_page_with_many_violations_draws_them_first_and_names_the_command_for_the_rest(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    check_cli = importlib.import_module("mla_golden.cli.check")  # the module: mla_golden.cli.check is the command
    keys = sorted(p.relative_to(ROOT / "goldens").with_suffix("").as_posix() for p in (ROOT / "goldens" / "decode" / "dsv3-tp").rglob("*.safetensors"))
    tree = _copy_tree(tmp_path / "tree", keys)
    violated = keys[-12:]  # last in file order: the page must still lead with them
    _plant_violations(tree, violated)
    torn = tree / f"{keys[0]}.safetensors"
    torn.write_bytes(torn.read_bytes()[:1000])  # a bad golden, first in file order
    monkeypatch.setattr(check_cli, "HTML_MAX_PICTURES", 8)  # 12 violated: 8 drawn, 4 named
    page = tmp_path / "check.html"
    assert run("check", tree, "--html", page, "-q").code == 2  # bad input outranks the violations
    assert page.stat().st_size < 2_000_000
    _open(browser, page, "check-many")
    # the violated goldens first, each keeping its schedule or naming the command that draws it alone
    sections = browser.evaluate(
        "Array.from(document.querySelectorAll('section.call')).map(s => [s.getAttribute('data-status'), s.querySelector('h2').innerText, "
        "!!s.querySelector('details.full'), !!s.querySelector('.where svg'), Array.from(s.querySelectorAll('code.command')).map(c => c.innerText), "
        "/left out: |Not drawn: /.test(s.innerText)])"
    )
    assert [status for status, *_ in sections] == ["violated"] * 12 + ["bad"]
    assert sorted(name for _, name, *_ in sections[:12]) == violated and sections[12][1] == str(torn)
    assert not any(s[5] for s in sections[12:])
    drawn = [s for s in sections[:12] if s[3]]
    assert len(drawn) == 8, sections
    for _, name, full, pictures, commands, says_left_out in sections[:12]:
        draws = f"mla-golden check {tree / name}.safetensors --html {name.rsplit('/', 1)[1]}.html"
        assert draws in commands, (name, commands)
        assert says_left_out == (not (full and pictures)), name  # whatever is left out says so
    # every count the summary states is linked: each group row links to as many goldens as it counts
    rows = browser.evaluate("Array.from(document.querySelectorAll('table.groups tr')).slice(1).map(r => "
                            "[r.cells[0].innerText, +r.cells[1].innerText, r.querySelectorAll('a').length])")  # fmt: skip
    assert rows[-1] == ["bad", 1, 1] and all(n == links for _, n, links in rows) and len(rows) > 1, rows
    for width in WIDTHS:
        # the verdict in the title and the first screen, before the legend; every link lands; nothing broken
        _first_screen(browser, page, width, "check-many")
        assert browser.evaluate("document.title") == "mla-golden check: 12 violated, 1 bad", width
        summary = _box(browser, ".summary")
        assert summary["top"] < _box(browser, ".legend")["top"] and _visible(summary, width), width
        assert _layout_problems(browser, width) == [], width
        assert _links_that_miss(browser, SCREEN[1]) == [], width
        browser.open(page.as_uri(), width, SCREEN[1])
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert _layout_problems(browser, width) == [], f"{width}, every fold open"



def test_the_layout_check_tells_a_word_broken_mid_word_from_a_path_broken_after_its_slashes(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "cells.html"
    cell = "<table class='{0}' style='width:{1}px'><tr><td style='white-space:normal;{2}'>{3}</td></tr></table>"
    path = "decode/dsv3-tp/gfx942-cu304/h128-bf16-q1-b1-jitter8192-p1.safetensors"
    page.write_text("".join([cell.format("word", 60, "word-break:break-all", "coverage-coverage"),
                             cell.format("path", 200, "overflow-wrap:break-word", path.replace("/", "/<wbr>"))]))  # fmt: skip
    browser.open(page.as_uri(), *SCREEN)
    lines = {table: n for table, _, n, *_ in browser.evaluate(_CELLS)}
    assert lines["word"] > 1 and lines["path"] > 1  # both broken, the word mid-word, the path after a '/'
    (problem,) = _layout_problems(browser, SCREEN[0])
    assert problem.startswith("table word: 'coverage-coverage' broken over")
