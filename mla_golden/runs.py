"""Runs over many goldens: record a matrix, replay goldens, pair two golden trees, check; one result per golden.

The CLI is a thin layer over this module. Work fans out over processes, not
threads: the planners read ``os.environ``, which a process shares. Workers
return plain :class:`Result` data, and a bad golden never stops the others:
whatever goes wrong with one is its result.

Exit policy (:func:`exit_code`): 0 all equal (or written, skipped, not
comparable), 1 some divergence, a buffer resized or a refused write, 2 bad
input; a run exits with the worst of its results.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mla_golden.cases import device_label
from mla_golden.workers import stop_requested

if TYPE_CHECKING:
    from mla_golden.call import Call
    from mla_golden.checks import CheckResult
    from mla_golden.differ import Diff
    from mla_golden.matrix import Case
    from mla_golden.store import Golden, GoldenFile

EXIT_OK, EXIT_DIVERGED, EXIT_BAD = 0, 1, 2


class Status(enum.StrEnum):
    """What happened to one golden (or one case, or one call of a recorded command)."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"
    UPDATED = "updated"
    EQUAL = "equal"
    PASSED = "passed"
    SKIPPED = "skipped"
    #: The planner cannot express the golden's call (an older signature lacks what it needs): nothing to compare.
    NOT_COMPARABLE = "not-comparable"
    REFUSED = "refused"
    #: Only buffer sizes changed (another sizing helper); the written contents are equal.
    RESIZED = "resized"
    DIVERGED = "diverged"
    VIOLATED = "violated"
    ONLY_EXPECTED = "only-expected"
    ONLY_ACTUAL = "only-actual"
    BAD = "bad"
    FAILED = "failed"
    #: A call the program made that the recorder could not keep as made (it ran untouched).
    MISSED = "missed"

    @property
    def exit_code(self) -> int:
        """What this status contributes to the run's exit status."""
        return STATUS_EXIT[self]

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


#: Exit status each result status contributes (the run exits with the largest); also the summary's row order.
STATUS_EXIT: dict[Status, int] = {
    Status.WRITTEN: EXIT_OK,
    Status.UNCHANGED: EXIT_OK,
    Status.UPDATED: EXIT_OK,
    Status.EQUAL: EXIT_OK,
    Status.PASSED: EXIT_OK,
    Status.SKIPPED: EXIT_OK,
    Status.NOT_COMPARABLE: EXIT_OK,
    Status.REFUSED: EXIT_DIVERGED,
    Status.RESIZED: EXIT_DIVERGED,
    Status.DIVERGED: EXIT_DIVERGED,
    Status.VIOLATED: EXIT_DIVERGED,
    Status.ONLY_EXPECTED: EXIT_DIVERGED,
    Status.ONLY_ACTUAL: EXIT_DIVERGED,
    Status.BAD: EXIT_BAD,
    Status.FAILED: EXIT_BAD,
    Status.MISSED: EXIT_BAD,
}


@dataclass
class Result:
    """What happened to one golden (or one case); plain data so worker processes can return it."""

    key: str
    status: Status
    path: str | None = None
    message: str = ""
    #: The expected golden's path when comparing two trees (``path`` is then the actual one).
    against_path: str | None = None
    #: The rendered diff, when there is one worth showing.
    report: str | None = None
    diff: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: Why it diverged (a ``differ.Cause`` value) and how reports name it, when a diff says.
    cause: str | None = None
    cause_label: str | None = None
    #: The diff itself and the (expected, actual) calls, kept only when asked (to draw them); never in JSON.
    found: Diff | None = field(default=None, repr=False, compare=False)
    calls: tuple[Call, Call] | None = field(default=None, repr=False, compare=False)
    #: The call a check broke and what the check found, kept only when asked (to draw them); never in JSON.
    checked: tuple[Call, CheckResult] | None = field(default=None, repr=False, compare=False)
    #: Digest of the golden's content (all but key and provenance), to find copies in a tree; never in JSON.
    content: str | None = field(default=None, repr=False, compare=False)
    #: (folder walked, file, key) per golden found by a walk, for :func:`misplaced`. Never in JSON.
    placed: list[tuple[str, str, str]] = field(default_factory=list, repr=False, compare=False)
    #: Seconds its golden took to load and judge, when measured (JUnit's ``time``). Never in JSON.
    seconds: float | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the kept diff, calls, check, content digest and placements left out)."""
        hidden = ("found", "calls", "checked", "content", "placed", "seconds")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}


def misplaced(results: Sequence[Result]) -> None:
    """Make 'bad' each result holding a golden copied or renamed into a walked tree by hand (see
    :func:`misplaced_files`): a walk may start inside a tree, so a key is checked against its path only as far
    as the path under the walked folder goes, and that alone lets such a golden pass."""
    holding: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        for root, path, _ in result.placed:
            holding.setdefault((root, path), []).append(result)
    for spot, message in misplaced_files([where for result in results for where in result.placed]).items():
        for result in holding[spot]:
            result.status, result.message = Status.BAD, message


def misplaced_files(placed: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """(folder walked, file) -> why, for ``placed`` (folder walked, file, key) goldens of one walk that cannot all
    be where they are: goldens in one folder whose keys name other folders than most of their neighbours' do
    (a tie names none). A golden alone in its folder is judged by its path only; one key in two places is
    allowed (a folder may hold several trees, a whole one and a part)."""
    by_folder: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for root, path, key in placed:
        by_folder.setdefault((root, os.path.dirname(path)), []).append((path, key.rpartition("/")[0]))
    out = {}
    for (root, _), files in by_folder.items():
        counts = Counter(folder for _, folder in files)
        (top, most), *rest = counts.most_common()
        for path, folder in files:
            if folder != top or (rest and rest[0][1] == most):
                beside = len(files) - counts[folder]
                out[root, path] = (
                    f"its key names the folder {_folder(folder)}, where the {beside} golden(s) beside it name "
                    f"{'others' if folder == top else _folder(top)} (copied or renamed here by hand?)"
                )
    return out


def _folder(name: str) -> str:
    return f"{name}/" if name else "the top of the tree"


#: Copies a note names; the rest are counted.
NAMED_COPIES = 3


def note_copies(results: Sequence[Result]) -> list[list[Result]]:
    """Goldens of one tree holding the same content under different keys: each gets a note naming the others.

    Returns the groups found (a copy is usually a golden saved twice by mistake, or moved without its old file).
    """
    groups: dict[str, list[Result]] = {}
    for result in results:
        if result.content is not None:
            groups.setdefault(result.content, []).append(result)
    copies = [group for group in groups.values() if len(group) > 1]
    for group in copies:
        for result in group:
            # a few others by name, the rest counted: a note per golden naming every other would grow
            # with the square of the copies (10,000 copies: 1.3 GB of JSON)
            others = [r.key for r in group[:NAMED_COPIES + 1] if r is not result][:NAMED_COPIES]
            more = len(group) - 1 - len(others)
            named = ", ".join(others) + (f" and {more} more" if more else "")
            result.notes.append(f"same content as {named} (a copy under another key)")
    return copies


def soundness_verdict(results: Sequence[Result]) -> str | None:
    """Whether the plans of the run's diverged and resized calls pass ``check`` on both sides, in a few words
    (None when no result was judged)."""
    from mla_golden.soundness import verdict_of

    judged = [(r.key, r.diff["soundness"]) for r in results if r.diff and r.diff.get("soundness")]
    return verdict_of(judged) if judged else None


def exit_code(results: Sequence[Result]) -> int:
    """The run's exit status: the worst any result contributes (0 for none)."""
    return max((r.status.exit_code for r in results), default=EXIT_OK)


@dataclass
class CauseGroup:
    """The results that are not ok for one cause label (or, without a diff, one status)."""

    label: str
    #: ``{old, new}`` when the cause is a planner change.
    planner: dict[str, str] | None
    results: list[Result] = field(default_factory=list)

    @property
    def causes(self) -> list[str]:
        """The ``differ.Cause`` values behind the label (a planner change moves geometry in some calls, values in others)."""
        return sorted({r.cause for r in self.results if r.cause})

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "causes": self.causes, "planner": self.planner, "count": len(self.results),
                "keys": [r.key for r in self.results]}  # fmt: skip


def by_cause(results: Sequence[Result]) -> list[CauseGroup]:
    """The results that are not ok, grouped by cause label (a result without a diff, by status); largest first.

    An upgrade preview gives one group per ``planner behaviour change OLD -> NEW``.
    """
    return _grouped(r for r in results if not r.status.ok)


def not_comparable(results: Sequence[Result]) -> list[CauseGroup]:
    """The goldens a planner cannot express, grouped by planner (``not comparable on reference@33d168a0``).

    Apart from :func:`by_cause`: nothing was compared, so they are no divergence.
    """
    return _grouped(r for r in results if r.status is Status.NOT_COMPARABLE)


def _grouped(results: Iterable[Result]) -> list[CauseGroup]:
    groups: dict[str, CauseGroup] = {}
    for r in results:
        label = r.cause_label or r.status.value
        groups.setdefault(label, CauseGroup(label, (r.diff or {}).get("planner"))).results.append(r)
    return sorted(groups.values(), key=lambda g: -len(g.results))


# ---------------------------------------------------------------- fanning out

#: Called with how many items just finished (a progress bar's advance).
Advance = Callable[[int], None]


def run_items(
    worker: Callable[..., list[Result]], items: list[Any], args: tuple[Any, ...], jobs: int, advance: Advance | None = None
) -> list[Result]:
    """``worker(chunk, *args)`` over ``items`` in ``jobs`` processes (one: a thread of this one); results in the order
    of ``items``.

    SIGINT or SIGTERM stops the run: each worker ends the golden it is on
    (stragglers are killed, or given up on, within :data:`STOP_GRACE_S`), then
    :class:`~mla_golden.errors.Interrupted` carries the results so far.
    """
    from mla_golden.errors import Interrupted
    from mla_golden.workers import stop_on_signals

    if not items:
        return []
    chunk = max(1, min(16, len(items) // (4 * max(jobs, 1)) or 1))
    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    results: list[list[Result]] = [[] for _ in chunks]
    if jobs <= 1:
        with stop_on_signals() as came:
            _run_here(worker, chunks, args, results, came, advance)
    else:
        import multiprocessing

        # spawn: a forked child would inherit torch's thread pools half-initialised.
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        with stop_on_signals(stop) as came:
            _run_pool(context, stop, came, worker, chunks, args, jobs, results, advance)
    done = [r for part in results for r in part]
    if came:
        raise Interrupted(came[0], done)
    return done


#: After a stop, how long workers get to finish the golden they are on before they are killed.
STOP_GRACE_S = 0.5


def _run_here(
    worker: Callable[..., list[Result]], chunks: list[list[Any]], args: tuple[Any, ...], results: list[list[Result]],
    came: list[int], advance: Advance | None,
) -> None:  # fmt: skip
    """Fill ``results`` in a thread of this process (:class:`~mla_golden.workers.Background`) until done or until a
    signal lands in ``came``: the golden in progress then gets :data:`STOP_GRACE_S` to finish, as a worker process
    does, and a planner call that never returns is left to end with the process (nothing is written after)."""
    from mla_golden.workers import Background

    def work() -> None:
        for i, part in enumerate(chunks):
            if stop_requested():
                return
            results[i] = worker(part, *args)
            if advance is not None and not stop_requested():
                advance(len(part))

    running = Background(work)
    while not running.wait(0.1):
        if came:
            if not running.wait(STOP_GRACE_S):
                return
            break
    running.outcome()


def _run_pool(
    context: Any, stop: Any, came: list[int], worker: Callable[..., list[Result]], chunks: list[list[Any]],
    args: tuple[Any, ...], jobs: int, results: list[list[Result]], advance: Advance | None,
) -> None:  # fmt: skip
    """Fill ``results`` from a process pool until done or until a signal lands in ``came``."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from mla_golden.workers import init_worker

    # Workers end when this process does, however it ends: none writes after the run is gone.
    pool = ProcessPoolExecutor(jobs, context, initializer=init_worker, initargs=(os.getpid(), stop))
    futures = {pool.submit(worker, part, *args): i for i, part in enumerate(chunks)}
    pending = set(futures)
    try:
        while pending and not came:
            finished, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            for future in finished:
                results[futures[future]] = future.result()
                if advance is not None:
                    advance(len(chunks[futures[future]]))
        if came:
            for future in pending:
                future.cancel()
            finished, _late = wait([f for f in pending if not f.cancelled()], timeout=STOP_GRACE_S)
            for future in finished:
                if future.exception() is None:
                    results[futures[future]] = future.result()
            for process in list(getattr(pool, "_processes", {}).values()):  # stragglers: nothing written later
                process.kill()
    finally:
        pool.shutdown(wait=not came, cancel_futures=True)


def _single_threaded() -> None:
    """Planner tensors are tiny: torch's intra-op thread pool only adds overhead (and fights --jobs)."""
    import torch

    torch.set_num_threads(1)


@contextlib.contextmanager
def _guard(key: str, path: str, results: list[Result]) -> Iterator[None]:
    """Whatever goes wrong with one golden is reported as 'failed' (exit 2) and never stops the others; planner code
    raising SystemExit or KeyboardInterrupt too (it runs off the main thread, where no signal raises them)."""
    from mla_golden.errors import PLANNER_EXITS, PlannerExited

    try:
        yield
    except PLANNER_EXITS as exc:
        results.append(Result(key, Status.FAILED, path, str(PlannerExited.of(exc))))
    except Exception as exc:  # noqa: BLE001 - reported with its type, the run goes on
        results.append(Result(key, Status.FAILED, path, f"{type(exc).__name__}: {exc}"))


def _each_timed(items: Iterable[Any], results: list[Result]) -> Iterator[Any]:
    """``items`` one at a time, the results appended to ``results`` while the caller works on one stamped with the
    seconds that took (:attr:`Result.seconds`)."""
    for item in items:
        start, first = time.perf_counter(), len(results)
        yield item
        took = time.perf_counter() - start
        for result in results[first:]:
            result.seconds = took


def _placements(found: Iterable[tuple[GoldenFile, str]]) -> list[tuple[str, str, str]]:
    """(folder walked, file, key) of each of ``found`` (file, key) that a walk found."""
    return [(path[: len(path) - len(under)], path, key) for (path, under), key in found if under is not None]


def _note_placements(results: Sequence[Result], found: Sequence[tuple[GoldenFile, str]]) -> None:
    """Give each result the walk, file and key of the golden it reports on (by path), for :func:`misplaced`."""
    spots = {spot[1]: spot for spot in _placements(found)}
    for result in results:
        if result.path in spots:
            result.placed.append(spots[result.path])


def _load_or_bad(file: GoldenFile, results: list[Result]) -> Golden | None:
    """The golden ``file`` holds (a walked one's key agreeing with where it was found), or None after a 'bad'
    result naming the problem."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import load, load_placed

    path, under = file
    try:
        return load(path) if under is None else load_placed(path, under)
    except GoldenError as exc:
        results.append(Result(path, Status.BAD, path, exc.problem))
        return None


def _diff_result(key: str, path: str, found: Diff, render: bool, calls: tuple[Call, Call] | None) -> Result:
    """A diff as a result; rendering text (rich tables) costs, so only when it will be shown."""
    from mla_golden.differ import Cause
    from mla_golden.report import render_text

    if found.equal:
        return Result(key, Status.EQUAL, path, notes=list(found.notes))
    report = render_text(found, more="--max-items") if render else None
    status = Status.RESIZED if found.cause is Cause.RESIZED else Status.DIVERGED
    return Result(
        key, status, path, report=report, diff=found.to_dict(), notes=list(found.notes),
        cause=found.cause.value, cause_label=found.cause_label, found=found if calls is not None else None, calls=calls,
    )  # fmt: skip


# ---------------------------------------------------------------- record


def record_worker(cases: list[Case], backend_spec: str, out: str, update: bool, max_items: int, render: bool) -> list[Result]:
    """Run matrix cases on the backend and write one golden per call (runs in a worker process too)."""
    from mla_golden.backends import resolve
    from mla_golden.differ import diff
    from mla_golden.errors import GoldenError
    from mla_golden.matrix import capture
    from mla_golden.report import render_text
    from mla_golden.store import Golden, GoldenStore, WriteOutcome, key_path

    _single_threaded()
    backend = resolve(backend_spec)
    store = GoldenStore(out)
    results = []
    for case, call in capture(cases, backend):
        if stop_requested():
            break
        try:
            path = str(store.path_for(case.name))
        except GoldenError as exc:  # e.g. its folder is a symlink leading out of --out: this case fails, not the run
            results.append(Result(case.name, Status.FAILED, str(key_path(store.root, case.name)), exc.problem))
            continue
        if isinstance(call, Exception):
            results.append(Result(case.name, Status.FAILED, path, f"the case could not run: {type(call).__name__}: {call}"))
            continue
        call.provenance["case"] = {"group": case.group, "model": case.model, "tags": list(case.tags)}
        result = Result(case.name, Status.WRITTEN, path, f"planner raised: {call.error}" if call.error else "")
        try:
            result.status = Status(store.write(Golden(case.name, call), update=update).value)
        except GoldenError as exc:
            result.status, result.message = Status.FAILED, str(exc)
        if result.status is Status(WriteOutcome.REFUSED.value):
            try:
                existing = store.read(case.name)
            except GoldenError as exc:
                result.message = f"not replaced: the file there is unreadable ({exc.problem}); remove it or use --update"
            else:
                found = diff(existing.call, call, expected_name=f"golden {path}", actual_name=f"{backend.label} run", max_items=max_items)
                result.message = "a different golden exists (use --update to replace it)"
                result.report = render_text(found, more="--max-items") if render else None
                result.diff = found.to_dict()
                result.cause, result.cause_label = found.cause.value, found.cause_label
        results.append(result)
    return results


def command_results(entries: list[dict[str, Any]], command: Sequence[str], status: int) -> list[Result]:
    """One result per distinct key a recorded command's calls were written under (the worst outcome wins).

    A call the recorder could not keep as made is a ``missed`` result of its own, with the reason: never a silent pass.
    """
    by_key: dict[str, Result] = {}
    missed = [e for e in entries if e.get("outcome") == Status.MISSED]
    for entry in (e for e in entries if e.get("outcome") != Status.MISSED):
        key = entry.get("key") or f"<call {len(by_key)}>"
        result = Result(key, Status(entry.get("outcome", "failed")), entry.get("path"), entry.get("problem") or "")
        if entry.get("error"):
            result.notes.append(f"planner raised: {entry['error']}")
        seen = by_key.get(key)
        if seen is None or result.status.exit_code > seen.status.exit_code:
            by_key[key] = result
    results = list(by_key.values())
    results += [Result(f"<missed call {i}>", Status.MISSED, message=e.get("problem", "")) for i, e in enumerate(missed)]
    if status != 0:
        results.append(Result(" ".join(command), Status.FAILED, message=f"the command exited with status {status}"))
    return results


# ---------------------------------------------------------------- replay and compare



def path_problem(path: Path) -> str | None:
    """Why ``path`` gives no golden to work on (missing, or a folder without goldens), or None: every command's wording."""
    from mla_golden.store import SUFFIX, GoldenStore

    if not path.exists() and not path.is_symlink():
        return f"no such file or folder (goldens are *{SUFFIX} files)"
    if path.is_dir() and next(GoldenStore(path).paths(), None) is None:
        return f"a folder holding no goldens (*{SUFFIX} files)"
    return None


def golden_files(paths: Sequence[Path]) -> tuple[list[GoldenFile], list[Result]]:
    """Golden files under ``paths`` (files or folders), and a 'bad' result for each path that is neither."""
    from mla_golden.store import GoldenStore

    files: list[GoldenFile] = []
    bad: list[Result] = []
    for path in paths:
        if path.is_dir():
            files.extend((str(p), p.relative_to(path).as_posix()) for p in GoldenStore(path).paths())
        elif path.exists() or path.is_symlink():  # a FIFO or a dangling link too: the reader reports it
            files.append((str(path), None))
        else:
            bad.append(Result(str(path), Status.BAD, str(path), path_problem(path) or "unreadable"))
    return files, bad


def replay_worker(paths: list[GoldenFile], backend_spec: str, max_items: int, render: bool, keep: bool = False) -> list[Result]:
    """Replay each golden's inputs on the backend and diff against the golden; ``keep`` the calls of divergent ones.

    An unpinned reference replays each golden on the version that recorded it (a note says which).
    """
    from mla_golden import limits
    from mla_golden.backends import resolve
    from mla_golden.differ import diff
    from mla_golden.errors import AdaptationError

    _single_threaded()
    backend = resolve(backend_spec)
    live = backend.live_device()
    results: list[Result] = []
    found: list[tuple[GoldenFile, str]] = []
    for file in _each_timed(paths, results):
        if stop_requested():
            break
        path, golden = file[0], _load_or_bad(file, results)
        if golden is None:
            continue
        found.append((file, golden.key))
        device = golden.call.device
        if live is not None and (device.get("arch"), device.get("cu_num")) != live:
            where, here = device_label(device.get("arch"), device.get("cu_num")), device_label(*live)
            results.append(Result(golden.key, Status.SKIPPED, path, f"recorded for {where}; this GPU is {here}"))
            continue
        beyond = limits.problems(golden.call)
        if beyond:  # planning it would cost far more than the golden's size says
            results.append(Result(golden.key, Status.BAD, path, "not replayed: " + "; ".join(beyond)))
            continue
        with _guard(golden.key, path, results):
            target, note = backend.for_golden(golden.call.provenance)
            try:
                actual = target.replay(golden.call)
            except AdaptationError as exc:
                label = f"not comparable on {target.label}"
                message = f"{label}: it cannot express this call ({exc})"
                results.append(Result(golden.key, Status.NOT_COMPARABLE, path, message, notes=[note] if note else [], cause_label=label))
                continue
            diffed = diff(golden.call, actual, expected_name=f"golden {path}", actual_name=f"{target.label} replay", max_items=max_items)
            if note:
                diffed.notes.insert(0, note)
            results.append(_diff_result(golden.key, path, diffed, render, (golden.call, actual) if keep else None))
            results[-1].notes += golden.notes
    _note_placements(results, found)
    return results


def pair_worker(pairs: list[GoldenPair], max_items: int, render: bool, keep: bool = False) -> list[Result]:
    """Diff goldens pairwise (see :data:`GoldenPair`); ``keep`` the calls of divergent pairs."""
    _single_threaded()
    results: list[Result] = []
    with _no_cycle_collection():
        for key, expected, actual, by_inputs in _each_timed(pairs, results):
            if stop_requested():
                break
            _pair_paths(key, expected, actual, by_inputs, max_items, render, keep, results)
    return results


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Pause Python's cyclic garbage collector over a chunk of pairs, then restore it.

    Loading builds thousands of small acyclic objects per golden (headers,
    metadata, lists); the collector rescanning them cost a tenth of a tree
    diff. What a chunk leaves behind is freed by reference counting, and any
    cycle at the next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pair_paths(
    key: str,
    expected_file: GoldenFile,
    actual_file: GoldenFile,
    by_inputs: bool,
    max_items: int,
    render: bool,
    keep: bool,
    results: list[Result],
) -> None:
    """Load one pair and diff it into ``results`` (a 'bad' result for each side that does not load)."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import load_pair

    expected_path, actual_path = expected_file[0], actual_file[0]
    loaded = []
    for path, golden in zip((expected_path, actual_path), load_pair(expected_file, actual_file)):
        if isinstance(golden, GoldenError):
            results.append(Result(key, Status.BAD, path, golden.problem))
        else:
            loaded.append(golden)
    if len(loaded) < 2:
        return
    expected, actual = loaded
    start = len(results)
    if expected.call.op != actual.call.op:
        results.append(Result(key, Status.DIVERGED, actual_path, f"op {expected.call.op} -> {actual.call.op}"))
    else:
        with _guard(key, actual_path, results):
            results.append(_pair_one(key, expected, actual, expected_path, actual_path, by_inputs, max_items, render, keep))
    for result in results[start:]:
        result.placed += _placements([(expected_file, expected.key), (actual_file, actual.key)])


def _pair_one(
    key: str,
    expected: Golden,
    actual: Golden,
    expected_path: str,
    actual_path: str,
    by_inputs: bool,
    max_items: int,
    render: bool,
    keep: bool,
) -> Result:
    """Diff one expected/actual pair of goldens (``by_inputs``: paired by same op and input tensors, not by path)."""
    from mla_golden.differ import diff

    found = diff(expected.call, actual.call, expected_name=expected_path, actual_name=actual_path, max_items=max_items)
    result = _diff_result(key, actual_path, found, render, (expected.call, actual.call) if keep else None)
    result.against_path = expected_path
    if expected.key != actual.key:
        how = "by same op and input tensors" if by_inputs else "by path"
        result.notes.insert(0, f"paired {how}; keys {expected.key!r} vs {actual.key!r}")
        if result.status is Status.EQUAL:
            alike = "same inputs and outputs" if by_inputs else "the same call"
            result.status, result.message = Status.DIVERGED, f"{alike}, but recorded under another key"
        elif by_inputs:
            result.message = "same inputs, params changed" if found.params else "same inputs, recorded under another key"
        else:
            result.message = "recorded under another key"
    return result


#: Two goldens to diff: (key, expected file, actual file, paired by same op and input tensors rather than by path).
GoldenPair = tuple[str, "GoldenFile", "GoldenFile", bool]


def pair_trees(actual_root: Path, expected_root: Path) -> tuple[list[GoldenPair], list[Result]]:
    """Pair goldens of two trees by key (= relative path); pair the rest by same op and input tensors.

    Returns the pairs and results for goldens left on one side (and unreadable ones).
    """
    from mla_golden.errors import GoldenError
    from mla_golden.store import SUFFIX, GoldenStore, inputs_digest, load_placed

    def index(root: Path) -> dict[str, Path]:
        return {p.relative_to(root).as_posix().removesuffix(SUFFIX): p for p in GoldenStore(root).paths()}

    def found(tree: dict[str, Path], rel: str) -> GoldenFile:
        return str(tree[rel]), rel + SUFFIX

    expected, actual = index(expected_root), index(actual_root)
    pairs = [(rel, found(expected, rel), found(actual, rel), False) for rel in sorted(expected.keys() & actual.keys())]
    results: list[Result] = []
    lonely: dict[str, list[tuple[str, Golden]]] = {"expected": [], "actual": []}
    for side, tree, other in (("expected", expected, actual), ("actual", actual, expected)):
        for rel in sorted(tree.keys() - other.keys()):
            try:
                lonely[side].append((rel, load_placed(tree[rel], rel + SUFFIX)))
            except GoldenError as exc:
                results.append(Result(rel, Status.BAD, str(tree[rel]), exc.problem))
    unmatched = {rel: golden for rel, golden in lonely["expected"]}
    by_inputs: dict[tuple[str, str], list[str]] = {}
    for rel, golden in unmatched.items():
        by_inputs.setdefault((golden.call.op, inputs_digest(golden.call)), []).append(rel)
    for rel, golden in lonely["actual"]:
        twins = by_inputs.get((golden.call.op, inputs_digest(golden.call)), [])
        twin = twins.pop(0) if twins else None
        if twin is None:
            results.append(Result(golden.key, Status.ONLY_ACTUAL, str(actual[rel]), f"no golden for this call in {expected_root}"))
            continue
        pairs.append((golden.key, found(expected, twin), found(actual, rel), True))
        del unmatched[twin]
    for rel, golden in unmatched.items():
        results.append(Result(golden.key, Status.ONLY_EXPECTED, str(expected[rel]), f"no golden for this call in {actual_root}"))
    return pairs, results


def diff_trees(
    actual: Path | str,
    expected: Path | str,
    *,
    max_items: int = 20,
    render: bool = False,
    keep: bool = False,
    jobs: int = 1,
    advance: Advance | None = None,
) -> list[Result]:
    """Compare the golden tree ``actual`` with ``expected``, call by call; results sorted by key.

    Goldens pair by key, else by same op and input tensors (a renamed call);
    the rest are ONLY_ACTUAL / ONLY_EXPECTED. ``render`` adds text reports,
    ``keep`` the diffs and calls of divergent pairs (to draw them).
    """
    pairs, results = pair_trees(Path(actual), Path(expected))
    results += run_items(pair_worker, pairs, (max_items, render, keep), jobs, advance)
    misplaced(results)
    return sorted(results, key=lambda r: r.key)


# ---------------------------------------------------------------- check


def check_worker(paths: list[GoldenFile], keep: bool = False) -> list[Result]:
    """Check each golden's metadata against the planner's invariants; ``keep`` the call and findings of violated ones."""
    from mla_golden.store import content_key

    _single_threaded()
    results: list[Result] = []
    found: list[tuple[GoldenFile, str]] = []
    for file in _each_timed(paths, results):
        if stop_requested():
            break
        path, golden = file[0], _load_or_bad(file, results)
        if golden is None:
            continue
        found.append((file, golden.key))
        with _guard(golden.key, path, results):
            results.append(_check_one(golden, path, keep))
            results[-1].content = content_key(golden.call)
            results[-1].notes += golden.notes
    _note_placements(results, found)
    return results


def _check_one(golden: Golden, path: str, keep: bool) -> Result:
    from mla_golden.checks import check
    from mla_golden.report import render_check_text

    found = check(golden.call)
    notes = [f"hazard {h.hazard}: {h.message}" for h in found.hazards] + [f"skipped: {s}" for s in found.skipped]
    if found.ok:
        return Result(golden.key, Status.PASSED, path, notes=notes)
    first = found.violations[0]
    return Result(
        golden.key, Status.VIOLATED, path, f"{first.invariant} at {first.where}: {first.message}",
        report=render_check_text(found), notes=notes, checked=(golden.call, found) if keep else None,
    )  # fmt: skip
