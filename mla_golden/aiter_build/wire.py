"""What mla-golden and the tree's Python process (:mod:`.python_child`) send each other.

Each message is a frame: its length (8 bytes, big-endian), then its bytes.
Requests, from mla-golden, are pickled: the child trusts its parent. A tensor
argument travels as a :class:`TensorArg` (its layout, and its values unless it
is an output buffer: the C++ call gets only an output's shape, and aiter's
Python passes it on). Replies, from the child, are JSON in a small vocabulary
that decodes to plain values only: the child runs the tree's code, so nothing
it sends may run code here, as unpickling would. A tensor in a reply is one
the request sent (by its index), a view of one, or values the tree's Python
made.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import pickle
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import torch

from mla_golden.errors import AiterSourceError
from mla_golden.schema import to_dtype

#: The length in front of each frame.
HEADER = struct.Struct(">Q")
#: The most a reply may hold (a plan's values never travel back: they come from the harness).
MAX_REPLY_BYTES = 64 << 20
#: How deeply a reply's values may nest (a sizing helper's shapes: three).
MAX_DEPTH = 16


def frame(payload: bytes) -> bytes:
    return HEADER.pack(len(payload)) + payload


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's bytes from a blocking stream; None at its end (the other side closed it)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    (size,) = HEADER.unpack(head)
    data = stream.read(size)
    return data if len(data) == size else None


# ---------------------------------------------------------------- requests (pickled, parent -> child)


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument of a request: its layout, and its values (C order) unless it is an output buffer."""

    index: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    data: bytes | None


def dump_request(request: Mapping[str, Any], outputs: frozenset[int] = frozenset()) -> tuple[bytes, list[torch.Tensor]]:
    """``request`` pickled with its tensors as :class:`TensorArg`, and those tensors by index.

    ``outputs``: ids of the tensors that are output buffers (sent without values).
    """
    sent: list[torch.Tensor] = []
    by_id: dict[int, int] = {}

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            if not isinstance(obj, torch.Tensor):
                return None
            if id(obj) not in by_id:
                by_id[id(obj)] = len(sent)
                sent.append(obj)
            values = None if id(obj) in outputs else _bytes(obj)
            return TensorArg(by_id[id(obj)], str(obj.dtype), tuple(obj.shape), tuple(obj.stride()), values)

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(dict(request))
    return buffer.getvalue(), sent


def _bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return bytes(flat.view(torch.uint8).numpy()) if flat.numel() else b""


def load_request(data: bytes) -> tuple[dict[str, Any], dict[int, torch.Tensor]]:
    """A request and the tensors it carried by index (made in this process)."""
    made: dict[int, torch.Tensor] = {}

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            if pid.index not in made:
                made[pid.index] = _tensor(pid)
            return made[pid.index]

    request = _Unpickler(io.BytesIO(data)).load()
    return request, made


def _tensor(arg: TensorArg) -> torch.Tensor:
    dtype = to_dtype(arg.dtype)
    assert dtype is not None
    out = torch.empty_strided(arg.shape, arg.stride, dtype=dtype)
    if arg.data:
        values = torch.frombuffer(bytearray(arg.data), dtype=torch.uint8).view(dtype).reshape(arg.shape)
        try:
            out.copy_(values)
        except RuntimeError:  # a layout whose elements overlap (an expanded tensor): its values, dense
            out = values
    return out


# ---------------------------------------------------------------- replies (JSON, child -> parent)


def to_wire(value: Any, sent: Mapping[int, torch.Tensor], depth: int = 0) -> Any:
    """``value`` as the reply vocabulary; TypeError for anything else (names the type)."""
    if depth > MAX_DEPTH:
        raise TypeError(f"values nested more than {MAX_DEPTH} deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum (MlaVersion) as its value
    if isinstance(value, float):
        return {"float": repr(value)}  # inf and nan too
    if isinstance(value, torch.dtype):
        return {"dtype": str(value)}
    if isinstance(value, torch.Tensor):
        return _tensor_to_wire(value, sent)
    if isinstance(value, tuple):  # torch.Size too
        return {"tuple": [to_wire(v, sent, depth + 1) for v in value]}
    if isinstance(value, list):
        return [to_wire(v, sent, depth + 1) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: to_wire(v, sent, depth + 1) for k, v in value.items()}}
    raise TypeError(f"a {type(value).__name__}")


def _tensor_to_wire(tensor: torch.Tensor, sent: Mapping[int, torch.Tensor]) -> Any:
    for index, given in sent.items():
        if tensor is given:
            return {"ref": index}
    for index, given in sent.items():
        same = tensor.dtype == given.dtype and tensor.device == given.device
        if same and given.numel() and tensor.untyped_storage().data_ptr() == given.untyped_storage().data_ptr():
            offset = tensor.storage_offset() - given.storage_offset()
            return {"view": index, "offset": offset, "shape": list(tensor.shape), "stride": list(tensor.stride())}
    data = base64.b64encode(_bytes(tensor)).decode()
    return {"tensor": {"dtype": str(tensor.dtype), "shape": list(tensor.shape), "data": data}}


def signature_to_wire(sig: inspect.Signature) -> list[dict[str, Any]]:
    """A signature's parameters: name, kind and (when it has one) the default, in the reply vocabulary.

    A default outside the vocabulary goes as its repr (shown, never passed: a call that omits the
    argument leaves it to the tree's own default).
    """
    out = []
    for param in sig.parameters.values():
        item: dict[str, Any] = {"name": param.name, "kind": int(param.kind)}
        if param.default is not inspect.Parameter.empty:
            try:
                item["default"] = to_wire(param.default, {})
            except TypeError:
                item["shown"] = repr(param.default)[:200]
        out.append(item)
    return out


class Malformed(AiterSourceError):
    """A reply outside the vocabulary: the tree's Python process cannot be trusted to have answered."""


def parse_reply(data: bytes) -> dict[str, Any]:
    """A reply frame as a JSON object; :class:`Malformed` otherwise."""
    try:
        reply = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"the tree's Python process sent a reply that is not JSON ({exc})") from None
    if not isinstance(reply, dict):
        raise Malformed("the tree's Python process sent a reply that is no JSON object")
    return reply


def from_wire(value: Any, sent: Sequence[torch.Tensor], depth: int = 0) -> Any:
    """A reply value back as plain values, tensors the request sent (or views of them) and new tensors."""
    if depth > MAX_DEPTH:
        raise Malformed(f"the tree's Python process sent values nested more than {MAX_DEPTH} deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, list):
        return [from_wire(v, sent, depth + 1) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        tag = next(iter(value))
    elif isinstance(value, dict) and set(value) == {"view", "offset", "shape", "stride"}:
        tag = "view"
    else:
        raise Malformed(f"the tree's Python process sent an unknown value {str(value)[:100]!r}")
    body = value[tag]
    try:
        if tag == "float":
            return float(_typed(body, str))
        if tag == "dtype":
            return to_dtype(_typed(body, str))
        if tag == "tuple":
            return tuple(from_wire(v, sent, depth + 1) for v in _typed(body, list))
        if tag == "dict":
            return {str(k): from_wire(v, sent, depth + 1) for k, v in _typed(body, dict).items()}
        if tag == "ref":
            return sent[_typed(body, int)]
        if tag == "view":
            base = sent[_typed(body, int)]
            shape, stride = _ints(value.get("shape")), _ints(value.get("stride"))
            return base.as_strided(shape, stride, base.storage_offset() + _typed(value.get("offset"), int))
        if tag == "tensor":
            fields = _typed(body, dict)
            dtype = to_dtype(_typed(fields.get("dtype"), str))
            assert dtype is not None
            raw = base64.b64decode(_typed(fields.get("data"), str), validate=True)
            flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
            return flat.view(dtype).reshape(_ints(fields.get("shape"))).clone()
    except (ValueError, TypeError, IndexError, RuntimeError, AssertionError) as exc:
        raise Malformed(f"the tree's Python process sent a bad {tag} value ({type(exc).__name__}: {exc})") from None
    raise Malformed(f"the tree's Python process sent an unknown value tagged {tag[:50]!r}")


def _typed(value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _ints(value: Any) -> list[int]:
    return [_typed(v, int) for v in _typed(value, list)]


def signature_from_wire(params: Any) -> inspect.Signature:
    """A signature as :func:`signature_to_wire` sent it (a default outside the vocabulary by its repr)."""
    built = []
    try:
        for item in _typed(params, list):
            fields = _typed(item, dict)
            kind = inspect._ParameterKind(_typed(fields.get("kind"), int))
            if "default" in fields:
                default = from_wire(fields["default"], [])
            elif "shown" in fields:
                default = _Shown(_typed(fields["shown"], str))
            else:
                default = inspect.Parameter.empty
            built.append(inspect.Parameter(_typed(fields.get("name"), str), kind, default=default))
        return inspect.Signature(built)
    except (ValueError, TypeError) as exc:
        raise Malformed(f"the tree's Python process sent a bad signature ({exc})") from None


class _Shown:
    """A default the child could not send, standing in by its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text
