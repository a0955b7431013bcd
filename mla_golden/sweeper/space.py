"""The sweep space: which planner calls a sweep may make, and how it picks them.

A space is a TOML file in the case matrix's spirit (format in docs/cli.md,
"mla-golden sweep"): ``[[decode]]`` / ``[[prefill]]`` groups whose keys are
the matrix's (``heads``, ``dtype``, ``qlen``, ``batch``, ``context``,
``page_size``, ``max_split_per_batch``, ``causal``, ``topk``, ``env``,
``devices``...; prefill's tile settings ``qlen_granularity``...), each a value
or a list of choices, and where integers may also be ranges ``"LO..HI"``
(contexts ``"jitter:LO..HI"``). A small space is enumerated in file order; a
large one is sampled, seeded: point ``i`` depends only on the seed and ``i``,
so a resumed sweep regenerates the same points.

The default space (``space.toml`` beside this module) spans what the shipped
case matrix spans.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mla_golden import cases
from mla_golden.case_file import Table, read_document
from mla_golden.errors import MatrixError, SpaceError
from mla_golden.schema import ENV_VARS, MLA_OP, PS_OP
from mla_golden.sweeper.axes import Axis, Choices, Context, IntRange, sample_lengths

FORMAT = "mla-golden-space/1"
DECODE, PREFILL = MLA_OP, PS_OP
DTYPES = (*cases.DTYPE_NAMES, cases.NO_DTYPE)
UNSET = "unset"
_RANGE_RE = re.compile(r"^([0-9]+)\.\.([0-9]+)$")
_CONTEXT_RE = re.compile(rf"^({'|'.join(cases.CONTEXT_MODES)}):([0-9]+)(?:\.\.([0-9]+))?$")
_DECODE_KEYS = (
    "name", "model", "devices", "heads", "dtype", "qlen", "batch", "context", "seq_lens",
    "page_size", "max_split_per_batch", "causal", "topk", "env", "tags",
)  # fmt: skip
#: The prefill planner's settings a [[prefill]] group may sweep, besides heads and causality, and the value
#: vLLM passes (``_build_fp8_prefill_ps_metadata``, :data:`mla_golden.cases.PREFILL_OPTIONS`).
PREFILL_SETTINGS = {
    "gqa_ratio": cases.PREFILL_GQA_RATIO,
    **{name: int(cases.PREFILL_OPTIONS[name]) for name in ("qhead_granularity", "qlen_granularity", "kvlen_granularity", "block_size")},
}
_PREFILL_KEYS = ("name", "model", "devices", "heads", "batch", "context", "seq_lens", "causal", *PREFILL_SETTINGS, "tags")
#: The fields only a decode point has, at the value a prefill point must leave them.
_DECODE_ONLY = {"qlen": 1, "q_dtype": "bf16", "kv_dtype": "bf16", "page_size": 1, "max_split_per_batch": -1, "topk": -1, "env": ()}


@dataclass(frozen=True)
class Point:
    """One planner call of a sweep, independent of which planner runs it (JSON-able, picklable)."""

    op: str
    arch: str
    cu_num: int
    #: Query heads per rank passed to the planner (decode: fewer than 16 padded to 16, as vLLM does).
    heads: int
    #: KV tokens per request (decode) or sequence lengths (prefill, kv == q).
    seq_lens: tuple[int, ...]
    qlen: int = 1
    #: "bf16", "fp8" (the device's fp8 type) or "none" (not passed).
    q_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    page_size: int = 1
    max_split_per_batch: int = -1
    causal: bool = True
    #: Planner env vars this point pins (None = unset), sorted by name.
    env: tuple[tuple[str, str | None], ...] = ()
    #: Decode: KV tokens each query attends to in sparse MLA (-1: dense; the sizing helper's is_sparse).
    topk: int = -1
    #: Prefill: the planner's settings (:data:`PREFILL_SETTINGS`; vLLM's by default).
    gqa_ratio: int = PREFILL_SETTINGS["gqa_ratio"]
    qhead_granularity: int = PREFILL_SETTINGS["qhead_granularity"]
    qlen_granularity: int = PREFILL_SETTINGS["qlen_granularity"]
    kvlen_granularity: int = PREFILL_SETTINGS["kvlen_granularity"]
    block_size: int = PREFILL_SETTINGS["block_size"]

    @property
    def batch(self) -> int:
        return len(self.seq_lens)

    @property
    def dtype(self) -> str:
        return self.q_dtype if self.q_dtype == self.kv_dtype else f"{self.q_dtype}/{self.kv_dtype}"

    @property
    def key(self) -> str:
        """Golden key: readable shape part plus a digest of everything, so equal points share a file."""
        digest = hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
        causal = "" if self.causal else "-noncausal"
        if self.op == PREFILL:
            tiles = "" if self.prefill_settings() == PREFILL_SETTINGS else f"-{self.tiles}"
            label = f"h{self.heads}{causal}{tiles}-b{self.batch}-t{sum(self.seq_lens)}-{digest}"
            return cases.case_key("sweep/prefill", self.arch, self.cu_num, label)
        env = "".join(f"-{k.removeprefix('AITER_').lower()}{v}" for k, v in self.env if v is not None)
        split = "" if self.max_split_per_batch == -1 else f"-s{self.max_split_per_batch}"
        sparse = "" if self.topk < 0 else f"-topk{self.topk}"
        label = (
            f"h{self.heads}-{self.dtype.replace('/', '-')}-q{self.qlen}-p{self.page_size}"
            f"{split}{causal}{sparse}{env}-b{self.batch}-{digest}"
        )
        return cases.case_key("sweep/decode", self.arch, self.cu_num, label)

    def prefill_settings(self) -> dict[str, int]:
        """The prefill planner's settings of this point, by name."""
        return {name: getattr(self, name) for name in PREFILL_SETTINGS}

    @property
    def tiles(self) -> str:
        """The prefill settings as keys and reports name them: ``q256-kv128-h1-b1-g1`` (qlen, kvlen, qhead granularity,
        block size, GQA ratio)."""
        return (f"q{self.qlen_granularity}-kv{self.kvlen_granularity}-h{self.qhead_granularity}-b{self.block_size}"
                f"-g{self.gqa_ratio}")  # fmt: skip

    def problem(self) -> str | None:
        """Why no planner call makes this point (a setting its op has no way to say), or None.

        A point is never run as another: a prefill point with a query length or page size, a decode point with
        prefill tiles, would otherwise plan as if they were not there.
        """
        if self.op not in (DECODE, PREFILL):
            return f"unknown op {self.op!r} (known: {DECODE}, {PREFILL})"
        if not self.seq_lens or min(self.seq_lens) < 1:
            return f"seq_lens {list(self.seq_lens)}: expected at least one request, each at least 1 token long"
        if self.op == PREFILL:
            foreign = [f"{name}={getattr(self, name)!r}" for name, value in _DECODE_ONLY.items() if getattr(self, name) != value]
            return f"{PREFILL} has no {', '.join(foreign)} (decode settings)" if foreign else None
        foreign = [f"{name}={value!r}" for name, value in self.prefill_settings().items() if value != PREFILL_SETTINGS[name]]
        if foreign:
            return f"{DECODE} has no {', '.join(foreign)} (prefill settings)"
        if min(self.seq_lens) < self.qlen:
            return f"a request of {min(self.seq_lens)} KV tokens is shorter than its query length {self.qlen}"
        return None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (field by field: dataclasses.asdict deep-copies, too slow per point)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["seq_lens"] = list(self.seq_lens)
        data["env"] = dict(self.env)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Point:
        values = dict(data)
        values["seq_lens"] = tuple(values["seq_lens"])
        values["env"] = tuple(sorted(values.get("env", {}).items()))
        return cls(**values)


@dataclass
class Subspace:
    """One [[decode]] / [[prefill]] table of a space file: an axis per parameter."""

    name: str
    op: str
    axes: dict[str, Axis]
    #: Explicit KV/sequence length lists; when given, they replace batch x contexts.
    seq_lens: tuple[tuple[int, ...], ...] = ()
    #: How long each request is (with ``batch``), when ``seq_lens`` is not given.
    contexts: tuple[Context, ...] = ()

    def _sizes(self) -> dict[str, int]:
        sizes = {name: len(axis) for name, axis in self.axes.items()}
        if self.seq_lens:
            sizes["seq_lens"] = len(self.seq_lens)
        else:
            sizes["context"] = sum(len(c.top) for c in self.contexts)
        return sizes

    def size(self) -> int:
        """Number of distinct points (ranges counted in full)."""
        return math.prod(self._sizes().values())

    def points(self) -> Iterator[Point]:
        """Every point, in axis order."""
        lists: dict[str, list[Any]] = {}
        for name in self._sizes():
            if name == "seq_lens":
                lists[name] = list(self.seq_lens)
            elif name == "context":
                lists[name] = [(c.mode, top) for c in self.contexts for top in c.top.values()]
            else:
                lists[name] = list(self.axes[name].values())
        for combo in itertools.product(*lists.values()):
            yield self._point(dict(zip(lists, combo)))

    def sample(self, rng: random.Random) -> Point:
        values: dict[str, Any] = {name: axis.sample(rng) for name, axis in self.axes.items()}
        if self.seq_lens:
            values["seq_lens"] = self.seq_lens[rng.randrange(len(self.seq_lens))]
        else:
            context = self.contexts[rng.randrange(len(self.contexts))]
            values["context"] = (context.mode, context.top.sample(rng))
        values["seed"] = rng.getrandbits(32)
        return self._point(values)

    def _point(self, v: dict[str, Any]) -> Point:
        arch, cu = v["device"]
        qlen = v.get("qlen", 1)
        if "seq_lens" in v:
            lens = tuple(v["seq_lens"])
        else:
            mode, top = v["context"]
            lens = sample_lengths(mode, max(top, qlen), v["batch"], qlen, random.Random(v.get("seed", repr(sorted(v.items())))))
        if self.op == PREFILL:
            settings = {name: v[name] for name in PREFILL_SETTINGS}
            return Point(PREFILL, arch, cu, v["heads"], lens, causal=v["causal"], **settings)
        q_dtype, kv_dtype = v["dtype"]
        heads = cases.kernel_heads(v["heads"])
        split = v["max_split_per_batch"]
        split = cases.vllm_max_split_per_batch(heads, len(lens), cu) if split == "vllm" else split
        env = tuple(sorted((name, None if value == UNSET else value) for name, value in v["env"]))
        return Point(
            DECODE, arch, cu, heads, lens, qlen=qlen, q_dtype=q_dtype, kv_dtype=kv_dtype,
            page_size=v["page_size"], max_split_per_batch=split, causal=v["causal"], env=env, topk=v["topk"],
        )  # fmt: skip


@dataclass
class Space:
    """Subspaces of both ops (the file's tables), or an explicit list of points; ``source`` names it in the journal and reports."""

    subspaces: list[Subspace]
    source: str = "<space>"
    text: str = field(default="", repr=False)
    #: Points swept as given, in order (``Space.of``), before any group's.
    explicit: tuple[Point, ...] = ()

    @classmethod
    def of(cls, points: Sequence[Point], source: str = "<points>") -> Space:
        """A space of exactly these points (e.g. the calls of recorded cases); SpaceError for one no call makes."""
        for index, point in enumerate(points):
            problem = point.problem()
            if problem:
                raise SpaceError(f"{source}: point {index}: {problem}")
        text = json.dumps([p.to_dict() for p in points], sort_keys=True)
        return cls([], source, text, tuple(points))

    def size(self) -> int:
        return len(self.explicit) + sum(g.size() for g in self.subspaces)

    @property
    def digest(self) -> str:
        """Identifies the space's content (a resumed sweep must sweep the same space)."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def points(self, seed: int, limit: int | None) -> Iterator[Point]:
        """Enumerated when the whole space fits in ``limit`` (None: 10000), else seeded samples, endlessly."""
        if self.size() <= (limit if limit is not None else 10_000):
            yield from self.explicit
            for subspace in self.subspaces:
                yield from subspace.points()
            return
        if self.explicit:
            raise SpaceError(f"{self.source}: {self.size()} explicit points exceed the budget of {limit}")
        weights = [math.log2(g.size() + 1) for g in self.subspaces]
        for index in itertools.count():
            rng = random.Random(f"{seed}:{index}")
            subspace = rng.choices(self.subspaces, weights)[0]
            yield subspace.sample(rng)


# ---------------------------------------------------------------- loading


def default_space() -> Path:
    return Path(__file__).with_name("space.toml")


def load_space(path: Path | str | None = None) -> Space:
    """The space at ``path`` (default: the shipped one); SpaceError naming file, line and key."""
    path = Path(path) if path is not None else default_space()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpaceError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse(text, str(path))


def parse(text: str, source: str = "<space>") -> Space:
    try:
        data, where = read_document(text, source, FORMAT)
        tables = {kind: where.tables_of(data, kind) for kind in ("decode", "prefill")}
    except MatrixError as exc:
        raise SpaceError(str(exc)) from exc
    devices = _devices(_SpaceTable(where, "", 0, {"devices": data.get("devices", list(cases.default_devices()))}))
    subspaces: list[Subspace] = []
    for kind, op in (("decode", DECODE), ("prefill", PREFILL)):
        for index, table in enumerate(tables[kind]):
            subspaces.append(_subspace(_SpaceTable(where, kind, index, table), op, devices))
    if not subspaces:
        raise SpaceError(f"{source}: no [[decode]] or [[prefill]] group: nothing to sweep")
    return Space(subspaces, source, text)


class _SpaceTable(Table):
    """The matrix's located accessors, plus ranges (errors are SpaceErrors)."""

    def fail(self, key: str, problem: str) -> SpaceError:
        if not self.kind:
            return SpaceError(str(self.where.error(None, 0, key, problem)))
        return SpaceError(str(super().fail(key, problem)))

    def axis(self, key: str, default: Any, low: int, high: int, extra: Sequence[Any] = ()) -> Axis:
        """An int axis: a value, a list of values (``extra`` words allowed), or ``"LO..HI"``."""
        value = self.data.get(key, default)
        if isinstance(value, str) and (match := _RANGE_RE.match(value)):
            lo, hi = int(match.group(1)), int(match.group(2))
            if not low <= lo <= hi <= high:
                raise self.fail(key, f"range {value!r} must lie within [{low}, {high}] with LO <= HI")
            return IntRange(lo, hi)
        values = value if isinstance(value, list) else [value]
        ok = all((isinstance(v, int) and not isinstance(v, bool) and (low <= v <= high or v in extra)) or v in extra for v in values)
        if not values or not ok:
            words = f" or {', '.join(map(repr, extra))}" if extra else ""
            raise self.fail(key, f"expected an integer in [{low}, {high}]{words}, a list of them, or a range 'LO..HI'; got {value!r}")
        return Choices(tuple(values))

    def dtype_axis(self) -> Choices:
        value = self.data.get("dtype")
        values = value if isinstance(value, list) else [value]
        pairs = []
        for item in values:
            parts = item.split("/") if isinstance(item, str) else []
            if len(parts) not in (1, 2) or not all(p in DTYPES for p in parts):
                raise self.fail("dtype", f"expected Q or Q/KV dtypes from {list(DTYPES)} (e.g. 'fp8', 'bf16/fp8'), got {item!r}")
            pairs.append((parts[0], parts[-1]))
        return Choices(tuple(pairs))

    def context_ranges(self) -> tuple[Context, ...]:
        value = self.data.get("context")
        values = value if isinstance(value, list) else [value]
        contexts = []
        for item in values:
            match = _CONTEXT_RE.match(item) if isinstance(item, str) else None
            low = int(match.group(2)) if match else 0
            high = int(match.group(3) or low) if match else 0
            if match is None or not 1 <= low <= high <= 1 << 22:
                raise self.fail("context", f"expected 'uniform:N', 'jitter:N' or 'MODE:LO..HI' with 1 <= LO <= HI, got {item!r}")
            contexts.append(Context(match.group(1), IntRange(low, high) if high > low else Choices((low,))))
        return tuple(contexts)

    def env_axis(self) -> Choices:
        value = self.data.get("env", {})
        if not isinstance(value, dict):
            raise self.fail("env", f"expected a table such as {{ AITER_ENABLE_EXPERIMENTAL = [\"unset\", \"1\"] }}, got {value!r}")
        per_var = []
        for name, setting in value.items():
            if name not in ENV_VARS:
                raise self.fail(f"env.{name}", f"not a planner env var (known: {', '.join(ENV_VARS)})")
            settings = setting if isinstance(setting, list) else [setting]
            if not settings or not all(isinstance(s, str) for s in settings):
                raise self.fail(f"env.{name}", f"expected a string or a list of strings ('{UNSET}' = unset), got {setting!r}")
            per_var.append([(name, s) for s in settings])
        return Choices(tuple(tuple(combo) for combo in itertools.product(*per_var)))

    def causal_axis(self) -> Choices:
        causal = self.data.get("causal", True)
        values = causal if isinstance(causal, list) else [causal]
        if not values or not all(isinstance(c, bool) for c in values):
            raise self.fail("causal", f"expected true, false or a list of them, got {causal!r}")
        return Choices(tuple(values))

    def seq_lens(self) -> tuple[tuple[int, ...], ...]:
        value = self.data.get("seq_lens")
        if value is None:
            return ()
        ok = isinstance(value, list) and value and all(
            isinstance(b, list) and b and all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1 << 22 for n in b)
            for b in value
        )
        if not ok:
            raise self.fail("seq_lens", f"expected a list of batches, each a non-empty list of lengths in [1, {1 << 22}]")
        return tuple(tuple(b) for b in value)


def _devices(group: _SpaceTable) -> Choices:
    value = group.data["devices"]
    values = value if isinstance(value, list) else [value]
    devices = []
    for item in values:
        try:
            devices.append(cases.parse_device(item if isinstance(item, str) else repr(item)))
        except MatrixError as exc:
            raise group.fail("devices", str(exc)) from None
    if not devices:
        raise group.fail("devices", "needs at least one device")
    return Choices(tuple(devices))


def _subspace(group: _SpaceTable, op: str, devices: Choices) -> Subspace:
    decode = op == DECODE
    group.check_keys(_DECODE_KEYS if decode else _PREFILL_KEYS, ("name", "heads"))
    name = group.text("name")
    seq_lens = group.seq_lens()
    if not seq_lens and not ("batch" in group.data and "context" in group.data):
        raise group.fail("batch", "give batch and context, or seq_lens")
    axes: dict[str, Axis] = {"device": _devices(group) if "devices" in group.data else devices}
    axes["heads"] = group.axis("heads", None, 1, 1024)
    if decode:
        if "dtype" not in group.data:
            raise group.fail("dtype", "missing (required)")
        for h in axes["heads"].values():
            if h % 8:
                raise group.fail("heads", f"{h} heads per rank: aiter's sizing helper needs a multiple of 8")
        axes["dtype"] = group.dtype_axis()
        axes["qlen"] = group.axis("qlen", 1, 1, 64)
        axes["page_size"] = group.axis("page_size", 1, 1, 1024)
        axes["max_split_per_batch"] = group.axis("max_split_per_batch", "vllm", 1, 1 << 16, extra=("vllm", -1))
        axes["topk"] = group.axis("topk", -1, 1, 1 << 22, extra=(-1,))
        axes["env"] = group.env_axis()
    else:
        for name, vllm in PREFILL_SETTINGS.items():
            axes[name] = group.axis(name, vllm, 1, 1 << 16)
    axes["causal"] = group.causal_axis()
    contexts: tuple[Context, ...] = ()
    if not seq_lens:
        axes["batch"] = group.axis("batch", None, 1, 1 << 16)
        contexts = group.context_ranges()
    if decode and seq_lens:
        short = min(min(b) for b in seq_lens)
        if short < max(axes["qlen"].values() if isinstance(axes["qlen"], Choices) else [axes["qlen"].high]):
            raise group.fail("seq_lens", f"a context of {short} tokens is shorter than a query length of this group")
    return Subspace(name, op, axes, seq_lens, contexts)
