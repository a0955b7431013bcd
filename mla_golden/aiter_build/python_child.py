"""The tree's Python layer in a process of its own (``python -m mla_golden.aiter_build.python_child``).

A tree's ``aiter/ops/attention.py`` is code mla-golden does not control, so it
runs here, not in mla-golden's process (:mod:`.python_process` starts this
one): its address space is bounded (``MEMORY`` bytes beyond what the process
maps once torch is imported, set before the tree's file is even parsed), its
parent kills it when a call takes too long, and it ends itself when its
parent is gone. The tree's prints go nowhere and what it writes to stderr
into a file its parent reads when this process dies, so neither can garble a
reply. On start it sends what the tree defines (or why it cannot be loaded),
then answers one request per call (:mod:`.wire`).

Arguments: ``PY_ROOT CSRC_ROOT MEMORY``.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from mla_golden.schema import ATTENTION_PY

#: How often this process looks whether its parent is still there.
WATCH_INTERVAL_S = 0.5
#: What the tree may define that mla-golden calls: the planner wrappers and their sizing helpers.
NAMES = ("get_mla_metadata_v1", "get_mla_metadata_info_v1", "get_ps_metadata_v1", "get_ps_metadata_info_v1")
#: The device the signatures are read for (a signature does not depend on it).


def main(argv: list[str]) -> None:
    replies, requests = _protocol_streams()
    for sig in (signal.SIGINT, signal.SIGTERM):  # a terminal's Ctrl-C reaches the whole group: the parent decides
        signal.signal(sig, signal.SIG_IGN)
    parent = os.getppid()
    threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()
    import torch

    from mla_golden.aiter_build import wire

    torch.set_num_threads(1)  # one thread: a thread's arena and stack count against the address space too
    py_root, csrc_root, memory = Path(argv[0]), Path(argv[1]), int(argv[2])
    _limit_memory(memory)
    layer, hello = _load(py_root, csrc_root, memory)
    _send(replies, hello)
    while layer is not None:
        data = wire.read_frame(requests)
        if data is None:  # the parent closed the pipe
            break
        _send(replies, _answer(layer, data, memory))
    replies.flush()
    os._exit(0)  # no atexit handler the tree registered runs


def _protocol_streams() -> tuple[IO[bytes], IO[bytes]]:
    """The pipes to the parent, kept apart from fds 0-2: the tree's prints go nowhere, stdin reads nothing."""
    replies = os.fdopen(os.dup(1), "wb")
    requests = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return replies, requests


def _watch(parent: int) -> None:
    """End this process once its parent is gone (a helper that loops would otherwise run on)."""
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)


def _limit_memory(extra: int) -> None:
    """Bound the address space to what is mapped now plus ``extra`` (Linux: where RLIMIT_AS and statm are)."""
    try:
        import resource

        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (ImportError, OSError, ValueError, IndexError):
        return
    limit = pages * os.sysconf("SC_PAGE_SIZE") + extra
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _load(py_root: Path, csrc_root: Path, memory: int) -> tuple[Any, dict[str, Any]]:
    """The tree's Python layer and the hello naming its functions with their signatures (or the error)."""
    from mla_golden.aiter_build import wire
    from mla_golden.aiter_build.python_layer import AiterPython
    from mla_golden.reference import DEFAULT_DEVICE

    try:
        layer = AiterPython(py_root, csrc_root)
        probe = layer.namespace(DEFAULT_DEVICE, {})
        present = [name for name in NAMES if name in layer.functions]
        signatures = {name: wire.signature_to_wire(inspect.signature(layer.load_function(name, probe))) for name in present}
    except BaseException as exc:  # noqa: BLE001 - the tree's code may raise anything; its parent says what
        return None, _error(exc, memory, f"loading {py_root / ATTENTION_PY}")
    return layer, {"functions": present, "signatures": signatures}


def _answer(layer: Any, data: bytes, memory: int) -> dict[str, Any]:
    """One call of the tree's function: its result and the C++ call its binding recorded, or its error."""
    from mla_golden.aiter_build import wire
    from mla_golden.aiter_build.python_layer import AiterPyError
    from mla_golden.reference import Device

    request, sent = wire.load_request(data)
    name = request["name"]
    if request["env"] is not None:
        os.environ.clear()
        os.environ.update(request["env"])
    device = Device(*request["device"])
    if device not in _namespaces:
        sink: dict[str, Any] = {}
        _namespaces[device] = (layer.namespace(device, sink), sink)
    namespace, sink = _namespaces[device]
    try:
        fn = layer.load_function(name, namespace)
        sink.clear()
        result = fn(*request["args"], **request["kwargs"])
        bound = sink.get("args")
        try:
            return {
                "result": wire.to_wire(result, sent),
                "bound": None if bound is None else [[arg, wire.to_wire(value, sent)] for arg, value in bound],
            }
        except TypeError as exc:
            raise AiterPyError(f"{name} of the tree passed or returned {exc}, which mla-golden cannot take back from its process") from None
    except BaseException as exc:  # noqa: BLE001 - the tree's code may raise anything: that call's error
        return _error(exc, memory, name)


#: Namespaces per device, each with the sink its compiled bindings record into.
_namespaces: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}


def _error(exc: BaseException, memory: int, what: str) -> dict[str, Any]:
    """An error reply: the exception's type, message and where it comes from."""
    from mla_golden.errors import AiterSourceError

    if isinstance(exc, MemoryError):
        exc = AiterSourceError(f"{what}: the tree's Python ran out of memory (its process may map {memory >> 20} MiB more than torch takes)")
    origin = "ours" if isinstance(exc, AiterSourceError) else "builtin" if _shown(lambda: type(exc).__module__) == "builtins" else "tree"
    name = _shown(lambda: type(exc).__name__)[:200]
    reply: dict[str, Any] = {"type": name, "message": _shown(lambda: str(exc))[:4000], "origin": origin}
    if isinstance(exc, SystemExit):
        code = exc.code
        reply["code"] = code if code is None or isinstance(code, (int, str)) and not isinstance(code, bool) else repr(code)
    return {"error": reply}


def _shown(text: Callable[[], Any]) -> str:
    """``text()`` as a string, or a placeholder when the tree's class breaks it (no __module__, a failing __str__)."""
    try:
        return str(text())
    except BaseException:  # noqa: BLE001 - whatever the tree's code raises
        return "(cannot be shown)"


def _send(stream: IO[bytes], reply: dict[str, Any]) -> None:
    import json

    from mla_golden.aiter_build import wire

    stream.write(wire.frame(json.dumps(reply).encode()))
    stream.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
