"""pytest plugin: ``--mla-golden-dir``, ``--mla-golden-update`` and the ``mla_golden`` fixture.

Goldens are named after the test id plus the check's ``name`` (or a counter),
as snapshot tools do. Writes are atomic and no-clobber, so pytest-xdist
workers writing the same golden end with one valid file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mla_golden.call import Call
    from mla_golden.recorder import Spy

_WRITTEN = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mla-golden", "aiter MLA metadata goldens")
    group.addoption(
        "--mla-golden-dir",
        dest="mla_golden_dir",
        default=None,
        help="folder of the goldens the mla_golden fixture checks against (default: <rootdir>/goldens/tests)",
    )
    group.addoption(
        "--mla-golden-update",
        dest="mla_golden_update",
        action="store_true",
        default=False,
        help="write the goldens instead of checking them",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_WRITTEN] = []


class MlaGoldenFixture:
    """What a test holds: ``spy()`` to capture calls, ``check(call)`` to compare one with its golden."""

    def __init__(self, nodeid: str, golden_dir: Path, update: bool, written: list) -> None:
        self.nodeid = nodeid
        self.golden_dir = golden_dir
        self.update = update
        self._written = written
        self._counter = 0
        self._spies: list[Spy] = []

    def spy(self, *targets: Any) -> Spy:
        """A spy whose calls made but not recorded fail the test at teardown (they were warned about)."""
        from mla_golden.recorder import spy

        made = spy(*targets)
        self._spies.append(made)
        return made

    def missed(self) -> list[str]:
        """Calls this test's spies saw but could not record, with the reasons."""
        return [reason for s in self._spies for reason in s.missed]

    def key(self, name: str | None = None) -> str:
        """The golden key of this test's next check: ``<test id>/<name or counter>``."""
        if name is None:
            name = str(self._counter)
            self._counter += 1
        test = re.sub(r"::", "/", self.nodeid)
        return f"{test}/{name}"

    def check(self, call: Call, name: str | None = None) -> None:
        """Assert ``call`` matches its golden (or write it under --mla-golden-update)."""
        __tracebackhide__ = True
        from mla_golden.assertions import assert_matches_golden

        key = self.key(name)
        outcome = assert_matches_golden(call, self.golden_dir, name=key, update=self.update)
        if outcome is not None:
            self._written.append((key, outcome.value))


@pytest.fixture
def mla_golden(request: pytest.FixtureRequest) -> Iterator[MlaGoldenFixture]:
    """Check planner calls against goldens named after this test."""
    config = request.config
    option = config.getoption("mla_golden_dir")
    golden_dir = Path(option) if option else Path(config.rootpath) / "goldens" / "tests"
    fixture = MlaGoldenFixture(
        request.node.nodeid, golden_dir, bool(config.getoption("mla_golden_update")), config.stash[_WRITTEN]
    )
    yield fixture
    missed = fixture.missed()
    if missed:
        pytest.fail(f"mla-golden: {len(missed)} planner call(s) made but not recorded: " + "; ".join(missed), pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, hand this worker's writes to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["mla_golden_written"] = [list(w) for w in session.config.stash.get(_WRITTEN, [])]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: collect a finished worker's writes."""
    written = getattr(node, "workeroutput", {}).get("mla_golden_written", [])
    node.config.stash[_WRITTEN].extend(tuple(w) for w in written)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, [])
    if written:
        counts: dict[str, int] = {}
        for _, outcome in written:
            counts[outcome] = counts.get(outcome, 0) + 1
        summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
        terminalreporter.write_line(f"mla-golden: goldens {summary}")
