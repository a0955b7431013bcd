"""A headless Chromium driven over the DevTools protocol on a pipe: load a page, measure it, screenshot it.

No driver package and no network: Chromium's ``--remote-debugging-pipe`` reads
JSON commands (each ending in a NUL byte) on file descriptor 3 and writes
replies and events on 4. That is all the tests need: a viewport of a given
size, ``getBoundingClientRect`` through ``Runtime.evaluate``, and a PNG.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from helpers.repo import ROOT

#: Where the tests keep their screenshots (ignored by git).
ARTIFACTS = Path(os.environ.get("MLA_GOLDEN_ARTIFACTS", ROOT / ".artifacts")) / "browser"
#: Where Debian's package puts it (what .ci/run installs), then other common names.
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",  # containers often have a small /dev/shm
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    """The browser would not start or answered with an error."""


def _high(fd: int) -> int:
    """``fd`` moved to a number >= 10 (close-on-exec)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def find_browser() -> str | None:
    """$MLA_GOLDEN_BROWSER when set (a path that is not there counts as no browser), else the first candidate found."""
    chosen = os.environ.get("MLA_GOLDEN_BROWSER")
    if chosen is not None:
        return shutil.which(chosen)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process with one page; use as a context manager."""

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="mla-golden-chromium-")
        # Pipe ends numbered 10 and up, so that making them 3 and 4 in the child clobbers none of them.
        to_child_r, self._to_child = (_high(fd) for fd in os.pipe())
        self._from_child, from_child_w = (_high(fd) for fd in os.pipe())

        def plumb() -> None:  # runs in the child before exec: the pipe ends become fds 3 and 4 (inheritable)
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self._log = Path(self._profile) / "stderr.log"
        with open(self._log, "wb") as log:
            self._process = subprocess.Popen(
                [executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                close_fds=False, preexec_fn=plumb,  # our other fds are close-on-exec already
            )  # fmt: skip
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None
        try:
            target = self.send("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.send("Page.enable")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ protocol

    def _read_message(self) -> dict[str, Any]:
        """The browser's next message, waiting as long as it lives: no deadline a loaded machine could miss (a browser
        that hangs alive is the fault, and keeps the test waiting)."""
        while b"\0" not in self._buffer:
            if self._process.poll() is not None:
                raise BrowserError(f"no answer from the browser (exit status {self._process.poll()}){self._stderr()}")
            ready, _, _ = select.select([self._from_child], [], [], 1.0)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed its pipe (exit status {self._process.wait()}){self._stderr()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        reply: dict[str, Any] = json.loads(message)
        return reply

    def _stderr(self) -> str:
        try:
            lines = self._log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "; its last words:\n" + "\n".join(lines[-15:]) if lines else ""

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and wait for its reply."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self._session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def _wait_event(self, method: str) -> dict[str, Any]:
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method:
                    return self._events.pop(i)
            event = self._read_message()
            if "method" in event:
                self._events.append(event)

    # ------------------------------------------------------------ what tests use

    def open(self, url: str, width: int, height: int) -> None:
        """Load ``url`` in a ``width`` x ``height`` viewport and wait for its load event."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self._events.clear()
        self.send("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression evaluated in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:60]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the viewport."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if self._process.poll() is None:
                try:
                    self.send("Browser.close")
                except (BrowserError, OSError):
                    pass
                try:
                    self._process.wait(10)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait(10)
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
