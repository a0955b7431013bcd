"""One hostile golden fed to every command and format: nothing its strings hold reaches a sink raw.

A golden's key, planner name, notes and error are anyone's text. Here they hold GitHub workflow commands (on
a line of their own, and the older ``##[...]`` form the runner finds anywhere in a line), newlines and CRs,
ANSI and OSC escapes (a screen clear, an OSC 52 clipboard write, a window title), other control characters,
characters XML forbids, and rich markup. Each run must keep its real exit code, print no line a runner takes for
a workflow command but the tool's own annotations, write no raw escape or control character, and keep the
JSON, JUnit and step summary well formed and true to the strings.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.cli import Ran, run
from helpers.repo import ROOT

from mla_golden.call import Call
from mla_golden.golden.store import Golden, GoldenStore, load

SHIPPED = ROOT / "goldens" / "decode" / "dsv3-tp" / "gfx942-cu304"

#: Everything at once.
HOSTILE = (
    "0.1.20[/]x::add-mask::x\n::stop-commands::tok\r\n  ::error::fake ##[add-mask]y "
    "\x1b[2J\x1b]52;c;aGk=\x07\x1b]0;title\x07\r\x01\x0b\x0c\x7f\x9b[bold]B[/bold] [dev] :smile: \ufffe\u2028end"
)
#: The same, for an error message (which may hold a NUL: a key may not).
HOSTILE_ERROR = HOSTILE + "\x00"
#: How a report shows it: on one line, every escape and control written out, markup and emoji codes as text.
ESCAPED = (
    "0.1.20[/]x::add-mask::x\\n::stop-commands::tok\\r\\n  ::error::fake ##[add-mask]y "
    "\\x1b[2J\\x1b]52;c;aGk=\\x07\\x1b]0;title\\x07\\r\\x01\\x0b\\x0c\\x7f\\x9b[bold]B[/bold] [dev] :smile: \\ufffe\\u2028end"
)
#: How a console shows it: the older workflow command's bracket escaped too.
SHOWN = ESCAPED.replace("##[", "##\\x5b")


def _hostile(call: Call) -> Call:
    hostile = copy.copy(call)
    hostile.provenance = copy.deepcopy(call.provenance)
    hostile.provenance["planner"] = {"backend": "aiter", "version": HOSTILE, "commit": None}
    hostile.provenance["capture"] = {**hostile.provenance.get("capture", {}), "notes": [HOSTILE]}
    return hostile


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(expected, actual): the expected tree holds a hostile golden whose kv_end was moved (so it diverges on
    replay and breaks an invariant), its copy under a second hostile key, and a hostile call that raised; the
    actual tree holds the same keys recorded by another hostile planner."""
    root = tmp_path_factory.mktemp("hostile")
    base = load(sorted(SHIPPED.glob("h16-fp8-*.safetensors"))[0]).call
    moved = _hostile(base)
    moved.outputs = {name: tensor.clone() for name, tensor in base.outputs.items()}
    moved.outputs["work_info_set"][0, 5] += 10_000  # work 0's kv range runs past its batch's end
    raised = _hostile(base)
    raised.outputs, raised.written, raised.error = {}, {}, HOSTILE_ERROR
    expected, actual = GoldenStore(root / "expected"), GoldenStore(root / "actual")
    expected.write(Golden(f"{HOSTILE}/moved", moved))
    expected.write(Golden(f"{HOSTILE}/copy", moved))
    expected.write(Golden(f"{HOSTILE}/raised", raised))
    other = _hostile(base)
    other.provenance["planner"] = {"backend": HOSTILE, "version": HOSTILE, "commit": HOSTILE}
    for key, call in ((f"{HOSTILE}/moved", other), (f"{HOSTILE}/copy", other), (f"{HOSTILE}/raised", raised)):
        actual.write(Golden(key, call))
    return root / "expected", root / "actual"


#: A line a runner reads as a workflow command (after leading blanks), or holding the older form.
_COMMAND = re.compile(r"^[^\S\r\n]*::|##\[", re.MULTILINE)
_LINES = re.compile(r"\r\n|\r|\n")


def _assert_shows_only(text: str) -> None:
    """No escape or control character (but the newline), nothing XML or a terminal cannot show."""
    controls = sorted({hex(ord(c)) for c in text if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0})
    assert controls == [], controls
    assert all(ch not in text for ch in ("\ufffe", "\u2028", "\ud800"))


def _assert_harmless(text: str, *, annotations: int = 0) -> None:
    """A log: no workflow command but ``annotations`` of the tool's own ``::error`` lines and its folds
    (``::group::TITLE``, ``::endgroup::``), and :func:`_assert_shows_only`."""
    commands = [line for line in _LINES.split(text) if _COMMAND.search(line)]
    ours = [line for line in commands if line.startswith("::error file=") or line.startswith("::error title=")]
    folds = [line for line in commands if line.startswith("::group::mla-golden ") or line == "::endgroup::"]
    assert sorted(commands) == sorted(ours + folds) and len(ours) == annotations, commands
    for line in ours:  # properties escaped as GitHub's rules say (no ':' or ',' of a key's in them), one line
        properties, _, message = line[len("::error ") :].partition("::")
        assert all(":" not in value for value in re.findall(r"=([^,]*)", properties)), properties
        assert "%0A" not in message and "%0D" not in message
    for line in folds:  # a title is one line too
        assert "%0A" not in line and "%0D" not in line
    _assert_shows_only(text)


def _ran(*args: object, code: int, annotations: int = 0) -> Ran:
    ran = run(*args)  # a traceback (a MarkupError, say) is re-raised here
    assert ran.code == code, ran.output
    _assert_harmless(ran.stdout, annotations=annotations)
    _assert_harmless(ran.stderr)
    return ran


def _assert_junit(path: Path, count: int, *, by_key: bool = True) -> None:
    suite = ET.parse(path).getroot()  # well formed, whatever the keys hold
    names = [case.get("name") or "" for case in suite.iter("testcase")]
    assert len(set(names)) == count and all(name.isprintable() for name in names), names
    assert all(name.startswith(ESCAPED) for name in names) or not by_key, names


def _assert_summary(path: Path, rows: int) -> None:
    text = path.read_text(encoding="utf-8")
    _assert_shows_only(text)
    problems = text.split("| status | golden | first difference |\n|---|---|---|\n", 1)[1].splitlines()
    assert len(problems) == rows, text
    for line in problems:  # three cells each: no '|' of a key's ends one
        assert len(re.findall(r"(?<!\\)\|", line)) == 4, line


def _assert_html(path: Path) -> None:
    page = path.read_text(encoding="utf-8")
    _assert_shows_only(page)
    assert "0.1.20[/]x::add-mask::x" in page and "\\x1b]52;c;aGk=" in page, "the strings shown, their escapes escaped"


def test_diff_replay_in_every_format(trees: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected, _ = trees
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    text = _ran("diff", expected, "--backend", "reference", code=1)
    assert "exit 1 (divergence)" in text.stdout
    assert f"DIVERGED {SHOWN}/moved" in text.stdout, "the key shown whole, escaped, markup kept as text"
    assert f"aiter {SHOWN}" in text.stdout, "the planner name too"
    github = _ran(
        "diff", expected, "--backend", "reference", "--format", "github", "--junit-xml", tmp_path / "d.xml",
        "--html", tmp_path / "d.html", code=1, annotations=3,
    )  # fmt: skip
    assert "exit 1 (divergence)" in github.stdout
    _assert_junit(tmp_path / "d.xml", 3)
    _assert_summary(summary, 3)
    _assert_html(tmp_path / "d.html")
    as_json = _ran("diff", expected, "--backend", "reference", "--format", "json", code=1)
    document = json.loads(as_json.stdout)
    assert {r["key"] for r in document["results"]} == {f"{HOSTILE}/{name}" for name in ("moved", "copy", "raised")}


def test_diff_of_two_trees_in_every_format(trees: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected, actual = trees
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    _ran("diff", actual, "--against", expected, code=1)
    _ran("diff", actual, "--against", expected, "--format", "github", "--junit-xml", tmp_path / "t.xml",
         "--html", tmp_path / "t.html", code=1, annotations=2)  # fmt: skip
    _assert_junit(tmp_path / "t.xml", 3, by_key=False)  # a tree diff names a pair by its path
    _assert_summary(tmp_path / "summary.md", 2)
    _assert_html(tmp_path / "t.html")
    document = json.loads(_ran("diff", actual, "--against", expected, "--format", "json", code=1).stdout)
    statuses = {r["key"].rsplit("/", 1)[1]: r["status"] for r in document["results"]}
    assert statuses == {"moved": "diverged", "copy": "diverged", "raised": "equal"}
    assert any(HOSTILE in line for r in document["results"] for line in r["notes"]), "JSON keeps the strings exactly"


def test_check_in_every_format(trees: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected, _ = trees
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    text = _ran("check", expected, code=1)
    assert "warning: the same content under 2 keys" in text.stderr, "check's warning names the hostile keys"
    _ran("check", expected, "--format", "github", "--junit-xml", tmp_path / "c.xml", "--html", tmp_path / "c.html",
         code=1, annotations=2)  # fmt: skip
    _assert_junit(tmp_path / "c.xml", 3)
    _assert_summary(tmp_path / "summary.md", 2)
    _assert_html(tmp_path / "c.html")
    document = json.loads(_ran("check", expected, "--format", "json", code=1).stdout)
    assert sorted(r["status"] for r in document["results"]) == ["passed", "violated", "violated"]


def test_show_list_and_textconv(trees: tuple[Path, Path], tmp_path: Path) -> None:
    expected, _ = trees
    files = sorted(GoldenStore(expected).paths())
    for path in files:
        shown = _ran("show", path, code=0)
        assert shown.stdout.startswith(f"{SHOWN}/")
        data = json.loads(_ran("show", path, "--format", "json", code=0).stdout)
        assert data["key"] == load(path).key and data["notes"] == [] and data["provenance"]["capture"]["notes"] == [HOSTILE]
        _ran("show", path, "--html", tmp_path / "s.html", code=0)
        _assert_html(tmp_path / "s.html")
        text = _ran("textconv", path, code=0).stdout
        assert text.startswith(f"golden {SHOWN}/") and f"planner aiter {SHOWN}\n" in text
    listed = _ran("list", expected, code=0)
    assert listed.stdout.count("x::add-mask::x\\n::stop-commands") >= 3
    rows = json.loads(_ran("list", expected, "--format", "json", code=0).stdout)["goldens"]
    assert sorted(r["key"] for r in rows) == sorted(load(p).key for p in files)


def test_a_string_no_caller_escaped_is_escaped_by_the_console(capsys: pytest.CaptureFixture[str]) -> None:
    """The consoles are the last line: an OSC 52 clipboard write or a workflow command said raw shows as text."""
    from mla_golden.cli.output import say, stdout

    say("warning: \x1b]52;c;aGk=\x07 clip\n::add-mask::x ##[add-mask]y")
    stdout().print("[bold]\r:smile:")
    out, err = capsys.readouterr()
    assert err == "warning: \\x1b]52;c;aGk=\\x07 clip\n\\x3a:add-mask::x ##\\x5badd-mask]y\n"
    assert out == "[bold]\\r:smile:\n", "markup and emoji codes are text"


def test_json_and_markdown_keep_the_strings_they_neutralise() -> None:
    from mla_golden.render.sanitize import json_text, markdown, markdown_code

    document = {"key": "##[add-mask]x\x1b", "nested": ["::stop-commands::t"]}
    text = json_text(document)
    assert "##[" not in text and "\x1b" not in text and json.loads(text) == document
    assert markdown_code("a|b``c") == "```a\\|b``c```" and markdown_code("`x") == "`` `x ``"
    assert markdown("[x](http://e) <img> *b*") == "\\[x\\]\\(http\\:\\/\\/e\\) \\<img\\> \\*b\\*"
