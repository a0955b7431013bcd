"""Record every planner call of any Python program (``mla-golden record --out DIR -- COMMAND``).

The program runs as a child process with a folder on ``PYTHONPATH`` holding a
``sitecustomize`` that calls :func:`install`. From then on, whenever ``aiter``
is imported (at start-up or much later), a meta-path finder wraps its planners
with a spy whose calls are written to DIR as goldens the moment they are made,
keyed by :func:`~mla_golden.golden.store.derived_key`. Processes the program starts
(vLLM workers) inherit the environment and record too.

Only the standard library (and :mod:`mla_golden.errors`, which needs nothing
else) is imported here at module level: this runs at the
start of every Python process of the recorded program.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from mla_golden.errors import HookError as HookError  # re-exported: importable from here too

#: Where the goldens go; the hook does nothing when unset.
ENV_OUT = "MLA_GOLDEN_RECORD_OUT"
#: "1": replace goldens that differ instead of refusing.
ENV_UPDATE = "MLA_GOLDEN_RECORD_UPDATE"
#: JSON-lines file the child appends one line per captured call to.
ENV_LOG = "MLA_GOLDEN_RECORD_LOG"
#: Folder holding the mla_golden package, for a child interpreter that lacks it.
ENV_PKG = "MLA_GOLDEN_PKG_DIR"
TARGET = "aiter"

SITECUSTOMIZE = '''\
"""Installed by `mla-golden record -- COMMAND`: record aiter planner calls in this process."""
import os
import sys


def _mla_golden_install():
    try:
        import mla_golden.capture.import_hook as hook
    except ImportError:
        sys.path.append(os.environ["MLA_GOLDEN_PKG_DIR"])
        import mla_golden.capture.import_hook as hook
    hook.install()
    hook.chain_sitecustomize(__file__)


_mla_golden_install()
del _mla_golden_install
'''

#: Spies installed in this process (kept alive for its lifetime).
_active: list[Any] = []


class _GoldenWriter:
    """Stands in for a spy's ``Calls``: writes each captured call as a golden at once (keeps none)."""

    def __init__(self, out: str, update: bool, log: str | None) -> None:
        self.out, self.update, self.log = out, update, log
        self.missed = _MissedLog(self)

    def append(self, call: Any) -> None:
        # Runs inside the program's planner call: it must never raise into the program.
        entry: dict[str, Any] = {"op": call.op, "error": call.error, "pid": os.getpid()}
        try:
            from mla_golden.golden.store import Golden, GoldenStore, derived_key

            store = GoldenStore(self.out)
            entry["key"] = derived_key(call)
            entry["path"] = str(store.path_for(entry["key"]))
            entry["outcome"] = store.write(Golden(entry["key"], call), update=self.update).value
            if entry["outcome"] == "refused":
                entry["problem"] = "a different golden exists at this key (use --update to replace it)"
        except Exception as exc:
            entry["outcome"] = "failed"
            entry["problem"] = f"{type(exc).__name__}: {exc}"
        self.write_log(entry)

    def write_log(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, default=str) + "\n"
        try:
            fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if self.log else 2
            try:
                os.write(fd, line.encode())  # one O_APPEND write per line: processes do not interleave
            finally:
                if fd != 2:
                    os.close(fd)
        except OSError:
            pass  # the golden is on disk (or its failure is); only the parent's tally misses it


class _MissedLog:
    """Stands in for ``Calls.missed``: each call made but not recorded becomes a log entry the parent reports."""

    def __init__(self, writer: _GoldenWriter) -> None:
        self.writer = writer

    def append(self, reason: str) -> None:
        self.writer.write_log({"outcome": "missed", "problem": reason, "pid": os.getpid()})


def _writing_spy(module: ModuleType) -> Any:
    """An entered spy on ``module``'s planners writing each call as a golden; None when it has no planners."""
    from mla_golden.capture.recorder import Spy
    from mla_golden.errors import NothingToIntercept

    spy = Spy(module)
    writer = _GoldenWriter(os.environ[ENV_OUT], os.environ.get(ENV_UPDATE) == "1", os.environ.get(ENV_LOG))
    spy.calls = writer  # type: ignore[assignment]  # the spy only appends
    try:
        spy.__enter__()
    except NothingToIntercept:
        return None  # this aiter has no planners to wrap; the program runs on unchanged
    return spy


def _wrap(module: ModuleType) -> None:
    """Spy on ``module``'s planners for the rest of the process, writing each call as a golden."""
    spy = _writing_spy(module)
    if spy is not None:
        _active.append(spy)


@contextlib.contextmanager
def recording(module: ModuleType) -> Iterator[None]:
    """Under ``record -- COMMAND``, record the planner calls of an ``aiter`` placed in ``sys.modules`` for a block.

    ``reference.as_aiter()`` puts its stand-in there directly, so no import
    (and no finder of ours) ever sees it; :func:`install` registers this
    block with it (:mod:`mla_golden.reference.stand_in_hooks`). The
    spy is left on exit, so the next stand-in's calls are written once.
    Outside a recorded process this does nothing.
    """
    spy = _writing_spy(module) if os.environ.get(ENV_OUT) else None
    try:
        yield
    finally:
        if spy is not None:
            spy.__exit__(None, None, None)


class _WrappingLoader(importlib.abc.Loader):
    """Runs the real loader, then wraps the planners of the freshly executed module."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        try:
            _wrap(module)
        except Exception as exc:  # recording must never break the program's import of aiter
            print(f"mla-golden: cannot record aiter planner calls: {type(exc).__name__}: {exc}", file=sys.stderr)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # is_package, get_resource_reader, ...


class _AiterFinder(importlib.abc.MetaPathFinder):
    """Finds ``aiter`` the way the other finders would, with a loader that wraps it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _WrappingLoader(spec.loader)
                return spec
        return None


def install() -> None:
    """Record planner calls of this process to ``$MLA_GOLDEN_RECORD_OUT`` once aiter is imported."""
    if not os.environ.get(ENV_OUT) or _active or any(isinstance(f, _AiterFinder) for f in sys.meta_path):
        return
    from mla_golden.reference.stand_in_hooks import register

    register(recording)  # reference.as_aiter()'s stand-in: placed in sys.modules, never imported
    if TARGET in sys.modules:
        _wrap(sys.modules[TARGET])
        return
    sys.meta_path.insert(0, _AiterFinder())


def chain_sitecustomize(ours: str) -> None:
    """Run the ``sitecustomize`` ours shadows, if the interpreter has one."""
    here = os.path.dirname(os.path.abspath(ours))
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(ours):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def run(command: Sequence[str], out: Path | str, *, update: bool = False) -> tuple[int, list[dict[str, Any]], int | None]:
    """Run ``command`` with the hook installed.

    Returns its exit status, one log entry per captured call, and the signal
    (SIGINT, SIGTERM) that stopped it, if one did: that signal is forwarded to
    the program's process group, which is waited for, so no process of it
    outlives the run and the hook folder is removed.
    """
    if not command:
        raise HookError("no command given after --")
    with tempfile.TemporaryDirectory(prefix="mla-golden-hook-") as tmp:
        hook_dir = Path(tmp, "hook")
        hook_dir.mkdir()
        (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        log = Path(tmp, "calls.jsonl")
        log.touch()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook_dir), env.get("PYTHONPATH")) if p)
        env[ENV_OUT] = str(Path(out).resolve())
        env[ENV_UPDATE] = "1" if update else "0"
        env[ENV_LOG] = str(log)
        env[ENV_PKG] = str(Path(__file__).resolve().parent.parent)
        try:
            status, stopped_by = _run_to_stderr(list(command), env)
        except OSError as exc:
            raise HookError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from exc
        entries = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return status, entries, stopped_by


#: After forwarding a signal, how long the program's process group gets to end before it is killed.
STOP_GRACE_S = 5.0


def _run_to_stderr(command: list[str], env: dict[str, str]) -> tuple[int, int | None]:
    """Run the program in its own process group, its stdout sent to our stderr (our stdout carries the report).

    SIGINT / SIGTERM received meanwhile go to the program's whole group; once
    its leader ended (or :data:`STOP_GRACE_S` passed) whatever is left of the
    group is killed. Returns (exit status, the signal that came or None).
    """
    try:
        target: int | None = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # stderr is not a file (e.g. captured in a test runner)
        target = None
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE if target is None else target, text=target is None, process_group=0
    )
    came: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        came.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        if target is None:
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stderr.write(line)
        while True:
            try:
                status = proc.wait(timeout=STOP_GRACE_S if came else None)
                break
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if came:  # the program's children that outlived it would go on recording
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    return status, came[0] if came else None
