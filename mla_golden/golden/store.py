"""The golden store: one call per safetensors file, written atomically.

Format (docs/format.md; encoded and checked in :mod:`mla_golden.golden.format`).
Paths come only from keys the caller gives, sanitised, and every check on a key
lives in :mod:`mla_golden.golden.keys`; nothing read from a file ever becomes a path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

import torch

from mla_golden.call import Call
from mla_golden.cases import case_key
from mla_golden.differ import CONTENT_DEVICE, same_content
from mla_golden.errors import GoldenError
from mla_golden.files import HOST, TEMP_SUFFIX, fsync_dir, write_temp
from mla_golden.golden import safetensors_file
from mla_golden.golden.format import FORMAT, FORMAT_V1, V1_NOTE, decode, encode
from mla_golden.golden.keys import OBTAINED, SUFFIX, check_placed, check_read, key_path
from mla_golden.golden.rules import check_call
from mla_golden.schema import MLA_OP, schema_for

#: SUFFIX and key_path are the key's (mla_golden.golden.keys), named here too for the runs that walk stores.
__all__ = ["FORMAT", "FORMAT_V1", "SUFFIX", "Golden", "GoldenStore", "WriteOutcome", "key_path", "load", "write"]
FOREIGN_STALE_AFTER_S = 3600.0


@dataclass
class Golden:
    """A call as stored under ``key`` (``path`` where it was read from or written to)."""

    key: str
    call: Call
    path: Path | None = None
    #: The format it was read in (or will be written in).
    format: str = FORMAT
    #: What a reader should know, e.g. that an mla-golden/1 file carries no digest.
    notes: list[str] = field(default_factory=list)


class WriteOutcome(str, Enum):
    WRITTEN = "written"
    UNCHANGED = "unchanged"
    UPDATED = "updated"
    REFUSED = "refused"


# ---------------------------------------------------------------- derived keys and digests

_SHORT_DTYPES = {
    None: "none",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.float8_e4m3fn": "fp8",
    "torch.float8_e4m3fnuz": "fp8fnuz",
}


def _short(dtype: str | None) -> str:
    return _SHORT_DTYPES.get(dtype, str(dtype).removeprefix("torch."))


def _tensor_digest(tensor: torch.Tensor) -> list[Any]:
    data = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return [str(tensor.dtype), list(tensor.shape), hashlib.sha256(data).hexdigest()]


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def inputs_digest(call: Call) -> str:
    """Same for two calls of the same op with the same input tensors."""
    return _digest({"op": call.op, "inputs": {n: _tensor_digest(t) for n, t in sorted(call.inputs.items())}})


def shape_label(call: Call) -> str:
    """The call's shape and dtypes in a few characters (``b4-h128-q1-p1-fp8-fp8``); part of :func:`derived_key`."""
    p = call.params
    batch = max(call.inputs[schema_for(call.op).inputs[0]].numel() - 1, 0)
    if call.op == MLA_OP:
        q, kv = _short(p.get("dtype_q_nope")), _short(p.get("dtype_kv_nope"))
        rope = "" if (p.get("dtype_q_rope"), p.get("dtype_kv_rope")) == (p.get("dtype_q_nope"), p.get("dtype_kv_nope")) else "-mixed"
        return f"b{batch}-h{p.get('num_heads_per_head_k')}-q{p.get('max_seqlen_qo')}-p{p.get('page_size')}-{q}-{kv}{rope}"
    return f"b{batch}-g{p.get('gqa_ratio')}-hk{p.get('num_heads_k')}-qg{p.get('qlen_granularity')}-kg{p.get('kvlen_granularity')}"


def derived_key(call: Call) -> str:
    """``<op>/<arch>-cu<N>/<shape-and-dtype>-<digest>``: same call, same key; different calls, different keys.

    The digest covers everything that determines the output: inputs (shapes,
    dtypes, bytes), params, device, env and buffer shapes.
    """
    digest = _digest(
        {
            "op": call.op,
            "inputs": {n: _tensor_digest(t) for n, t in sorted(call.inputs.items())},
            "params": call.params,
            "device": {k: call.device.get(k) for k in CONTENT_DEVICE},
            "env": call.env,
            "buffers": call.buffers,
        }
    )[:12]
    return case_key(call.op, call.device.get("arch", "unknown"), call.device.get("cu_num", 0), f"{shape_label(call)}-{digest}")


#: A failing test's call, kept next to its golden; never a golden itself.
OBTAINED_SUFFIX = OBTAINED + SUFFIX


class GoldenFile(NamedTuple):
    """A golden file to read."""

    path: str
    #: For a file found by walking a folder, its path under that folder ('/'-separated, which its key must agree
    #: with); None for a file named on its own.
    under: str | None


def obtained_path(golden_path: Path) -> Path:
    """Where a failing call is kept next to the golden at ``golden_path``."""
    return golden_path.with_name(golden_path.name.removesuffix(SUFFIX) + OBTAINED_SUFFIX)


# ---------------------------------------------------------------- encoding


def to_bytes(golden: Golden) -> bytes:
    """The safetensors bytes of a golden; GoldenError when the reader would refuse them."""
    problems = check_call(golden.call, golden.key)
    if problems:
        raise GoldenError(golden.path or golden.key, "cannot be stored as a golden: " + "; ".join(problems))
    tensors, metadata = encode(golden.call, golden.key)
    return safetensors_file.dumps(tensors, metadata)


def content_key(call: Call) -> str:
    """:func:`mla_golden.differ.same_content` as a key: two goldens share one exactly when the differ calls them the
    same call, so grouping a tree's goldens by it finds its copies without diffing every pair.

    It digests what the differ compares, and nothing else: op, params, the
    device's ``CONTENT_DEVICE`` fields (not the GPU's name), env, error,
    strides, inputs and, for a call that returned, its buffers and outputs
    (a golden's unwritten elements and pointers are 0, so its whole outputs
    and written masks stand for what the differ compares). Key and
    provenance never count.
    """
    returned = call.error is None
    device = {k: call.device.get(k) for k in CONTENT_DEVICE}
    return _digest(
        {
            "call": [call.op, call.params, device, call.env, call.buffers if returned else None, call.error, call.strides],
            "tensors": {
                f"{kind}.{n}": _tensor_digest(t)
                for kind, group in (("input", call.inputs), ("output", call.outputs), ("written", call.written))
                if kind == "input" or returned
                for n, t in sorted(group.items())
            },
        }
    )


# ---------------------------------------------------------------- reading


def load(path: Path | str) -> Golden:
    """Read and validate one golden; GoldenError naming the file and problem otherwise.

    Only a regular file is opened; the header is checked before any tensor
    data is read, and only the bytes the header declares are read. A v2
    file's content digest is checked before its tensors are decoded.
    """
    path = Path(path)
    return _decoded(path, safetensors_file.read(path))


def _decoded(path: Path, raw: safetensors_file.RawFile) -> Golden:
    """The golden ``raw`` (read from ``path``) holds; GoldenError when it is not a valid one."""
    key, call, fmt = decode(path, raw)
    return Golden(key=key, call=call, path=path, format=fmt, notes=[V1_NOTE] if fmt == FORMAT_V1 else [])


def load_placed(path: Path | str, under: str) -> Golden:
    """A golden found by a walk: :func:`load`, and its key must agree with ``under``, its path under the folder
    walked (:func:`mla_golden.golden.keys.check_placed`)."""
    return _placed(load(path), path, under)


def _placed(golden: Golden, path: Path | str, under: str) -> Golden:
    check_placed(path, golden.key, under)
    return golden


def load_file(file: GoldenFile) -> Golden:
    """A named file as :func:`load` reads it, a walked one as :func:`load_placed`."""
    return load(file.path) if file.under is None else load_placed(file.path, file.under)


def load_pair(first: GoldenFile, second: GoldenFile) -> tuple[Golden | GoldenError, Golden | GoldenError]:
    """Both files of a pair (:data:`GoldenFile`: a walked one's key must agree with where it was found),
    each a golden or the error that refused it.

    When the second file's bytes are exactly the first's (an unchanged golden
    in two checkouts), its decoding is the first's: the same bytes pass the
    same checks and decode to the same call, so it is not decoded again (the
    two goldens share that Call: a diff only reads it).
    """
    raw: safetensors_file.RawFile | None = None
    one: Golden | GoldenError
    two: Golden | GoldenError
    try:
        raw = safetensors_file.read(Path(first.path))
        one = _decoded(Path(first.path), raw)
        if first.under is not None:
            one = _placed(one, first.path, first.under)
    except GoldenError as exc:
        one = exc
    try:
        if isinstance(one, Golden) and raw is not None and safetensors_file.holds(Path(second.path), raw):
            two = Golden(one.key, one.call, Path(second.path), one.format, list(one.notes))
            if second.under is not None:
                two = _placed(two, second.path, second.under)
        else:
            two = load_file(second)
    except GoldenError as exc:
        two = exc
    return one, two


# ---------------------------------------------------------------- writing


def write(path: Path, golden: Golden, *, update: bool = False) -> WriteOutcome:
    """Write ``golden`` to ``path`` atomically.

    Temp file in the same folder, fsync, then a no-clobber link (or a rename
    when ``update``): readers see the old file or the new one, never a part.
    An identical golden already there is left alone (UNCHANGED); a different
    one is REFUSED unless ``update``. Concurrent writers of one key end with
    one valid file.
    """
    path = Path(path)
    data = to_bytes(golden)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GoldenError(path, f"cannot create folder {path.parent}: {exc.strerror or exc}") from exc
    existed = path.exists()
    if existed:
        outcome = _compare_existing(path, golden)
        older = _older_format(path) if outcome is WriteOutcome.UNCHANGED and update else None
        if older is not None:
            # Same content in an older format: rewritten in this one, keeping when and how it was recorded.
            data = to_bytes(Golden(golden.key, dataclasses.replace(golden.call, provenance=older.call.provenance)))
        elif outcome is WriteOutcome.UNCHANGED or (outcome is WriteOutcome.REFUSED and not update):
            return outcome
    tmp = _write_temp(path, data)
    try:
        if update:
            os.replace(tmp, path)
            fsync_dir(path.parent)
            return WriteOutcome.UPDATED if existed else WriteOutcome.WRITTEN
        try:
            os.link(tmp, path)
        except FileExistsError:
            # Another writer got there first: same content is fine, else refuse.
            return _compare_existing(path, golden)
        fsync_dir(path.parent)
        return WriteOutcome.WRITTEN
    except OSError as exc:
        raise GoldenError(path, f"cannot write: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _compare_existing(path: Path, golden: Golden) -> WriteOutcome:
    try:
        existing = load(path)
    except GoldenError:
        return WriteOutcome.REFUSED  # a corrupt file is never silently replaced
    if existing.key == golden.key and same_content(existing.call, golden.call):
        return WriteOutcome.UNCHANGED
    return WriteOutcome.REFUSED


def _older_format(path: Path) -> Golden | None:
    """The golden at ``path`` when it is stored in an older format than :data:`FORMAT`."""
    with contextlib.suppress(GoldenError):
        existing = load(path)
        if existing.format != FORMAT:
            return existing
    return None


def _write_temp(path: Path, data: bytes) -> Path:
    try:
        return write_temp(path, data)
    except OSError as exc:
        raise GoldenError(path, f"cannot write in {path.parent}: {exc.strerror or exc}") from exc


# ---------------------------------------------------------------- the tree


class GoldenStore:
    """A folder of goldens addressed by key."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path_for(self, key: str) -> Path:
        """Where ``key`` is stored; GoldenError for a bad name or one that leads outside the root (a symlink)."""
        path = key_path(self.root, key)
        root = self.root.resolve()
        # resolve() follows every symlink that exists so far: a linked folder that leads out is refused.
        if not path.resolve().is_relative_to(root):
            raise GoldenError(path, f"refused: {key[:80]!r} would be written outside the golden folder {self.root} (a symlink leads out)")
        return path

    def exists(self, key: str) -> bool:
        return self.path_for(key).is_file()

    def read(self, key: str) -> Golden:
        """The golden stored under ``key``; GoldenError when the file there holds another key (copied by hand)."""
        path = self.path_for(key)
        golden = load(path)
        check_read(path, golden.key, key)
        return golden

    def write(self, golden: Golden, *, update: bool = False) -> WriteOutcome:
        path = self.path_for(golden.key)
        outcome = write(path, golden, update=update)
        golden.path = path
        return outcome

    def paths(self) -> Iterator[Path]:
        """Every golden name under the root, in a stable order (temp and obtained files skipped).

        Symlinked folders are followed, each real folder once (a link cycle
        ends there). Entries that are not regular files are listed too, never
        opened here, so the reader reports them as bad.
        """
        if not self.root.is_dir():
            return iter(())
        found: list[Path] = []
        seen: set[tuple[int, int]] = set()
        for folder, dirs, files in os.walk(self.root, followlinks=True):
            try:
                st = os.stat(folder)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                dirs[:] = []
                continue
            seen.add((st.st_dev, st.st_ino))
            dirs.sort()
            found.extend(Path(folder, f) for f in files if f.endswith(SUFFIX) and not f.startswith(".") and not f.endswith(OBTAINED_SUFFIX))
            # os.walk lists a FIFO/socket under files, and a dangling link too; a link to a folder under dirs
            found.extend(Path(folder, d) for d in dirs if d.endswith(SUFFIX) and not d.startswith("."))
        return iter(sorted(found))

    def stale_temps(self) -> list[Path]:
        """Temp files left by writers that died mid-write.

        One from this host is stale as soon as its writer's pid no longer
        runs (or, should the pid have been reused, after an hour); one from
        another host (a shared folder) after an hour, since its pid cannot be
        checked.
        """
        if not self.root.is_dir():
            return []
        now = time.time()
        stale = []
        for path in self.root.rglob(f".*{SUFFIX}.*{TEMP_SUFFIX}"):
            parts = path.name.removesuffix(TEMP_SUFFIX).split(".")
            host, pid = parts[-3], parts[-2]
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue  # its writer just finished
            dead = host == HOST and (not pid.isdigit() or not _alive(int(pid)))
            if dead or age >= FOREIGN_STALE_AFTER_S:
                stale.append(path)
        return sorted(stale)

    def clean_stale_temps(self) -> list[Path]:
        """Remove what :meth:`stale_temps` finds; returns the paths removed (to be reported)."""
        removed = []
        for path in self.stale_temps():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
        return removed

    def same_inputs(self, call: Call) -> Iterator[Golden]:
        """Readable goldens of the same op and input tensors as ``call``."""
        want = inputs_digest(call)
        for path in self.paths():
            try:
                golden = load(path)
            except GoldenError:
                continue
            if golden.call.op == call.op and inputs_digest(golden.call) == want:
                yield golden


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
