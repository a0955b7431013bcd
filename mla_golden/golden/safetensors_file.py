"""Strict reading of one safetensors file: exactly the bytes the format allows.

The safetensors library itself rejects trailing bytes, overlapping or gapped
tensor data and duplicate header keys; so does this reader, before any tensor
is built. It never opens anything but a regular file (a FIFO would block), and
reads only what the header declares, after checking the declaration against
the file's size: a hostile file costs at most its own size in memory.
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mla_golden.errors import GoldenError, NotAGoldenError

#: A golden's header is a few KiB; a larger claim is refused before it is read.
MAX_HEADER_BYTES = 1 << 20
#: Larger tensors are refused as absurd (aiter's largest buffers hold a few million elements).
MAX_ELEMENTS = 1 << 25
#: What every mla-golden format's ``format`` metadata starts with; a file without it holds something else.
FORMAT_FAMILY = "mla-golden/"
#: How a Git LFS pointer file starts (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"
DTYPES = {"I32": torch.int32, "I64": torch.int64, "U64": torch.uint64, "BOOL": torch.bool}


class Tensors(Mapping[str, torch.Tensor]):
    """A checked file's tensors, each built on first use (a reader that needs a tensor's values only as ints skips it)."""

    def __init__(self, path: Path, body: bytearray, specs: dict[str, tuple[str, list[int], int, int]]) -> None:
        self._path, self._body, self._specs = path, body, specs
        self._built: dict[str, torch.Tensor] = {}

    def __getitem__(self, name: str) -> torch.Tensor:
        tensor = self._built.get(name)
        if tensor is None:
            code, shape, start, end = self._specs[name]
            tensor = self._built[name] = _tensor(self._path, name, DTYPES[code], shape, self._body, start, end)
        return tensor

    def __contains__(self, name: object) -> bool:
        return name in self._specs  # Mapping's own would build the tensor

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


@dataclass
class RawFile:
    """A checked safetensors file: string metadata, tensors, and each tensor's stored bytes."""

    metadata: dict[str, str]
    tensors: Mapping[str, torch.Tensor]
    #: name -> (safetensors dtype, shape, bytes): what the content digest covers.
    raw: dict[str, tuple[str, list[int], memoryview]]
    #: The file's bytes as read: the length prefix and header, then the tensor data.
    head: bytes
    body: bytearray


class _Repeated(ValueError):
    """A JSON object repeats ``key`` (raised inside the decoder, named with the file by :func:`_parse_header`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # a repeated key: find the first one to name it
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return out


#: One decoder for every header (``json.loads`` with a hook builds a new one per call).
_HEADER_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def open_regular(path: Path) -> int:
    """A read-only fd on ``path``; GoldenError when it is not a regular file.

    The type is checked with ``stat`` before opening, and the open itself is
    non-blocking, so a FIFO or device named like a golden never hangs a run.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise GoldenError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise GoldenError(path, f"not a regular file ({_kind(st.st_mode)}); not opened")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise GoldenError(path, f"cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
        os.close(fd)
        raise GoldenError(path, "not a regular file; not read")
    return fd


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a plain file"


def read(path: Path) -> RawFile:
    """Read and check ``path``; GoldenError naming the file and the rule broken."""
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise NotAGoldenError(path, f"not a safetensors file (only {len(prefix)} bytes)")
            (header_len,) = struct.unpack("<Q", prefix)
            if prefix == _LFS_POINTER[:8] and size <= 1024:
                raise NotAGoldenError(path, _lfs_pointer(prefix + fh.read(1024)))
            if not 2 <= header_len <= MAX_HEADER_BYTES:
                raise NotAGoldenError(path, f"not a safetensors file (header size {header_len} bytes, allowed 2..{MAX_HEADER_BYTES})")
            if 8 + header_len > size:
                raise GoldenError(path, f"truncated: header claims {header_len} bytes, file has {size - 8} after the length")
            header_bytes = fh.read(header_len)
            header = _parse_header(path, header_bytes)
            metadata = header.pop("__metadata__", None)
            family = metadata.get("format") if isinstance(metadata, dict) else None
            if not (isinstance(family, str) and family.startswith(FORMAT_FAMILY)):
                raise NotAGoldenError(path, _holds(header, metadata, size))
            if not all(isinstance(v, str) for v in metadata.values()):
                raise GoldenError(path, "__metadata__ holds a value that is not a string")
            specs = {name: _spec(path, name, spec) for name, spec in header.items()}
            body_len = _check_layout(path, specs)
            if 8 + header_len + body_len != size:
                what = "truncated" if 8 + header_len + body_len > size else "trailing bytes"
                raise GoldenError(path, f"{what}: tensor data ends at byte {8 + header_len + body_len}, file has {size}")
            body = bytearray(body_len)  # writable, so tensors view it without a copy each
            if fh.readinto(body) != body_len:
                raise GoldenError(path, "truncated while reading (the file shrank)")
    except OSError as exc:
        raise GoldenError(path, f"cannot read: {exc.strerror or exc}") from exc
    view = memoryview(body)
    raw = {name: (code, shape, view[start:end]) for name, (code, shape, start, end) in specs.items()}
    tensors = Tensors(path, body, specs)
    for name, (code, *_) in specs.items():
        if code == "BOOL":
            tensors[name]  # built now: a bool tensor holding other values is refused on reading
    return RawFile(metadata=metadata, tensors=tensors, raw=raw, head=prefix + header_bytes, body=body)


def _holds(header: dict[str, Any], metadata: object, size: int) -> str:
    """What a safetensors file that is no golden holds, in a line: its tensors' count and dtypes, its size and
    its metadata's ``format`` (model weights read "... (BF16, F32), 3355 bytes, metadata format 'pt'")."""
    dtypes = sorted({str(spec.get("dtype"))[:16] for spec in header.values() if isinstance(spec, dict)})
    kinds = f" ({', '.join(dtypes[:6])}{', ...' if len(dtypes) > 6 else ''})" if dtypes else ""
    count = f"{len(header)} tensor{'' if len(header) == 1 else 's'}"
    family = metadata.get("format") if isinstance(metadata, dict) else None
    if isinstance(family, str):
        meta = f"metadata format {family[:40]!r}"
    else:
        meta = "no metadata" if metadata is None else "no mla-golden metadata"
    return f"a safetensors file of {count}{kinds}, {size} bytes, {meta}"


def _lfs_pointer(text: bytes) -> str:
    """A Git LFS pointer's object, in a line: what git stores for a file kept in LFS (model weights, often)."""
    fields = dict(line.partition(" ")[::2] for line in text.decode("utf-8", "replace").splitlines())
    return f"a Git LFS pointer to {fields.get('oid', '?')[:80]}, size {fields.get('size', '?')[:20]}"


def holds(path: Path, raw: RawFile) -> bool:
    """Are ``path``'s bytes exactly those ``raw`` was read from? False too when it cannot be read as a regular
    file (reading it the usual way then says why). Reads at most ``raw``'s size."""
    try:
        fd = open_regular(path)
    except GoldenError:
        return False
    try:
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != len(raw.head) + len(raw.body):
                return False
            # the header first: a re-recorded golden differs there (its timestamp) and its body is not read
            return fh.read(len(raw.head)) == raw.head and fh.read(len(raw.body)) == raw.body and not fh.read(1)
    except OSError:
        return False


def _parse_header(path: Path, raw: bytes) -> dict[str, Any]:
    if not raw.startswith(b"{"):
        raise NotAGoldenError(path, "not a safetensors file (its header does not start with '{')")
    try:
        header = _HEADER_JSON.decode(raw.decode("utf-8"))
    except _Repeated as exc:
        raise NotAGoldenError(path, f"not a safetensors file (its header repeats the key {exc.key[:80]!r})") from exc
    except (ValueError, RecursionError) as exc:  # bad UTF-8, bad JSON, absurd nesting or numbers
        raise NotAGoldenError(path, f"not a safetensors file (its header is not JSON: {type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(header, dict):
        raise NotAGoldenError(path, "not a safetensors file (its header is not a JSON object)")
    return header


def _spec(path: Path, name: str, spec: Any) -> tuple[str, list[int], int, int]:
    """(dtype code, shape, start, end) of one header entry, checked.

    ``type(x) is int``: JSON gives plain ints, and it refuses bools (a bool is an int to isinstance).
    """
    code = shape = offsets = None
    if type(spec) is dict and len(spec) == 3:
        code, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
    if not (
        type(code) is str
        and code in DTYPES
        and type(shape) is list
        and len(shape) <= 4
        and all([type(d) is int and 0 <= d <= MAX_ELEMENTS for d in shape])  # a list: cheaper than a generator here
        and type(offsets) is list
        and len(offsets) == 2
        and type(offsets[0]) is int
        and type(offsets[1]) is int
    ):
        raise GoldenError(path, f"tensor {name[:80]!r}: unsupported dtype or malformed shape/offsets in header")
    numel = math.prod(shape)
    if numel > MAX_ELEMENTS:
        raise GoldenError(path, f"tensor {name[:80]!r}: absurd shape {shape}")
    start, end = offsets
    if not 0 <= start <= end or end - start != numel * DTYPES[code].itemsize:
        raise GoldenError(path, f"tensor {name[:80]!r}: data offsets {start}..{end} do not fit its shape (corrupt)")
    return code, shape, start, end


def _check_layout(path: Path, specs: dict[str, tuple[str, list[int], int, int]]) -> int:
    """Tensor data must tile the body exactly, in order: no overlap, no gap. Returns the body length."""
    at = 0
    for name, (_, _, start, end) in sorted(specs.items(), key=lambda item: (item[1][2], item[1][3])):
        if start != at:
            problem = "overlaps the tensor before it" if start < at else f"leaves a gap of {start - at} bytes"
            raise GoldenError(path, f"tensor {name[:80]!r}: data at {start}..{end} {problem} (corrupt)")
        at = end
    return at


def _tensor(path: Path, name: str, dtype: torch.dtype, shape: list[int], body: bytearray, start: int, end: int) -> torch.Tensor:
    numel = math.prod(shape)
    if end == start:
        return torch.empty(shape, dtype=dtype)
    if start % dtype.itemsize:
        # safetensors aligns data, but a hand-made file need not be: copy to an aligned buffer
        body, start = bytearray(body[start:end]), 0
    if dtype == torch.bool:
        values = torch.frombuffer(body, dtype=torch.uint8, count=numel, offset=start)
        if bool((values > 1).any()):
            raise GoldenError(path, f"tensor {name[:80]!r}: bool tensor holds values other than 0/1")
        return values.view(torch.bool).reshape(shape)
    return torch.frombuffer(body, dtype=dtype, count=numel, offset=start).reshape(shape)


def dumps(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """The safetensors bytes of ``tensors`` with ``metadata``."""
    from safetensors.torch import save

    return save({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, metadata=metadata)
