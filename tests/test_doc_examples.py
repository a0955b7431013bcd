"""Every console example in README.md and docs/*.md runs, and the output a page shows is what the command prints.

Which blocks are examples is in ``tests/helpers/doc_examples.py``. A page's examples run in page order in one work
folder (the shipped ``goldens/`` copied in, ``docs/`` linked, what the page takes as there made first), each
through bash with the package's ``mla-golden`` first on PATH (a plain ``mla-golden`` command in-process),
its exit status checked. An example with
output is compared line by line with stdout and stderr as a terminal shows them (trailing spaces dropped,
the work folder written ``TMP``, a reader's folder in it as the page writes it: :data:`READER_PATHS`); in the
page's output:

- a line that is ``...`` alone (indented or not) stands for any run of lines, none included;
- a duration (``35.7 s``, ``120 ms``) stands for any duration: the page shows one a run printed;
- ``<N>`` stands for a count that differs from run to run (how many distinct minimal calls shrinking found);
- bisect's ``6 cached`` stands for ``6 built`` too: a cold run builds what a warm one finds cached.

An illustrative block (``<!-- illustrative: COMMAND -->``) has only its exit status checked.

A plain ``` block right under a heading is that command's usage synopsis. Any other plain block with no marker
is taken for something other than console output (a file's format, a diagram, lines for a config file) unless
it looks like output or commands:
:data:`OUTPUT_START` at its first line (then it must name its command), or only command lines (then it must
be a ```sh block), so neither kind can stay unchecked by leaving off its fence's word.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.doc_examples import (
    AITER_SETUP,
    FILES,
    MARKER,
    NOT_RUN,
    PAGES,
    READER_PATHS,
    RUNS,
    SETUP,
    Example,
    examples,
    plain_blocks,
    sh_lines,
    substitute,
)
from helpers.repo import ROOT
from typer.testing import CliRunner

from mla_golden.cli import app

AITER = os.environ.get("MLA_GOLDEN_AITER_REPO", "")
NO_AITER = "needs an aiter clone: set MLA_GOLDEN_AITER_REPO to run these examples"
#: How the first line of mla-golden's output begins (a verdict, a summary, a golden key, a report heading).
OUTPUT_START = re.compile(r"^(DIVERGED|EQUAL|INCONCLUSIVE|mla-golden \w+: |sweep/|decode/|prefill/|== |backend: |exit \d)")
#: A line of a block that only lists commands.
COMMAND_LINE = re.compile(r"^(mla-golden|git|echo|pip|python|make|pytest) ")
#: A duration (``35.7 s``, ``120 ms``): read as ``<TIME>`` in the page and the output alike, so a page shows a real one.
TIME = re.compile(r"\b\d+(\.\d+)? ?(ms|s|min)\b")
#: How bisect had a planner built from source (``6 built`` cold, ``6 cached`` warm): read as ``<BUILT>`` alike.
BUILT = re.compile(r"\b\d+ (built|cached)\b")
ELIDED = "..."
COUNT = "<N>"
#: Where a CI host would take a run's report: left out, so that an example writes none into the test's own job.
CI_VARIABLES = ("GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS")


def _pattern(doc_line: str) -> re.Pattern[str]:
    """``doc_line`` as a pattern: itself, but ``<N>`` any number."""
    return re.compile(r"\d+".join(map(re.escape, doc_line.split(COUNT))))


def matches(doc: list[str], real: list[str]) -> bool:
    """Whether ``real`` is ``doc`` line by line, ``...`` lines standing for any run of lines."""
    def plain(line: str) -> str:
        return BUILT.sub("<BUILT>", TIME.sub("<TIME>", line))

    want = [None if line.strip() == ELIDED else _pattern(plain(line.rstrip())) for line in doc]
    got = [plain(line) for line in real]

    @functools.cache
    def at(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        pattern = want[i]
        if pattern is None:  # an elision
            return any(at(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and pattern.fullmatch(got[j]) is not None and at(i + 1, j + 1)

    return at(0, 0)


#: Unset for the examples that need no aiter clone: they print as a reader without one sees them.
WITHOUT_CLONE = ("MLA_GOLDEN_AITER_REPO",)


def _env(with_aiter: bool) -> dict[str, str]:
    """The test's environment, this tree's package first, with no CI step summary to append to (and no aiter
    clone unless ``with_aiter``)."""
    hidden = (*CI_VARIABLES, *(() if with_aiter else WITHOUT_CLONE))
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr interleaved as a terminal shows them
    return env


def _sh(command: str, work: Path, with_aiter: bool = False) -> tuple[int, list[str]]:
    """(exit status, output lines) of ``command`` run in ``work``: by bash, or in-process when it is a plain
    ``mla-golden`` command (the same CLI, without a process start per example; a ``python:`` plug-in runs
    as a process, since finding it puts the work folder on sys.path)."""
    if command.startswith("mla-golden ") and not re.search(r"[|&;<>$`\\]|python:", command):
        with contextlib.chdir(work):
            hidden = (*CI_VARIABLES, *(() if with_aiter else WITHOUT_CLONE))
            result = CliRunner().invoke(app, shlex.split(command)[1:], env=dict.fromkeys(hidden))
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        code, text = result.exit_code, result.output  # stdout and stderr, interleaved
    else:
        done = subprocess.run(
            ["bash", "-c", command], cwd=work, env=_env(with_aiter), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            check=False,
        )  # fmt: skip
        code, text = done.returncode, done.stdout
    for folder, path in READER_PATHS.items():
        text = text.replace(str(work / folder), path)
    lines = [line.rstrip() for line in text.replace(str(work), "TMP").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return code, lines


def _workspace(page: str, work: Path) -> None:
    """``work`` as ``page``'s commands take it: the shipped goldens, docs/, and the page's :data:`SETUP`."""
    shutil.copytree(ROOT / "goldens", work / "goldens")
    (work / "docs").symlink_to(ROOT / "docs")
    for name, text in FILES.get(page, {}).items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    for command in SETUP.get(page, []):
        code, out = _sh(command, work)
        assert code == 0, f"{page} set-up `{command}` exited {code}:\n" + "\n".join(out)


def _all() -> list[Example]:
    return [ex for page in PAGES for ex in examples(page)]


def _pages(aiter: bool) -> list[str]:
    """The pages with an example that runs here (``aiter``: one that needs an aiter clone)."""
    return sorted({ex.page for ex in _all() if ex.command in RUNS and RUNS[ex.command].aiter == aiter})


def _failure(ex: Example, code: int, out: list[str]) -> str | None:
    """What is wrong with ``ex`` run (exit status ``code``, output ``out``), or None."""
    want = RUNS[ex.command].exit
    if code != want:
        return f"{ex.where}: `{ex.command}` exited {code}, the page implies {want}:\n" + "\n".join(out[-30:])
    if ex.output is not None and not ex.illustrative and not matches(ex.output, out):
        doc = ex.output
        # the first page line after which nothing it prints matches any more (past the end: it prints more)
        bad = next((i for i in range(1, len(doc) + 1) if not matches([*doc[:i], ELIDED], out)), len(doc) + 1) - 1
        where = f"its output line {bad + 1}, {doc[bad]!r}, is not printed there" if bad < len(doc) else "it prints more"
        return f"{ex.where}: `{ex.command}` prints other output than the page shows ({where}); it prints:\n" + "\n".join(out)
    return None


def _run_page(page: str, tmp_path: Path, with_aiter: bool) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _workspace(page, work)
    for command in AITER_SETUP if with_aiter else ():
        code, out = _sh(command.format(aiter=AITER), work, with_aiter)
        assert code == 0, f"set-up `{command}` exited {code}:\n" + "\n".join(out)
    failures = []
    for ex in examples(ROOT / page):
        run = RUNS.get(ex.command)
        if run is None or (run.aiter and not with_aiter):
            continue
        code, out = _sh(substitute(ex.command, work, AITER), work, with_aiter)
        failure = _failure(ex, code, out)
        if failure:
            failures.append(failure)
    assert not failures, "\n\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages(aiter=False))
def test_the_examples_of_a_page_run_and_print_what_it_shows(page: str, tmp_path: Path) -> None:
    _run_page(page, tmp_path, with_aiter=False)


@pytest.mark.parametrize("page", _pages(aiter=True))
def test_the_examples_that_need_an_aiter_clone_run_with_one(page: str, tmp_path: Path) -> None:
    if not AITER:
        pytest.skip(NO_AITER)
    _run_page(page, tmp_path, with_aiter=True)


def test_every_example_runs_or_says_why_it_cannot() -> None:
    commands = {ex.command: ex.where for ex in _all()}
    unchecked = [f"{where}: `{cmd}`" for cmd, where in commands.items() if cmd not in RUNS and cmd not in NOT_RUN]
    assert not unchecked, "examples with neither a RUNS nor a NOT_RUN row in tests/helpers/doc_examples.py:\n" + "\n".join(unchecked)
    stale = sorted((set(RUNS) | set(NOT_RUN)) - set(commands))
    assert not stale, f"rows of tests/helpers/doc_examples.py for commands no page shows: {stale}"
    assert not set(RUNS) & set(NOT_RUN), "a command is both run and not run"


def test_a_plain_block_that_shows_output_or_commands_says_which() -> None:
    unmarked = []
    for page in PAGES:
        for line, body, before in plain_blocks(page):
            if MARKER.match(before.strip()) or before.startswith("#"):
                continue  # a named output, or a command's usage synopsis right under its heading
            lines = [cmd for _, cmd in sh_lines(body, line + 1)]
            where = f"{page.relative_to(ROOT)}:{line}"
            if lines and OUTPUT_START.match(lines[0]):
                unmarked.append(f"{where}: output with no `<!-- output of: COMMAND -->` (or illustrative) before it")
            elif lines and all(COMMAND_LINE.match(raw) and "[" not in raw for raw in lines):
                unmarked.append(f"{where}: commands in a plain block: make it a ```sh block")
    assert not unmarked, "\n".join(unmarked)


def test_the_comparison_reads_placeholders_and_elisions() -> None:
    """The matcher itself: ``...`` takes any run of lines, a duration any duration, and nothing else is loose."""
    assert matches(["a", "...", "took 5.2 s (4.3 s in the planners)"], ["a", "x", "y", "took 13.2 s (120 ms in the planners)"])
    assert matches(["a", "  ...", "b"], ["a", "b"])
    assert not matches(["a 12 b"], ["a 13 b"])
    assert not matches(["a", "b"], ["a", "b", "c"])
    assert not matches(["took 5.2 s"], ["took soon"])
    assert not matches(["...", "b"], ["a", "c"])
    assert matches(["109 case(s), <N> calls"], ["109 case(s), 51 calls"])
    assert not matches(["109 case(s), <N> calls"], ["108 case(s), 51 calls"])
    assert not matches(["a (b)"], ["a b"])  # the page's text is no regular expression
