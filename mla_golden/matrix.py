"""The case matrix: which planner calls ``mla-golden record`` makes, and how.

A matrix is a TOML file (format in docs/cli.md; the default one,
``matrix.toml``, ships in this package). Each ``[[decode]]`` or ``[[prefill]]``
group lists values per axis; the group expands to every combination, one case
per combination and device. A case runs the planner the way a real builder
does: buffers sized by the backend's ``get_*_info_v1`` and allocated with
``torch.empty``, then the call with the builder's arguments (vLLM's
``AiterMLAMetadataBuilder`` for decode, its ``_build_fp8_prefill_ps_metadata``
for prefill).

Every error in a matrix names the file, the line and the key.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import tomllib
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mla_golden.errors import MatrixError
from mla_golden.schema import ENV_VARS, MLA_OP, PS_OP

if TYPE_CHECKING:
    from mla_golden.backends import Backend
    from mla_golden.call import Call

FORMAT = "mla-golden-matrix/1"
DEFAULT_MATRIX = "matrix.toml"
DTYPES = ("bf16", "fp8")
#: Devices a matrix (or sweep space) plans every case for unless it says ``devices = [...]``.
DEFAULT_DEVICES = ("gfx942:304", "gfx950:256")
#: vLLM's cap on kv splits per request (``_DEFAULT_MLA_NUM_KV_SPLITS``).
VLLM_MAX_KV_SPLITS = 32
#: vLLM's FP8 prefill tile (``_FP8_PREFILL_TILE_Q``) and kv granularity.
PREFILL_QLEN_GRANULARITY = 256
PREFILL_KVLEN_GRANULARITY = 128

_DEVICE_RE = re.compile(r"^(gfx[0-9a-z]+):([1-9][0-9]*)$")
_CONTEXT_RE = re.compile(r"^(uniform|jitter):([1-9][0-9]*)$")


@dataclass(frozen=True)
class Case:
    """One planner call of the matrix. ``name`` is its golden key."""

    name: str
    op: str
    group: str
    model: str
    arch: str
    cu_num: int
    #: Every planner env var the op reads: pinned value, or None (unset).
    env: dict[str, str | None]
    #: Query heads per rank as the model has them (vLLM pads fewer than 16 to 16).
    heads: int
    #: KV tokens per request (decode) or sequence lengths (prefill).
    seq_lens: tuple[int, ...]
    #: Batch size the builder sized its buffers for (vLLM: max_num_seqs).
    sizing_batch: int
    dtype: str = "bf16"
    qlen: int = 1
    page_size: int = 1
    max_split_per_batch: int = -1
    #: Longest query the prefill buffers were sized for.
    sizing_qlen: int = 0
    tags: tuple[str, ...] = ()

    @property
    def batch(self) -> int:
        return len(self.seq_lens)

    @property
    def kernel_heads(self) -> int:
        """Heads passed to the planner: vLLM pads fewer than 16 to 16 (``max(16, num_heads)``)."""
        return max(16, self.heads)

    def invoke(self, backend: Backend) -> None:
        """Size, allocate and plan like the builder; the planner is looked up on ``backend`` now."""
        if self.op == MLA_OP:
            self._invoke_decode(backend)
        else:
            self._invoke_prefill(backend)

    def _invoke_decode(self, backend: Backend) -> None:
        """vLLM ``AiterMLAMetadataBuilder._build_decode`` (plus page sizes as ATOM/SGLang page them)."""
        import torch

        fp8 = torch.float8_e4m3fnuz if self.arch == "gfx942" else torch.float8_e4m3fn
        dtype = fp8 if self.dtype == "fp8" else torch.bfloat16
        dev = backend.tensor_device
        info = backend.sizer(self.op)(
            self.sizing_batch, self.qlen, self.kernel_heads, dtype, dtype, is_sparse=False, fast_mode=True
        )
        wm, wi, wis, ri, rfm, rpm = (torch.empty(shape, dtype=dt, device=dev) for shape, dt in info)
        pages = [math.ceil(n / self.page_size) for n in self.seq_lens]
        last = [n - (p - 1) * self.page_size for n, p in zip(self.seq_lens, pages)]
        qo_indptr = torch.arange(0, (self.batch + 1) * self.qlen, self.qlen, dtype=torch.int32, device=dev)
        kv_indptr = torch.tensor([0, *itertools.accumulate(pages)], dtype=torch.int32, device=dev)
        last_page_lens = torch.tensor(last, dtype=torch.int32, device=dev)
        backend.planner(self.op)(
            qo_indptr, kv_indptr, last_page_lens, self.kernel_heads, 1, True,
            wm, wis, wi, ri, rfm, rpm,
            page_size=self.page_size, kv_granularity=max(self.page_size, 16),
            max_seqlen_qo=self.qlen, uni_seqlen_qo=self.qlen, fast_mode=True,
            max_split_per_batch=self.max_split_per_batch, dtype_q=dtype, dtype_kv=dtype,
        )  # fmt: skip

    def _invoke_prefill(self, backend: Backend) -> None:
        """vLLM ``_build_fp8_prefill_ps_metadata``: host-side indptrs, new tokens only (kv == q)."""
        import torch

        dev = backend.tensor_device
        info = backend.sizer(self.op)(
            batch_size=self.sizing_batch,
            num_head_k=self.heads,
            max_qlen=self.sizing_qlen,
            qlen_granularity=PREFILL_QLEN_GRANULARITY,
        )
        wm, wi, wis, ri, rfm, rpm = (torch.empty(shape, dtype=dt, device=dev) for shape, dt in info)
        qo_indptr = torch.tensor([0, *itertools.accumulate(self.seq_lens)], dtype=torch.int32)
        backend.planner(self.op)(
            qo_indptr, qo_indptr.clone(), torch.tensor(self.seq_lens, dtype=torch.int32), 1, self.heads,
            wm, wi, wis, ri, rfm, rpm,
            qhead_granularity=1, qlen_granularity=PREFILL_QLEN_GRANULARITY,
            kvlen_granularity=PREFILL_KVLEN_GRANULARITY, block_size=1, is_causal=True,
        )  # fmt: skip


def vllm_max_split_per_batch(heads: int, batch: int, cu_num: int) -> int:
    """vLLM ``AiterMLAMetadataBuilder._max_split_per_batch``: capped splits only with 128+ heads."""
    if max(16, heads) < 128 or batch <= 0:
        return -1
    return max(1, min((cu_num + batch - 1) // batch, VLLM_MAX_KV_SPLITS))


def capture(cases: Sequence[Case], backend: Backend) -> Iterator[tuple[Case, Call | Exception]]:
    """Run each case on ``backend`` under one spy; yield it with its captured call.

    A planner that rejects the inputs yields a call with ``error`` set (that
    is a result worth keeping); whatever stops the call from being made (the
    sizing helper failing, say) is yielded as the exception. One spy for all
    cases: installing one scans every loaded module.
    """
    from mla_golden.capture import planner_env
    from mla_golden.recorder import spy

    with spy(backend.module) as s:
        for case in cases:
            before = len(s.calls)
            try:
                with planner_env(case.env), backend.plans_for(case.arch, case.cu_num):
                    case.invoke(backend)
            except Exception as exc:
                if len(s.calls) == before:
                    yield case, exc
                    continue
            call = s.calls[len(s.calls) - 1]
            backend.stamp(call)
            yield case, call


# ---------------------------------------------------------------- loading


def default_matrix() -> Path:
    """The matrix that ships in the package."""
    return Path(__file__).with_name(DEFAULT_MATRIX)


def load(path: Path | str | None = None, devices: Sequence[str] | None = None) -> list[Case]:
    """Every case of the matrix at ``path`` (default: the shipped one), in file order.

    ``devices`` ("ARCH:CU" each) plans every case for those devices instead of the matrix's.
    """
    path = Path(path) if path is not None else default_matrix()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse(text, str(path), devices)


def parse_device(text: str) -> tuple[str, int]:
    """'gfx942:304' -> ('gfx942', 304); MatrixError otherwise (an arch the planners know nothing of too)."""
    match = _DEVICE_RE.match(text)
    if match is None:
        raise MatrixError(f"device {text!r}: expected ARCH:CU such as gfx942:304")
    problem = arch_problem(match.group(1))
    if problem:
        raise MatrixError(f"device {text!r}: {problem}")
    return match.group(1), int(match.group(2))


def arch_problem(arch: str) -> str | None:
    """Why the planners cannot plan for ``arch`` (one they know no LDS size or CU count of), or None.

    Planning every case for such an arch would write goldens that each hold the same arch error.
    """
    from mla_golden.reference._device import FULL_PART_CUS

    if arch in FULL_PART_CUS:
        return None
    return f"unknown arch {arch!r} (known: {', '.join(sorted(FULL_PART_CUS))})"


def parse(text: str, source: str = "<matrix>", devices: Sequence[str] | None = None) -> list[Case]:
    """Cases of a matrix given as TOML text; ``source`` names it in errors; ``devices`` as in :func:`load`."""
    data, where = read_document(text, source, FORMAT)
    defaults = _devices(where, None, 0, data.get("devices", list(DEFAULT_DEVICES)))
    override = [parse_device(d) for d in devices] if devices else None
    cases: list[Case] = []
    for kind in ("decode", "prefill"):
        for index, group in enumerate(where.tables_of(data, kind)):
            expand = _decode_cases if kind == "decode" else _prefill_cases
            cases.extend(expand(Table(where, kind, index, group), defaults, override))
    seen: dict[str, Case] = {}
    for case in cases:
        if case.name in seen:
            raise MatrixError(f"{source}: two cases named {case.name!r} (groups {seen[case.name].group!r} and {case.group!r})")
        seen[case.name] = case
    return cases


def read_document(text: str, source: str, fmt: str) -> tuple[dict[str, Any], Locator]:
    """A matrix-like TOML document (``format``, ``devices``, ``[[decode]]``, ``[[prefill]]``) and its locator; MatrixError otherwise.

    Sweep spaces share the layout (:mod:`mla_golden.sweeper.space`).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{source}: not valid TOML: {exc}") from exc
    where = Locator(text, source)
    unknown = sorted(set(data) - {"format", "devices", "decode", "prefill"})
    if unknown:
        raise where.error(None, 0, unknown[0], "unknown top-level key (known: format, devices, [[decode]], [[prefill]])")
    if data.get("format", fmt) != fmt:
        raise where.error(None, 0, "format", f"unknown format {data['format']!r}; this mla-golden reads {fmt!r}")
    return data, where


class Locator:
    """Finds the line of a key in the TOML text, so errors can name it."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        #: (kind, index) -> (first line, last line) of that [[kind]] table, 1-based.
        self.tables: dict[tuple[str, int], tuple[int, int]] = {}
        counts: dict[str, int] = {}
        current: tuple[str, int] | None = None
        self.top_end = len(self.lines)
        for number, line in enumerate(self.lines, start=1):
            header = re.match(r"^\s*\[\[\s*([A-Za-z0-9_.-]+)\s*\]\]", line) or re.match(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]", line)
            if header:
                if current is not None:
                    start, _ = self.tables[current]
                    self.tables[current] = (start, number - 1)
                else:
                    self.top_end = number - 1
                kind = header.group(1)
                current = (kind, counts.get(kind, 0))
                counts[kind] = counts.get(kind, 0) + 1
                self.tables[current] = (number, len(self.lines))

    def line_of(self, kind: str | None, index: int, key: str) -> int | None:
        start, end = self.tables.get((kind, index), (0, 0)) if kind else (1, self.top_end)
        head = key.split(".")[0]
        pattern = re.compile(rf"^\s*[\"']?{re.escape(head)}[\"']?\s*=")
        for number in range(max(start, 1), end + 1):
            if pattern.match(self.lines[number - 1]):
                return number
        return start or None

    def tables_of(self, data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        """The ``[[kind]]`` tables of ``data`` (none when absent)."""
        tables = data.get(kind, [])
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise self.error(None, 0, kind, f"must be an array of tables: [[{kind}]]")
        return tables

    def error(self, kind: str | None, index: int, key: str, problem: str, name: str | None = None) -> MatrixError:
        line = self.line_of(kind, index, key)
        place = f"{self.source}:{line}" if line else self.source
        table = f" [[{kind}]] #{index + 1}" + (f" ({name!r})" if name else "") + ":" if kind else ""
        return MatrixError(f"{place}:{table} key {key!r}: {problem}")


class Table:
    """One [[decode]] / [[prefill]] table, with typed accessors that raise located errors."""

    def __init__(self, where: Locator, kind: str, index: int, data: dict[str, Any]) -> None:
        self.where, self.kind, self.index, self.data = where, kind, index, data
        self.name = data.get("name") if isinstance(data.get("name"), str) else None

    def fail(self, key: str, problem: str) -> MatrixError:
        return self.where.error(self.kind, self.index, key, problem, self.name)

    def check_keys(self, allowed: Sequence[str], required: Sequence[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, f"unknown key (allowed here: {', '.join(allowed)})")
        for key in required:
            if key not in self.data:
                raise self.fail(key, "missing (required)")

    def text(self, key: str, default: str | None = None, pattern: str = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$") -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str) or not re.match(pattern, value):
            raise self.fail(key, f"expected a name matching {pattern}, got {value!r}")
        return value

    def ints(self, key: str, default: Any = None, low: int = 1, high: int = 1 << 24) -> list[int]:
        value = self.data.get(key, default)
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values):
            raise self.fail(key, f"expected an integer in [{low}, {high}] or a non-empty list of them, got {value!r}")
        return values

    def choices(self, key: str, allowed: Sequence[str], default: Any = None) -> list[str]:
        value = self.data.get(key, default)
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v in allowed for v in values):
            raise self.fail(key, f"expected one of {list(allowed)} or a list of them, got {value!r}")
        return values

    def contexts(self, key: str) -> list[tuple[str, int]]:
        value = self.data.get(key)
        values = value if isinstance(value, list) else [value]
        parsed = []
        for item in values:
            match = _CONTEXT_RE.match(item) if isinstance(item, str) else None
            if match is None:
                raise self.fail(key, f"expected 'uniform:N' or 'jitter:N' (or a list of them), got {item!r}")
            parsed.append((match.group(1), int(match.group(2))))
        return parsed

    def env(self) -> dict[str, str | None]:
        value = self.data.get("env", {})
        if not isinstance(value, dict):
            raise self.fail("env", f"expected a table such as {{ AITER_ENABLE_EXPERIMENTAL = \"1\" }}, got {value!r}")
        env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
        for name, setting in value.items():
            if name not in ENV_VARS:
                raise self.fail(f"env.{name}", f"not a planner env var (known: {', '.join(ENV_VARS)})")
            if not isinstance(setting, str):
                raise self.fail(f"env.{name}", f"expected a string value, got {setting!r}")
            env[name] = setting
        return env

    def tags(self) -> tuple[str, ...]:
        value = self.data.get("tags", [])
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise self.fail("tags", f"expected a list of strings, got {value!r}")
        return tuple(value)


def _devices(where: Locator, group: Table | None, index: int, value: Any) -> list[tuple[str, int]]:
    values = value if isinstance(value, list) else [value]
    devices = []
    for item in values:
        match = _DEVICE_RE.match(item) if isinstance(item, str) else None
        problem = None if match is None else arch_problem(match.group(1))
        if match is None or problem:
            problem = problem or f"expected devices as 'ARCH:CU' such as 'gfx942:304', got {item!r}"
            raise group.fail("devices", problem) if group else where.error(None, index, "devices", problem)
        devices.append((match.group(1), int(match.group(2))))
    if not devices:
        problem = "needs at least one device"
        raise group.fail("devices", problem) if group else where.error(None, index, "devices", problem)
    return devices


def _lengths(mode: str, top: int, count: int, low: int, seed: str) -> tuple[int, ...]:
    """``count`` lengths: all ``top`` (uniform) or seeded spread over [max(low, top/8), top] (jitter)."""
    if mode == "uniform":
        return (top,) * count
    rng = random.Random(zlib.crc32(seed.encode()))
    return tuple(rng.randint(max(low, top // 8), top) for _ in range(count))


_DECODE_KEYS = (
    "name", "model", "devices", "heads", "dtype", "qlen", "batch", "context",
    "page_size", "max_split_per_batch", "max_num_seqs", "env", "tags",
)  # fmt: skip
#: No env: get_ps_metadata_v1 reads none.
_PREFILL_KEYS = ("name", "model", "devices", "heads", "seq_lens", "batch", "context", "max_num_seqs", "max_qlen", "tags")


def _decode_cases(
    group: Table, default_devices: list[tuple[str, int]], override: list[tuple[str, int]] | None
) -> Iterator[Case]:
    group.check_keys(_DECODE_KEYS, ("name", "heads", "dtype", "batch", "context"))
    name = group.text("name")
    model = group.text("model", default="", pattern=r"^.*$")
    devices = _devices(group.where, group, group.index, group.data["devices"]) if "devices" in group.data else default_devices
    devices = override or devices
    heads = group.ints("heads", high=1024)
    for h in heads:
        if h % 8:
            raise group.fail("heads", f"{h} heads per rank: aiter's sizing helper needs a multiple of 8")
    dtypes = group.choices("dtype", DTYPES)
    qlens = group.ints("qlen", default=1, high=64)
    batches = group.ints("batch", high=1 << 16)
    contexts = group.contexts("context")
    pages = group.ints("page_size", default=1, high=1024)
    split = group.data.get("max_split_per_batch", "vllm")
    if split != "vllm" and not (isinstance(split, int) and not isinstance(split, bool) and (split == -1 or split >= 1)):
        raise group.fail("max_split_per_batch", f"expected 'vllm', -1 or a positive integer, got {split!r}")
    max_num_seqs = group.ints("max_num_seqs", high=1 << 16)[0] if "max_num_seqs" in group.data else None
    env, tags = group.env(), group.tags()
    for (arch, cu), h, dtype, qlen, batch, (mode, top), page in itertools.product(
        devices, heads, dtypes, qlens, batches, contexts, pages
    ):
        if top < qlen:
            raise group.fail("context", f"context {top} is shorter than the query ({qlen} tokens)")
        if max_num_seqs is not None and max_num_seqs < batch:
            raise group.fail("max_num_seqs", f"{max_num_seqs} is smaller than batch {batch}")
        case_name = f"decode/{name}/{arch}-cu{cu}/h{h}-{dtype}-q{qlen}-b{batch}-{mode}{top}-p{page}"
        yield Case(
            name=case_name, op=MLA_OP, group=name, model=model, arch=arch, cu_num=cu,
            env=env, heads=h, seq_lens=_lengths(mode, top, batch, qlen, case_name),
            sizing_batch=max_num_seqs or batch, dtype=dtype, qlen=qlen, page_size=page,
            max_split_per_batch=vllm_max_split_per_batch(h, batch, cu) if split == "vllm" else split, tags=tags,
        )  # fmt: skip


def _prefill_cases(
    group: Table, default_devices: list[tuple[str, int]], override: list[tuple[str, int]] | None
) -> Iterator[Case]:
    group.check_keys(_PREFILL_KEYS, ("name", "heads"))
    name = group.text("name")
    model = group.text("model", default="", pattern=r"^.*$")
    devices = _devices(group.where, group, group.index, group.data["devices"]) if "devices" in group.data else default_devices
    devices = override or devices
    heads = group.ints("heads", high=1024)
    batches: list[tuple[str, tuple[int, ...]]] = []
    explicit = group.data.get("seq_lens")
    if explicit is not None:
        if not (
            isinstance(explicit, list)
            and explicit
            and all(isinstance(b, list) and b and all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1 << 20 for n in b) for b in explicit)
        ):
            raise group.fail("seq_lens", f"expected a list of batches, each a non-empty list of lengths in [1, {1 << 20}]")
        for lens in explicit:
            label = f"b{len(lens)}-t{sum(lens)}-{zlib.crc32(repr(lens).encode()):08x}"
            batches.append((label, tuple(lens)))
    if "batch" in group.data or "context" in group.data:
        for batch, (mode, top) in itertools.product(group.ints("batch", high=1 << 12), group.contexts("context")):
            label = f"b{batch}-{mode}{top}"
            batches.append((label, _lengths(mode, top, batch, 1, f"prefill/{name}/{label}")))
    if not batches:
        raise group.fail("seq_lens", "give seq_lens, or batch and context")
    max_num_seqs = group.ints("max_num_seqs", high=1 << 16)[0] if "max_num_seqs" in group.data else None
    max_qlen = group.ints("max_qlen", high=1 << 20)[0] if "max_qlen" in group.data else None
    tags = group.tags()
    for (arch, cu), h, (label, lens) in itertools.product(devices, heads, batches):
        if max_num_seqs is not None and max_num_seqs < len(lens):
            raise group.fail("max_num_seqs", f"{max_num_seqs} is smaller than a batch of {len(lens)}")
        if max_qlen is not None and max_qlen < max(lens):
            raise group.fail("max_qlen", f"{max_qlen} is shorter than a sequence of {max(lens)}")
        yield Case(
            name=f"prefill/{name}/{arch}-cu{cu}/h{h}-{label}", op=PS_OP, group=name, model=model,
            arch=arch, cu_num=cu, env={}, heads=h, seq_lens=lens, sizing_batch=max_num_seqs or len(lens),
            sizing_qlen=max_qlen or max(lens), tags=tags,
        )  # fmt: skip
