"""Bit-exact CPU reference of aiter's MLA decode metadata planner (``get_mla_metadata_v1``).

Ports, from aiter commit e4048607a535ace3a2b51ded31b1c8c2d45c0879 (2026-08-22),
written from the source (no upstream code copied):

* ``aiter/ops/attention.py``: ``get_mla_decode_fwd_occupancy``,
  ``get_mla_decode_fwd_max_splits``, ``get_mla_metadata_info_v1`` and the
  ``get_mla_metadata_v1`` wrapper (legacy ``dtype_q`` / ``dtype_kv`` aliases,
  ``aiter/utility/dtypes.py::_aiter_dtype_id``);
* ``csrc/kernels/mla/metadata.cu``: the op's input checks and its choice of
  planner (``fast_mode`` -> v1_2);
* ``csrc/kernels/mla/metadata/v1_2_device.cuh`` and ``v1_comm.cuh``: host
  dispatch (:mod:`.mla_v1_dispatch`), the serial planner (:mod:`.mla_v1_serial`)
  and the parallel planner (:mod:`.mla_v1_parallel`).

Every version's Python signature (``*_signature``) wraps the same op,
:func:`fill_mla_metadata_v1`, told apart by its
:class:`~mla_golden.reference.features.PlannerFeatures`
(:func:`mla_golden.reference.at` builds them; ``mla_golden.reference``'s own
planners are the newest version's).

The GPU planned for is :func:`~mla_golden.reference._device.current_device`;
``AITER_ENABLE_EXPERIMENTAL`` and ``AITER_MLA_META_USE_PARALLEL`` are read from
``os.environ`` at call time. Where aiter aborts on a failed ``AITER_CHECK`` this
raises :class:`AiterCheckError`; where it would write past a caller's buffer,
:class:`BufferTooSmallError` (before touching any buffer); where its result is
undefined, :class:`UndefinedResultError` unless the caller opted in with
:func:`mla_golden.reference._undefined.allow_undefined`.

Two deliberate differences: both fp8 torch dtypes (``float8_e4m3fnuz`` and
``float8_e4m3fn``) count as fp8 on every arch (aiter only accepts the device's
one), and only ``fast_mode=True`` is ported: ``fast_mode=False`` (aiter's v1_1,
or v1_0 with ``intra_batch_mode``) raises :class:`NotImplementedError`. As in
aiter, ``intra_batch_mode`` is ignored when ``fast_mode`` is true.
"""

from __future__ import annotations

import array
import itertools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch

from mla_golden.reference import dtypes, kernel_log, preconditions
from mla_golden.reference._device import current_device
from mla_golden.reference._undefined import UNDEFINED_PLACEHOLDER, undefined_allowed
from mla_golden.reference.errors import (
    AiterCheckError,
    BufferTooSmallError,
    UndefinedResultError,
)
from mla_golden.reference.features import PlannerFeatures, Signature
from mla_golden.reference.mla_v1_dispatch import (
    AITER_DTYPE_BF16,
    MlaV12Dispatch,
    MlaVersion,
    get_mla_metadata_v1_2_device,
)
from mla_golden.reference.mla_v1_past_end import run_planner
from mla_golden.reference.mla_v1_sizing import (
    FP8_DTYPES,
    BufferInfo,
    get_mla_decode_fwd_max_splits,
    get_mla_decode_fwd_occupancy,
    mla_metadata_info_v1,
)
from mla_golden.reference.versions import latest
from mla_golden.schema import CPP_FILE

__all__ = [
    "FP8_DTYPES",
    "MlaVersion",
    "get_mla_decode_fwd_max_splits",
    "get_mla_decode_fwd_occupancy",
    "no_pages_signature",
    "nope_rope_signature",
    "paged_signature",
    "plan_mla_metadata_v1",
    "sizing_signature",
]

_F = TypeVar("_F", bound=Callable[..., Any])

_AITER_DTYPE_I32 = dtypes.AITER_DTYPE_NAMES.index("i32")


def _check_input(tensor: torch.Tensor, name: str, lines: Iterator[int]) -> None:
    """metadata.cu's two checks of one input (at the next two ``lines``): contiguous, int32."""
    stride_line, dtype_line = next(lines), next(lines)
    if tensor.stride(0) != 1:
        raise AiterCheckError(
            f"get_mla_metadata_v1: {name} should be continuous!", f"{CPP_FILE}:{stride_line}"
        )
    if dtypes.aiter_dtype_id(tensor.dtype) != _AITER_DTYPE_I32:
        raise AiterCheckError(
            f"get_mla_metadata_v1: {name}'s element type should be int!",
            f"{CPP_FILE}:{dtype_line}",
        )


def _words(buf: torch.Tensor, name: str, dtype: torch.dtype) -> torch.Tensor:
    """A caller's buffer as aiter's kernel sees it: its memory as a flat array of ``dtype``."""
    if not buf.is_contiguous():
        raise ValueError(
            f"{name} must be contiguous: aiter writes it through data_ptr() as a flat array"
        )
    flat = buf.view(-1)
    return flat if flat.dtype == dtype else flat.view(dtype)


def plan_mla_metadata_v1(
    seqlens_qo_indptr: torch.Tensor,
    seqlens_kv_indptr: torch.Tensor,
    kv_last_page_lens: torch.Tensor | None,
    num_heads_per_head_k: int,
    num_heads_k: int,
    is_causal: bool,
    reduce_indptr_size: int,
    page_size: int = 1,
    kv_granularity: int = 16,
    max_seqlen_qo: int = -1,
    uni_seqlen_qo: int = -1,
    fast_mode: bool = True,
    topk: int = -1,
    max_split_per_batch: int = -1,
    intra_batch_mode: bool = False,
    is_cp_round_robin: bool = False,
    mla_version: int = MlaVersion.V32,
    dtype_q_nope: int | None = None,
    dtype_q_rope: int | None = None,
    dtype_kv_nope: int | None = None,
    dtype_kv_rope: int | None = None,
    features: PlannerFeatures | None = None,
) -> MlaV12Dispatch:
    """The C++ op up to the kernel launch: input checks, then v1_2 host dispatch.

    Dtypes are ``AiterDtype`` ids (None = not passed). Raises
    :class:`AiterCheckError` where aiter's checks fail, and
    :class:`NotImplementedError` for the planners not ported (``fast_mode=False``;
    like aiter, ``intra_batch_mode`` only matters then). ``features``: the
    version's rules, the newest ported version's (``versions.latest()``) by default.
    """
    features = latest().features if features is None else features
    # metadata.cu's checks, two lines apart (33d168a0 has none for page_size / kv_last_page_lens).
    lines = itertools.count(features.check_lines[0], 2)
    granularity_line = next(lines)
    if kv_granularity & (kv_granularity - 1) != 0:
        raise AiterCheckError(
            "get_mla_metadata_v1: kv_granularity Must be power of 2!",
            f"{CPP_FILE}:{granularity_line}",
        )
    if kv_last_page_lens is not None:
        page_size_line = next(lines)
        if page_size & (page_size - 1) != 0:
            raise AiterCheckError(
                "get_mla_metadata_v1: page_size Must be power of 2!",
                f"{CPP_FILE}:{page_size_line}",
            )
    _check_input(seqlens_qo_indptr, "seqlens_qo_indptr", lines)
    _check_input(seqlens_kv_indptr, "seqlens_kv_indptr", lines)
    if kv_last_page_lens is not None:
        _check_input(kv_last_page_lens, "kv_last_page_lens", lines)
    if not fast_mode:
        planner = "v1_0_device.cuh" if intra_batch_mode else "v1_1_device.cuh"
        raise NotImplementedError(
            f"get_mla_metadata_v1(fast_mode=False, intra_batch_mode={intra_batch_mode}) runs "
            f"aiter's csrc/kernels/mla/metadata/{planner}, which the reference does not port"
        )
    # Missing nope dtypes mean bf16; missing rope dtypes follow their nope dtype.
    q_nope = AITER_DTYPE_BF16 if dtype_q_nope is None else dtype_q_nope
    kv_nope = AITER_DTYPE_BF16 if dtype_kv_nope is None else dtype_kv_nope
    return get_mla_metadata_v1_2_device(
        current_device(),
        num_kv_batches=seqlens_kv_indptr.size(0) - 1,
        num_heads_per_head_k=num_heads_per_head_k,
        num_heads_k=num_heads_k,
        is_causal=is_causal,
        page_size=page_size,
        kv_granularity=kv_granularity,
        max_seqlen_qo=max_seqlen_qo,
        ori_uni_seqlen_qo=uni_seqlen_qo,
        topk=topk,
        max_split_per_batch=max_split_per_batch,
        q_dtype=q_nope,
        kv_dtype=kv_nope,
        q_rope_dtype=q_nope if dtype_q_rope is None else dtype_q_rope,
        kv_rope_dtype=kv_nope if dtype_kv_rope is None else dtype_kv_rope,
        is_cp_round_robin=is_cp_round_robin,
        mla_version=int(mla_version),
        reduce_indptr_size=reduce_indptr_size,
        features=features,
    )


def nope_rope_signature(features: PlannerFeatures) -> Callable[..., None]:
    """``get_mla_metadata_v1`` with the signature of aiter 2026-07 on (aded0f84, e4048607).

    ``is_cp_round_robin``, ``mla_version`` and the nope/rope dtypes; the
    legacy ``dtype_q`` / ``dtype_kv`` fill whichever of them were not given
    (``aiter/ops/attention.py`` at aded0f84 and e4048607).
    """

    def get_mla_metadata_v1(
        seqlens_qo_indptr: torch.Tensor,
        seqlens_kv_indptr: torch.Tensor,
        kv_last_page_lens: torch.Tensor,
        num_heads_per_head_k: int,
        num_heads_k: int,
        is_causal: bool,
        work_metadata_ptrs: torch.Tensor,
        work_info_set: torch.Tensor,
        work_indptr: torch.Tensor,
        reduce_indptr: torch.Tensor,
        reduce_final_map: torch.Tensor,
        reduce_partial_map: torch.Tensor,
        page_size: int = 1,
        kv_granularity: int = 16,
        max_seqlen_qo: int = -1,
        uni_seqlen_qo: int = -1,
        fast_mode: bool = True,
        topk: int = -1,
        max_split_per_batch: int = -1,
        intra_batch_mode: bool = False,
        is_cp_round_robin: bool = False,
        mla_version: int = MlaVersion.V32.value,
        dtype_q_nope: torch.dtype | None = None,
        dtype_q_rope: torch.dtype | None = None,
        dtype_kv_nope: torch.dtype | None = None,
        dtype_kv_rope: torch.dtype | None = None,
        dtype_q: torch.dtype | None = None,
        dtype_kv: torch.dtype | None = None,
    ) -> None:
        """Fill the six metadata buffers in place exactly as aiter's planner does.

        Same signature as aiter's wrapper; computes on CPU and stores only the
        elements aiter stores (the rest keep the caller's contents).
        """
        # The wrapper: legacy aliases fill whichever nope/rope dtype was not given.
        if dtype_q is not None:
            dtype_q_nope = dtype_q if dtype_q_nope is None else dtype_q_nope
            dtype_q_rope = dtype_q if dtype_q_rope is None else dtype_q_rope
        if dtype_kv is not None:
            dtype_kv_nope = dtype_kv if dtype_kv_nope is None else dtype_kv_nope
            dtype_kv_rope = dtype_kv if dtype_kv_rope is None else dtype_kv_rope
        fill_mla_metadata_v1(
            features,
            seqlens_qo_indptr,
            seqlens_kv_indptr,
            kv_last_page_lens,
            num_heads_per_head_k,
            num_heads_k,
            is_causal,
            work_metadata_ptrs,
            work_info_set,
            work_indptr,
            reduce_indptr,
            reduce_final_map,
            reduce_partial_map,
            page_size,
            kv_granularity,
            max_seqlen_qo,
            uni_seqlen_qo,
            fast_mode,
            topk,
            max_split_per_batch,
            intra_batch_mode,
            is_cp_round_robin,
            mla_version,
            dtype_q_nope,
            dtype_q_rope,
            dtype_kv_nope,
            dtype_kv_rope,
        )

    return _named(get_mla_metadata_v1, "get_mla_metadata_v1")


def paged_signature(features: PlannerFeatures) -> Callable[..., None]:
    """``get_mla_metadata_v1`` with the signature of aiter 739c63177e .. v0.1.16.post2.

    ``kv_last_page_lens`` and ``page_size`` but torch dtypes ``dtype_q`` /
    ``dtype_kv`` only (``aiter/ops/attention.py`` at 620287969c); they reach
    the op as its q and kv dtypes, nope and rope alike.
    """

    def get_mla_metadata_v1(
        seqlens_qo_indptr: torch.Tensor,
        seqlens_kv_indptr: torch.Tensor,
        kv_last_page_lens: torch.Tensor,
        num_heads_per_head_k: int,
        num_heads_k: int,
        is_causal: bool,
        work_metadata_ptrs: torch.Tensor,
        work_info_set: torch.Tensor,
        work_indptr: torch.Tensor,
        reduce_indptr: torch.Tensor,
        reduce_final_map: torch.Tensor,
        reduce_partial_map: torch.Tensor,
        page_size: int = 1,
        kv_granularity: int = 16,
        max_seqlen_qo: int = -1,
        uni_seqlen_qo: int = -1,
        fast_mode: bool = True,
        topk: int = -1,
        max_split_per_batch: int = -1,
        intra_batch_mode: bool = False,
        dtype_q: torch.dtype | None = None,
        dtype_kv: torch.dtype | None = None,
    ) -> None:
        """Fill the six metadata buffers in place exactly as this aiter version's planner does."""
        fill_mla_metadata_v1(
            features,
            seqlens_qo_indptr,
            seqlens_kv_indptr,
            kv_last_page_lens,
            num_heads_per_head_k,
            num_heads_k,
            is_causal,
            work_metadata_ptrs,
            work_info_set,
            work_indptr,
            reduce_indptr,
            reduce_final_map,
            reduce_partial_map,
            page_size,
            kv_granularity,
            max_seqlen_qo,
            uni_seqlen_qo,
            fast_mode,
            topk,
            max_split_per_batch,
            intra_batch_mode,
            False,
            MlaVersion.V32,
            dtype_q,
            dtype_q,
            dtype_kv,
            dtype_kv,
        )

    return _named(get_mla_metadata_v1, "get_mla_metadata_v1")


def no_pages_signature(features: PlannerFeatures) -> Callable[..., None]:
    """``get_mla_metadata_v1`` with the signature of aiter 33d168a0 and before.

    No ``kv_last_page_lens`` / ``page_size`` (every page is one token); a
    ``compile_ops`` binding taking torch dtypes ``dtype_q`` / ``dtype_kv``
    (``aiter/ops/attention.py`` at 33d168a06297).
    """

    def get_mla_metadata_v1(
        seqlens_qo_indptr: torch.Tensor,
        seqlens_kv_indptr: torch.Tensor,
        num_heads_per_head_k: int,
        num_heads_k: int,
        is_causal: bool,
        work_metadata_ptrs: torch.Tensor,
        work_info_set: torch.Tensor,
        work_indptr: torch.Tensor,
        reduce_indptr: torch.Tensor,
        reduce_final_map: torch.Tensor,
        reduce_partial_map: torch.Tensor,
        kv_granularity: int = 16,
        max_seqlen_qo: int = -1,
        uni_seqlen_qo: int = -1,
        fast_mode: bool = True,
        topk: int = -1,
        max_split_per_batch: int = -1,
        intra_batch_mode: bool = False,
        dtype_q: torch.dtype | None = None,
        dtype_kv: torch.dtype | None = None,
    ) -> None:
        """Fill the six metadata buffers in place exactly as this aiter version's planner does."""
        fill_mla_metadata_v1(
            features,
            seqlens_qo_indptr,
            seqlens_kv_indptr,
            None,
            num_heads_per_head_k,
            num_heads_k,
            is_causal,
            work_metadata_ptrs,
            work_info_set,
            work_indptr,
            reduce_indptr,
            reduce_final_map,
            reduce_partial_map,
            1,
            kv_granularity,
            max_seqlen_qo,
            uni_seqlen_qo,
            fast_mode,
            topk,
            max_split_per_batch,
            intra_batch_mode,
            False,
            MlaVersion.V32,
            dtype_q,
            dtype_q,
            dtype_kv,
            dtype_kv,
        )

    return _named(get_mla_metadata_v1, "get_mla_metadata_v1")


def sizing_signature(features: PlannerFeatures) -> Callable[..., BufferInfo]:
    """``get_mla_metadata_info_v1`` of a version with ``features``, in that version's signature.

    33d168a0's helper has no ``max_split_per_batch``; later ones add it last.
    """
    if features.signature is Signature.NO_PAGES:

        def get_mla_metadata_info_v1(
            batch_size: int,
            max_seqlen_qo: int,
            num_head_qo: int,
            q_dtype: torch.dtype | None,
            kv_dtype: torch.dtype | None,
            is_sparse: bool,
            fast_mode: bool = True,
            num_kv_splits: int = 32,
            intra_batch_mode: bool = False,
        ) -> BufferInfo:
            """(shape, dtype) of the six output buffers, as this version's sizing helper returns them."""
            return mla_metadata_info_v1(
                features, batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse,
                fast_mode, num_kv_splits, intra_batch_mode,
            )  # fmt: skip

        return _named(get_mla_metadata_info_v1, "get_mla_metadata_info_v1")

    def get_mla_metadata_info_v1_split_cap(
        batch_size: int,
        max_seqlen_qo: int,
        num_head_qo: int,
        q_dtype: torch.dtype | None,
        kv_dtype: torch.dtype | None,
        is_sparse: bool,
        fast_mode: bool = True,
        num_kv_splits: int = 32,
        intra_batch_mode: bool = False,
        max_split_per_batch: int = -1,
    ) -> BufferInfo:
        """(shape, dtype) of the six output buffers, as this version's sizing helper returns them.

        Order: work_metadata_ptrs, work_indptr, work_info_set, reduce_indptr,
        reduce_final_map, reduce_partial_map; 1-D shapes are plain ints, like aiter's.
        """
        return mla_metadata_info_v1(
            features, batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse,
            fast_mode, num_kv_splits, intra_batch_mode, max_split_per_batch,
        )  # fmt: skip

    return _named(get_mla_metadata_info_v1_split_cap, "get_mla_metadata_info_v1")


def _named(fn: _F, name: str) -> _F:
    """``fn`` under aiter's name (reports and ``repr`` show it as aiter's function)."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def fill_mla_metadata_v1(
    features: PlannerFeatures,
    seqlens_qo_indptr: torch.Tensor,
    seqlens_kv_indptr: torch.Tensor,
    kv_last_page_lens: torch.Tensor | None,
    num_heads_per_head_k: int,
    num_heads_k: int,
    is_causal: bool,
    work_metadata_ptrs: torch.Tensor,
    work_info_set: torch.Tensor,
    work_indptr: torch.Tensor,
    reduce_indptr: torch.Tensor,
    reduce_final_map: torch.Tensor,
    reduce_partial_map: torch.Tensor,
    page_size: int,
    kv_granularity: int,
    max_seqlen_qo: int,
    uni_seqlen_qo: int,
    fast_mode: bool,
    topk: int,
    max_split_per_batch: int,
    intra_batch_mode: bool,
    is_cp_round_robin: bool,
    mla_version: int,
    dtype_q_nope: torch.dtype | None,
    dtype_q_rope: torch.dtype | None,
    dtype_kv_nope: torch.dtype | None,
    dtype_kv_rope: torch.dtype | None,
) -> None:
    """The op behind every version's ``get_mla_metadata_v1``: the C++ op with resolved dtypes.

    ``kv_last_page_lens`` is None for versions whose signature lacks it
    (then ``page_size`` is 1 and the planner never reads it).
    """
    read = preconditions.require("get_mla_metadata_v1", locals())
    dtype_ids = [
        None if dtype is None else dtypes.aiter_dtype_id(dtype)
        for dtype in (dtype_q_nope, dtype_q_rope, dtype_kv_nope, dtype_kv_rope)
    ]
    tensors = (
        seqlens_qo_indptr,
        seqlens_kv_indptr,
        *(() if kv_last_page_lens is None else (kv_last_page_lens,)),
        work_metadata_ptrs,
        work_info_set,
        work_indptr,
        reduce_indptr,
        reduce_final_map,
        reduce_partial_map,
    )
    for tensor in tensors:  # aiter converts each tensor to an aiter_tensor_t
        dtypes.aiter_dtype_id(tensor.dtype)

    dispatch = plan_mla_metadata_v1(
        seqlens_qo_indptr,
        seqlens_kv_indptr,
        kv_last_page_lens,
        num_heads_per_head_k,
        num_heads_k,
        is_causal,
        reduce_indptr.size(0),
        page_size=page_size,
        kv_granularity=kv_granularity,
        max_seqlen_qo=max_seqlen_qo,
        uni_seqlen_qo=uni_seqlen_qo,
        topk=topk,
        fast_mode=fast_mode,
        max_split_per_batch=max_split_per_batch,
        intra_batch_mode=intra_batch_mode,
        is_cp_round_robin=is_cp_round_robin,
        mla_version=mla_version,
        dtype_q_nope=dtype_ids[0],
        dtype_q_rope=dtype_ids[1],
        dtype_kv_nope=dtype_ids[2],
        dtype_kv_rope=dtype_ids[3],
        features=features,
    )
    kernel_log.note(dispatch.kernel_name, dispatch.params.qk_batch_ratio)

    # the values the preconditions read, where they could (a 1-D contiguous int tensor), else read here
    inputs = {
        name: [] if tensor is None else _read_or(read.get(name), tensor)
        for name, tensor in (
            ("seqlens_qo_indptr", seqlens_qo_indptr),
            ("seqlens_kv_indptr", seqlens_kv_indptr),
            ("kv_last_page_lens", kv_last_page_lens),
        )
    }
    ptrs = _words(work_metadata_ptrs, "work_metadata_ptrs", torch.uint64)
    buffers = {
        "work_info_set": _words(work_info_set, "work_info_set", torch.int32),
        "work_indptr": _words(work_indptr, "work_indptr", torch.int32),
        "reduce_indptr": _words(reduce_indptr, "reduce_indptr", torch.int32),
        "reduce_final_map": _words(reduce_final_map, "reduce_final_map", torch.int32),
        "reduce_partial_map": _words(reduce_partial_map, "reduce_partial_map", torch.int32),
    }
    pointers = [work_indptr.data_ptr(), work_info_set.data_ptr()]
    if ptrs.numel() < 2:
        raise BufferTooSmallError("work_metadata_ptrs", ptrs.numel(), 2)

    try:
        outputs, indeterminate, message = run_planner(dispatch, inputs, uni_seqlen_qo)
    except UndefinedResultError:
        if not undefined_allowed():
            raise
        ptrs[:2].copy_(torch.tensor(pointers, dtype=torch.uint64))
        return
    if indeterminate:
        if not undefined_allowed():
            raise UndefinedResultError(message)
        for field, indices in indeterminate.items():
            values = getattr(outputs, field)
            for index in indices:
                values[index] = UNDEFINED_PLACEHOLDER

    stores = {name: getattr(outputs, name) for name in buffers}
    for name, values in stores.items():
        if len(values) > buffers[name].numel():
            raise BufferTooSmallError(name, buffers[name].numel(), len(values))
    ptrs[:2].copy_(torch.tensor(pointers, dtype=torch.uint64))
    for name, values in stores.items():
        _store(buffers[name], values)


def _read_or(values: list[int] | None, tensor: torch.Tensor) -> list[int]:
    """``values`` when given, else the tensor's values, flat."""
    return tensor.reshape(-1).tolist() if values is None else values


def _store(flat: torch.Tensor, values: Sequence[int | None]) -> None:
    """Write ``values`` to the start of ``flat``, skipping the ``None`` entries."""
    if not values:
        return
    region = flat[: len(values)]
    skipped = values.count(None)
    if not skipped:
        region.copy_(_int32_tensor(values))  # type: ignore[arg-type]
        return
    if skipped == len(values):  # e.g. reduce_final_map when nothing is split: a loop per call saved
        return
    # the per-element work at C speed (map, bytearray, compress): the planners store every call
    present = bytearray(map(operator.is_not, values, itertools.repeat(None)))
    mask = torch.frombuffer(present, dtype=torch.bool)
    region[mask.to(region.device)] = _int32_tensor(list(itertools.compress(values, present))).to(region.device)  # type: ignore[arg-type]


def _int32_tensor(values: list[int]) -> torch.Tensor:
    """int32 CPU tensor of ``values`` (via array: three times faster than torch.tensor)."""
    return torch.frombuffer(array.array("i", values), dtype=torch.int32)
