"""What a diff returns, as plain data: the Diff, its cause, each field's verdict, decoded work items, reduce groups and CU parts."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from mla_golden.geometry import (
    Geometry,
    ReduceGroup,
)

if TYPE_CHECKING:
    from mla_golden.soundness import Soundness


_GEOMETRY = "written region changed (tile geometry: q tiles / works / groups)"


_VALUES = "values only (the same elements written, other values)"


_PLANNER = "planner behaviour changed with equal params: "


class Cause(enum.StrEnum):
    """The likeliest cause of a divergence, leading the report: what the caller changed first, then the planner."""

    EQUAL = "equal"
    PARAMS = "params changed"
    DEVICE = "device changed"
    ENV = "env changed"
    INPUTS = "inputs changed"
    ERROR = "error status changed"
    HAZARD = "capture hazard"
    #: Only buffer sizes changed (cause_detail lists them); the report leads with them.
    RESIZED = "buffer sizes changed; written contents equal"
    GEOMETRY = _GEOMETRY
    VALUES = _VALUES
    #: The same, where provenance shows another planner (backend, aiter or reference version, signature).
    PLANNER_GEOMETRY = _PLANNER + _GEOMETRY
    PLANNER_VALUES = _PLANNER + _VALUES
    PLANNER_ERROR = _PLANNER + "error status changed"

    @property
    def is_planner(self) -> bool:
        """Same call, another planner planned it otherwise: what an aiter upgrade does."""
        return self in (Cause.PLANNER_GEOMETRY, Cause.PLANNER_VALUES, Cause.PLANNER_ERROR)


@dataclass(frozen=True)
class PlannerChange:
    """The planners of the two sides, when they are not the same one (names as ``planner_id`` gives them)."""

    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.old} -> {self.new}"


class FieldStatus(enum.StrEnum):
    """How one tensor compares."""

    EQUAL = "equal"
    VALUES = "values"
    #: Only the written mask differs.
    WRITTEN = "written"
    SHAPE = "shape"
    #: Only the buffer's size changed: equal contents over the common length, the larger buffer's extra
    #: elements unwritten or one fill value.
    RESIZED = "resized"
    MISSING = "missing"


@dataclass
class Change:
    """One scalar or structured value that differs."""

    path: str
    expected: Any
    actual: Any


@dataclass
class ElementDiff:
    index: list[int]
    flat: int
    expected: int | None  # None: not written on that side
    actual: int | None


@dataclass
class FieldDiff:
    """How one tensor (input or output buffer) compares."""

    name: str
    status: FieldStatus
    numel: int
    expected_shape: list[int]
    actual_shape: list[int]
    expected_dtype: str
    actual_dtype: str
    #: Elements that differ: value differs in both-written region, or written on one side only.
    count: int = 0
    value_diffs: int = 0
    written_only_expected: int = 0
    written_only_actual: int = 0
    first: ElementDiff | None = None
    samples: list[ElementDiff] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.status is FieldStatus.EQUAL


@dataclass
class WorkItem:
    """A work_info_set row on one side, decoded."""

    cu_part: int | None
    columns: dict[str, int]


@dataclass
class WorkItemDiff:
    index: int
    expected: WorkItem | None
    actual: WorkItem | None
    #: Columns whose value (or written state) differs.
    changed: list[str]


@dataclass
class ReduceGroupDiff:
    group: int
    expected: ReduceGroup | None
    actual: ReduceGroup | None


@dataclass
class CuPartDiff:
    """A work_indptr entry that moved: the CU part's [first, last) work ids on each side."""

    cu_part: int
    expected: list[int] | None
    actual: list[int] | None


@dataclass
class Diff:
    """Everything that differs between an expected (golden) and an actual call."""

    op: str
    expected_name: str
    actual_name: str
    params: list[Change] = field(default_factory=list)
    device: list[Change] = field(default_factory=list)
    env: list[Change] = field(default_factory=list)
    error: Change | None = None
    inputs: list[FieldDiff] = field(default_factory=list)
    fields: list[FieldDiff] = field(default_factory=list)
    cu_parts: list[CuPartDiff] = field(default_factory=list)
    work_items: list[WorkItemDiff] = field(default_factory=list)
    reduce_groups: list[ReduceGroupDiff] = field(default_factory=list)
    #: How many CU parts, work items and reduce groups differ: the three lists above hold the first ``max_items``.
    cu_parts_differing: int = 0
    work_items_differing: int = 0
    reduce_groups_differing: int = 0
    #: Facts that matter but are not divergences (signature adaptations, provenance).
    notes: list[str] = field(default_factory=list)
    #: Provenance that shows another planner on the actual side (also in notes): planner, signature.
    planner_changes: list[str] = field(default_factory=list)
    #: The planners that produced each side, when they differ (an aiter upgrade, another backend).
    planner: PlannerChange | None = None
    #: Problems in how a call was captured (pointers aimed elsewhere, non-determinism).
    hazards: list[str] = field(default_factory=list)
    #: The likeliest cause, leading the report ('equal' when nothing differs), and its specifics.
    cause: Cause = Cause.EQUAL
    cause_detail: str = ""
    #: Schedule summaries (works per CU part, split tiles...), both sides; None for an errored call.
    geometry: dict[str, Geometry | None] = field(default_factory=dict)
    #: Each side judged by ``check`` with what a kernel engineer reads first; for a pair whose content differs.
    soundness: Soundness | None = None

    @property
    def same_content(self) -> bool:
        """The two calls hold the same call: params, device, env, error, inputs, written outputs.

        The one notion of "the same golden": the store keeps an existing golden
        (UNCHANGED) exactly when this holds. Provenance and capture hazards do
        not count: a call is the same as itself even when its capture was shaky.
        """
        return not (
            self.params
            or self.device
            or self.env
            or self.error
            or any(not f.equal for f in self.inputs)
            or any(not f.equal for f in self.fields)
        )

    @property
    def equal(self) -> bool:
        """Nothing to report: the same content, and no capture hazard on either side."""
        return self.same_content and not self.hazards

    @property
    def cause_label(self) -> str:
        """The cause as reports lead with it: ``planner behaviour change reference@aded0f84 -> reference@e4048607``."""
        if self.cause.is_planner and self.planner is not None:
            return f"planner behaviour change {self.planner}"
        return self.cause.value

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, schema 'mla-golden-diff/1' (docs/cli.md, "Diff JSON")."""
        data = asdict(self)
        data["soundness"] = self.soundness.to_dict() if self.soundness is not None else None
        data["cause_label"] = self.cause_label
        data["equal"] = self.equal
        data["format"] = "mla-golden-diff/1"
        return data
