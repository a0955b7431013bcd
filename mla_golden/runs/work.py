"""What a worker does to each golden or case: record, replay, check; whatever goes wrong with one is its result.

A bad golden never stops the others (:func:`guard`); each result is stamped
with the time its golden took (:func:`each_timed`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mla_golden.cases import device_label
from mla_golden.runs.placement import note_placements
from mla_golden.runs.results import Result, Status
from mla_golden.workers import stop_requested

if TYPE_CHECKING:
    from mla_golden.call import Call
    from mla_golden.diff_data import Diff
    from mla_golden.golden.store import Golden, GoldenFile
    from mla_golden.matrix import Case

def single_threaded() -> None:
    """Planner tensors are tiny: torch's intra-op thread pool only adds overhead (and fights --jobs)."""
    import torch

    torch.set_num_threads(1)


@contextlib.contextmanager
def guard(key: str, path: str, results: list[Result]) -> Iterator[None]:
    """Whatever goes wrong with one golden is reported as 'failed' (exit 2) and never stops the others; planner code
    raising SystemExit or KeyboardInterrupt too (it runs off the main thread, where no signal raises them)."""
    from mla_golden.errors import PLANNER_EXITS, PlannerExited

    try:
        yield
    except PLANNER_EXITS as exc:
        results.append(Result(key, Status.FAILED, path, str(PlannerExited.of(exc))))
    except Exception as exc:  # noqa: BLE001 - reported with its type, the run goes on
        results.append(Result(key, Status.FAILED, path, f"{type(exc).__name__}: {exc}"))


def each_timed(items: Iterable[Any], results: list[Result]) -> Iterator[Any]:
    """``items`` one at a time, the results appended to ``results`` while the caller works on one stamped with the
    seconds that took (:attr:`Result.seconds`)."""
    for item in items:
        start, first = time.perf_counter(), len(results)
        yield item
        took = time.perf_counter() - start
        for result in results[first:]:
            result.seconds = took


def _goldens(paths: list[GoldenFile], results: list[Result], found: list[tuple[GoldenFile, str]]) -> Iterator[tuple[str, Golden]]:
    """Each of ``paths`` that loads, with its path, until a stop is asked for: a 'bad' result for one that does not,
    each timed (:func:`each_timed`: the caller's work on it counts) and noted in ``found`` for the placement check."""
    for file in each_timed(paths, results):
        if stop_requested():
            return
        golden = _load_or_bad(file, results)
        if golden is None:
            continue
        found.append((file, golden.key))
        yield file.path, golden


def _load_or_bad(file: GoldenFile, results: list[Result]) -> Golden | None:
    """The golden ``file`` holds (a walked one's key agreeing with where it was found), or None after a 'bad'
    result naming the problem."""
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import load_file

    try:
        return load_file(file)
    except GoldenError as exc:
        results.append(Result(file.path, Status.BAD, file.path, exc.problem))
        return None


def diff_result(key: str, path: str, found: Diff, render: bool, calls: tuple[Call, Call] | None) -> Result:
    """A diff as a result; rendering text (rich tables) costs, so only when it will be shown."""
    from mla_golden.diff_data import Cause
    from mla_golden.render.report import render_text

    if found.equal:
        return Result(key, Status.EQUAL, path, notes=list(found.notes))
    report = render_text(found, more="--max-items") if render else None
    status = Status.RESIZED if found.cause is Cause.RESIZED else Status.DIVERGED
    return Result(
        key, status, path, report=report, diff_json=found.to_dict(), notes=list(found.notes),
        cause=found.cause.value, cause_label=found.cause_label, diff=found if calls is not None else None, calls=calls,
    )  # fmt: skip


# ---------------------------------------------------------------- record


def record_worker(cases: list[Case], backend_spec: str, out: str, update: bool, max_items: int, render: bool) -> list[Result]:
    """Run matrix cases on the backend and write one golden per call (runs in a worker process too)."""
    from mla_golden.backends import resolve
    from mla_golden.differ import diff
    from mla_golden.errors import GoldenError
    from mla_golden.golden.store import Golden, GoldenStore, WriteOutcome, key_path
    from mla_golden.matrix import capture
    from mla_golden.render.report import render_text

    single_threaded()
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
                result.diff_json = found.to_dict()
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


# ---------------------------------------------------------------- replay


def replay_worker(paths: list[GoldenFile], backend_spec: str, max_items: int, render: bool, keep: bool = False) -> list[Result]:
    """Replay each golden's inputs on the backend and diff against the golden; ``keep`` the calls of divergent ones.

    An unpinned reference replays each golden on the version that recorded it (a note says which).
    """
    from mla_golden import limits
    from mla_golden.backends import resolve
    from mla_golden.differ import diff
    from mla_golden.errors import AdaptationError

    single_threaded()
    backend = resolve(backend_spec)
    live = backend.live_device()
    results: list[Result] = []
    found: list[tuple[GoldenFile, str]] = []
    for path, golden in _goldens(paths, results, found):
        device = golden.call.device
        if live is not None and (device.get("arch"), device.get("cu_num")) != live:
            where, here = device_label(device.get("arch"), device.get("cu_num")), device_label(*live)
            results.append(Result(golden.key, Status.SKIPPED, path, f"recorded for {where}; this GPU is {here}"))
            continue
        beyond = limits.problems(golden.call)
        if beyond:  # planning it would cost far more than the golden's size says
            results.append(Result(golden.key, Status.BAD, path, "not replayed: " + "; ".join(beyond)))
            continue
        with guard(golden.key, path, results):
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
            results.append(diff_result(golden.key, path, diffed, render, (golden.call, actual) if keep else None))
            results[-1].notes += golden.notes
    note_placements(results, found)
    return results


# ---------------------------------------------------------------- check


#: Violations a check result's JSON lists (all are counted).
JSON_VIOLATIONS = 100


def check_worker(paths: list[GoldenFile], keep: bool = False) -> list[Result]:
    """Check each golden's metadata against the planner's invariants; ``keep`` the call and findings of violated ones."""
    from mla_golden.golden.store import content_key

    single_threaded()
    results: list[Result] = []
    found: list[tuple[GoldenFile, str]] = []
    for path, golden in _goldens(paths, results, found):
        with guard(golden.key, path, results):
            results.append(_check_one(golden, path, keep))
            results[-1].content = content_key(golden.call)
            results[-1].notes += golden.notes
    note_placements(results, found)
    return results


def _check_one(golden: Golden, path: str, keep: bool) -> Result:
    from mla_golden.checks import check
    from mla_golden.render.report import render_check_text

    found = check(golden.call)
    notes = [f"hazard {h.hazard}: {h.message}" for h in found.hazards] + [f"skipped: {s}" for s in found.skipped]
    document = found.to_dict(max_violations=JSON_VIOLATIONS)
    if found.ok:
        return Result(golden.key, Status.PASSED, path, notes=notes, check_json=document)
    first = found.violations[0]
    return Result(
        golden.key, Status.VIOLATED, path, f"{first.invariant} at {first.where}: {first.message}",
        report=render_check_text(found), notes=notes, check_json=document, checked=(golden.call, found) if keep else None,
    )  # fmt: skip
