"""What tells one aiter version's MLA decode planner from another's.

The reference has one planner core, the port of aiter e4048607. Every other
version is that core plus the rules of its :class:`PlannerFeatures`, which the
Python signature, the sizing helper, the host dispatch (head folding, tile
packing, cluster count, which kernel) and the serial kernel (causal trim, KV
tail, sparse batches) consult. Each rule names the aiter commit that
introduced today's behaviour (``csrc/kernels/mla/metadata/v1_2_device.cuh``
unless said otherwise); a version before that commit has the older rule.

The PS prefill planner (``v1_2_host.cuh``) and its sizing helper plan the same
at every ported version (from 33d168a0 to e4048607 its sources only change
how buffers are copied), so it has no features.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Signature(enum.Enum):
    """The Python signature of ``get_mla_metadata_v1`` (``aiter/ops/attention.py``)."""

    #: 33d168a0 and before: no ``kv_last_page_lens`` / ``page_size``; torch dtypes ``dtype_q`` / ``dtype_kv``.
    NO_PAGES = "no_pages"
    #: 739c63177e (2026-02-02) .. v0.1.16.post6: ``kv_last_page_lens`` (3rd) and ``page_size``;
    #: ``dtype_q`` / ``dtype_kv`` only.
    PAGED = "paged"
    #: aded0f84, e4048607: ``is_cp_round_robin``, ``mla_version`` and the nope/rope dtypes;
    #: ``dtype_q`` / ``dtype_kv`` kept as legacy aliases.
    NOPE_ROPE = "nope_rope"


class Dispatch(enum.Enum):
    """The host dispatch's rules: which head counts run natively, query rows per tile, the head check."""

    #: 33d168a0: only 16 heads, and 128 heads with fp8 q and kv, run natively; 128 rows per tile;
    #: after folding the check accepts 16 or 128 heads.
    CK = "ck"
    #: v0.1.16.post2 (620287969c): adds gfx950 with q and kv both non-fp8 (any head count,
    #: 64 rows per tile for 64 <= heads x qlen < 128 or 48 heads; aiter 6a82fa71ab), gfx950 fp8
    #: 32 heads at qlen 2 or 4, 64 and 128 heads, gfx942 fp8 128 heads, and with
    #: AITER_ENABLE_EXPERIMENTAL fp8 heads x qlen == 128 (aiter d35d35b40e).
    V0_1_16 = "v0.1.16"
    #: aded0f84: also gfx950 fp8 32 heads at qlen 1 and >= 4, and fp8 64 heads at qlen 1 (gfx942 too).
    ADED0F84 = "aded0f84"
    #: e4048607: gfx950 fp8 32 heads at every qlen, 64 rows per tile at qlen 3 (aiter ca1c24a9dd).
    E4048607 = "e4048607"


class Sizing(enum.Enum):
    """Which ``get_mla_metadata_info_v1`` sizes the buffers (``aiter/ops/attention.py``)."""

    #: 33d168a0: no ``max_split_per_batch``; ignores the arch, the env and sparsity in its tile
    #: count; asserts ``num_head_qo % 16 == 0``.
    CK = "ck"
    #: v0.1.16.post2: occupancy-aware split count, arch/dtype-aware tile counts, and
    #: ``max_split_per_batch`` enlarging ``reduce_partial_map`` to ``tile_cnt * cap``.
    V0_1_16 = "v0.1.16"
    #: aded0f84: 64-row tiles for gfx950 bf16, 128-row for fp8 64 heads at qlen 1, and a
    #: split cap of ``tile_cnt + cap``.
    ADED0F84 = "aded0f84"
    #: e4048607: also 64-row tiles for gfx950 fp8 32 heads at qlen 3 (aiter ca1c24a9dd).
    E4048607 = "e4048607"


@dataclass(frozen=True)
class PlannerFeatures:
    """The rules one aiter version's decode planner follows where versions differ."""

    signature: Signature
    sizing: Sizing
    dispatch: Dispatch
    #: The parallel kernel exists and ``AITER_MLA_META_USE_PARALLEL`` is read (aiter befce5035b).
    parallel_planner: bool
    #: ``AITER_ENABLE_EXPERIMENTAL`` is read: m16x4 at occupancy 2, MTP shapes (aiter d35d35b40e).
    experimental_env: bool
    #: Folded calls hand the kernel the folded head count 16 (aiter b3037388f4); before, the
    #: unfolded count, which sizes the query tiles.
    folded_heads_to_kernel: bool
    #: One query tile per token when heads fill more than half a tile (aiter 6a82fa71ab).
    per_token_qo_tiles: bool
    #: The causal trim (``batch_tail``) is clamped at 0 (aiter 5e4c537c6b); before, a negative one
    #: let ``kv_end`` run past the batch's KV.
    batch_tail_clamped: bool
    #: ``is_causal=False`` drops the trim (aiter 45ef304fe5); before, tiles trim as if causal.
    noncausal_untrimmed: bool
    #: A KV remainder shorter than the tail threshold stays with the tile's last work (aiter b564a7367b).
    kv_tail_done: bool
    #: Sparse works name their real batch, with the token's causal ``kv_offset`` (aiter fea695b90b).
    sparse_batch_fixup: bool
    #: Line of the first argument check in ``csrc/kernels/mla/metadata.cu`` (the others follow
    #: every 2 lines) and of the head-count check in ``v1_2_device.cuh``.
    check_lines: tuple[int, int]


#: aiter 33d168a0 (2026-02-02), the CK/ck_tile planner before the OPUS rewrite d87e5991cc.
CK_33D168A0 = PlannerFeatures(
    signature=Signature.NO_PAGES,
    sizing=Sizing.CK,
    dispatch=Dispatch.CK,
    parallel_planner=False,
    experimental_env=False,
    folded_heads_to_kernel=False,
    per_token_qo_tiles=False,
    batch_tail_clamped=False,
    noncausal_untrimmed=False,
    kv_tail_done=False,
    sparse_batch_fixup=False,
    check_lines=(64, 407),
)
#: aiter v0.1.16.post2 (620287969c, release branch cut from main 0730b33fcf on 2026-06-13).
V0_1_16_POST2 = PlannerFeatures(
    signature=Signature.PAGED,
    sizing=Sizing.V0_1_16,
    dispatch=Dispatch.V0_1_16,
    parallel_planner=False,
    experimental_env=True,
    folded_heads_to_kernel=True,
    per_token_qo_tiles=True,
    batch_tail_clamped=True,
    noncausal_untrimmed=False,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    check_lines=(66, 527),
)
#: aiter v0.1.16.post4 .. post6 (72eedddd .. 50f8d952, release branch): v0.1.16.post2 plus the
#: parallel kernel, cherry-picked as 2e49028544 (main's befce5035b). The kernel and its dispatch
#: are aded0f84's (formatting aside); the head-count check moved down with the inserted kernel.
V0_1_16_POST4 = replace(V0_1_16_POST2, parallel_planner=True, check_lines=(66, 834))
#: aiter aded0f84 (2026-08-05), the parent of ca1c24a9dd.
ADED0F84 = PlannerFeatures(
    signature=Signature.NOPE_ROPE,
    sizing=Sizing.ADED0F84,
    dispatch=Dispatch.ADED0F84,
    parallel_planner=True,
    experimental_env=True,
    folded_heads_to_kernel=True,
    per_token_qo_tiles=True,
    batch_tail_clamped=True,
    noncausal_untrimmed=False,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    check_lines=(70, 883),
)
#: aiter e4048607 (2026-08-22): the core port itself.
E4048607 = PlannerFeatures(
    signature=Signature.NOPE_ROPE,
    sizing=Sizing.E4048607,
    dispatch=Dispatch.E4048607,
    parallel_planner=True,
    experimental_env=True,
    folded_heads_to_kernel=True,
    per_token_qo_tiles=True,
    batch_tail_clamped=True,
    noncausal_untrimmed=True,
    kv_tail_done=True,
    sparse_batch_fixup=True,
    check_lines=(70, 872),
)
