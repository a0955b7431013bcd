"""Host side of aiter's MLA decode planner: which kernel, with which parameters.

Port of ``get_mla_metadata_v1_2_device``, ``mla_metadata_cluster_multiplier``,
``dispatch_mla_metadata_v1_2_device`` and the ``MLA_METADATA_DISPATCHER``
macros of ``csrc/kernels/mla/metadata/v1_2_device.cuh`` and
``csrc/kernels/mla/metadata/v1_comm.cuh`` (aiter commit
e4048607a535ace3a2b51ded31b1c8c2d45c0879), written from the source. Reads
the device from :func:`~mla_golden.reference._device.current_device` and the
environment at call time, as aiter does. Older versions' head folding, tile
packing, head check and kernel choice follow their
:class:`~mla_golden.reference.features.PlannerFeatures` (the same functions at
33d168a06297, 620287969c and aded0f84013b, each rule citing its commit).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mla_golden.reference._cint import c_div
from mla_golden.reference._device import Device
from mla_golden.reference.dtypes import AITER_DTYPE_NAMES
from mla_golden.reference.errors import AiterCheckError, UndefinedResultError
from mla_golden.reference.features import Dispatch, PlannerFeatures
from mla_golden.reference.mla_v1_comm import (
    MlaV12Outputs,
    MlaV12Params,
    MlaV12Traits,
)
from mla_golden.reference.mla_v1_parallel import kn_get_mla_metadata_v1_2_parallel
from mla_golden.reference.mla_v1_serial import kn_get_mla_metadata_v1_2

V1_2_DEVICE = "csrc/kernels/mla/metadata/v1_2_device.cuh"

#: aiter's ``AiterDtype`` ids that the planner tells apart.
AITER_DTYPE_FP8 = AITER_DTYPE_NAMES.index("fp8")
AITER_DTYPE_BF16 = AITER_DTYPE_NAMES.index("bf16")

Kernel = Callable[
    [MlaV12Params, MlaV12Traits, Sequence[int], Sequence[int], Sequence[int]], MlaV12Outputs
]


class MlaVersion(enum.IntEnum):
    """aiter's ``MlaVersion`` (``csrc/include/aiter_enum.h``)."""

    V32 = 0
    V40 = 1


def c_atoi(text: str) -> int:
    """C's ``atoi``: optional blanks and sign, then leading digits; 0 when there are none."""
    text = text.lstrip(" \t\n\v\f\r")
    sign = -1 if text[:1] == "-" else 1
    if text[:1] in "+-":
        text = text[1:]
    digits = len(text) - len(text.lstrip("0123456789"))
    return sign * int(text[:digits]) if digits else 0


def env_flag(name: str, unset: bool) -> bool:
    """``getenv(name)`` then ``atoi(...) != 0`` as the planner's C++ reads its switches."""
    value = os.environ.get(name)
    return unset if value is None else c_atoi(value) != 0


@dataclass(frozen=True)
class MlaV12Dispatch:
    """What aiter's host code decided: the kernel and what it is launched with."""

    kernel: Kernel
    params: MlaV12Params
    traits: MlaV12Traits

    @property
    def kernel_name(self) -> str:
        return self.kernel.__name__


def mla_metadata_cluster_multiplier(
    arch_id: str,
    enable_experimental: bool,
    num_heads: int,
    max_seqlen_qo: int,
    mla_version: int,
    q_nope_dtype: int,
    q_rope_dtype: int,
    kv_nope_dtype: int,
    kv_rope_dtype: int,
) -> int:
    """2 where aiter runs the HK m16x4 kernel at occupancy 2 (gfx950, 64 query rows), else 1."""
    nopes_fp8 = q_nope_dtype == AITER_DTYPE_FP8 and kv_nope_dtype == AITER_DTYPE_FP8
    dtype_ok = nopes_fp8 and (
        (
            mla_version == MlaVersion.V32
            and q_rope_dtype == AITER_DTYPE_FP8
            and kv_rope_dtype == AITER_DTYPE_FP8
        )
        or (
            mla_version == MlaVersion.V40
            and q_rope_dtype == AITER_DTYPE_BF16
            and kv_rope_dtype == AITER_DTYPE_BF16
        )
    )
    is_hk_m16x4 = (
        enable_experimental and arch_id == "gfx950" and num_heads * max_seqlen_qo == 64 and dtype_ok
    )
    return 2 if is_hk_m16x4 else 1


def uni_seqlen_qo_trait(uni_seqlen_qo: int) -> int:
    """``MLA_UNI_SEQLEN_DISPATCHER``: 1..4 baked in, other positive 0, else -1 (per batch)."""
    if 1 <= uni_seqlen_qo <= 4:
        return uni_seqlen_qo
    return 0 if uni_seqlen_qo > 0 else -1


def _natively_supported(
    era: Dispatch,
    arch_id: str,
    num_heads: int,
    max_seqlen_qo: int,
    fp8_fp8: bool,
    bf16_like: bool,
    enable_experimental: bool,
) -> bool:
    """Whether the decode kernels of ``era`` run ``num_heads`` as they are (else: fold to 16)."""
    if era is Dispatch.CK:
        return num_heads == 16 or (num_heads == 128 and fp8_fp8)
    hk_mtp_experimental = (
        arch_id in ("gfx942", "gfx950")
        and fp8_fp8
        and num_heads * max_seqlen_qo == 128
        and num_heads in (16, 32, 64, 128)
        and enable_experimental
    )
    if era is Dispatch.E4048607:
        # aiter ca1c24a9dd: gfx950 fp8 32 heads at every query length.
        gfx950_fp8_32 = True
    elif era is Dispatch.ADED0F84:
        gfx950_fp8_32 = max_seqlen_qo in (1, 2) or max_seqlen_qo >= 4
    else:
        gfx950_fp8_32 = max_seqlen_qo in (2, 4)
    fp8_64_qlen1 = era is not Dispatch.V0_1_16 and num_heads == 64 and fp8_fp8 and max_seqlen_qo == 1
    return (
        num_heads == 16
        or (arch_id in ("gfx942", "gfx950") and fp8_64_qlen1)
        or (arch_id == "gfx950" and bf16_like)
        or (arch_id == "gfx942" and num_heads == 128 and fp8_fp8)
        or (arch_id == "gfx950" and fp8_fp8 and num_heads == 32 and gfx950_fp8_32)
        or (arch_id == "gfx950" and fp8_fp8 and num_heads in (64, 128))
        or hk_mtp_experimental
    )


def get_mla_metadata_v1_2_device(
    device: Device,
    num_kv_batches: int,
    num_heads_per_head_k: int,
    num_heads_k: int,
    is_causal: bool,
    page_size: int,
    kv_granularity: int,
    max_seqlen_qo: int,
    ori_uni_seqlen_qo: int,
    topk: int,
    max_split_per_batch: int,
    q_dtype: int,
    kv_dtype: int,
    q_rope_dtype: int,
    kv_rope_dtype: int,
    is_cp_round_robin: bool,
    mla_version: int,
    reduce_indptr_size: int,
    features: PlannerFeatures,
) -> MlaV12Dispatch:
    """Decide head folding, cluster count, packing and the kernel, as aiter's host code does.

    ``num_kv_batches`` is ``seqlens_kv_indptr.size(0) - 1``. Raises
    :class:`AiterCheckError` where aiter's head-count check fails.
    """
    arch_id = device.arch
    is_sparse = topk >= 0
    num_batches = num_kv_batches
    num_heads = num_heads_k * num_heads_per_head_k
    qk_batch_ratio = 1
    q_is_fp8 = q_dtype == AITER_DTYPE_FP8
    kv_is_fp8 = kv_dtype == AITER_DTYPE_FP8
    enable_experimental = features.experimental_env and env_flag(
        "AITER_ENABLE_EXPERIMENTAL", unset=False
    )

    cluster_multiplier = mla_metadata_cluster_multiplier(
        arch_id,
        enable_experimental,
        num_heads,
        max_seqlen_qo,
        mla_version,
        q_dtype,
        q_rope_dtype,
        kv_dtype,
        kv_rope_dtype,
    )
    num_clusters = c_div(device.cu_num * cluster_multiplier, num_heads_k)

    fp8_fp8 = q_is_fp8 and kv_is_fp8
    bf16_like = not q_is_fp8 and not kv_is_fp8
    era = features.dispatch
    natively_supported = _natively_supported(
        era, arch_id, num_heads, max_seqlen_qo, fp8_fp8, bf16_like, enable_experimental
    )
    if not natively_supported and num_heads % 16 == 0:
        qk_batch_ratio = num_heads // 16
        num_heads = 16
        num_batches *= qk_batch_ratio

    if era is Dispatch.CK:
        # 33d168a0: after folding only 16 and 128 heads pass.
        supported = num_heads in (16, 128)
        message = (
            "get_mla_metadata_v1_2_device: only supports #heads in [16, 128], or "
            "(#head, uni_seqlen_qo) = (16*N, 1) where N is in [2, 8)."
        )
    else:
        supported = (
            natively_supported
            or num_heads in (16, 128)
            or (num_heads == 32 and fp8_fp8)
            or (num_heads == 64 and fp8_fp8 and max_seqlen_qo == 1)
            or (arch_id == "gfx950" and num_heads == 8 and max_seqlen_qo == 4 and fp8_fp8)
            or (arch_id == "gfx942" and num_heads == 8 and max_seqlen_qo == 2 and bf16_like)
            or (arch_id == "gfx950" and bf16_like)
            or (
                arch_id == "gfx950"
                and fp8_fp8
                and ((num_heads == 32 and max_seqlen_qo == 4) or num_heads in (64, 128))
            )
        )
        message = (
            "get_mla_metadata_v1_2_device: only supports #heads in [16, 64, 128], or "
            "(#head, uni_seqlen_qo) = (16*N, 1) where N is in [2, 8), or (#head, max_seqlen_qo) "
            "= (8, 4) where q and kv are fp8, or q and kv are bf16 on gfx950"
        )
    if not supported:
        raise AiterCheckError(message, f"{V1_2_DEVICE}:{features.check_lines[1]}")

    num_splits = (
        num_clusters
        if max_split_per_batch < 0
        else min(num_clusters, max_split_per_batch * num_batches)
    )
    if page_size == 0 or kv_granularity == 0:
        raise UndefinedResultError(
            f"aiter's MLA metadata planner divides by page_size={page_size} / takes "
            f"log2(kv_granularity={kv_granularity}) on the host; zero is undefined there"
        )
    params = MlaV12Params(
        num_batches=num_batches,
        num_heads=num_heads if features.folded_heads_to_kernel else num_heads_k * num_heads_per_head_k,
        num_cu=num_clusters,
        num_splits=num_splits,
        reduce_indptr_size=reduce_indptr_size,
        page_size=page_size,
        kv_granularity=kv_granularity,
        kv_granularity_log2=(kv_granularity & -kv_granularity).bit_length() - 1,
        uni_seqlen_qo=ori_uni_seqlen_qo,
        ori_seqlen_qo=ori_uni_seqlen_qo,
        topk=topk if topk < 0 else c_div(topk + page_size - 1, page_size),
        qk_batch_ratio=qk_batch_ratio,
        is_causal=is_causal,
        is_cp_round_robin=is_cp_round_robin,
        fixed_over_head_num_blocks=max(1, c_div(16 + page_size - 1, page_size)),
        tail_done_threshold=max_seqlen_qo,
        lds_size=device.lds_bytes,
    )

    packed_qo_len_per_wg = 128
    if era is not Dispatch.CK and (
        arch_id == "gfx950"
        and bf16_like
        and num_heads * max_seqlen_qo >= 64
        and num_heads <= 64
        and (num_heads * max_seqlen_qo < 128 or num_heads == 48)
    ):
        packed_qo_len_per_wg = 64  # aiter 6a82fa71ab
    elif era is Dispatch.E4048607 and (
        arch_id == "gfx950" and fp8_fp8 and num_heads == 32 and max_seqlen_qo == 3
    ):
        packed_qo_len_per_wg = 64  # aiter ca1c24a9dd

    # MLA_METADATA_DISPATCHER: split query tiles unless the packed rows fit one tile.
    max_packed_seqlen_qo = max_seqlen_qo * num_heads_per_head_k
    qo_splits = not (0 < max_packed_seqlen_qo <= packed_qo_len_per_wg)
    uni_seqlen_qo = uni_seqlen_qo_trait(ori_uni_seqlen_qo)
    return _dispatch_mla_metadata_v1_2_device(
        params,
        features,
        packed_qo_len_per_wg,
        qo_splits,
        uni_seqlen_qo,
        is_sparse,
        max_seqlen_qo,
    )


def _dispatch_mla_metadata_v1_2_device(
    params: MlaV12Params,
    features: PlannerFeatures,
    packed_qo_len_per_wg: int,
    qo_splits: bool,
    uni_seqlen_qo: int,
    is_sparse: bool,
    max_seqlen_qo: int,
) -> MlaV12Dispatch:
    """``dispatch_mla_metadata_v1_2_device``: parallel or serial kernel, LDS batch info or not."""
    is_unique = uni_seqlen_qo >= 0
    num_batches = params.num_batches
    lds_size = params.lds_size
    max_lds_batch_size = lds_size // (4 * (1 if is_unique else 2))
    parallel_wanted = features.parallel_planner and env_flag(
        "AITER_MLA_META_USE_PARALLEL", unset=True
    )
    use_parallel = (
        parallel_wanted
        and max_seqlen_qo == 1
        and not qo_splits
        and not is_sparse
        and params.page_size == 1
        and params.qk_batch_ratio == 1
    )
    scratch_bytes = 4 * (3 + 5 * num_batches)
    qo_bytes = 0 if is_unique else 4 * num_batches
    kv_bytes = 4 * num_batches

    kernel: Kernel
    if use_parallel and scratch_bytes + qo_bytes + kv_bytes <= lds_size:
        kernel, lds_batch_info = kn_get_mla_metadata_v1_2_parallel, True
    elif use_parallel and scratch_bytes + qo_bytes <= lds_size:
        kernel, lds_batch_info = kn_get_mla_metadata_v1_2_parallel, False
    else:
        kernel = kn_get_mla_metadata_v1_2
        lds_batch_info = num_batches <= max_lds_batch_size
    traits = MlaV12Traits(
        packed_qo_len_per_wg=packed_qo_len_per_wg,
        qo_splits=qo_splits,
        uni_seqlen_qo=uni_seqlen_qo,
        lds_batch_info=lds_batch_info,
        is_sparse=is_sparse,
        features=features,
    )
    return MlaV12Dispatch(kernel, params, traits)
