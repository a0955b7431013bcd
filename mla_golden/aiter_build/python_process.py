"""The tree's Python layer, run in a child process (:mod:`.python_child`) and called from here.

One child per tree per Python process, started on first use and again after
it died. A call sends the arguments (:mod:`.wire`) and waits at most
:data:`CALL_TIMEOUT_S` for the answer: a tree whose helper never returns is
killed and that call fails, as one that runs out of its address space does.
Children end with this process (at exit, or by themselves when it is killed).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import inspect
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mla_golden.aiter_build import wire
from mla_golden.errors import AiterSourceError
from mla_golden.reference import Device

#: How long one call of the tree's Python may take (aiter's take milliseconds).
CALL_TIMEOUT_S = 60.0
#: How long the child may take to start: import torch, then parse and define the tree's functions.
START_TIMEOUT_S = 300.0
#: Address space the tree's Python may map beyond what the child maps once torch is imported.
MEMORY_BYTES = 2 << 30
CHILD = "mla_golden.aiter_build.python_child"


@dataclass(frozen=True)
class _Deadline:
    """When the exchange in progress must be done: a monotonic time, the seconds it allowed, what it is."""

    at: float
    seconds: float
    what: str


@dataclass(frozen=True)
class Loaded:
    """What a tree's Python defines of the planner functions, with their signatures."""

    functions: frozenset[str]
    signatures: dict[str, inspect.Signature]


class PythonProcess:
    """The child process running one tree's Python layer."""

    def __init__(self, py_root: Path, csrc_root: Path) -> None:
        self.py_root, self.csrc_root = py_root, csrc_root
        self.attention_py = py_root / "aiter" / "ops" / "attention.py"
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()
        #: the Python process the child belongs to (a fork starts its own)
        self._owner = os.getpid()
        #: the environment the child has (None: send it with the next call)
        self._env: dict[str, str] | None = None
        self.loaded: Loaded | None = None
        _children.add(self)

    def load_tree(self) -> Loaded:
        """Start the child (if it is not running) and say what the tree defines; AiterSourceError when it cannot load."""
        with self._lock:
            self._started()
            assert self.loaded is not None
            return self.loaded

    def call(
        self, name: str, device: Device, args: tuple[Any, ...], kwargs: Mapping[str, Any], outputs: frozenset[int] = frozenset()
    ) -> tuple[Any, list[tuple[str, Any]] | None]:
        """``name(*args, **kwargs)`` in the tree's Python for ``device``: its result, and the C++ call its
        compiled binding recorded (None: it reached none). ``outputs``: ids of the output buffers among the
        tensors (sent as their layout only). An error the tree's code raised is raised here as it was."""
        with self._lock:
            self._started()
            env = dict(os.environ)
            request = {"name": name, "device": tuple(vars(device).values()), "env": None if env == self._env else env,
                       "args": tuple(args), "kwargs": dict(kwargs)}  # fmt: skip
            data, sent = wire.dump_request(request, outputs)
            self._env = env
            reply = self._exchange(data, CALL_TIMEOUT_S, name)
        if "error" in reply:
            raise _raised(reply["error"])
        bound = reply.get("bound")
        if bound is not None and not (isinstance(bound, list) and all(isinstance(b, list) and len(b) == 2 and isinstance(b[0], str) for b in bound)):
            raise wire.Malformed("the tree's Python process sent a bad binding")
        result = wire.from_wire(reply.get("result"), sent)
        return result, None if bound is None else [(arg, wire.from_wire(value, sent)) for arg, value in bound]

    def pid(self) -> int:
        """The child's process id (started if it is not running)."""
        with self._lock:
            return self._started().pid

    def close(self) -> None:
        """Stop the child (the next call starts another)."""
        proc, self._proc = self._proc, None
        self._env = None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._owner != os.getpid():  # a fork: the child is the parent process's
            self._proc, self._owner, self._env = None, os.getpid(), None
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile(prefix="mla-golden-aiter-src-")
        self._stderr.seek(0)
        self._stderr.truncate()
        package_parent = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-m", CHILD, str(self.py_root), str(self.csrc_root), str(MEMORY_BYTES)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, bufsize=0,
        )  # fmt: skip
        for stream in (self._proc.stdin, self._proc.stdout):
            assert stream is not None
            os.set_blocking(stream.fileno(), False)
        what = f"loading {self.attention_py}"
        hello = self._receive(_Deadline(time.monotonic() + START_TIMEOUT_S, START_TIMEOUT_S, what))
        if "error" in hello:
            self.close()
            raise _loading_failed(self.attention_py, hello["error"])
        if self.loaded is None:
            self.loaded = _loaded(hello)
        return self._proc

    def _exchange(self, data: bytes, timeout: float, what: str) -> dict[str, Any]:
        """Send one request frame and read the reply, within ``timeout`` seconds for both."""
        deadline = _Deadline(time.monotonic() + timeout, timeout, what)
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        out = memoryview(wire.frame(data))
        fd = proc.stdin.fileno()
        while out:
            self._wait(fd, "w", deadline)
            try:
                out = out[os.write(fd, out) :]
            except BlockingIOError:
                continue
            except OSError:  # the child is gone; reading says how
                break
        return self._receive(deadline)

    def _receive(self, deadline: _Deadline) -> dict[str, Any]:
        (size,) = wire.HEADER.unpack(self._read(wire.HEADER.size, deadline))
        if size > wire.MAX_REPLY_BYTES:
            self.close()
            raise wire.Malformed(
                f"the tree's Python process sent a {size}-byte reply to {deadline.what}, more than the {wire.MAX_REPLY_BYTES} allowed"
            )
        return wire.parse_reply(self._read(size, deadline))

    def _read(self, size: int, deadline: _Deadline) -> bytes:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        chunks, left = [], size
        while left:
            self._wait(fd, "r", deadline)
            try:
                chunk = os.read(fd, min(left, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise self._died(deadline.what)
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _wait(self, fd: int, mode: str, deadline: _Deadline) -> None:
        """Until ``fd`` is ready; kills the child and raises once the deadline has passed."""
        while True:
            left = deadline.at - time.monotonic()
            if left <= 0:
                self.close()
                raise AiterSourceError(
                    f"the tree's Python ({self.attention_py}) did not finish {deadline.what} within {deadline.seconds:.0f} s: "
                    "its process was killed (a helper that never returns?)"
                )
            readable, writable, _ = select.select([fd], [], [], left) if mode == "r" else select.select([], [fd], [], left)
            if readable or writable:
                return

    def _died(self, what: str) -> AiterSourceError:
        proc = self._proc
        code = proc.wait() if proc is not None else None
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 2000))
            tail = self._stderr.read().decode(errors="replace").strip()
        self.close()
        return AiterSourceError(
            f"the tree's Python process ({self.attention_py}) ended during {what} (exit status {code})" + (f": {tail}" if tail else "")
        )


#: Every child of this process, killed at exit.
_children: weakref.WeakSet[PythonProcess] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for child in list(_children):
        child.close()


def _loaded(hello: dict[str, Any]) -> Loaded:
    functions, signatures = hello.get("functions"), hello.get("signatures")
    if not (isinstance(functions, list) and all(isinstance(f, str) for f in functions) and isinstance(signatures, dict)):
        raise wire.Malformed("the tree's Python process sent a bad hello")
    return Loaded(frozenset(functions), {str(name): wire.signature_from_wire(params) for name, params in signatures.items()})


def _loading_failed(path: Path, error: Any) -> AiterSourceError:
    raised = _raised(error)
    if isinstance(raised, AiterSourceError):
        return raised
    return AiterSourceError(f"{path}: loading the tree's Python raised {type(raised).__name__}: {raised}")


#: Exception classes standing in for the tree's own, by name (so ``type(exc).__name__`` reads as in-process).
_TREE_ERRORS: dict[str, type[Exception]] = {}


def _raised(error: Any) -> BaseException:
    """The exception an error reply describes: ours, a builtin one as itself, a tree's as a RuntimeError of its name."""
    if not isinstance(error, dict) or not all(isinstance(error.get(k), str) for k in ("type", "message", "origin")):
        return wire.Malformed("the tree's Python process sent a bad error")
    name, message, origin = error["type"], error["message"], error["origin"]
    if origin == "ours":
        return AiterSourceError(message)
    if name == "SystemExit":
        code = error.get("code")
        return SystemExit(code if code is None or isinstance(code, (int, str)) else None)
    if name == "KeyboardInterrupt":
        return KeyboardInterrupt()
    found = getattr(builtins, name, None) if origin == "builtin" else None
    if isinstance(found, type) and issubclass(found, Exception):
        with contextlib.suppress(Exception):  # one that takes more than a message (UnicodeDecodeError) falls through
            return found(message)
    if not name.isidentifier():
        name = "TreeError"
    if name not in _TREE_ERRORS and len(_TREE_ERRORS) < 64:
        _TREE_ERRORS[name] = type(name, (RuntimeError,), {"__module__": "aiter"})
    return _TREE_ERRORS.get(name, RuntimeError)(message)
