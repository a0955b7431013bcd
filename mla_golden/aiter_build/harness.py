"""A built harness as a persistent process: case text in, what its five runs found out.

One process per binary per Python process serves case after case over
stdin/stdout (protocol in emu/harness_runtime.hpp); a process that died (a
crash, an emulation failure, a planner that never finished) is restarted for
the next case, and every one is killed when this process exits. Values come
back as raw bytes, read straight into numpy.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from mla_golden.errors import AiterSourceError

#: A planner that has not answered by then is taken to loop forever on garbage.
CASE_TIMEOUT_S = 120.0
#: How often the watchdog looks at the case in flight.
WATCH_INTERVAL_S = 1.0
#: Flag bits per output element (emu/harness_runtime.hpp).
STORED, PAST_END, FROM_LDS, CANARY_HIT = 1, 2, 4, 8


@dataclass
class BufferFound:
    """One output buffer after the runs: run 0's values and what each element did."""

    values: np.ndarray  # uint32 or uint64, run 0
    flags: np.ndarray  # uint8, STORED | PAST_END | FROM_LDS | CANARY_HIT
    #: elements past the end that some run changed: index past the end -> run 0's value
    tail: dict[int, int] = field(default_factory=dict)

    def _any(self, bits: int) -> NDArray[np.bool_]:
        """Elements whose flags have any of ``bits`` set (numpy types ``!=`` as Any)."""
        return cast("NDArray[np.bool_]", (self.flags & bits) != 0)

    @property
    def stored(self) -> NDArray[np.bool_]:
        return self._any(STORED)

    @property
    def past_end(self) -> NDArray[np.bool_]:
        """Stored values that changed with the bytes after an input's end."""
        return self.stored & self._any(PAST_END)

    @property
    def from_lds(self) -> NDArray[np.bool_]:
        """Stored values that changed with the LDS fill."""
        return self.stored & self._any(FROM_LDS)

    @property
    def unsettled(self) -> NDArray[np.bool_]:
        """Stored in some runs, left alone in others, for no garbage this found."""
        return self.stored & self._any(CANARY_HIT) & ~self._any(PAST_END | FROM_LDS)


@dataclass
class CaseFound:
    """A case's outcome: a failed check (kind, file, line, message), or its output buffers."""

    error: tuple[str, str, int, str] | None = None
    buffers: dict[str, BufferFound] = field(default_factory=dict)
    #: where the harness kept each tensor argument (to map written pointers back)
    addresses: dict[str, int] = field(default_factory=dict)
    #: the harness printed something for it (a failure before that may predate the case)
    answered: bool = False


class HarnessProcess:
    """The running harness of one built binary."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        #: the Python process that owns it (a forked worker starts its own)
        self.owner = os.getpid()
        #: when the case in flight must have been answered (None: no case in flight)
        self._deadline: float | None = None
        self._timed_out = False
        self._watchdog: threading.Thread | None = None

    def run(self, case_text: str) -> CaseFound:
        """Run one case; AiterSourceError when the harness fails (it is restarted next time).

        A process that dies before answering may have died before the case
        reached it: the case is given once more to a fresh one.
        """
        with self._lock:
            data = case_text.encode()
            for attempt in (1, 2):
                proc = self._started()
                found = CaseFound()
                self._timed_out = False
                self._deadline = time.monotonic() + CASE_TIMEOUT_S
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(data)
                    proc.stdin.flush()
                    return _read_case(proc, found)
                except (OSError, _Died) as exc:
                    self.close()
                    if attempt == 1 and not found.answered and not self._timed_out:
                        continue
                    detail = str(exc) if isinstance(exc, _Died) else f"{type(exc).__name__}: {exc}"
                    why = f"did not answer within {CASE_TIMEOUT_S:.0f} s" if self._timed_out else f"failed: {detail}"
                    raise AiterSourceError(f"aiter-src harness {self.binary} {why}") from None
                finally:
                    self._deadline = None
            raise AssertionError("unreachable")

    def _watch(self) -> None:
        """Kill a harness that has not answered by its deadline (one thread, not a timer per case)."""
        while True:
            time.sleep(WATCH_INTERVAL_S)
            deadline, proc = self._deadline, self._proc
            if deadline is not None and proc is not None and time.monotonic() > deadline:
                self._timed_out = True
                proc.kill()

    def pid(self) -> int:
        """The process id of the harness (started if it is not running)."""
        with self._lock:
            return self._started().pid

    def _started(self) -> subprocess.Popen[bytes]:
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="aiter-src-watchdog", daemon=True)
            self._watchdog.start()
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [str(self.binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=1 << 16
            )
        return self._proc

    def close(self) -> None:
        """Stop the process (it restarts on the next case)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):  # a pipe to a dead process fails to flush
                    stream.close()


class _Died(Exception):
    """The harness stopped mid-case; the message says how."""


def _line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stdout is not None
    raw = proc.stdout.readline()
    if not raw:
        code = proc.wait()
        err = proc.stderr.read().decode(errors="replace").strip()[-2000:] if proc.stderr else ""
        raise _Died(f"exit status {code}" + (f": {err}" if err else ""))
    return raw.decode().rstrip("\n")


def _bytes(proc: subprocess.Popen[bytes], n: int) -> bytes:
    assert proc.stdout is not None
    data = proc.stdout.read(n)
    if len(data) != n:
        raise _Died(f"exit status {proc.wait()} in the middle of a buffer")
    return data


def _read_case(proc: subprocess.Popen[bytes], found: CaseFound) -> CaseFound:
    while True:
        line = _line(proc)
        found.answered = True
        if line == "DONE":
            return found
        head, _, rest = line.partition(" ")
        if head == "ERROR":
            kind, file, lineno = rest.split(" ")
            found.error = (kind, file, int(lineno), _line(proc))
        elif head == "BUF":
            name, elem, numel = rest.split(" ")
            n, size = int(numel), int(elem)
            values = np.frombuffer(_bytes(proc, n * size), dtype=np.uint64 if size == 8 else np.uint32)
            flags = np.frombuffer(_bytes(proc, n), dtype=np.uint8)
            found.buffers[name] = BufferFound(values, flags)
        elif head == "TAIL":
            name, count = rest.split(" ")
            pairs = np.frombuffer(_bytes(proc, 16 * int(count)), dtype=np.uint64).reshape(-1, 2)
            found.buffers[name].tail = {int(i): int(v) for i, v in pairs}
        elif head == "ADDR":
            name, address = rest.split(" ")
            found.addresses[name] = int(address)
        elif head == "EMUFAIL":
            raise _Died(f"the emulation failed: {_line(proc)}")
        else:
            raise _Died(f"unexpected output {line[:200]!r}")


_processes: dict[Path, HarnessProcess] = {}
_processes_lock = threading.Lock()


@atexit.register
def _close_all() -> None:
    """A harness whose planner loops must not outlive the run given up on it (a SIGTERM'd ``--jobs 1`` run)."""
    for proc in list(_processes.values()):
        if proc.owner == os.getpid():
            proc.close()


def process_for(binary: Path) -> HarnessProcess:
    """The one harness process of ``binary`` in this Python process (a fork gets its own)."""
    key = binary.resolve()
    with _processes_lock:
        proc = _processes.get(key)
        if proc is None or proc.owner != os.getpid():
            proc = HarnessProcess(key)
            _processes[key] = proc
        return proc
