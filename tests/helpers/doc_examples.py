"""The console examples of README.md and docs/*.md, and what the test does with each (every example runs).

An example is a command line a reader may copy, with the output the page shows for it, if any:

- every line of a ```sh block (``\\`` continuations joined, ``# comments`` dropped), no output;
- every ``$ COMMAND`` line of a ```console block, its output the lines after it up to the next ``$``;
- a plain ``` block right after ``<!-- output of: COMMAND -->`` is COMMAND's output;
- a plain ``` block right after ``<!-- illustrative: COMMAND -->`` is trimmed or from another machine:
  COMMAND runs, only its exit status is checked.

Each command, as the page writes it, is in :data:`RUNS` (its exit status, and whether it needs an aiter
clone) or in :data:`NOT_RUN` (why it cannot run here); ``tests/test_doc_examples.py`` fails on one in
neither, so a page cannot gain an unchecked example. Placeholders in a command (:data:`PLACEHOLDERS`)
are substituted before it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from helpers.repo import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: The comment before a plain block that names the command it shows: ``<!-- output of: mla-golden ... -->``.
MARKER = re.compile(r"^<!-- (output of|illustrative): (.+?) -->$")
FENCE = re.compile(r"^```(\S*)\n(.*?)^```$", flags=re.S | re.M)


@dataclass(frozen=True)
class Example:
    """One command of a page, the output the page shows for it (None: none shown) and whether that is exact."""

    page: str  # relative to the repository root
    line: int  # of the command (a console or sh block) or of the block's fence (an output block)
    command: str
    output: list[str] | None = None
    illustrative: bool = False

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Run:
    """How a command that runs here ends: its exit status, and whether it needs an aiter clone."""

    exit: int = 0
    aiter: bool = False


#: Placeholders the pages write in commands (whole words: MLA_GOLDEN_AITER_REPO holds none) -> what the test
#: puts there (``{tmp}``: the page's work folder, ``{aiter}``: $MLA_GOLDEN_AITER_REPO).
PLACEHOLDERS: dict[str, str] = {
    "AITER_REPO": "{aiter}",
    "AITER_TREE": "{tmp}/aiter-tree",
    "GOLDEN": "goldens/decode/dsv3-tp/gfx950-cu256/h32-fp8-q1-b1-jitter8192-p1.safetensors",
    "TMP": "{tmp}",
    "REV": "e4048607",
    "DIR": "sweep-out",
}

#: Folders of a page's work folder that its output writes as the reader's own: a reader's pytest project.
READER_PATHS: dict[str, str] = {"project": "/path/to/project"}

#: What a page's commands take as already there, made in its work folder first (the shipped ``goldens`` and
#: ``docs/`` are copied or linked in for every page).
SETUP: dict[str, list[str]] = {
    "README.md": [
        "git init -q",
        "mla-golden record --backend reference@v0.1.16.post2 --out old-tree --quiet",
        "cp -r old-tree goldens-old",
        "cp -r goldens new-tree",  # the shipped goldens are the default matrix recorded on the reference
        # "In pytest": the goldens written on a known-good build, then the change that drops the planner's dtypes
        "cd project && pytest -q --mla-golden-update",
        "sed -i 's/^NEW_BUILD = False$/NEW_BUILD = True/' project/tests/builder.py",
    ],
    "docs/cli.md": ["git init -q", "mla-golden record --backend reference@v0.1.16.post2 --out goldens-0.1.16 --quiet"],
}

#: What the examples that need an aiter clone take as already there: AITER_TREE, a tree of v0.1.20 (``{aiter}``:
#: the clone).
AITER_SETUP: list[str] = ["mkdir -p aiter-tree", "git -C {aiter} archive v0.1.20 csrc aiter | tar -x -C aiter-tree"]

#: README's "In pytest" test, in a project laid out as README describes (``project/``, which the page's output
#: writes ``/path/to/project``): the README's test, with what it leaves to the reader (the builder, its input)
#: filled in.
_PYTEST_TEST = """\
from mla_golden import reference as aiter

from builder import builder, common_attn_metadata


def test_decode_metadata(mla_golden):
    with mla_golden.spy(aiter) as spy:
        builder.build(common_attn_metadata)
    mla_golden.assert_matches(spy.calls.one("get_mla_metadata_v1"), name="decode")
"""
#: A decode builder that calls the planner as vLLM's does (DeepSeek-V3 at TP 1); ``NEW_BUILD`` drops the dtypes
#: from its sizing and planning calls: the regression the page's failure shows.
_PYTEST_BUILDER = """\
import torch
from mla_golden import reference as aiter

NEW_BUILD = False
BUFFERS = ("work_meta_data", "work_indptr", "work_info_set", "reduce_indptr", "reduce_final_map", "reduce_partial_map")


class Builder:
    def __init__(self, heads=128, max_reqs=4):
        fp8 = None if NEW_BUILD else aiter.dtypes.fp8
        shapes = aiter.get_mla_metadata_info_v1(max_reqs, 1, heads, fp8, fp8, is_sparse=False, fast_mode=True)
        self.buffers = {name: torch.empty(size, dtype=dtype) for name, (size, dtype) in zip(BUFFERS, shapes)}
        self.heads = heads

    def build(self, seq_lens):
        kv_indptr = torch.zeros(len(seq_lens) + 1, dtype=torch.int32)
        kv_indptr[1:] = torch.cumsum(torch.tensor(seq_lens, dtype=torch.int32), 0)
        dtypes = {} if NEW_BUILD else {"dtype_q": aiter.dtypes.fp8, "dtype_kv": aiter.dtypes.fp8}
        b = self.buffers
        aiter.get_mla_metadata_v1(
            torch.arange(len(seq_lens) + 1, dtype=torch.int32), kv_indptr, torch.ones(len(seq_lens), dtype=torch.int32),
            self.heads, 1, True, b["work_meta_data"], b["work_info_set"], b["work_indptr"], b["reduce_indptr"],
            b["reduce_final_map"], b["reduce_partial_map"], page_size=1, kv_granularity=16, max_seqlen_qo=1,
            uni_seqlen_qo=1, fast_mode=True, **dtypes)


builder = Builder()
common_attn_metadata = [700, 1900, 100, 3000]
"""

#: Files a page's commands take as already there (paths in its work folder): README's
#: ``python:my_planners:patched`` is a module in the current folder (here the reference itself, so that sweep
#: finds nothing), and its pytest project.
FILES: dict[str, dict[str, str]] = {
    "README.md": {
        "my_planners.py": "from mla_golden import reference as patched\n",
        "project/pyproject.toml": "[tool.pytest.ini_options]\n",  # the project's root: its goldens/ go there
        "project/tests/test_builder.py": _PYTEST_TEST,
        "project/tests/builder.py": _PYTEST_BUILDER,
    },
    "docs/cli.md": {"my_planners.py": "from mla_golden import reference as patched\n"},
}

#: Every command that runs here, as its page writes it -> how it ends.
RUNS: dict[str, Run] = {
    # README.md: the command tour
    "mla-golden record --backend reference --out goldens": Run(),
    "mla-golden diff goldens --backend auto": Run(),
    "mla-golden diff new-tree --against old-tree --html diff.html": Run(1),
    "mla-golden check goldens": Run(),
    "mla-golden check goldens --format github --junit-xml r.xml": Run(),
    "mla-golden textconv GOLDEN": Run(),
    "mla-golden show GOLDEN --cu 3": Run(),
    "mla-golden versions": Run(),
    "mla-golden versions --aiter AITER_TREE": Run(aiter=True),
    "mla-golden diff goldens --backend reference@e4048607": Run(),
    "mla-golden diff goldens --backend aiter-src@REV --aiter-repo AITER_REPO": Run(aiter=True),
    "mla-golden sweep --a reference@aded0f84 --b reference@e4048607 --out sweep-out": Run(1),
    "mla-golden bisect goldens-old --good v0.1.16.post2 --bad v0.1.20 --aiter-repo AITER_REPO": Run(1, aiter=True),
    "mla-golden history v0.1.16..v0.1.20 --aiter-repo AITER_REPO": Run(aiter=True),
    'git config diff.mla-golden.textconv "mla-golden textconv"': Run(),
    # README.md: in pytest (project/'s test, its builder changed since its golden was written)
    "cd project && pytest": Run(1),
    # README.md: the upgrade preview
    "mla-golden record --backend reference@v0.1.16.post2 --out goldens-0.1.16 --quiet": Run(),
    'mla-golden diff goldens-0.1.16 --backend reference --format json | grep -m1 "replayed on"': Run(),
    "mla-golden diff goldens-0.1.16 --backend reference@v0.1.20 --quiet": Run(1),
    "mla-golden bisect goldens-0.1.16 --good v0.1.16.post2 --bad v0.1.20 --quiet": Run(1, aiter=True),
    # README.md: aiter-src
    "mla-golden diff goldens --backend aiter-src@v0.1.19 --aiter-repo AITER_REPO": Run(aiter=True),
    "export MLA_GOLDEN_AITER_REPO=AITER_REPO": Run(aiter=True),
    "mla-golden record --backend aiter-src@e4048607 --out TMP/goldens-e4048607": Run(aiter=True),
    "mkdir -p TMP/aiter-REV": Run(),
    "git -C AITER_REPO archive REV csrc aiter | tar -x -C TMP/aiter-REV": Run(aiter=True),
    "mla-golden diff goldens --backend aiter-src:TMP/aiter-REV": Run(aiter=True),
    # README.md: history
    "mla-golden history v0.1.16..v0.1.20": Run(aiter=True),
    "mla-golden history v0.1.19..main --goldens goldens --jobs 2": Run(aiter=True),
    # README.md: sweeps
    "mla-golden sweep --a reference+AITER_MLA_META_USE_PARALLEL=0 --b reference+AITER_MLA_META_USE_PARALLEL=1"
    " --space docs/sweep-spaces/parallel-eligible.toml --cases 2000 --jobs 2": Run(),
    "mla-golden sweep --a reference --b reference:gfx942:80 --space docs/sweep-spaces/gfx942.toml": Run(1),
    "mla-golden sweep --a reference --b python:my_planners:patched": Run(),
    "mla-golden diff sweep-out/b --against sweep-out/a": Run(1),
    # docs/cli.md
    "mla-golden diff goldens-0.1.16/decode/dsv3-tp/gfx950-cu256/h32-fp8-q1-b1-jitter8192-p1.safetensors"
    " --backend reference@v0.1.20 --max-items 3": Run(1),
    "mla-golden diff goldens --backend reference --format github --junit-xml reports/mla-golden.xml": Run(),
    "echo '*.safetensors diff=mla-golden' >> .gitattributes": Run(),
    "mla-golden sweep --a reference+AITER_MLA_META_USE_PARALLEL=0 --b reference+AITER_MLA_META_USE_PARALLEL=1"
    " --space docs/sweep-spaces/parallel-eligible.toml": Run(),
    "mla-golden sweep --a reference --b aiter-src@1e8c33fd62 --aiter-repo AITER_REPO": Run(aiter=True),
    "mla-golden diff DIR/b --against DIR/a": Run(1),
    "mla-golden sweep --space docs/sweep-spaces/versions.toml --a reference@aded0f84 --b reference@e4048607"
    " --cases 1500 --jobs 2": Run(1),
    "mla-golden record --backend reference --out .mla-golden-out": Run(),
    "mla-golden diff goldens --backend reference": Run(),
    "mla-golden diff .mla-golden-out --against goldens": Run(),
    "mla-golden diff goldens --backend reference@v0.1.20": Run(),
    # docs/sweep-findings.md
    "mla-golden sweep --space docs/sweep-spaces/versions.toml --a reference@aded0f84 --b reference@e4048607"
    " --cases 1500 --jobs 2 --out out-aded-e404": Run(1),
    "mla-golden diff out-aded-e404/b --against out-aded-e404/a": Run(1),
    "mla-golden sweep --space docs/sweep-spaces/parallel-eligible.toml --a reference+AITER_MLA_META_USE_PARALLEL=0"
    " --b reference+AITER_MLA_META_USE_PARALLEL=1 --cases 3000 --seed 7 --jobs 2": Run(),
}

#: Every command that cannot run here, as its page writes it -> why.
NOT_RUN: dict[str, str] = {
    "make demo": "builds a venv and installs torch into it; its commands are docs/cli.md's first CI lines, which run",
    "make test": "the test suite itself",
    'pip install "mla-golden @ git+https://github.com/OWNER/mla-golden@main"': "needs the network",
    "pip install /path/to/mla-golden": "installs into the test's own environment; tests/test_wheel.py installs the "
    "package into a fresh venv",
    'pip install "/path/to/mla-golden[plot,ray]"': "installs into the test's own environment (see above)",
    "python -m build --wheel /path/to/mla-golden && pip install /path/to/mla-golden/dist/mla_golden-*.whl": (
        "tests/test_wheel.py builds this wheel and installs it into a fresh venv"
    ),
    "mla-golden record --out mine -- python -m pytest tests/mla": "runs the reader's own tests",
    "mla-golden record --out goldens/vllm -- python -m vllm.entrypoints.offline ...": "runs vLLM, on a GPU",
    "mla-golden record --out goldens/unit -- python -m pytest tests/test_mla_backend.py": "runs the reader's own tests",
    "mla-golden record --out goldens/mine -- python -m pytest tests/test_mla.py -q": "runs the reader's own tests",
    "mla-golden list goldens/mine": "lists what the reader's tests recorded (the line above)",
    "mla-golden show goldens/mine/get_mla_metadata_v1/gfx942-cu304/....safetensors --cu 3": (
        "shows one of the goldens the reader's tests recorded (the line above)"
    ),
    "mla-golden sweep --a aiter --b reference": "needs aiter on an MI300X or MI355X",
    "mla-golden diff goldens --backend aiter --format json > mla-golden.json": "needs aiter on an MI300X",
    "mla-golden record --backend aiter --out goldens-old": "needs aiter on a GPU (the old build)",
    "mla-golden record --backend aiter --out goldens-new": "needs aiter on a GPU (the new build)",
    "mla-golden diff goldens-new --against goldens-old": "compares the two aiter recordings above",
}


def _blocks(page: Path) -> list[tuple[int, str, str, str]]:
    """(line of the fence, info string, body, the last line before it, blank lines skipped) of every fenced block."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((line, m.group(1), m.group(2), before))
    return found


def sh_lines(body: str, first: int) -> list[tuple[int, str]]:
    """(line, command) of a shell block: continuations joined, comments and blank lines dropped."""
    commands: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for n, raw in enumerate(body.splitlines(), start=first):
        line = re.sub(r"(^|\s+)#\s.*$|^#.*$", "", raw).strip()
        if pending is not None:
            line, n = f"{pending[1]} {line}", pending[0]
            pending = None
        if line.endswith("\\"):
            pending = (n, line[:-1].rstrip())
        elif line:
            commands.append((n, line))
    return commands


def _console(body: str, first: int, page: str) -> list[Example]:
    """The ``$ COMMAND`` lines of a console block, each with the lines up to the next one as its output."""
    examples: list[Example] = []
    for n, raw in enumerate(body.splitlines(), start=first):
        if raw.startswith("$ "):
            examples.append(Example(page, n, raw[2:].strip(), []))
        elif examples:
            output = examples[-1].output
            assert output is not None
            output.append(raw)
        elif raw.strip():
            raise AssertionError(f"{page}:{n}: a console block starts with output, before any `$ COMMAND` line")
    for ex in examples:
        assert ex.output is not None
        while ex.output and not ex.output[-1].strip():
            ex.output.pop()
    return examples


def examples(page: Path) -> list[Example]:
    """Every example of ``page``, in page order."""
    rel = str(page.relative_to(ROOT))
    found: list[Example] = []
    for line, info, body, before in _blocks(page):
        if info == "sh":
            found += [Example(rel, n, cmd) for n, cmd in sh_lines(body, line + 1)]
        elif info == "console":
            found += _console(body, line + 1, rel)
        elif info == "" and (m := MARKER.match(before.strip())):
            illustrative = m.group(1) == "illustrative"
            found.append(Example(rel, line, m.group(2).strip(), body.rstrip("\n").split("\n"), illustrative))
    return found


def plain_blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, body, the line before) of every plain ``` block of ``page``."""
    return [(line, body, before) for line, info, body, before in _blocks(page) if info == ""]


def substitute(command: str, tmp: Path, aiter: str) -> str:
    """``command`` with its :data:`PLACEHOLDERS` filled in."""
    for name, value in PLACEHOLDERS.items():
        command = re.sub(rf"\b{name}\b", value.format(tmp=tmp, aiter=aiter).replace("\\", r"\\"), command)
    return command
