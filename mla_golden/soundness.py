"""Is each side of a divergence a plan the kernels can run? ``check`` on both sides, and what a kernel engineer reads first.

A diff says *that* two plans of one call differ; a reviewer's next question is
whether the new one is an intended re-tiling or broken coverage. Each side is
judged by :func:`mla_golden.checks.check` (the invariants the kernels rely on)
and summarised by the numbers read first: works, split requests, reduce
groups, CU load balance (max / mean planned kv per CU part) and kernel path.

A side planned by an aiter no ported version plans as (an ``aiter-src`` tree
between releases) is judged by the newest ported rules, and its head folding
is not judged: which folding that aiter's kernel reads is its own rule, which
no port knows. The side says so.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from mla_golden.call import Call
from mla_golden.geometry import Geometry, geometry, whole_work_columns
from mla_golden.schema import WorkColumn
from mla_golden.tensors import widened

#: The check whose rule is the judging version's own: not judged on a side no ported version planned.
FOLDING = "work.folding"


@dataclass
class Side:
    """One side of a compared pair, judged."""

    #: None when there is nothing to judge: the call raised.
    sound: bool | None
    #: The violated invariants' names, and the first violation in words.
    violated: list[str] = field(default_factory=list)
    first: str | None = None
    violations: int = 0
    error: str | None = None
    works: int = 0
    split_requests: int = 0
    reduce_groups: int = 0
    #: Planned kv tokens per CU part: the busiest part, the mean, and their ratio (1.0 = balanced).
    kv_max: int = 0
    kv_mean: float = 0.0
    kernel: str | None = None
    #: The aiter version whose rules judged it.
    rules: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def balance(self) -> float:
        return round(self.kv_max / self.kv_mean, 2) if self.kv_mean else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "balance": self.balance}

    def summary(self) -> str:
        """``works 64, split requests 8, reduce groups 8, kv per CU part max 130 / mean 128 (1.02x), serial/native``."""
        if self.error is not None:
            return f"raised: {self.error}"
        kernel = f", {self.kernel}" if self.kernel else ""
        return (
            f"works {self.works}, split requests {self.split_requests}, reduce groups {self.reduce_groups}, "
            f"kv per CU part max {self.kv_max} / mean {self.kv_mean:g} ({self.balance:g}x){kernel}"
        )

    def verdict(self) -> str:
        """``sound`` / ``unsound: coverage at batch 3 ...`` / ``raised``."""
        if self.sound is None:
            return "raised (nothing to judge)"
        if self.sound:
            return "sound"
        more = f" (+{self.violations - 1} more)" if self.violations > 1 else ""
        return f"unsound: {self.first}{more}"


@dataclass
class Soundness:
    """Both sides of a compared pair: ``expected`` (the golden, the old plan) and ``actual`` (the new one)."""

    expected: Side
    actual: Side

    @property
    def both_sound(self) -> bool:
        return all(side.sound is not False for side in (self.expected, self.actual))

    def headline(self, names: tuple[str, str] = ("old", "new")) -> str:
        """What a report leads with: ``sound on both sides``, or which side breaks what (``names``: the sides' words,
        ``old`` / ``new`` for a golden and its replay, ``A`` / ``B`` for a sweep's planners)."""
        sides = tuple(zip(names, (self.expected, self.actual)))
        broken = [(name, side) for name, side in sides if side.sound is False]
        if not broken:
            raised = [name for name, side in sides if side.sound is None]
            return "sound on both sides" if not raised else f"the {' and '.join(raised)} plan raised; the other is sound"
        if len(broken) == 2:
            if self.actual.first == self.expected.first:
                return f"both plans break {self.actual.first}"
            return (f"both plans unsound: the {names[1]} one breaks {self.actual.first}; "
                    f"the {names[0]} one breaks {self.expected.first}")
        name, side = broken[0]
        return f"the {name} plan breaks {side.first}"

    def changes(self, names: tuple[str, str] = ("old", "new")) -> str:
        """The numbers read first, old -> new: ``works 224 -> 112, ..., kernel serial/folded x2 -> parallel/native``."""
        old, new = self.expected, self.actual
        if old.error is not None or new.error is not None:
            return "; ".join(f"{name} {side.summary()}" for name, side in zip(names, (old, new)))
        pairs = [
            ("works", old.works, new.works),
            ("split requests", old.split_requests, new.split_requests),
            ("reduce groups", old.reduce_groups, new.reduce_groups),
            ("kv per CU part max/mean", f"{old.balance:g}x", f"{new.balance:g}x"),
            ("kernel", old.kernel or "?", new.kernel or "?"),
        ]
        return ", ".join(f"{name} {a} -> {b}" if a != b else f"{name} {a}" for name, a, b in pairs)

    def to_dict(self) -> dict[str, Any]:
        return {"expected": self.expected.to_dict(), "actual": self.actual.to_dict(), "both_sound": self.both_sound,
                "headline": self.headline()}  # fmt: skip


def judge(call: Call, shape: Geometry | None = None) -> Side:
    """``call`` judged by ``check`` and summarised; ``shape``: its :func:`geometry`, where the caller has it already
    (a diff has: computing it again cost a pass over every work per side)."""
    from mla_golden.checks import check
    from mla_golden.planner_id import recorded_planner, reference_version

    if call.error is not None or not call.outputs:
        return Side(sound=None, error=call.error or "no outputs recorded")
    result = check(call)
    own_rules = reference_version(recorded_planner(call.provenance)) is not None
    notes = []
    violations = result.violations
    if not own_rules:
        folding = [v for v in violations if v.invariant == FOLDING]
        if folding:
            violations = [v for v in violations if v.invariant != FOLDING]
            notes.append(f"head folding not judged: {recorded_planner(call.provenance).label} is no ported version ({folding[0].message})")
    kernel = result.kernel
    if not own_rules and kernel is not None and "/" in kernel:
        kernel = kernel.split("/", 1)[1]  # serial or parallel is that aiter's own dispatch: only the folding is seen
    if shape is None:
        shape = geometry(call)
    first = violations[0] if violations else None
    return Side(
        sound=not violations,
        violated=sorted({v.invariant for v in violations}),
        first=f"{first.invariant} at {first.where}: {first.message}" if first else None,
        violations=len(violations),
        works=shape.works,
        split_requests=_split_requests(call, result.folding) if shape.split_works else 0,  # (no split work: none)
        reduce_groups=shape.reduce_groups,
        kv_max=shape.kv_per_cu[2],
        kv_mean=shape.kv_per_cu[1],
        kernel=kernel,
        rules=result.rules,
        notes=notes,
    )


#: From this many work rows on each side, the two sides are judged at once, the expected one on a second thread:
#: a check is whole-tensor passes in numpy and torch, which let go of the GIL, and a big diverged pair's two checks
#: are most of its diff. Below it a thread costs more than it saves.
CONCURRENT_ROWS = 1 << 16


def judge_pair(
    expected: Call, actual: Call, shapes: tuple[Geometry | None, Geometry | None] = (None, None)
) -> Soundness:
    """Both sides judged; ``shapes``: their geometries where known (see :func:`judge`)."""
    return shaped_pair(expected, actual, shapes)[0]


def shaped_pair(
    expected: Call, actual: Call, shapes: tuple[Geometry | None, Geometry | None] = (None, None)
) -> tuple[Soundness, tuple[Geometry, Geometry]]:
    """:func:`judge_pair`, and each side's geometry: made where that side is judged, unless given (a diff of two
    big plans summarises each on the thread that judges it).

    The two checks share no state but the env a planner reads, which :func:`mla_golden.context.planner_env` sets
    one thread at a time, and the reference's device, which is the thread's own (a context variable).
    """
    if min(_rows(expected), _rows(actual)) < CONCURRENT_ROWS:
        (old, old_shape), (new, new_shape) = _shaped(expected, shapes[0]), _shaped(actual, shapes[1])
    else:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mla-golden-judge") as pool:
            other = pool.submit(contextvars.copy_context().run, _shaped, expected, shapes[0])
            new, new_shape = _shaped(actual, shapes[1])
            old, old_shape = other.result()
    return Soundness(old, new), (old_shape, new_shape)


def _shaped(call: Call, shape: Geometry | None) -> tuple[Side, Geometry]:
    shape = geometry(call) if shape is None else shape
    return judge(call, shape), shape


def _rows(call: Call) -> int:
    """Work rows of ``call``'s work_info_set buffer (0 when it kept none: a call that raised)."""
    info = call.outputs.get("work_info_set")
    return int(info.shape[0]) if info is not None and info.dim() else 0


def _split_requests(call: Call, folding: int) -> int:
    """Requests (caller batches) with at least one split work: a folded batch ``b`` belongs to request ``b // folding``."""
    (partial, batch), _sizes = whole_work_columns(call, WorkColumn.PARTIAL_QO_LOC, WorkColumn.BATCH_IDX)
    split = widened(batch[partial >= 0])
    return int(torch.unique(torch.div(split, max(folding, 1), rounding_mode="floor")).numel())


def verdict_of(judged: list[tuple[str, dict[str, Any]]]) -> str:
    """A run's soundness in a few words, from its not-equal results' ``(key, soundness dict)``:
    ``all sound on both sides``, or how many break what (the first named)."""
    broken = [(key, doc) for key, doc in judged if not doc.get("both_sound", True)]
    if not broken:
        return "all sound on both sides" if len(judged) > 1 else "sound on both sides"
    key, doc = broken[0]
    more = f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""
    return f"{len(broken)} unsound: {key}: {doc.get('headline')}{more}"
