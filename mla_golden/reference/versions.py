"""The aiter versions the reference planners speak, and how a version is named.

A version is a set of planner sources (``csrc/kernels/mla/metadata*``,
``aiter/ops/attention.py``'s metadata wrappers): many aiter commits and release
tags share one. :func:`versions` lists the ported ones oldest first, each with
the :class:`~mla_golden.reference.features.PlannerFeatures` that set it apart
from the core port (e4048607) and one line per change from the version before.
Release tags come from ``aiter_tags.json`` next to this module (written by
``tools/aiter_oracle``) when it is there, plus each version's own tag.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mla_golden.reference import features
from mla_golden.reference.errors import UnknownVersionError
from mla_golden.reference.features import PlannerFeatures

TAGS_FILE = Path(__file__).with_name("aiter_tags.json")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class PlannerVersion:
    """One ported aiter planner version."""

    #: Short commit (8 hex), how the CLI and goldens name it.
    name: str
    #: Full 40-hex aiter commit the port follows.
    commit: str
    #: Commit date (ISO ``YYYY-MM-DD``).
    date: str
    #: Release tags whose planner sources are this version's.
    tags: tuple[str, ...]
    #: What changed in the planner's output or signature since the previous version, one line each.
    changes: tuple[str, ...]
    features: PlannerFeatures

    def __str__(self) -> str:
        return self.name


#: (name, commit, date, own tags, changes, features), oldest first. The changes name the aiter
#: commits (csrc/kernels/mla/metadata/v1_2_device.cuh, aiter/ops/attention.py) that made them.
_REGISTRY: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...], PlannerFeatures], ...] = (
    (
        "33d168a0",
        "33d168a06297930b66e83cc0d90981bc26bb79c3",
        "2026-02-02",
        (),
        (
            "oldest ported: the CK-era planner (serial only), signature without "
            "kv_last_page_lens / page_size, arch-independent sizing helper",
        ),
        features.CK_33D168A0,
    ),
    (
        "62028796",
        "620287969c9ce18cd2033ebbdfd13107800f7f3f",
        "2026-06-25",
        ("v0.1.16.post2",),
        (
            "signature: kv_last_page_lens (3rd positional) and page_size added (739c63177e)",
            "head folding: gfx950 with q and kv both non-fp8 (dtypes omitted too) runs every head "
            "count natively, gfx950 fp8 runs 32 heads at max_seqlen_qo 2 or 4, 64 and 128 natively "
            "(6a82fa71ab, fea695b90b)",
            "gfx950 bf16 packs 64 query rows per tile for 64 <= heads x qlen < 128 (6a82fa71ab)",
            "folded calls plan with 16 heads and clamp the causal trim at 0: no kv_end past the "
            "KV end, no negative kv_offset (b3037388f4, 5e4c537c6b)",
            "one query tile per token when the heads fill more than half a tile (6a82fa71ab)",
            "a KV remainder shorter than max_seqlen_qo stays with the tile's last work (b564a7367b)",
            "sparse (topk) works name their batch and carry the token's causal kv_offset (fea695b90b)",
            "AITER_ENABLE_EXPERIMENTAL: MTP shapes run natively, gfx950 fp8 heads x qlen 64 plans "
            "twice the clusters (d35d35b40e)",
            "sizing helper: takes max_split_per_batch, counts tiles by arch and dtype, sizes for "
            "the occupancy",
        ),
        features.V0_1_16_POST2,
    ),
    (
        "72eedddd",
        "72eedddd921d0fb8f274e7b9291dd04306d089ef",
        "2026-07-15",
        # Same planner sources (git diff v0.1.16.post4 v0.1.16.post6 -- csrc/kernels/mla
        # aiter/ops/attention.py is empty); a release-branch successor of 62028796, not of main.
        ("v0.1.16.post4", "v0.1.16.post5", "v0.1.16.post6"),
        (
            "parallel planner for single-token decode cherry-picked onto the release branch "
            "(2e49028544 = main's befce5035b): AITER_MLA_META_USE_PARALLEL, read as on by default; "
            "same plans as the serial one where the inputs are well defined",
            "otherwise v0.1.16.post2's planner: signature, sizing helper and head folding unchanged",
        ),
        features.V0_1_16_POST4,
    ),
    (
        "aded0f84",
        "aded0f84013b2a82f839991616235069b12dfae8",
        "2026-08-05",
        (),
        (
            "signature: is_cp_round_robin, mla_version and nope/rope dtypes; dtype_q / dtype_kv "
            "become legacy aliases",
            "head folding: gfx950 fp8 32 heads also run natively at max_seqlen_qo 1 and >= 5, fp8 "
            "64 heads at max_seqlen_qo 1 on gfx942 too",
            "parallel planner for single-token decode (AITER_MLA_META_USE_PARALLEL, befce5035b); "
            "same plans as the serial one",
            "sizing helper: 64-row tiles for gfx950 bf16, a split cap of tile_cnt + cap instead "
            "of tile_cnt x cap",
        ),
        features.ADED0F84,
    ),
    (
        "e4048607",
        "e4048607a535ace3a2b51ded31b1c8c2d45c0879",
        "2026-08-22",
        # Same planner sources (git diff of csrc/kernels/mla/metadata*, aiter/ops/attention.py is empty).
        ("v0.1.20", "v0.1.20.post1"),
        (
            "gfx950 fp8 32 heads at max_seqlen_qo 3 run natively with 64 query rows per tile; the "
            "sizing helper allocates fewer query tiles there (ca1c24a9dd)",
            "is_causal=False no longer trims each query tile's KV range as if causal (45ef304fe5)",
        ),
        features.E4048607,
    ),
)


@dataclass(frozen=True)
class _TagEntry:
    """A release tag of aiter_tags.json whose planner is a ported version's."""

    tag: str
    commit: str
    date: str
    #: The full commit of the ported version carrying its planner.
    ported: str


@cache
def _tag_entries() -> tuple[_TagEntry, ...]:
    """The release tags of aiter_tags.json that carry a ported planner (the others are left out)."""
    if not TAGS_FILE.is_file():
        return ()
    entries = []
    for entry in json.loads(TAGS_FILE.read_text(encoding="utf-8")):
        for key in (entry.get("same_planner_as"), entry.get("commit")):
            ported = _match_commit(str(key)) if key else None
            if ported is not None:
                commit = str(entry.get("commit", "")).lower()
                entries.append(_TagEntry(str(entry["tag"]), commit, str(entry.get("date", "")), ported))
                break
    return tuple(entries)


def _match_commit(prefix: str) -> str | None:
    """The full commit of the ported version whose commit starts with ``prefix``."""
    prefix = prefix.lower()
    for _, commit, *_ in _REGISTRY:
        if _HEX.fullmatch(prefix) and commit.startswith(prefix):
            return commit
    return None


@cache
def versions() -> tuple[PlannerVersion, ...]:
    """The ported versions, oldest first; the last is what ``mla_golden.reference`` plans as."""
    result = []
    for name, commit, date, own_tags, changes, rules in _REGISTRY:
        released = (entry.tag for entry in _tag_entries() if entry.ported == commit)
        tags = tuple(sorted({*own_tags, *released}))
        result.append(PlannerVersion(name, commit, date, tags, changes, rules))
    return tuple(result)


def latest() -> PlannerVersion:
    """The newest ported version: every "newest" default (the package-level planners, the checks) is this one."""
    return versions()[-1]


def resolve_version(version: str | PlannerVersion) -> PlannerVersion:
    """The ported version ``version`` names.

    Accepted: a commit prefix of at least 7 hex digits (of a ported version, or
    of a release commit that carries one's planner per ``aiter_tags.json``), a
    release tag (``v0.1.16.post2``), or a date ``YYYY-MM-DD``: the ported
    version of the newest ported commit or release tag (per ``aiter_tags.json``)
    dated at or before that day (``2026-07-28`` is v0.1.19's day: aded0f84).
    That is the closest ported planner, not necessarily the one aiter had that
    day: main moved between the ported commits and the release tags. Raises
    :class:`UnknownVersionError` listing the known versions otherwise.
    """
    if isinstance(version, PlannerVersion):
        return version
    spec = str(version).strip()
    known = versions()
    by_commit = {v.commit: v for v in known}
    if _DATE.fullmatch(spec):
        dated = [(v.date, v.commit) for v in known] + [(e.date, e.ported) for e in _tag_entries()]
        older = [(date, commit) for date, commit in dated if date <= spec]
        if older:
            return by_commit[max(older)[1]]
        raise UnknownVersionError(
            f"no ported aiter planner version is as old as {spec}; {_listing(known)}"
        )
    for v in known:
        if spec in v.tags:
            return v
    if _HEX.fullmatch(spec.lower()):
        commit = _match_commit(spec)
        if commit is not None:
            return by_commit[commit]
        for entry in _tag_entries():
            if entry.commit.startswith(spec.lower()):
                return by_commit[entry.ported]
    raise UnknownVersionError(f"unknown aiter planner version {spec!r}; {_listing(known)}")


def _listing(known: tuple[PlannerVersion, ...]) -> str:
    lines = ", ".join(
        f"{v.name} ({v.date}{', ' + ', '.join(v.tags) if v.tags else ''})" for v in known
    )
    return f"known versions (by commit prefix, release tag or date): {lines}"
