"""The HTML picture: self-contained, every divergent work present and marked."""

from __future__ import annotations

import copy
import re
import shlex
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers.calls import decode_call
from helpers.cli import run
from helpers.repo import ROOT

import mla_golden
from mla_golden.checks import CheckResult, Violation
from mla_golden.geometry import works_by_cu
from mla_golden.planner_id import planner_label
from mla_golden.render.html import (
    VERDICT_ROWS,
    CheckEntry,
    Entry,
    cause_group,
    render_check_page,
    render_diff_page,
    render_show_page,
)
from mla_golden.render.html import diff as diff_page
from mla_golden.render.sanitize import html_text
from mla_golden.render.views import diff_marks, focus, schedule
from mla_golden.runs import exit_words


class _Rects(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.works: dict[tuple[str, int], str] = {}
        self.external: list[str] = []

    def handle_starttag(self, tag: Any, attrs: Any) -> None:
        a = dict(attrs)
        if tag == "rect" and "data-work" in a:
            self.works[(a["data-side"], int(a["data-work"]))] = a["class"]
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http", "//")):
                self.external.append(a[key])


def _decode_call(heads: int = 16, kv: tuple[int, ...] = (0, 700, 1900, 2000, 9000)) -> mla_golden.Call:
    """gfx950 decode of requests whose kv_indptr is ``kv``."""
    return decode_call([b - a for a, b in zip(kv, kv[1:])], heads, device=("gfx950", 256))


def _truth(expected: Any, actual: Any) -> set[int]:
    """work_info_set rows that differ in value or written state, row by row (the slow obvious way)."""
    rows = set()
    we, wa = expected.written["work_info_set"], actual.written["work_info_set"]
    for row in range(we.shape[0]):
        if not torch.equal(we[row], wa[row]) or not torch.equal(expected.outputs["work_info_set"][row], actual.outputs["work_info_set"][row]):
            rows.add(row)
    return rows


def test_every_divergent_work_is_drawn_and_marked() -> None:
    expected = _decode_call()
    actual = _decode_call(kv=(0, 700, 1900, 2100, 9000))  # batch 2 grew: later splits move
    page = render_diff_page([Entry("decode", "diverged", "", mla_golden.diff(expected, actual), expected, actual)])
    parser = _Rects()
    parser.feed(page)
    assert not parser.external and "<script" not in page
    truth = _truth(expected, actual)
    assert truth
    for row in truth:
        for side, call in (("expected", expected), ("actual", actual)):
            if call.written["work_info_set"][row].all():
                assert "marked" in parser.works[(side, row)], (side, row)
    marked = {row for (side, row), cls in parser.works.items() if "marked" in cls}
    assert marked == truth
    assert len({row for side, row in parser.works if side == "expected"}) == int(expected.written["work_info_set"].all(1).sum())


def test_marks_say_what_changed_in_each_work() -> None:
    expected = _decode_call()
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"][2, 5] += 7  # kv_end
    actual.outputs["work_info_set"][2, 6] = 3  # kv_offset
    actual.written["work_info_set"][4] = False
    actual.outputs["work_info_set"][4] = 0
    e = expected.outputs["work_info_set"]
    assert diff_marks(expected, actual) == {
        2: [f"kv_end {int(e[2, 5])} -> {int(e[2, 5]) + 7}", f"kv_offset {int(e[2, 6])} -> 3"],
        4: ["only in expected"],
    }
    assert diff_marks(expected, copy.deepcopy(expected)) == {}


def test_a_work_info_set_of_another_shape_marks_nothing_and_still_renders() -> None:
    expected = _decode_call()
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"] = actual.outputs["work_info_set"].reshape(-1)
    actual.written["work_info_set"] = actual.written["work_info_set"].reshape(-1)
    assert diff_marks(expected, actual) == {}
    page = render_diff_page([Entry("flat", "diverged", "", mla_golden.diff(expected, actual), expected, actual)])
    assert "work_info_set" in page and "shape" in page


def test_focus_takes_the_first_marked_parts_with_neighbours_inside_the_schedule() -> None:
    assert focus([100, 0, 255], 256, context=2, limit=6) == ([0, 1, 2, 98, 99, 100, 101, 102, 253, 254, 255], 0)
    assert focus(range(0, 100, 10), 256, context=1, limit=3) == ([0, 1, 9, 10, 11, 19, 20, 21], 7)
    assert focus([-1, 300], 256) == ([], 0)


def test_equal_calls_are_a_count_and_problems_are_listed() -> None:
    page = render_diff_page([Entry("same", "equal"), Entry("broken", "bad", "x.safetensors: truncated")])
    parser = _Rects()
    parser.feed(page)
    assert not parser.works  # an equal call is not drawn
    assert "x.safetensors: truncated" in page and "1 equal call(s)" in page and '<span class="bad">1 bad</span>' in page and "not usable" not in page


def test_a_corrupt_work_indptr_cannot_make_more_works_than_rows() -> None:
    call = _decode_call()
    rows = call.outputs["work_info_set"].shape[0]
    indptr = call.outputs["work_indptr"]
    indptr[1::2] = rows  # every other CU part claims every row
    indptr[2::2] = 0
    per_cu = schedule(call)
    assert sum(len(w) for w in per_cu) <= rows
    page = render_show_page("corrupt", call, cu=3)
    parser = _Rects()
    parser.feed(page)
    assert len(parser.works) <= rows


def test_show_page_marks_the_chosen_work_only() -> None:
    call = _decode_call()
    work = works_by_cu(call)[5][0].index
    parser = _Rects()
    parser.feed(render_show_page("one", call, work=work))
    assert {row for (_, row), cls in parser.works.items() if "marked" in cls} == {work}


def test_check_page_marks_the_works_a_violation_names_and_groups_by_invariant() -> None:
    call = _decode_call()
    work = works_by_cu(call)[3][0].index
    violation = Violation("coverage", f"work {work} (CU part 3)", "kv range overlaps work 0", works=(work,))
    page = render_check_page(
        [
            CheckEntry("broken", "violated", "", call, CheckResult(call.op, violations=[violation])),
            CheckEntry("later", "violated", "not drawn: the page draws the first 50", result=CheckResult(call.op, violations=[violation])),
            CheckEntry("fine", "passed"),
            CheckEntry("torn", "bad", "torn.safetensors: truncated"),
        ]
    )
    parser = _Rects()
    parser.feed(page)
    assert {row for (_, row), cls in parser.works.items() if "marked" in cls} == {work}
    assert '<td class="l violated">coverage</td><td>2</td>' in page and '<td class="l bad">bad</td>' in page
    assert "2 violated" in page and "not drawn: the page draws the first 50" in page
    assert "1 passed call(s)" in page and "coverage: kv range overlaps work 0" in page


def test_a_check_page_draws_in_page_order_within_its_budget_and_names_the_command_for_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.render.html import check as check_page

    call = _decode_call()
    work = works_by_cu(call)[3][0].index

    def entry(name: str, invariant: str) -> CheckEntry:
        found = CheckResult(call.op, violations=[Violation(invariant, f"work {work}", "kv range overlaps work 0", works=(work,))])
        return CheckEntry(name, "violated", "", call, found, command=("mla-golden", "check", f"{name}.safetensors"))

    def entries() -> list[CheckEntry]:  # in file order: the page lists the 'coverage' ones first
        return [CheckEntry("torn", "bad", "torn.safetensors: truncated"), entry("z", "work.kv_range"), entry("a", "coverage"),
                entry("b", "coverage"), CheckEntry("fine", "passed")]  # fmt: skip

    monkeypatch.setattr(check_page, "PAGE_BUDGET", 10**9)
    whole = render_check_page(entries(), most=2)
    assert list(_sections(whole)) == ["a", "b", "z", "torn"]  # violated first, by invariant; the bad one last
    sections = _sections(whole)
    assert all(_full_schedule(sections[name]) for name in "ab") and "Not drawn: the page draws 2 goldens at most" in sections["z"]
    assert "<code class='command'>mla-golden check z.safetensors --html z.html</code>" in sections["z"]
    # room for one full schedule: the first golden keeps it, the second names the command that draws it
    monkeypatch.setattr(check_page, "PAGE_BUDGET", len(whole) - len(_full_schedule(sections["b"])) - 1)
    sections = _sections(render_check_page(entries(), most=2))
    assert _full_schedule(sections["a"]) and not _full_schedule(sections["b"]) and "left-out" not in sections["a"]
    left_out = sections["b"].split("<p class='left-out'>", 1)[1].split("</p>", 1)[0]
    assert left_out.startswith("Full schedule (256 CU parts) left out: ")
    assert "<code class='command'>mla-golden check b.safetensors --html b.html</code>" in left_out


def test_divergent_calls_not_drawn_still_count_under_their_cause() -> None:
    call = _decode_call()
    actual = copy.deepcopy(call)
    actual.outputs["work_info_set"][1, 5] += 1
    drawn = Entry("drawn", "diverged", "", mla_golden.diff(call, actual), call, actual)
    not_drawn = Entry("later", "diverged", "not drawn: the page draws the first 50", group=cause_group(mla_golden.diff(call, actual).to_dict()))
    page = render_diff_page([drawn, not_drawn, Entry("same", "equal")])
    assert '<td class="l diverged">values only</td><td>2</td>' in page
    assert "2 diverged" in page and "not drawn: the page draws the first 50" in page


def test_check_and_show_pages_name_what_they_looked_at() -> None:
    call = _decode_call(heads=32)
    violation = Violation("coverage.kv", "batch 0", "kv [0, 700) is not covered", works=(0,))
    check_page = render_check_page(
        [CheckEntry("broken", "violated", "", call, CheckResult(call.op, violations=[violation])), CheckEntry("fine", "passed")],
        checked="goldens under tree/",
    )
    show_page = render_show_page("one", call)
    arch, cus = call.device["arch"], call.device["cu_num"]
    for page in (check_page, show_page):
        compared = page.split('<p class="compared">', 1)[1].split("</p>", 1)[0]
        assert f"devices {arch}:{cus}" in compared and "heads 32" in compared and "recorded by reference@" in compared, compared
    assert "checked: goldens under tree/" in check_page and "shown: one" in show_page


def _resized(call: Any) -> Any:
    """``call`` with room for 8 more works, nothing more written: a resize-only change."""
    bigger = copy.deepcopy(call)
    rows, written = bigger.outputs["work_info_set"], bigger.written["work_info_set"]
    bigger.outputs["work_info_set"] = torch.cat([rows, torch.zeros((8, rows.shape[1]), dtype=rows.dtype)])
    bigger.written["work_info_set"] = torch.cat([written, torch.zeros((8, written.shape[1]), dtype=written.dtype)])
    return bigger


def _sections(page: str) -> dict[str, str]:
    """Each call's section by its name."""
    return {part.split("<h2>", 1)[1].split("</h2>", 1)[0]: part for part in page.split('<section class="call"')[1:]}


def _full_schedule(section: str) -> str:
    return section.split('<details class="full">', 1)[1].split("</details>", 1)[0] if '<details class="full">' in section else ""


def _dead_links(page: str) -> list[str]:
    ids = set(re.findall(r'id="([^"]+)"', page))
    return [h for h in re.findall(r'href="#([^"]+)"', page) if h not in ids]


def test_the_page_budget_keeps_diverged_schedules_before_resize_only_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    small = _decode_call()
    grown = copy.deepcopy(small)
    grown.outputs["work_info_set"][1, 5] += 1
    big = _decode_call(kv=tuple(range(0, 64 * 3000, 3000)))  # 63 batches: many more works to draw
    bigger = copy.deepcopy(big)
    bigger.outputs["work_info_set"][2, 5] += 1

    def entries() -> list[Entry]:
        resized = _resized(small)
        return [
            Entry("resized", "resized", "", mla_golden.diff(small, resized), small, resized, command=("mla-golden", "diff", "r.safetensors")),
            Entry("first", "diverged", "", mla_golden.diff(small, grown), small, grown, command=("mla-golden", "diff", "f.safetensors")),
            Entry("large", "diverged", "", mla_golden.diff(big, bigger), big, bigger, command=("mla-golden", "diff", "l.safetensors")),
        ]

    monkeypatch.setattr(diff_page, "PAGE_BUDGET", 10**9)
    whole = render_diff_page(entries())
    fulls = {name: len(_full_schedule(section)) for name, section in _sections(whole).items()}
    assert all(fulls.values()) and fulls["large"] > fulls["resized"] + 20_000, fulls  # the halved gap outweighs the page frame
    # room for the first diverged call's schedule and the resize-only one's, not for the large diverged one's
    room = len(whole) - sum(fulls.values()) + fulls["first"] + fulls["resized"] + (fulls["large"] - fulls["resized"]) // 2
    monkeypatch.setattr(diff_page, "PAGE_BUDGET", room)
    page = render_diff_page(entries())
    sections = _sections(page)
    assert _full_schedule(sections["first"]) and not _full_schedule(sections["large"])
    # a resize-only call keeps its schedule only where every diverged call kept its own
    assert not _full_schedule(sections["resized"])
    for name, file in (("large", "l"), ("resized", "r")):
        left_out = sections[name].split("<p class='left-out'>", 1)[1].split("</p>", 1)[0]
        assert left_out.startswith("Full schedule (256 CU parts) left out: ")
        assert f"<code class='command'>mla-golden diff {file}.safetensors --html {name}.html</code>" in left_out
    assert "left-out" not in sections["first"]
    assert not _dead_links(page)


def test_a_resize_only_call_has_no_pictures_link_to_nothing() -> None:
    call = _decode_call()
    resized = _resized(call)
    page = render_diff_page([Entry("resized", "resized", "", mla_golden.diff(call, resized), call, resized)])
    assert ">pictures</a>" not in page and '-where"' not in page and not _dead_links(page)
    assert '<details class="full">' in page  # one drawn call keeps its schedule


def test_more_marked_cu_parts_are_promised_in_the_full_schedule_only_when_it_is_on_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _decode_call(kv=tuple(range(0, 64 * 3000, 3000)))
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"][:, 5] += 1  # every work: many more marked CU parts than are enlarged
    other = copy.deepcopy(expected)
    other.outputs["work_info_set"][0, 5] += 1

    def entries() -> list[Entry]:
        return [Entry("all", "diverged", "", mla_golden.diff(expected, actual), expected, actual, command=("mla-golden", "diff", "a.safetensors")),
                Entry("one", "diverged", "", mla_golden.diff(expected, other), expected, other)]  # fmt: skip

    monkeypatch.setattr(diff_page, "PAGE_BUDGET", 10**9)
    whole = render_diff_page(entries())
    assert "more marked CU part(s) in the full schedule below" in _sections(whole)["all"]
    monkeypatch.setattr(diff_page, "PAGE_BUDGET", len(whole) - sum(len(_full_schedule(s)) for s in _sections(whole).values()))
    section = _sections(render_diff_page(entries()))["all"]
    assert not _full_schedule(section) and "in the full schedule below" not in section
    assert "more marked CU part(s), in the full schedule (left out here: see below)" in section
    assert "<code class='command'>mla-golden diff a.safetensors --html all.html</code>" in section.split("left out: ", 1)[1]


@pytest.mark.slow
def test_each_drawn_call_names_the_command_that_draws_it_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = ROOT / "goldens" / "decode" / "dsv3-mtp-bf16" / "gfx942-cu304"
    files = [folder / f"h128-bf16-q{q}-b8-jitter32768-p1.safetensors" for q in (2, 4)]
    page = tmp_path / "two.html"
    assert run("diff", *files, "--backend", "reference@33d168a0", "--html", page, "-q").code == 1
    commands = re.findall(r"<p class='alone'>This call alone: <code class='command'>(.*?)</code></p>", page.read_text())
    assert [shlex.split(unescape(c))[2] for c in commands] == [str(f) for f in files]
    monkeypatch.chdir(tmp_path)
    words = shlex.split(unescape(commands[1]))
    assert words[:2] == ["mla-golden", "diff"] and run(*words[1:]).code == 1
    alone = (tmp_path / words[-1]).read_text()
    assert len(_sections(alone)) == 1 and _full_schedule(alone) and "left out:" not in alone


def test_every_listed_count_is_on_the_page_or_names_the_command_that_lists_it() -> None:
    expected = _decode_call(kv=tuple(range(0, 64 * 3000, 3000)))
    actual = copy.deepcopy(expected)
    actual.outputs["work_info_set"][:, 5] += 1  # every work's kv_end
    written = int(expected.written["work_info_set"].all(1).sum())
    found = mla_golden.diff(expected, actual, max_items=3)  # what a run with --max-items 3 keeps
    assert found.work_items_differing == written > 3 * VERDICT_ROWS
    command = ("mla-golden", "diff", "a.safetensors", "--backend", "reference")
    alone = render_diff_page([Entry("all", "diverged", "", found, expected, actual, command=command)])
    # one call drawn: every divergent work item decoded, the first few shown and the rest folded
    works = alone.split("<h3>Divergent work items (", 1)[1].split("<h3>", 1)[0]
    assert works.startswith(f"{written} in all") and works.count("<td class=\"l\">expected</td>") == written
    assert f"<details><summary>{written - VERDICT_ROWS} more</summary>" in works and "not on this page" not in alone
    # one of several: the run's first 3 and the command that lists them all
    other = copy.deepcopy(expected)
    other.outputs["work_info_set"][0, 5] += 1
    page = render_diff_page([Entry("all", "diverged", "", found, expected, actual, command=command),
                             Entry("one", "diverged", "", mla_golden.diff(expected, other), expected, other)])  # fmt: skip
    works = _sections(page)["all"].split("<h3>Divergent work items (", 1)[1].split("<h3>", 1)[0]
    assert works.count("<td class=\"l\">expected</td>") == 3
    assert (f"The other {written - 3} are not on this page; <code class='command'>mla-golden diff a.safetensors --backend reference "
            f"--max-items {written}</code> lists all {written} in its text report.") in works  # fmt: skip


def test_each_status_has_its_own_word_and_colour() -> None:
    call = _decode_call()
    grown, resized = copy.deepcopy(call), _resized(call)
    grown.outputs["work_info_set"][1, 5] += 1
    page = render_diff_page([
        Entry("grown", "diverged", "", mla_golden.diff(call, grown), call, grown),
        Entry("roomier", "resized", "", mla_golden.diff(call, resized), call, resized),
        Entry("old", "not-comparable", "the planner cannot express page_size 64"),
        Entry("torn", "bad", "torn.safetensors: truncated"),
        Entry("same", "equal"),
    ])  # fmt: skip
    counts = page.split('<div class="summary"><p>', 1)[1].split("</p>", 1)[0]
    assert re.findall(r'<span class="([a-z-]+)">(\d+ [a-z-]+)</span>', counts) == [
        ("diverged", "1 diverged"), ("resized", "1 resized"), ("equal", "1 equal"), ("not-comparable", "1 not-comparable"), ("bad", "1 bad"),
    ]  # fmt: skip
    sections = _sections(page)
    assert '<span class="resized">RESIZED</span>' in sections["roomier"] and "DIVERGED" not in sections["roomier"]
    assert '<span class="diverged">DIVERGED</span>' in sections["grown"]
    assert '<p class="not-comparable">not-comparable: ' in sections["old"] and '<p class="bad">bad: ' in sections["torn"]
    # the groups table names each in the same word and colour as the counts
    rows = dict(re.findall(r'<td class="l ([a-z-]+)">([^<]+)</td><td>1</td>', page.split('class="groups"', 1)[1]))
    assert rows["not-comparable"] == "not-comparable" and rows["bad"] == "bad" and rows["resized"].startswith("buffer sizes changed")
    assert rows["diverged"] == "values only"
    colours = dict(re.findall(r"\.([a-z-]+)\{color:(#[0-9a-f]{6})", page))
    assert len({colours[s] for s in ("diverged", "resized", "not-comparable", "bad", "equal")}) == 5, colours


def test_a_check_page_where_everything_passed_raises_no_alarm() -> None:
    page = render_check_page([CheckEntry("fine", "passed"), CheckEntry("also", "passed")])
    counts = page.split('<div class="summary"><p>', 1)[1].split("</p>", 1)[0]
    assert '<span class="none">0 violated</span>' in counts and '<span class="equal">2 passed</span>' in counts
    assert 'class="diverged"' not in page and 'class="violated"' not in page


def test_the_verdict_and_exit_status_come_first_and_in_the_title() -> None:
    call = _decode_call()
    grown, resized = copy.deepcopy(call), _resized(call)
    grown.outputs["work_info_set"][1, 5] += 1
    entries = [Entry("grown", "diverged", "", mla_golden.diff(call, grown), call, grown),
               Entry("roomier", "resized", "", mla_golden.diff(call, resized), call, resized), Entry("same", "equal")]  # fmt: skip
    for entry in entries[:2]:
        assert entry.diff is not None
        entry.diff.notes.append("the actual side was replayed")  # a note every drawn call shares
    page = render_diff_page(entries, compared="two trees", exit_status=1, exit_word=exit_words(1, "diff"))
    assert "<title>mla-golden diff: 1 diverged, 1 resized</title>" in page
    summary, legend = page.index('<div class="summary">'), page.index('<p class="legend">')
    assert summary < page.index("exit 1 (divergence)") < legend < page.index("Notes (every call)") < page.index('<section class="call"')
    assert page.index('<p class="compared">') < legend
    # one call: its verdict and exit status before the legend too; nothing wrong: the good count is the verdict
    alone = render_diff_page(entries[:1], exit_status=1, exit_word="divergence")
    assert "<title>mla-golden diff: 1 diverged</title>" in alone and alone.index("exit 1 (divergence)") < alone.index('class="legend"')
    assert "<title>mla-golden diff: 2 equal</title>" in render_diff_page([Entry("a", "equal"), Entry("b", "equal")], exit_status=0)
    checked = render_check_page([CheckEntry("fine", "passed"), CheckEntry("torn", "bad", "truncated")], exit_status=2, exit_word=exit_words(2, "check"))
    assert "<title>mla-golden check: 1 bad</title>" in checked and "exit 2 (bad input)" in checked


def test_reduce_groups_print_their_partials_as_ranges() -> None:
    expected = _decode_call(kv=(0, 700, 1900, 2000, 90000))  # the long request is split many ways
    actual = copy.deepcopy(expected)
    partials = expected.outputs["reduce_partial_map"]
    last = int(expected.outputs["reduce_indptr"][-2])  # the long request's group starts here
    actual.outputs["reduce_partial_map"][last] += 1000
    found = mla_golden.diff(expected, actual)
    (group,) = [g for g in found.reduce_groups if len(g.expected.partials) > 8]
    first, end = group.expected.partials[0], group.expected.partials[-1]
    assert group.expected.partials == list(range(first, end + 1)) and int(partials[last]) == first
    page = render_diff_page([Entry("split", "diverged", "", found, expected, actual)])
    qo = group.expected.qo_range
    assert f"qo [{qo[0]}, {qo[1]}) &lt;- partials [{first}..{end}]" in page
    assert f"partials [{first + 1000}, {first + 1}..{end}]" in page


def test_calls_not_compared_for_one_reason_are_said_once() -> None:
    reason = "the planner signature cannot express page_size 64"
    entries = [Entry(f"paged{i}", "not-comparable", reason) for i in range(12)] + [Entry("other", "not-comparable", "another reason")]
    page = render_diff_page(entries)
    assert page.count(reason) == 1 and "<h2>12 calls not-comparable</h2>" in page and page.count("another reason") == 1
    assert all(f'<li id="e{i}">paged{i}</li>' in page for i in range(12)) and not _dead_links(page)
    assert "<title>mla-golden diff: 13 not-comparable</title>" in page


def test_show_cu_outlines_every_work_of_that_cu_part_and_the_page_carries_what_text_show_prints() -> None:
    call = mla_golden.load(ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx950-cu256" / "h16-fp8-q1-b128-jitter8192-p1.safetensors").call
    per_cu = works_by_cu(call)
    cu = next(i for i, works in enumerate(per_cu) if len(works) > 1)
    page = render_show_page("one", call, cu=cu)
    parser = _Rects()
    parser.feed(page)
    assert {row for (_, row), cls in parser.works.items() if "marked" in cls} == {w.index for w in per_cu[cu]}
    assert "red outline = selected work" in page
    # params, device, env and inputs as text show prints them, and the chosen CU part's work items decoded
    facts = page.split('<table class="call">', 1)[1].split("</table>", 1)[0]
    for key, value in {**call.params, **call.device}.items():
        assert f'<td class="l">{key}</td><td class="l">{html_text(value)}</td>' in facts, key
    for name in call.inputs:
        assert f'<td class="l">input</td><td class="l">{name}</td>' in facts
    prov = call.provenance
    assert f"<td class=\"l\">{planner_label(prov)} at {prov['created']}, torch {prov['torch']}</td>" in facts
    works = page.split('<details class="works" open>', 1)[1].split("</details>", 1)[0]
    assert [int(w) for w in re.findall(r"<tr><td>\d*</td><td>(\d+)</td>", works)] == [w.index for w in per_cu[cu]]
    # the whole schedule: every work item listed, folded
    whole = render_show_page("one", call)
    listed = whole.split('<details class="works">', 1)[1].split("</details>", 1)[0]
    assert len(re.findall(r"<tr><td>\d*</td><td>(\d+)</td>", listed)) == sum(len(w) for w in per_cu)


def test_a_check_page_names_the_command_that_checks_each_golden_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mla_golden.golden.store import Golden, GoldenStore

    key = "decode/dsv3-tp/gfx950-cu256/h16-fp8-q1-b128-jitter8192-p1"
    golden = mla_golden.load(ROOT / "goldens" / f"{key}.safetensors")
    golden.call.outputs["work_info_set"][0, 5] += 400  # past its batch's kv end: a violation
    GoldenStore(tmp_path / "tree").write(Golden(key, golden.call))
    page = tmp_path / "check.html"
    assert run("check", tmp_path / "tree", "--html", page, "-q").code == 1
    (command,) = re.findall(r"<p class='alone'>This golden alone: <code class='command'>(.*?)</code></p>", page.read_text())
    words = shlex.split(unescape(command))
    assert words[:3] == ["mla-golden", "check", str(tmp_path / "tree" / f"{key}.safetensors")] and words[3:] == ["--html", f"{Path(key).name}.html"]
    monkeypatch.chdir(tmp_path)
    assert run(*words[1:]).code == 1 and "<title>mla-golden check: 1 violated</title>" in (tmp_path / words[-1]).read_text()


def test_the_unsound_calls_the_counts_sum_up_are_each_listed_and_linked() -> None:
    def unsound(name: str) -> Entry:
        return Entry(name, "diverged", "not drawn", group="values only",
                     soundness={"both_sound": False, "headline": f"{name}: the new plan breaks coverage"})  # fmt: skip

    page = render_diff_page([unsound("a"), unsound("b"), unsound("c"), Entry("same", "equal")])
    assert "3 unsound: a: a: the new plan breaks coverage (and 2 more)" in page
    listed = page.split('<details class="unsound"><summary>3 unsound call(s)</summary>', 1)[1].split("</details>", 1)[0]
    assert re.findall(r'<li><a href="#(e\d)">(\w)</a>: \w: the new plan breaks coverage</li>', listed) == [("e0", "a"), ("e1", "b"), ("e2", "c")]
    assert not _dead_links(page)


def test_the_show_page_carries_the_notes_on_how_its_golden_was_read(tmp_path: Path) -> None:
    """A mla-golden/1 file: the text show notes its missing digest, and so does the page, beside the file it read."""
    from mla_golden.golden.format import V1_NOTE

    golden = sorted((ROOT / "tests" / "data" / "v1").glob("*.safetensors"))[0]
    page = tmp_path / "show.html"
    shown = run("show", golden, "--html", page)
    assert shown.code == 0 and f"note: {V1_NOTE}" in shown.stdout
    facts = page.read_text().split("<h3>Params, device, env, inputs and buffers</h3>", 1)[1].split("</table>", 1)[0]
    assert f'<td class="l">note</td><td class="l">golden</td><td class="l">{html_text(V1_NOTE)}</td>' in facts
    assert f'<td class="l">golden</td><td class="l">file</td><td class="l">{html_text(golden)}</td>' in facts
