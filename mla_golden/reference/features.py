"""What tells one aiter version's MLA decode planner from another's.

The reference has one planner core (the port of aiter e4048607); every older
version is that core plus the rules of a :class:`PlannerFeatures`, which the
Python signature, the sizing helper, the host dispatch (head folding, tile
packing, cluster count, which kernel) and the serial kernel (causal trim, KV
tail, sparse batches) consult. Each field names the aiter commit that changed
it; the per-version values live in :mod:`mla_golden.reference.versions`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Signature(enum.Enum):
    """Which Python signature ``get_mla_metadata_v1`` has."""

    #: aiter 33d168a0 and before (back to 2026-01-19): no ``kv_last_page_lens`` / ``page_size``;
    #: a ``compile_ops`` binding taking torch dtypes ``dtype_q`` / ``dtype_kv``.
    NO_PAGES = "no_pages"
    #: aiter 739c63177e (2026-02-02) .. v0.1.16.post2: ``kv_last_page_lens`` (3rd) and ``page_size``,
    #: ``dtype_q`` / ``dtype_kv`` only.
    PAGED = "paged"
    #: aiter 2026-07 on (aded0f84, e4048607): ``is_cp_round_robin``, ``mla_version`` and the
    #: nope/rope dtypes, ``dtype_q`` / ``dtype_kv`` kept as legacy aliases.
    NOPE_ROPE = "nope_rope"


class HeadRules(enum.Enum):
    """Which head counts the decode kernels run natively (the rest fold to 16-head batches)."""

    #: CK-era (33d168a0, ``v1_2_device.cuh``): 16 heads, and 128 heads with fp8 q and kv.
    CK = "ck"
    #: v0.1.16.post2 (620287969c): adds gfx950 bf16-like, gfx950 fp8 (32, qlen 2 / 4) / 64 / 128,
    #: gfx942 128 fp8, and the experimental MTP shapes.
    V0_1_16 = "v0.1.16"
    #: aded0f84 (2026-08-05): as e4048607 except gfx950 fp8 32 heads with max_seqlen_qo 3 folds.
    ADED0F84 = "aded0f84"
    #: e4048607 (2026-08-22, aiter ca1c24a9dd on): gfx950 fp8 32/64/128 heads natively at any length.
    E4048607 = "e4048607"


class Sizing(enum.Enum):
    """Which ``get_mla_metadata_info_v1`` sizes the buffers."""

    #: 33d168a0: no ``max_split_per_batch``, arch-independent, asserts heads % 16 == 0.
    CK = "ck"
    #: v0.1.16.post2: arch- and dtype-aware tile counts, ``max_split_per_batch``.
    V0_1_16 = "v0.1.16"
    #: aded0f84: as e4048607 without the gfx950 fp8 32-head qlen-3 rule.
    ADED0F84 = "aded0f84"
    E4048607 = "e4048607"


@dataclass(frozen=True)
class PlannerFeatures:
    """The rules one aiter version's decode planner follows where versions differ."""

    signature: Signature
    sizing: Sizing
    heads: HeadRules
    #: ``kn_get_mla_metadata_v1_2_parallel`` exists and ``AITER_MLA_META_USE_PARALLEL`` is read.
    parallel_planner: bool
    #: The planner reads ``AITER_ENABLE_EXPERIMENTAL`` (m16x4 occupancy 2, MTP shapes).
    experimental_env: bool
    #: ``is_causal=False`` drops the per-tile KV trim (aiter ca1c24a9dd); before, tiles trim as if causal.
    noncausal_untrimmed: bool
    #: A KV remainder shorter than the tail threshold stays with the tile's last work (aiter b564a7367b).
    kv_tail_done: bool
    #: Sparse without folding maps works back to the original batch and adds the token's causal offset.
    sparse_batch_fixup: bool
    #: The kernel gets the folded head count (16); CK-era hands it the unfolded count.
    folded_heads_to_kernel: bool


#: aiter 33d168a0 (2026-02-02), the CK/ck_tile planner before the OPUS rewrite d87e5991cc;
#: ``csrc/kernels/mla/metadata/v1_2_device.cuh`` and ``aiter/ops/attention.py`` at that commit.
CK_33D168A0 = PlannerFeatures(
    signature=Signature.NO_PAGES,
    sizing=Sizing.CK,
    heads=HeadRules.CK,
    parallel_planner=False,
    experimental_env=False,
    noncausal_untrimmed=False,
    kv_tail_done=False,
    sparse_batch_fixup=False,
    folded_heads_to_kernel=False,
)
#: aiter v0.1.16.post2 (620287969c, release branch cut from main 0730b33fcf on 2026-06-13).
V0_1_16_POST2 = PlannerFeatures(
    signature=Signature.PAGED,
    sizing=Sizing.V0_1_16,
    heads=HeadRules.V0_1_16,
    parallel_planner=True,
    experimental_env=True,
    noncausal_untrimmed=False,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    folded_heads_to_kernel=True,
)
#: aiter aded0f84 (2026-08-05), the parent of ca1c24a9dd.
ADED0F84 = PlannerFeatures(
    signature=Signature.NOPE_ROPE,
    sizing=Sizing.ADED0F84,
    heads=HeadRules.ADED0F84,
    parallel_planner=True,
    experimental_env=True,
    noncausal_untrimmed=False,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    folded_heads_to_kernel=True,
)
#: aiter e4048607 (2026-08-22): the core port itself.
E4048607 = PlannerFeatures(
    signature=Signature.NOPE_ROPE,
    sizing=Sizing.E4048607,
    heads=HeadRules.E4048607,
    parallel_planner=True,
    experimental_env=True,
    noncausal_untrimmed=True,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    folded_heads_to_kernel=True,
)
