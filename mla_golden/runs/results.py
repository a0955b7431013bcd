"""What a run found, one result per golden, and what the run's exit status is.

Exit policy (:func:`exit_code`): 0 all equal (or written, skipped, not
comparable), 1 some divergence, a buffer resized or a refused write, 2 bad
input; a run exits with the worst of its results. Results are plain data, so
worker processes can return them; the ones that are not ok are grouped by
cause for reports (:func:`by_cause`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mla_golden.call import Call
    from mla_golden.checks import CheckResult
    from mla_golden.diff_data import Diff

EXIT_OK, EXIT_DIVERGED, EXIT_BAD = 0, 1, 2
#: ``sweep`` only: no divergence found, but too many cases not compared (or none run) to call it a pass.
EXIT_INCONCLUSIVE = 3


class Status(enum.StrEnum):
    """What happened to one golden (or one case, or one call of a recorded command)."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"
    UPDATED = "updated"
    EQUAL = "equal"
    PASSED = "passed"
    SKIPPED = "skipped"
    #: The planner cannot express the golden's call (an older signature lacks what it needs): nothing to compare.
    NOT_COMPARABLE = "not-comparable"
    REFUSED = "refused"
    #: Only buffer sizes changed (another sizing helper); the written contents are equal.
    RESIZED = "resized"
    DIVERGED = "diverged"
    VIOLATED = "violated"
    ONLY_EXPECTED = "only-expected"
    ONLY_ACTUAL = "only-actual"
    BAD = "bad"
    FAILED = "failed"
    #: A call the program made that the recorder could not keep as made (it ran untouched).
    MISSED = "missed"

    @property
    def exit_code(self) -> int:
        """What this status contributes to the run's exit status."""
        return STATUS_EXIT[self]

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK


#: Exit status each result status contributes (the run exits with the largest); also the summary's row order.
STATUS_EXIT: dict[Status, int] = {
    Status.WRITTEN: EXIT_OK,
    Status.UNCHANGED: EXIT_OK,
    Status.UPDATED: EXIT_OK,
    Status.EQUAL: EXIT_OK,
    Status.PASSED: EXIT_OK,
    Status.SKIPPED: EXIT_OK,
    Status.NOT_COMPARABLE: EXIT_OK,
    Status.REFUSED: EXIT_DIVERGED,
    Status.RESIZED: EXIT_DIVERGED,
    Status.DIVERGED: EXIT_DIVERGED,
    Status.VIOLATED: EXIT_DIVERGED,
    Status.ONLY_EXPECTED: EXIT_DIVERGED,
    Status.ONLY_ACTUAL: EXIT_DIVERGED,
    Status.BAD: EXIT_BAD,
    Status.FAILED: EXIT_BAD,
    Status.MISSED: EXIT_BAD,
}


class PlacedGolden(NamedTuple):
    """Where a walk found a golden: the folder walked, its file, and the key it holds."""

    root: str
    path: str
    key: str


@dataclass
class Result:
    """What happened to one golden (or one case); plain data so worker processes can return it."""

    key: str
    status: Status
    path: str | None = None
    message: str = ""
    #: The expected golden's path when comparing two trees (``path`` is then the actual one).
    against_path: str | None = None
    #: The rendered diff, when there is one worth showing.
    report: str | None = None
    #: The diff as its JSON document (``Diff.to_dict()``), written under the key ``diff``.
    diff_json: dict[str, Any] | None = None
    #: What ``check`` found, as its JSON document (``CheckResult.to_dict``), written under the key ``check``.
    check_json: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    #: Why it diverged (a ``diff_data.Cause`` value) and how reports name it, when a diff says.
    cause: str | None = None
    cause_label: str | None = None
    #: The diff itself and the (expected, actual) calls, kept only when asked (to draw them); never in JSON.
    diff: Diff | None = field(default=None, repr=False, compare=False)
    calls: tuple[Call, Call] | None = field(default=None, repr=False, compare=False)
    #: The call a check broke and what the check found, kept only when asked (to draw them); never in JSON.
    checked: tuple[Call, CheckResult] | None = field(default=None, repr=False, compare=False)
    #: Digest of the golden's content (all but key and provenance), to find copies in a tree; never in JSON.
    content: str | None = field(default=None, repr=False, compare=False)
    #: Where a walk found the golden, for :func:`misplaced`. Never in JSON.
    placed: list[PlacedGolden] = field(default_factory=list, repr=False, compare=False)
    #: Seconds its golden took to load and judge, when measured (JUnit's ``time``). Never in JSON.
    seconds: float | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the kept diff, calls, check, content digest and placements left out; the diff's document
        under ``diff``)."""
        hidden = ("diff", "calls", "checked", "content", "placed", "seconds")
        return {_JSON_KEYS.get(f.name, f.name): getattr(self, f.name) for f in fields(self) if f.name not in hidden}


#: Fields written under another key than their name.
_JSON_KEYS = {"diff_json": "diff", "check_json": "check"}


#: Copies a note names; the rest are counted.
NAMED_COPIES = 3


def note_copies(results: Sequence[Result]) -> list[list[Result]]:
    """Goldens of one tree holding the same content under different keys: each gets a note naming the others.

    Returns the groups found (a copy is usually a golden saved twice by mistake, or moved without its old file).
    """
    groups: dict[str, list[Result]] = {}
    for result in results:
        if result.content is not None:
            groups.setdefault(result.content, []).append(result)
    copies = [group for group in groups.values() if len(group) > 1]
    for group in copies:
        for result in group:
            # a few others by name, the rest counted: a note per golden naming every other would grow
            # with the square of the copies (10,000 copies: 1.3 GB of JSON)
            others = [r.key for r in group[:NAMED_COPIES + 1] if r is not result][:NAMED_COPIES]
            more = len(group) - 1 - len(others)
            named = ", ".join(others) + (f" and {more} more" if more else "")
            result.notes.append(f"same content as {named} (a copy under another key)")
    return copies


def soundness_verdict(results: Sequence[Result]) -> str | None:
    """Whether the plans of the run's diverged and resized calls pass ``check`` on both sides, in a few words
    (None when no result was judged)."""
    from mla_golden.soundness import verdict_of

    judged = [(r.key, r.diff_json["soundness"]) for r in results if r.diff_json and r.diff_json.get("soundness")]
    return verdict_of(judged) if judged else None


def exit_words(code: int, command: str = "") -> str:
    """What an exit status means, as every report words it: ``divergence`` (``violation`` for ``check``), ``ok``,
    ``bad input`` (``failed cases`` for ``sweep``, whose other errors print no report), ``inconclusive``;
    ``interrupted`` for 128 + a signal."""
    if code == EXIT_DIVERGED and command == "check":
        return "violation"
    if code == EXIT_BAD and command == "sweep":
        return "failed cases"
    words = {EXIT_OK: "ok", EXIT_DIVERGED: "divergence", EXIT_BAD: "bad input", EXIT_INCONCLUSIVE: "inconclusive"}
    return words.get(code, "interrupted")


def exit_code(results: Sequence[Result]) -> int:
    """The run's exit status: the worst any result contributes (0 for none)."""
    return max((r.status.exit_code for r in results), default=EXIT_OK)


@dataclass
class CauseGroup:
    """The results that are not ok for one cause label (or, without a diff, one status)."""

    label: str
    #: ``{old, new}`` when the cause is a planner change.
    planner: dict[str, str] | None
    results: list[Result] = field(default_factory=list)

    @property
    def causes(self) -> list[str]:
        """The ``diff_data.Cause`` values behind the label (a planner change moves geometry in some calls, values in others)."""
        return sorted({r.cause for r in self.results if r.cause})

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "causes": self.causes, "planner": self.planner, "count": len(self.results),
                "keys": [r.key for r in self.results]}  # fmt: skip


def by_cause(results: Sequence[Result]) -> list[CauseGroup]:
    """The results that are not ok, grouped by cause label (a result without a diff, by status); largest first.

    An upgrade preview gives one group per ``planner behaviour change OLD -> NEW``.
    """
    return _grouped(r for r in results if not r.status.ok)


def not_comparable(results: Sequence[Result]) -> list[CauseGroup]:
    """The goldens a planner cannot express, grouped by planner (``not comparable on reference@33d168a0``).

    Apart from :func:`by_cause`: nothing was compared, so they are no divergence.
    """
    return _grouped(r for r in results if r.status is Status.NOT_COMPARABLE)


def _grouped(results: Iterable[Result]) -> list[CauseGroup]:
    groups: dict[str, CauseGroup] = {}
    for r in results:
        label = r.cause_label or r.status.value
        groups.setdefault(label, CauseGroup(label, (r.diff_json or {}).get("planner"))).results.append(r)
    return sorted(groups.values(), key=lambda g: -len(g.results))
