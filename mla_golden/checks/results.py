"""What :func:`mla_golden.checks.check` finds: violations, hazards, checks skipped; and the names it knows."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: Every invariant :func:`check` knows, with what it asserts.
INVARIANTS: dict[str, str] = {
    "call.indptr": "input indptrs start at 0, never decrease, have batch+1 entries",
    "call.kv_pages": "kv page counts agree with kv_last_page_lens / context_lens and the page size",
    "call.seqlen_qo": "declared max_seqlen_qo / uni_seqlen_qo agree with seqlens_qo_indptr",
    "call.precondition": (
        "the arguments keep the planner's preconditions: those it leaves unchecked (reference.preconditions), and "
        "for a call that returned those it refuses (head counts, granularities, dtypes, buffers)"
    ),
    "buffer.undersized": "no written region reaches the end of a buffer smaller than the planner's own sizing",
    "pointers": "work_metadata_ptrs point at the work_indptr / work_info_set buffers passed in",
    "written": "the planner wrote the metadata the kernels read",
    "work_indptr": "work_indptr starts at 0, never decreases, ends at the number of works, fits its buffer",
    "work.batch": "batch_idx names a batch the kernel plans (folded or sparse space as aiter plans it)",
    "work.folding": "heads are folded into batches as the kernel of the judging aiter version reads them",
    "work.qo_range": "[qo_start, qo_end) is one of its batch's query tiles",
    "work.kv_range": "[kv_start, kv_end) is non-empty and lies inside its batch's kv range",
    "work.kv_offset": "kv_offset agrees with kv_end and the batch end as aiter defines it",
    "work.head_range": "q_head_range tiles the query heads, one plan per KV head (prefill)",
    "coverage": "the works of every (batch, query tile) tile its required kv range exactly once",
    "split.partial": "a tile split k ways has k distinct partial locations; unsplit tiles use -1",
    "partial.overlap": "partial locations never overlap",
    "reduce_indptr": "reduce_indptr starts at 0, never decreases, ends at the number of partial entries",
    "reduce.group": (
        "each split tile's partials are listed once in one reduce group whose final map is its query range"
    ),
}

#: Every hazard :func:`check` reports, with why it matters.
HAZARDS: dict[str, str] = {
    "fold_qo_indptr_past_end": "head folding with variable query lengths: aiter reads seqlens_qo_indptr past its end",
    "fold_last_page_lens_past_end": (
        "head folding with page_size > 1: aiter reads kv_last_page_lens by folded batch, past its end"
    ),
    "lds_read_before_write": "variable query lengths with query-tile splitting: aiter reads LDS before writing it",
    "sparse_writes_past_buffer": "sparse topk with max_seqlen_qo > 1: aiter can write past buffers its own helper sized",
    "aborts": "aiter rejects these inputs with a failed AITER_CHECK and aborts the process",
    "undefined": "aiter's result for these inputs is undefined (division by zero, out-of-range LDS)",
    "nondeterministic": "the planner gave different values when re-run on the same inputs",
}


@dataclass
class Violation:
    """One broken invariant, and where in the metadata it broke."""

    invariant: str
    #: Work item / CU part / reduce group / index, in planner terms.
    where: str
    message: str
    #: The work_info_set rows that break it (what the pictures mark), where it is about works.
    works: tuple[int, ...] = ()


@dataclass
class Hazard:
    """An input shape aiter mishandles; its outputs may be wrong even when they look right."""

    hazard: str
    message: str


@dataclass
class CheckResult:
    """What :func:`check` found for one call."""

    op: str
    violations: list[Violation] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    #: Checks that did not run, each as "what: why" (reports show them as "skipped: ...").
    skipped: list[str] = field(default_factory=list)
    #: The aiter version whose rules judged the call (its recording version, else the newest ported one).
    rules: str | None = None
    #: The kernel path the plan was checked under (``serial/native``, ``parallel/folded x2``, ``prefill``), when known.
    kernel: str | None = None
    #: Planned batches per caller batch that batch_idx counts (decode head folding): request = batch_idx // folding.
    folding: int = 1

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def invariants(self) -> set[str]:
        """Names of the invariants violated."""
        return {v.invariant for v in self.violations}

    @property
    def hazard_names(self) -> set[str]:
        return {h.hazard for h in self.hazards}

    def to_dict(self, max_violations: int | None = None) -> dict[str, Any]:
        """JSON-ready; ``max_violations``: list only the first that many (``violation_count`` counts them all: a
        broken plan of a million works can break an invariant at every work)."""
        return {
            "op": self.op,
            "ok": self.ok,
            "violation_count": len(self.violations),
            "violations": [asdict(v) for v in self.violations[:max_violations]],
            "hazards": [asdict(h) for h in self.hazards],
            "skipped": list(self.skipped),
            "rules": self.rules,
            "kernel": self.kernel,
        }
