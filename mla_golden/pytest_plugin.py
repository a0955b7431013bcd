"""pytest plugin: ``--mla-golden-dir``, ``--mla-golden-update`` (and its ``-new`` and ``-fail`` modes) and the
``mla_golden`` fixture.

Goldens live in a folder mirroring the test's node id
(:mod:`mla_golden.golden.paths`), named by the assertion's ``name`` (or a
counter), as snapshot tools do. Writes are atomic and no-clobber, so
pytest-xdist workers writing the same golden end with one valid file; workers
hand what they wrote and read to the controller, which prints the summary and,
after a full run, the goldens no test used: they fail the run (as syrupy's
unused snapshots do) unless ``--mla-golden-warn-unused``, and
``--mla-golden-update`` deletes them, only when every worker reported (a
crashed one is named and nothing is deleted). What fails a run but no test
is a failed report of its own (``mla-golden::unused-goldens``), so pytest's
summary and its JUnit XML count it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from mla_golden.assertions import Comparison, Hints, Update
    from mla_golden.call import Call
    from mla_golden.capture.recorder import Spy
    from mla_golden.expectations import Expect

_WRITTEN = pytest.StashKey[list[tuple[str, str]]]()
#: Golden paths the fixture read or wrote (str, resolved).
_TOUCHED = pytest.StashKey[set[str]]()
#: node id -> passed (every phase), from the reports the controller receives.
_TESTS = pytest.StashKey[dict[str, bool]]()
#: node id -> its file's path relative to the rootdir, as the reports give it (``golden.paths.file_of_test``).
_LOCATIONS = pytest.StashKey[dict[str, str]]()
#: xdist workers that ended without reporting their reads (crashed): unused goldens cannot be told apart.
_SILENT = pytest.StashKey[list[str]]()
#: After a full run: the unused goldens and whether they were deleted.
_UNUSED = pytest.StashKey[tuple[list[Path], bool]]()
#: Work items a failure decodes by default: a failure stays within a screen (about 60 lines).
MAX_ITEMS = 5
#: The run's mode (an ``assertions.Update`` value) per option; at most one is given.
_MODES = {"mla_golden_update": "all", "mla_golden_update_new": "new", "mla_golden_update_fail": "fail"}
#: The node id of the report that fails a run for its goldens (no test did): JUnit's classname and name.
SESSION_NODEID = "mla-golden::unused-goldens"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mla-golden", "aiter MLA metadata goldens")
    group.addoption(
        "--mla-golden-dir",
        dest="mla_golden_dir",
        default=None,
        help="folder of the goldens the mla_golden fixture checks against (default: <rootdir>/goldens)",
    )
    group.addoption(
        "--mla-golden-update",
        dest="mla_golden_update",
        action="store_true",
        default=False,
        help="write the goldens instead of checking them; a full run also deletes the goldens no test used",
    )
    group.addoption(
        "--mla-golden-update-new",
        dest="mla_golden_update_new",
        action="store_true",
        default=False,
        help="write only the goldens that do not exist yet; check the others (and delete nothing)",
    )
    group.addoption(
        "--mla-golden-update-fail",
        dest="mla_golden_update_fail",
        action="store_true",
        default=False,
        help="as --mla-golden-update, but a test that wrote or rewrote a golden fails, and so does a full run "
        "that deleted unused ones: review the change, then rerun without it",
    )
    group.addoption(
        "--mla-golden-warn-unused",
        dest="mla_golden_warn_unused",
        action="store_true",
        default=False,
        help="only warn about the goldens no test used (by default they fail a full run)",
    )
    group.addoption(
        "--mla-golden-max-items",
        dest="mla_golden_max_items",
        type=int,
        default=MAX_ITEMS,
        help=f"divergent work items and reduce groups a failure decodes (default {MAX_ITEMS}; mla-golden diff shows all)",
    )


class _TestOutcomes:
    """Which tests passed every phase (on the xdist controller too): only they vouch for their goldens."""

    def __init__(self, tests: dict[str, bool], locations: dict[str, str]) -> None:
        self.tests = tests
        self.locations = locations

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] = self.tests.get(report.nodeid, True) and report.passed
        self.locations[report.nodeid] = report.location[0]


def _mode(config: pytest.Config) -> Update:
    """What the run does with goldens (:class:`~mla_golden.assertions.Update`)."""
    from mla_golden.assertions import Update  # imported when used: pytest starts without torch

    return Update(next((mode for dest, mode in _MODES.items() if config.getoption(dest)), "check"))


def _hints() -> Hints:
    """What a failure in a test tells its reader to do, in this plugin's options."""
    from mla_golden.assertions import Hints

    return Hints(
        create="--mla-golden-update-new (writes only the goldens that do not exist yet)",
        accept="--mla-golden-update",
        more="--mla-golden-max-items",
        rewrite="--mla-golden-update-fail",
    )


def pytest_configure(config: pytest.Config) -> None:
    given = [f"--{dest.replace('_', '-')}" for dest in _MODES if config.getoption(dest, False)]
    if len(given) > 1:
        raise pytest.UsageError(f"{' and '.join(given)}: give one of them (each writes goldens its own way)")
    config.stash[_WRITTEN] = []
    config.stash[_TOUCHED] = set()
    config.stash[_TESTS] = {}
    config.stash[_LOCATIONS] = {}
    config.stash[_SILENT] = []
    config.pluginmanager.register(_TestOutcomes(config.stash[_TESTS], config.stash[_LOCATIONS]), "mla-golden-test-outcomes")


def _golden_dir(config: pytest.Config) -> Path:
    option = config.getoption("mla_golden_dir")
    return Path(option) if option else Path(config.rootpath) / "goldens"


class MlaGoldenFixture:
    """What a test holds: ``spy()`` / ``expect()`` to capture calls, ``assert_matches(call)`` to compare one."""

    def __init__(self, nodeid: str, golden_dir: Path, update: Update, config: pytest.Config, location: str | None = None) -> None:
        self.nodeid = nodeid
        #: The test file's path relative to the rootdir (``item.location[0]``): its keys' first part when the
        #: node id has none (a test file outside the rootdir).
        self.location = location
        self.golden_dir = golden_dir
        self.update = update
        self.max_items: int = config.getoption("mla_golden_max_items")
        self._config = config
        self._counter = 0
        self._spies: list[Spy] = []

    def spy(self, *targets: ModuleType | str) -> Spy:
        """A spy whose calls made but not recorded fail the test at teardown (they were warned about).

        When a planner raises inside the block, the calls that raised are
        compared with this test's goldens of the same inputs and the report is
        chained to the error (the ``assert_matches`` after the block never runs).
        """
        from mla_golden.expectations import ReportingSpy
        from mla_golden.golden.paths import folder_of_test

        made = ReportingSpy(
            *targets,
            golden_dir=self.golden_dir,
            folder=folder_of_test(self.golden_dir, self.nodeid, self.location),
            on_compare=self._record,
            max_items=self.max_items,
            hints=_hints(),
        )
        self._spies.append(made)
        return made

    def missed(self) -> list[str]:
        """Calls this test's spies saw but could not record, with the reasons."""
        return [reason for s in self._spies for reason in s.missed]

    def key(self, name: str | None = None) -> str:
        """The golden key of this test's next assertion: ``<test file>/<test>/<name or counter>``."""
        from mla_golden.golden.paths import key_of_test

        if name is None:
            name = str(self._counter)
            self._counter += 1
        return f"{key_of_test(self.nodeid, self.location)}/{name}"

    def _record(self, result: Comparison) -> None:
        self._config.stash[_TOUCHED].add(str(result.path.resolve()))
        if result.outcome is not None:
            self._config.stash[_WRITTEN].append((result.key, result.outcome.value))

    def assert_matches(self, call: Call, name: str | None = None) -> None:
        """Assert ``call`` matches this test's golden ``name`` (or write it, as the run's --mla-golden-update* option
        says).

        On a mismatch (:class:`GoldenMismatch`) the call is also written next
        to the golden as ``<name>.obtained.safetensors``; a later pass removes it.
        """
        __tracebackhide__ = True
        from mla_golden.assertions import compare_with_golden
        from mla_golden.errors import GoldenMismatch

        result = compare_with_golden(
            call, self.golden_dir, name=self.key(name), update=self.update, keep_obtained=True, max_items=self.max_items,
            hints=_hints(),
        )  # fmt: skip
        self._record(result)
        if result.failure is not None:
            raise GoldenMismatch(result.failure)

    def expect(self, target: ModuleType | str = "aiter", *, name: str | None = None) -> Expect:
        """Like :func:`mla_golden.expect`, with this test's goldens: compares on exit even when the block raised."""
        from mla_golden.expectations import Expect

        made = Expect(
            target,
            self.golden_dir,
            name=self.key(name),
            update=self.update,
            keep_obtained=True,
            on_compare=self._record,
            max_items=self.max_items,
            hints=_hints(),
        )
        self._spies.append(made.spy)  # its missed calls fail the test too
        return made


@pytest.fixture
def mla_golden(request: pytest.FixtureRequest) -> Iterator[MlaGoldenFixture]:
    """Check planner calls against goldens named after this test."""
    config = request.config
    fixture = MlaGoldenFixture(request.node.nodeid, _golden_dir(config), _mode(config), config, request.node.location[0])
    yield fixture
    missed = fixture.missed()
    if missed:
        pytest.fail(f"mla-golden: {len(missed)} planner call(s) made but not recorded: " + "; ".join(missed), pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before the JUnit XML is written, so it holds the run's own failure
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A worker hands its writes and reads to the controller; the controller (or a lone run) finds unused goldens
    and, when they fail the run, reports that as a failure of its own."""
    config = session.config
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["mla_golden_written"] = [list(w) for w in config.stash.get(_WRITTEN, [])]
        touched: set[str] = config.stash.get(_TOUCHED, set())
        workeroutput["mla_golden_touched"] = sorted(touched)
    elif _full_run(session, exitstatus):
        _find_unused(config)
        why = _run_failure(config)
        if why is not None:
            _report_failure(session, why)


def _run_failure(config: pytest.Config) -> str | None:
    """Why the run fails for its goldens though no test did (None: it does not)."""
    unused, deleted = config.stash.get(_UNUSED, ([], False))
    listed = "".join(f"\n  {_shown(path, config)}" for path in unused)
    if _unused_fail(config):
        return (
            f"{len(unused)} golden(s) under {_golden_dir(config)} that no test read or wrote:{listed}\n"
            "a full run with --mla-golden-update deletes them; --mla-golden-warn-unused only warns"
        )
    if unused and deleted and _mode(config).value == "fail":
        return (
            f"deleted {len(unused)} unused golden(s) under {_golden_dir(config)} (--mla-golden-update-fail):{listed}\n"
            "review the change, then rerun without --mla-golden-update-fail"
        )
    return None


def _report_failure(session: pytest.Session, why: str) -> None:
    """Fail the run with a report of its own, through the hook every reporter hears (the terminal, JUnit XML)."""
    config = session.config
    location = (str(_golden_dir(config)), None, SESSION_NODEID.replace("::", ": ", 1))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and config.get_verbosity() <= 0:
        reporter.write_line("")  # ends the progress line
        reporter.write(f"{SESSION_NODEID} ")  # the letter its report prints says what it belongs to
    failed = pytest.TestReport(SESSION_NODEID, location, {}, "failed", why, "call")
    finished = pytest.TestReport(SESSION_NODEID, location, {}, "passed", None, "teardown")  # JUnit closes it here
    session.testscollected += 1  # one more result in the run's counts (and the progress stays at 100%)
    for report in (failed, finished):
        config.hook.pytest_runtest_logreport(report=report)
    session.testsfailed += 1
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: collect a finished worker's writes and reads; note a worker that never sent them."""
    output = getattr(node, "workeroutput", {})
    if error is not None or "mla_golden_touched" not in output:
        gateway = getattr(node, "gateway", None)
        node.config.stash[_SILENT].append(str(getattr(gateway, "id", node)))
    node.config.stash[_WRITTEN].extend(tuple(w) for w in output.get("mla_golden_written", []))
    node.config.stash[_TOUCHED].update(output.get("mla_golden_touched", []))


def _full_run(session: pytest.Session, exitstatus: int) -> bool:
    """Whether every collected test ran: no -k/-m/--deselect/--lf/--sw, no node ids, not stopped early."""
    config = session.config
    option = config.option
    subset = (
        getattr(option, "keyword", "")
        or getattr(option, "markexpr", "")
        or getattr(option, "deselect", None)
        or getattr(option, "lf", False)
        or getattr(option, "stepwise", False)
        or any("::" in str(arg) for arg in config.args)
    )
    stopped = session.shouldfail or session.shouldstop or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    return not subset and not stopped and bool(config.stash[_TESTS])


def _find_unused(config: pytest.Config) -> None:
    from mla_golden.golden.paths import unused_goldens
    from mla_golden.golden.store import obtained_path

    if config.stash[_SILENT]:
        return  # a worker's passing tests read goldens nobody heard of: any "unused" one may be theirs
    tests: dict[str, bool] = config.stash[_TESTS]
    touched = [Path(p) for p in config.stash[_TOUCHED]]
    unused = unused_goldens(_golden_dir(config), touched, tests, Path(config.rootpath), config.stash[_LOCATIONS])
    delete = _mode(config).value in ("all", "fail")
    if delete:
        for path in unused:
            for gone in (path, obtained_path(path)):  # a failure's obtained call goes with its golden
                with contextlib.suppress(FileNotFoundError):
                    gone.unlink()
            _prune(path.parent, _golden_dir(config))
    config.stash[_UNUSED] = (unused, delete)


def _prune(folder: Path, root: Path) -> None:
    """Remove ``folder`` and the folders above it, up to ``root`` (kept), while they are empty."""
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): what is above it is not empty either
            return
        folder = folder.parent


def _shown(path: Path, config: pytest.Config) -> str:
    """A golden's path as the run's lines name it: under the golden dir when it is there."""
    golden_dir = _golden_dir(config)
    return str(path.relative_to(golden_dir) if path.is_relative_to(golden_dir) else path)


def _unused_fail(config: pytest.Config) -> bool:
    """Whether unused goldens (found and not deleted) fail the run: yes unless --mla-golden-warn-unused, as syrupy does."""
    unused, deleted = config.stash.get(_UNUSED, ([], False))
    return bool(unused) and not deleted and not config.getoption("mla_golden_warn_unused")


def _print_unused(terminalreporter: Any, config: pytest.Config) -> None:
    silent = config.stash.get(_SILENT, [])
    if silent:
        terminalreporter.write_line(
            f"mla-golden: worker {', '.join(silent)} did not report the goldens its tests read (it crashed): "
            "unused goldens not looked for, nothing deleted"
        )
        return
    unused, deleted = config.stash.get(_UNUSED, ([], False))
    if not unused:
        return
    golden_dir = _golden_dir(config)
    if _unused_fail(config):  # the run's failure report lists them
        terminalreporter.write_line(
            f"mla-golden: {len(unused)} golden(s) under {golden_dir} that no test read or wrote fail this run "
            f"(listed in the failure {SESSION_NODEID}; a full run with --mla-golden-update deletes them)",
            red=True,
        )
        return
    if deleted:
        terminalreporter.write_line(f"mla-golden: deleted {len(unused)} unused golden(s) under {golden_dir}:")
    else:
        terminalreporter.write_line(
            f"mla-golden: {len(unused)} golden(s) under {golden_dir} that no test read or wrote "
            "(--mla-golden-warn-unused: a warning only) (a full run with --mla-golden-update deletes them):",
            yellow=True,
        )
    for path in unused:
        terminalreporter.write_line(f"  {_shown(path, config)}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, [])
    if written:
        counts: dict[str, int] = {}
        for _, outcome in written:
            counts[outcome] = counts.get(outcome, 0) + 1
        summary = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))
        terminalreporter.write_line(f"mla-golden: goldens {summary}")
    _print_unused(terminalreporter, config)
