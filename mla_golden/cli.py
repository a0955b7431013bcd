"""The ``mla-golden`` command line: record, diff, show and list goldens.

A thin typer layer over the library. Nothing heavy (torch, the library) is
imported at module level, so ``mla-golden --help`` is instant; each command
imports what it needs. Work fans out over processes (``--jobs``), not
threads: the planners read ``os.environ``, which a process shares.

Exit status everywhere: 0 all equal (or written), 1 some divergence or a
refused write, 2 bad input or usage; a bad golden never stops the others from
being checked.
"""

from __future__ import annotations

import contextlib
import enum
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

EXIT_OK, EXIT_DIVERGED, EXIT_BAD = 0, 1, 2
#: Exit status each result status contributes (the run exits with the largest).
STATUS_EXIT = {
    "written": EXIT_OK,
    "unchanged": EXIT_OK,
    "updated": EXIT_OK,
    "equal": EXIT_OK,
    "passed": EXIT_OK,
    "skipped": EXIT_OK,
    "refused": EXIT_DIVERGED,
    "diverged": EXIT_DIVERGED,
    "violated": EXIT_DIVERGED,
    "only-expected": EXIT_DIVERGED,
    "only-actual": EXIT_DIVERGED,
    "bad": EXIT_BAD,
    "failed": EXIT_BAD,
}
#: Runs at least this long get a progress bar.
PROGRESS_MIN_ITEMS = 20
DEFAULT_GOLDENS = Path("goldens")

app = typer.Typer(
    name="mla-golden",
    help="Record aiter MLA planner calls into safetensors goldens, and diff them field by field.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich's help formatter costs ~100 ms of imports, and --help must be instant.
    rich_markup_mode=None,
)


class Format(str, enum.Enum):
    text = "text"
    json = "json"


class BackendName(str, enum.Enum):
    auto = "auto"
    aiter = "aiter"
    reference = "reference"


@dataclass
class Result:
    """What happened to one golden (or one case); plain data so worker processes can return it."""

    key: str
    status: str
    path: str | None = None
    message: str = ""
    #: The expected golden's path when comparing two trees (``path`` is then the actual one).
    against_path: str | None = None
    #: The rendered diff, when there is one worth showing.
    report: str | None = None
    diff: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- output


def _stderr() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _stdout() -> Any:
    """Where reports go; piped output gets a wide page so tables keep their columns."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=200)
    return console


def _say(message: str, quiet: bool = False) -> None:
    """A line for people, on stderr (stdout stays data under --format json)."""
    if not quiet:
        _stderr().print(message, markup=False)


def _exit_code(results: Sequence[Result]) -> int:
    return max((STATUS_EXIT[r.status] for r in results), default=EXIT_OK)


def _emit(command: str, results: list[Result], fmt: Format, quiet: bool, header: dict[str, Any]) -> int:
    """Print per-result reports and the summary (text) or one JSON document; return the exit status."""
    code = _exit_code(results)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    if fmt is Format.json:
        document = {
            "format": "mla-golden-run/1",
            "command": command,
            **header,
            "results": [asdict(r) for r in results],
            "summary": counts,
            "exit_code": code,
        }
        typer.echo(json.dumps(document, indent=2, default=str))
        return code
    from rich.table import Table

    out = _stdout()
    if not quiet:
        for r in results:
            if STATUS_EXIT[r.status] == EXIT_OK:
                continue
            out.print(f"{r.status.upper()} {r.key}" + (f" ({r.path})" if r.path else ""), markup=False)
            if r.message:
                out.print(f"  {r.message}", markup=False)
            if r.report:
                out.print(r.report.rstrip(), markup=False)
            out.print()
    table = Table(title=f"mla-golden {command}", title_justify="left")
    table.add_column("status")
    table.add_column("count", justify="right")
    for status in STATUS_EXIT:
        if counts.get(status):
            table.add_row(status, str(counts[status]))
    table.add_row("total", str(len(results)), style="bold")
    out.print(table)
    problems = [r for r in results if STATUS_EXIT[r.status] != EXIT_OK]
    if problems and not quiet:
        from rich.text import Text

        where = Table(title="not ok", title_justify="left")
        for header in ("status", "key", "first difference"):
            where.add_column(header, overflow="fold")
        for r in problems:
            where.add_row(r.status, Text(r.key), Text(_headline(r)))
        out.print(where)
    verdict = {EXIT_OK: "ok", EXIT_DIVERGED: "divergence", EXIT_BAD: "bad input"}[code]
    out.print(f"exit {code} ({verdict})", markup=False)
    return code


def _headline(result: Result) -> str:
    """The first thing that differs, in one line: a params change, an error, or a field's first element."""
    diff = result.diff
    if diff is None:
        return result.message
    for kind in ("params", "device", "env"):
        if diff[kind]:
            return f"{kind}: " + ", ".join(f"{c['path']} {c['expected']} -> {c['actual']}" for c in diff[kind])
    if diff["error"]:
        return f"error: {diff['error']['expected']} -> {diff['error']['actual']}"
    for fd in (*diff["inputs"], *diff["fields"]):
        if fd["status"] == "equal":
            continue
        if fd["status"] == "shape" and not fd["count"]:
            return f"{fd['name']}: shape {fd['expected_shape']} -> {fd['actual_shape']}"
        first = fd["first"]
        return f"{fd['name']}{first['index']}: {first['expected']} -> {first['actual']} ({fd['count']} element(s))"
    return "; ".join(diff["hazards"]) or result.message


def _run_items(
    worker: Callable[..., list[Result]],
    items: list[Any],
    args: tuple[Any, ...],
    jobs: int,
    quiet: bool,
    label: str,
) -> list[Result]:
    """``worker(chunk, *args)`` over ``items`` in ``jobs`` processes, with a progress bar on long runs."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    if not items:
        return []
    console = _stderr()
    show = not quiet and len(items) >= PROGRESS_MIN_ITEMS and console.is_terminal
    progress = Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True,
        disable=not show,
    )  # fmt: skip
    chunk = max(1, min(16, len(items) // (4 * max(jobs, 1)) or 1))
    chunks = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    results: list[list[Result]] = [[] for _ in chunks]
    with progress:
        task = progress.add_task(label, total=len(items))
        if jobs <= 1:
            for i, part in enumerate(chunks):
                results[i] = worker(part, *args)
                progress.advance(task, len(part))
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # spawn: a forked child would inherit torch's thread pools half-initialised.
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(worker, part, *args): i for i, part in enumerate(chunks)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    progress.advance(task, len(chunks[futures[future]]))
    return [r for part in results for r in part]


def _single_threaded() -> None:
    """Planner tensors are tiny: torch's intra-op thread pool only adds overhead (and fights --jobs)."""
    import torch

    torch.set_num_threads(1)


def _backend(name: BackendName, quiet: bool) -> Any:
    """Resolve the backend or exit 2 saying why not; say which one runs."""
    from mla_golden.backends import BackendError, resolve

    try:
        backend = resolve(name.value)
    except BackendError as exc:
        _say(f"error: backend {name.value}: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"backend: {backend.name} ({backend.reason})", quiet)
    return backend


# ---------------------------------------------------------------- record


def _record_worker(
    cases: list[Any], backend_name: str, out: str, update: bool, max_items: int, render: bool
) -> list[Result]:
    """Run matrix cases under a spy and write one golden per call (runs in a worker process too)."""
    from mla_golden.backends import resolve
    from mla_golden.differ import diff
    from mla_golden.errors import GoldenError
    from mla_golden.matrix import capture
    from mla_golden.report import render_text
    from mla_golden.store import Golden, GoldenStore, WriteOutcome

    _single_threaded()
    backend = resolve(backend_name)
    store = GoldenStore(out)
    results = []
    for case, call in capture(cases, backend):
        path = str(store.path_for(case.name))
        if isinstance(call, Exception):
            results.append(Result(case.name, "failed", path, f"the case could not run: {type(call).__name__}: {call}"))
            continue
        call.provenance["case"] = {"group": case.group, "model": case.model, "tags": list(case.tags)}
        result = Result(case.name, "written", path, f"planner raised: {call.error}" if call.error else "")
        try:
            result.status = store.write(Golden(case.name, call), update=update).value
        except GoldenError as exc:
            result.status, result.message = "failed", str(exc)
        if result.status == WriteOutcome.REFUSED.value:
            try:
                existing = store.read(case.name)
            except GoldenError as exc:
                result.message = f"not replaced: the file there is unreadable ({exc.problem}); remove it or use --update"
            else:
                found = diff(existing.call, call, expected_name=f"golden {path}", actual_name=f"{backend.name} run", max_items=max_items)
                result.message = "a different golden exists (use --update to replace it)"
                result.report = render_text(found) if render else None
                result.diff = found.to_dict()
        results.append(result)
    return results


def _clean_stale_temps(out: Path, quiet: bool) -> None:
    """Remove temp files a killed earlier run left in ``out``, and say so."""
    from mla_golden.store import GoldenStore

    removed = GoldenStore(out).clean_stale_temps()
    if removed:
        shown = ", ".join(str(p) for p in removed[:3]) + (" ..." if len(removed) > 3 else "")
        _say(f"removed {len(removed)} temp file(s) left by an interrupted run: {shown}", quiet)


def _record_command(command: list[str], out: Path, update: bool, fmt: Format, quiet: bool) -> int:
    from mla_golden.import_hook import HookError, run

    _clean_stale_temps(out, quiet)
    _say(f"recording planner calls of: {' '.join(command)}", quiet)
    try:
        status, entries = run(command, out, update=update)
    except HookError as exc:
        _say(f"error: {exc}")
        return EXIT_BAD
    by_key: dict[str, Result] = {}
    for entry in entries:
        key = entry.get("key") or f"<call {len(by_key)}>"
        result = Result(key, entry.get("outcome", "failed"), entry.get("path"), entry.get("problem") or "")
        if entry.get("error"):
            result.notes.append(f"planner raised: {entry['error']}")
        seen = by_key.get(key)
        if seen is None or STATUS_EXIT[result.status] > STATUS_EXIT[seen.status]:
            by_key[key] = result
    results = list(by_key.values())
    if not entries:
        _say(
            "warning: the command made no aiter planner calls (did it import aiter? "
            "python -S / -I skip the sitecustomize that installs the hook)"
        )
    if status != 0:
        results.append(Result(" ".join(command), "failed", message=f"the command exited with status {status}"))
    _say(f"{len(entries)} planner call(s) captured, {len(by_key)} distinct", quiet)
    return _emit("record", results, fmt, quiet, {"out": str(out), "command_line": command, "command_status": status})


@app.command(context_settings={"allow_interspersed_args": False})
def record(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="After --: a program to run with interception installed (records every planner call it makes)."),
    ] = None,
    matrix: Annotated[Path | None, typer.Option(help="Case matrix TOML (default: the one shipped in the package).")] = None,
    out: Annotated[Path, typer.Option(help="Folder the goldens are written to.")] = DEFAULT_GOLDENS,
    backend: Annotated[BackendName, typer.Option(help="Planner to record from; auto = aiter when it works, else reference.")] = BackendName.auto,
    device: Annotated[
        list[str] | None, typer.Option(help="ARCH:CU to plan every case for instead of the matrix's devices (repeatable).")
    ] = None,
    update: Annotated[bool, typer.Option("--update", help="Replace existing goldens that differ instead of refusing.")] = False,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    max_items: Annotated[int, typer.Option(min=1, help="Divergent items shown per diff.")] = 20,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
) -> None:
    """Record goldens: every case of the matrix, or every planner call of COMMAND.

    \b
    mla-golden record --backend reference --out goldens
    mla-golden record --out my-goldens -- python -m pytest tests/test_mla.py
    """
    if command:
        if matrix is not None or device:
            _say("error: --matrix and --device do not apply when recording a command")
            raise typer.Exit(EXIT_BAD)
        raise typer.Exit(_record_command(command, out, update, format, quiet))
    from mla_golden.matrix import MatrixError, load

    _clean_stale_temps(out, quiet)
    chosen = _backend(backend, quiet)
    devices = list(device or [])
    if chosen.name == "aiter":
        live = "{}:{}".format(*chosen.live_device())
        if any(d != live for d in devices):
            _say(f"error: aiter plans for the GPU it runs on ({live}) only; drop --device or use --backend reference")
            raise typer.Exit(EXIT_BAD)
        devices = [live]
        _say(f"aiter plans for this GPU: every case is planned for {live}", quiet)
    try:
        cases = load(matrix, devices or None)
    except MatrixError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"{len(cases)} case(s) from {matrix or 'the default matrix'} -> {out}", quiet)
    render = format is Format.text and not quiet
    results = _run_items(_record_worker, cases, (chosen.name, str(out), update, max_items, render), jobs, quiet, "recording")
    header = {"backend": {"name": chosen.name, "reason": chosen.reason}, "out": str(out)}
    raise typer.Exit(_emit("record", results, format, quiet, header))


# ---------------------------------------------------------------- diff


def _replay_worker(paths: list[str], backend_name: str, max_items: int, render: bool) -> list[Result]:
    """Replay each golden's inputs on the backend and diff against the golden."""
    from mla_golden.backends import resolve
    from mla_golden.capture import replay
    from mla_golden.differ import diff
    from mla_golden.schema import AdaptationError

    _single_threaded()
    backend = resolve(backend_name)
    live = backend.live_device()
    results = []
    for path in paths:
        golden = _load_or_bad(path, results)
        if golden is None:
            continue
        device = golden.call.device
        if live is not None and (device.get("arch"), device.get("cu_num")) != live:
            where = f"{device.get('arch')}-cu{device.get('cu_num')}"
            results.append(Result(golden.key, "skipped", path, f"recorded for {where}; this GPU is {live[0]}-cu{live[1]}"))
            continue
        with _guard(golden.key, path, results):
            try:
                actual = replay(golden.call, backend.planner(golden.call.op), on=backend.tensor_device)
            except AdaptationError as exc:
                results.append(Result(golden.key, "diverged", path, f"cannot replay on {backend.reason}: {exc}"))
                continue
            found = diff(golden.call, actual, expected_name=f"golden {path}", actual_name=f"{backend.name} replay", max_items=max_items)
            results.append(_diff_result(golden.key, path, found, render))
    return results


@contextlib.contextmanager
def _guard(key: str, path: str, results: list[Result]) -> Iterator[None]:
    """Whatever goes wrong with one golden is reported as 'failed' (exit 2) and never stops the others."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - reported with its type, the run goes on
        results.append(Result(key, "failed", path, f"{type(exc).__name__}: {exc}"))


def _load_or_bad(path: str, results: list[Result]) -> Any:
    """The golden at ``path``, or None after recording a 'bad' result naming the problem."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import load

    try:
        return load(path)
    except GoldenError as exc:
        results.append(Result(path, "bad", path, exc.problem))
        return None


def _diff_result(key: str, path: str, found: Any, render: bool) -> Result:
    """A diff as a result; rendering text (rich tables) costs, so only when it will be shown."""
    from mla_golden.report import render_text

    if found.equal:
        return Result(key, "equal", path, notes=list(found.notes))
    report = render_text(found) if render else None
    return Result(key, "diverged", path, report=report, diff=found.to_dict(), notes=list(found.notes))


def _pair_worker(pairs: list[tuple[str, str, str]], max_items: int, render: bool) -> list[Result]:
    """Diff goldens pairwise: (key, expected path, actual path)."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import load

    _single_threaded()
    results = []
    for key, expected_path, actual_path in pairs:
        loaded = []
        for path in (expected_path, actual_path):
            try:
                loaded.append(load(path))
            except GoldenError as exc:
                results.append(Result(key, "bad", path, exc.problem))
        if len(loaded) < 2:
            continue
        expected, actual = loaded
        if expected.call.op != actual.call.op:
            results.append(Result(key, "diverged", actual_path, f"op {expected.call.op} -> {actual.call.op}"))
            continue
        with _guard(key, actual_path, results):
            _pair_one(key, expected, actual, expected_path, actual_path, max_items, render, results)
    return results


def _pair_one(
    key: str, expected: Any, actual: Any, expected_path: str, actual_path: str, max_items: int, render: bool,
    results: list[Result],
) -> None:  # fmt: skip
    """Diff one expected/actual pair of goldens into ``results``."""
    from mla_golden.differ import diff

    found = diff(expected.call, actual.call, expected_name=expected_path, actual_name=actual_path, max_items=max_items)
    result = _diff_result(key, actual_path, found, render)
    result.against_path = expected_path
    if expected.key != actual.key:
        result.notes.insert(0, f"paired by same op and input tensors; keys {expected.key!r} vs {actual.key!r}")
        if result.status == "equal":
            result.status, result.message = "diverged", "same inputs and outputs, but recorded under another key"
        else:
            result.message = "same inputs, params changed" if found.params else "same inputs, recorded under another key"
    results.append(result)


def _golden_files(paths: Sequence[Path]) -> tuple[list[str], list[Result]]:
    """Golden files under ``paths`` (files or folders), and a 'bad' result for each path that is neither."""
    from mla_golden.store import SUFFIX, GoldenStore

    files: list[str] = []
    bad: list[Result] = []
    for path in paths:
        if path.is_dir():
            files.extend(str(p) for p in GoldenStore(path).paths())
        elif path.is_file():
            files.append(str(path))
        else:
            bad.append(Result(str(path), "bad", str(path), f"no such file or folder (goldens are *{SUFFIX} files)"))
    return files, bad


def _pair_trees(actual_root: Path, expected_root: Path) -> tuple[list[tuple[str, str, str]], list[Result]]:
    """Pair goldens of two trees by key (= relative path); pair the rest by same op and input tensors.

    Returns the pairs and results for goldens left on one side (and unreadable ones).
    """
    from mla_golden.errors import GoldenError
    from mla_golden.store import SUFFIX, GoldenStore, inputs_digest, load

    def index(root: Path) -> dict[str, Path]:
        return {p.relative_to(root).as_posix().removesuffix(SUFFIX): p for p in GoldenStore(root).paths()}

    expected, actual = index(expected_root), index(actual_root)
    pairs = [(rel, str(expected[rel]), str(actual[rel])) for rel in sorted(expected.keys() & actual.keys())]
    results: list[Result] = []
    lonely: dict[str, list[tuple[str, Any]]] = {"expected": [], "actual": []}
    for side, tree, other in (("expected", expected, actual), ("actual", actual, expected)):
        for rel in sorted(tree.keys() - other.keys()):
            try:
                lonely[side].append((rel, load(tree[rel])))
            except GoldenError as exc:
                results.append(Result(rel, "bad", str(tree[rel]), exc.problem))
    unmatched = {rel: golden for rel, golden in lonely["expected"]}
    by_inputs: dict[tuple[str, str], list[str]] = {}
    for rel, golden in unmatched.items():
        by_inputs.setdefault((golden.call.op, inputs_digest(golden.call)), []).append(rel)
    for rel, golden in lonely["actual"]:
        twins = by_inputs.get((golden.call.op, inputs_digest(golden.call)), [])
        twin = twins.pop(0) if twins else None
        if twin is None:
            results.append(Result(golden.key, "only-actual", str(actual[rel]), f"no golden for this call in {expected_root}"))
            continue
        pairs.append((golden.key, str(expected[twin]), str(actual[rel])))
        del unmatched[twin]
    for rel, golden in unmatched.items():
        results.append(Result(golden.key, "only-expected", str(expected[rel]), f"no golden for this call in {actual_root}"))
    return pairs, results


@app.command()
def diff(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Golden files or folders (default: ./goldens).", show_default=False)
    ] = None,
    backend: Annotated[BackendName, typer.Option(help="Planner to replay on; auto = aiter when it works, else reference.")] = BackendName.auto,
    against: Annotated[
        Path | None,
        typer.Option(help="Compare with this golden tree (expected) instead of replaying; PATHS is then one tree (actual)."),
    ] = None,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    max_items: Annotated[int, typer.Option(min=1, help="Divergent items shown per diff.")] = 20,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
    html: Annotated[
        Path | None, typer.Option(help="Also write a self-contained HTML report (schedules drawn, divergent works marked).")
    ] = None,
    png: Annotated[Path | None, typer.Option(help="Also draw the first divergent call as a PNG (needs the plot extra).")] = None,
) -> None:
    """Diff goldens: replay their inputs on a backend, or compare two golden trees call by call.

    \b
    mla-golden diff goldens --backend reference
    mla-golden diff goldens-aiter-new --against goldens-aiter-old
    """
    roots = list(paths or [DEFAULT_GOLDENS])
    if against is not None:
        if len(roots) != 1 or not roots[0].is_dir() or not against.is_dir():
            _say("error: --against compares two folders: mla-golden diff ACTUAL_DIR --against EXPECTED_DIR")
            raise typer.Exit(EXIT_BAD)
        pairs, results = _pair_trees(roots[0], against)
        render = format is Format.text and not quiet
        results += _run_items(_pair_worker, pairs, (max_items, render), jobs, quiet, "comparing")
        header = {"mode": "against", "expected": str(against), "actual": str(roots[0])}
        results.sort(key=lambda r: r.key)
        if html is not None:
            _write_html(html, results, None, max_items, quiet)
        if png is not None:
            _write_png(png, results, None, quiet)
        raise typer.Exit(_emit("diff", results, format, quiet, header))
    files, results = _golden_files(roots)
    if not files and not results:
        _say(f"error: no goldens under {', '.join(map(str, roots))}")
        raise typer.Exit(EXIT_BAD)
    chosen = _backend(backend, quiet)
    render = format is Format.text and not quiet
    results += _run_items(_replay_worker, files, (chosen.name, max_items, render), jobs, quiet, "replaying")
    header = {"mode": "replay", "backend": {"name": chosen.name, "reason": chosen.reason}}
    if html is not None:
        _write_html(html, results, chosen, max_items, quiet)
    if png is not None:
        _write_png(png, results, chosen, quiet)
    raise typer.Exit(_emit("diff", results, format, quiet, header))


#: Divergent calls drawn in an HTML report (the summary table lists every call).
HTML_MAX_PICTURES = 50


def _divergent_calls(results: list[Result], backend: Any, limit: int) -> dict[str, tuple[Any, Any]]:
    """(expected, actual) calls of the first ``limit`` diverged results, by key.

    Workers return plain data, so the calls are loaded (or replayed) again here.
    """
    from mla_golden.capture import replay
    from mla_golden.store import load

    calls: dict[str, tuple[Any, Any]] = {}
    for r in results:
        if len(calls) >= limit:
            break
        if r.status != "diverged" or not r.path or r.diff is None:
            continue
        if r.against_path is not None:
            calls[r.key] = (load(r.against_path).call, load(r.path).call)
        else:
            expected = load(r.path).call
            calls[r.key] = (expected, replay(expected, backend.planner(expected.op), on=backend.tensor_device))
    return calls


def _write_html(path: Path, results: list[Result], backend: Any, max_items: int, quiet: bool) -> None:
    """Write the HTML report of a diff run: every result in the summary, divergent ones drawn."""
    from mla_golden.differ import diff
    from mla_golden.html import Entry, render_html

    drawn = _divergent_calls(results, backend, HTML_MAX_PICTURES)
    entries = []
    for r in results:
        if r.key in drawn:
            expected, actual = drawn[r.key]
            entries.append(Entry(r.key, diff(expected, actual, max_items=max_items), expected, actual))
        elif r.status == "equal":
            entries.append(Entry(r.key))
        else:
            entries.append(Entry(r.key, problem=f"{r.status}: {r.message}"))
    from mla_golden.files import atomic_write

    atomic_write(path, render_html(entries, title="mla-golden diff"))
    _say(f"HTML report: {path}", quiet)


def _write_png(path: Path, results: list[Result], backend: Any, quiet: bool) -> None:
    """Draw the first divergent call, expected beside actual (the plot extra)."""
    from mla_golden.plot import PlotExtraMissing, save_png

    first = _divergent_calls(results, backend, 1)
    if not first:
        _say(f"no divergent call to draw; {path} not written", quiet)
        return
    key, (expected, actual) = next(iter(first.items()))
    try:
        save_png(path, expected, actual, title=key)
    except PlotExtraMissing as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    _say(f"PNG of {key}: {path}", quiet)


# ---------------------------------------------------------------- check


def _check_worker(paths: list[str]) -> list[Result]:
    """Check each golden's metadata against the planner's invariants."""
    _single_threaded()
    results = []
    for path in paths:
        golden = _load_or_bad(path, results)
        if golden is None:
            continue
        with _guard(golden.key, path, results):
            _check_one(golden, path, results)
    return results


def _check_one(golden: Any, path: str, results: list[Result]) -> None:
    from mla_golden.checks import check
    from mla_golden.report import render_check_text

    found = check(golden.call)
    hazards = [f"hazard {h.hazard}: {h.message}" for h in found.hazards] + [f"skipped: {s}" for s in found.skipped]
    if found.ok:
        results.append(Result(golden.key, "passed", path, notes=hazards))
        return
    first = found.violations[0]
    results.append(
        Result(golden.key, "violated", path, f"{first.invariant} at {first.where}: {first.message}",
               report=render_check_text(found), notes=hazards)  # fmt: skip
    )


@app.command("check")
def check_(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Golden files or folders (default: ./goldens).", show_default=False)
    ] = None,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary.")] = False,
) -> None:
    """Check goldens against what the kernels rely on (coverage, splits, reduce groups), no golden to compare with.

    \b
    mla-golden check goldens
    """
    files, results = _golden_files(list(paths or [DEFAULT_GOLDENS]))
    if not files and not results:
        _say("error: no goldens found")
        raise typer.Exit(EXIT_BAD)
    results += _run_items(_check_worker, files, (), jobs, quiet, "checking")
    raise typer.Exit(_emit("check", results, format, quiet, {}))


# ---------------------------------------------------------------- show and list


def _show_data(golden: Any, cu: int | None, work: int | None) -> dict[str, Any]:
    """Everything ``show`` prints, as plain data; work items grouped by CU part."""
    from mla_golden.geometry import describe_schedule
    from mla_golden.schema import OUTPUTS

    call = golden.call
    data: dict[str, Any] = {
        "key": golden.key,
        "path": str(golden.path),
        "op": call.op,
        "params": call.params,
        "device": call.device,
        "env": call.env,
        "provenance": call.provenance,
        "error": call.error,
        "inputs": {name: t.tolist() for name, t in call.inputs.items()},
        "buffers": {
            name: {**call.buffers[name], "written": int(call.written[name].sum()) if call.written else 0}
            for name in OUTPUTS
        },
        "cu_parts": [],
        "reduce_groups": [],
    }
    if call.error is None:
        data.update(describe_schedule(call, cu=cu, work=work))
    return data


def _clip(values: list[int], limit: int = 16) -> str:
    return str(values) if len(values) <= limit else f"{values[:limit]} ... ({len(values)} values)"


@app.command()
def show(
    golden: Annotated[Path, typer.Argument(help="A golden file.")],
    cu: Annotated[int | None, typer.Option(min=0, help="Only this CU part's work items.")] = None,
    work: Annotated[int | None, typer.Option(min=0, help="Only this work item (and its CU part).")] = None,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
    html: Annotated[Path | None, typer.Option(help="Also write the schedule as a self-contained HTML picture.")] = None,
    png: Annotated[Path | None, typer.Option(help="Also draw the schedule as a PNG (needs the plot extra).")] = None,
) -> None:
    """Show one golden: header, params, device, provenance, inputs, work items by CU part, reduce groups."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import load

    try:
        loaded = load(golden)
    except GoldenError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(EXIT_BAD) from exc
    if html is not None:
        from mla_golden.files import atomic_write
        from mla_golden.html import Entry, render_html

        atomic_write(html, render_html([Entry(loaded.key, expected=loaded.call)], title=f"mla-golden show {loaded.key}"))
        _say(f"HTML picture: {html}")
    if png is not None:
        from mla_golden.plot import PlotExtraMissing, save_png

        try:
            save_png(png, loaded.call, title=loaded.key)
        except PlotExtraMissing as exc:
            _say(f"error: {exc}")
            raise typer.Exit(EXIT_BAD) from exc
        _say(f"PNG picture: {png}")
    data = _show_data(loaded, cu, work)
    if format is Format.json:
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.table import Table

    out = _stdout()
    p = out.print
    p(f"{data['key']}  ({data['op']}, {data['path']})", markup=False)
    prov = data["provenance"]
    aiter = prov.get("aiter") or {}
    p(
        f"recorded by {prov.get('backend')} at {prov.get('created')}"
        + (f", aiter {aiter.get('version')} {aiter.get('commit') or ''}".rstrip() if aiter else "")
        + f", torch {prov.get('torch')}",
        markup=False,
    )
    p(f"device: {json.dumps(data['device'])}", markup=False)
    p(f"env: {json.dumps(data['env'])}", markup=False)
    p("params: " + ", ".join(f"{k}={v}" for k, v in data["params"].items()), markup=False)
    for note in prov.get("capture", {}).get("notes", []):
        p(f"note: {note}", markup=False)
    for name, values in data["inputs"].items():
        p(f"input {name}: {_clip(values)}", markup=False)
    if data["error"] is not None:
        p(f"the planner raised: {data['error']}", markup=False)
        return
    for name, spec in data["buffers"].items():
        p(f"buffer {name}: {spec['dtype']} {spec['shape']}, {spec['written']} element(s) written", markup=False)
    from mla_golden.schema import format_cell, schema_for

    columns = schema_for(data["op"]).work_columns
    table = Table(title="work items by CU part", title_justify="left", show_edge=False)
    for header in ("cu part", "work", *columns):
        table.add_column(header, justify="right")
    for part in data["cu_parts"]:
        if not part["items"] and (cu is None and work is None):
            continue
        for i, item in enumerate(part["items"]):
            cells = [format_cell(c, item["columns"][c]) for c in columns] if item["columns"] else ["(not written)"] + [""] * (len(columns) - 1)
            table.add_row(str(part["cu_part"]) if i == 0 else "", str(item["work"]), *cells)
        if not part["items"]:
            table.add_row(str(part["cu_part"]), "-", "(no work)", *[""] * (len(columns) - 1))
    out.print(table)
    if data["reduce_groups"]:
        p("reduce groups:", markup=False)
        for g in data["reduce_groups"]:
            p(f"  group {g['group']}: qo {g['qo_range']} <- partials {g['partials']}", markup=False)


@app.command("list")
def list_(
    folder: Annotated[Path, typer.Argument(help="Golden folder.")] = DEFAULT_GOLDENS,
    format: Annotated[Format, typer.Option(help="text for people, json for machines.")] = Format.text,
) -> None:
    """List goldens: one row per golden (op, device, shape/dtype, backend, aiter version, error)."""
    from mla_golden.errors import GoldenError
    from mla_golden.store import GoldenStore, derived_key, load

    if not folder.is_dir():
        _say(f"error: {folder} is not a folder")
        raise typer.Exit(EXIT_BAD)
    rows: list[dict[str, Any]] = []
    for path in GoldenStore(folder).paths():
        try:
            golden = load(path)
        except GoldenError as exc:
            rows.append({"path": str(path), "problem": exc.problem})
            continue
        call = golden.call
        aiter = call.provenance.get("aiter") or {}
        rows.append(
            {
                "key": golden.key,
                "path": str(path),
                "op": call.op,
                "device": f"{call.device.get('arch')}-cu{call.device.get('cu_num')}",
                "shape": derived_key(call).split("/")[2].rsplit("-", 1)[0],
                "backend": call.provenance.get("backend"),
                "aiter": aiter.get("version") or aiter.get("commit"),
                "error": call.error,
            }
        )
    code = EXIT_BAD if any("problem" in r for r in rows) else EXIT_OK
    if format is Format.json:
        typer.echo(json.dumps({"format": "mla-golden-list/1", "folder": str(folder), "goldens": rows}, indent=2))
        raise typer.Exit(code)
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} golden(s) in {folder}", title_justify="left")
    for header in ("key", "op", "device", "shape/dtype", "backend", "aiter", "error"):
        table.add_column(header, overflow="fold")
    for r in rows:
        if "problem" in r:
            cells = [r["path"], "(unreadable)", "", "", "", "", r["problem"]]
        else:
            error = (r["error"][:60] + "...") if r["error"] and len(r["error"]) > 60 else (r["error"] or "")
            cells = [r["key"], r["op"], r["device"], r["shape"], str(r["backend"]), str(r["aiter"] or "-"), error]
        table.add_row(*(Text(c) for c in cells))
    _stdout().print(table)
    raise typer.Exit(code)


def main() -> None:
    """Entry point for ``python -m mla_golden.cli``."""
    app(prog_name="mla-golden")


if __name__ == "__main__":
    sys.exit(main())
