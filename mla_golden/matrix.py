"""The case matrix: which planner calls ``mla-golden record`` makes, and how.

A matrix is a TOML file (format in docs/cli.md; the default one,
``matrix.toml``, ships in this package). Each ``[[decode]]`` or ``[[prefill]]``
group lists values per axis; the group expands to every combination, one case
per combination and device. A case runs the planner the way a real builder
does: buffers sized by the backend's ``get_*_info_v1`` and allocated with
``torch.empty``, then the call with the builder's arguments (vLLM's
``AiterMLAMetadataBuilder`` for decode, its ``_build_fp8_prefill_ps_metadata``
for prefill), in the words :mod:`mla_golden.cases` defines for the matrix and
the sweep space alike.

Every error in a matrix names the file, the line and the key.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mla_golden import cases
from mla_golden.binding import build_arguments, signature_of
from mla_golden.case_file import Locator, Table, read_document
from mla_golden.errors import MatrixError as MatrixError  # re-exported: importable from here too
from mla_golden.schema import MLA_OP, OUTPUTS, PS_OP, schema_for

if TYPE_CHECKING:
    import torch

    from mla_golden.backends import Backend
    from mla_golden.call import Call

FORMAT = "mla-golden-matrix/1"
DEFAULT_MATRIX = "matrix.toml"


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
        """Heads passed to the planner (:func:`mla_golden.cases.kernel_heads`)."""
        return cases.kernel_heads(self.heads)

    def invoke(self, backend: Backend) -> None:
        """Size, allocate and plan like the builder; the planner is looked up on ``backend`` now."""
        if self.op == MLA_OP:
            self._invoke_decode(backend)
        else:
            self._invoke_prefill(backend)

    def _invoke_decode(self, backend: Backend) -> None:
        """vLLM ``AiterMLAMetadataBuilder._build_decode`` (plus page sizes as ATOM/SGLang page them)."""
        import torch

        dtype = cases.torch_dtype(self.dtype, self.arch)
        dev = backend.tensor_device
        info = backend.sizer(self.op)(
            self.sizing_batch, self.qlen, self.kernel_heads, dtype, dtype, is_sparse=False, fast_mode=True
        )
        wm, wi, wis, ri, rfm, rpm = (torch.empty(shape, dtype=dt, device=dev) for shape, dt in info)
        inputs = cases.decode_inputs(self.seq_lens, self.qlen, self.page_size, dev)
        planner = backend.planner(self.op)
        if "kv_last_page_lens" not in signature_of(planner, schema_for(self.op)).parameters:
            self._invoke_older_decode(planner, inputs, dtype, (wm, wi, wis, ri, rfm, rpm))
            return
        planner(
            *inputs.values(), self.kernel_heads, 1, True,
            wm, wis, wi, ri, rfm, rpm,
            page_size=self.page_size, kv_granularity=cases.kv_granularity(self.page_size),
            max_seqlen_qo=self.qlen, uni_seqlen_qo=self.qlen, fast_mode=True,
            max_split_per_batch=self.max_split_per_batch, dtype_q=dtype, dtype_kv=dtype,
        )  # fmt: skip

    def _invoke_older_decode(
        self, planner: Callable[..., Any], inputs: dict[str, torch.Tensor], dtype: torch.dtype, buffers: tuple[torch.Tensor, ...]
    ) -> None:
        """An aiter before paged KV (739c63177e: no ``kv_last_page_lens`` / ``page_size``), called as its builders
        did, by keyword; a paged case it cannot express fails naming the argument (AdaptationError)."""
        name = str(dtype)
        params = cases.decode_params(self.kernel_heads, True, self.page_size, self.qlen, self.max_split_per_batch, name, name)
        args, kwargs, _ = build_arguments(self.op, planner, params, inputs, dict(zip(OUTPUTS, buffers)))
        planner(*args, **kwargs)

    def _invoke_prefill(self, backend: Backend) -> None:
        """vLLM ``_build_fp8_prefill_ps_metadata``: host-side indptrs, new tokens only (kv == q)."""
        import torch

        dev = backend.tensor_device
        info = backend.sizer(self.op)(
            batch_size=self.sizing_batch,
            num_head_k=self.heads,
            max_qlen=self.sizing_qlen,
            qlen_granularity=cases.PREFILL_OPTIONS["qlen_granularity"],
        )
        wm, wi, wis, ri, rfm, rpm = (torch.empty(shape, dtype=dt, device=dev) for shape, dt in info)
        backend.planner(self.op)(
            *cases.prefill_inputs(self.seq_lens).values(), cases.PREFILL_GQA_RATIO, self.heads,
            wm, wi, wis, ri, rfm, rpm, **cases.PREFILL_OPTIONS,
        )  # fmt: skip


def capture(cases: Sequence[Case], backend: Backend) -> Iterator[tuple[Case, Call | Exception]]:
    """Run each case on ``backend`` under one spy; yield it with its captured call.

    A planner that rejects the inputs yields a call with ``error`` set (that
    is a result worth keeping); whatever stops the call from being made (the
    sizing helper failing, say) is yielded as the exception, and so is planner
    code raising SystemExit or KeyboardInterrupt (as :class:`PlannerExited`). One spy for all
    cases: installing one scans every loaded module.
    """
    from mla_golden.capture.recorder import spy
    from mla_golden.context import planner_env
    from mla_golden.errors import PLANNER_EXITS, PlannerExited

    with spy(backend.module) as s:
        for case in cases:
            before = len(s.calls)
            try:
                # Not context.as_recorded: there is no Call yet (this records one), only the case's env and device.
                with planner_env(case.env), backend.plans_for(case.arch, case.cu_num):
                    case.invoke(backend)
            except PLANNER_EXITS as exc:  # never the program's result: the case failed
                yield case, PlannerExited.of(exc)
                continue
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


def load_matrix(path: Path | str | None = None, devices: Sequence[str] | None = None) -> list[Case]:
    """Every case of the matrix at ``path`` (default: the shipped one), in file order.

    ``devices`` ("ARCH:CU" each) plans every case for those devices instead of the matrix's.
    """
    path = Path(path) if path is not None else default_matrix()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse(text, str(path), devices)


def parse(text: str, source: str = "<matrix>", devices: Sequence[str] | None = None) -> list[Case]:
    """Cases of a matrix given as TOML text; ``source`` names it in errors; ``devices`` as in :func:`load`."""
    data, where = read_document(text, source, FORMAT)
    defaults = _devices(where, None, 0, data.get("devices", list(cases.default_devices())))
    override = [cases.parse_device(d) for d in devices] if devices else None
    planned: list[Case] = []
    for kind in ("decode", "prefill"):
        for index, group in enumerate(where.tables_of(data, kind)):
            expand = _decode_cases if kind == "decode" else _prefill_cases
            planned.extend(expand(Table(where, kind, index, group), defaults, override))
    seen: dict[str, Case] = {}
    for case in planned:
        if case.name in seen:
            raise MatrixError(f"{source}: two cases named {case.name!r} (groups {seen[case.name].group!r} and {case.group!r})")
        seen[case.name] = case
    return planned


def _devices(where: Locator, group: Table | None, index: int, value: Any) -> list[tuple[str, int]]:
    values = value if isinstance(value, list) else [value]
    devices = []
    for item in values:
        problem = cases.device_problem(item)
        if problem:
            raise group.fail("devices", problem) if group else where.error(None, index, "devices", problem)
        devices.append(cases.split_device(item))
    if not devices:
        problem = "needs at least one device"
        raise group.fail("devices", problem) if group else where.error(None, index, "devices", problem)
    return devices


def _lengths(mode: str, top: int, count: int, low: int, seed: str) -> tuple[int, ...]:
    """:func:`mla_golden.cases.lengths`, jitter drawn by a generator seeded with ``seed`` (the case's name)."""
    return cases.lengths(mode, top, count, low, random.Random(zlib.crc32(seed.encode())).randint)


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
    dtypes = group.choices("dtype", cases.DTYPE_NAMES)
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
        case_name = cases.case_key(f"decode/{name}", arch, cu, f"h{h}-{dtype}-q{qlen}-b{batch}-{mode}{top}-p{page}")
        yield Case(
            name=case_name, op=MLA_OP, group=name, model=model, arch=arch, cu_num=cu,
            env=env, heads=h, seq_lens=_lengths(mode, top, batch, qlen, case_name),
            sizing_batch=max_num_seqs or batch, dtype=dtype, qlen=qlen, page_size=page,
            max_split_per_batch=cases.vllm_max_split_per_batch(h, batch, cu) if split == "vllm" else split, tags=tags,
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
            name=cases.case_key(f"prefill/{name}", arch, cu, f"h{h}-{label}"), op=PS_OP, group=name, model=model,
            arch=arch, cu_num=cu, env={}, heads=h, seq_lens=lens, sizing_batch=max_num_seqs or len(lens),
            sizing_qlen=max_qlen or max(lens), tags=tags,
        )  # fmt: skip
