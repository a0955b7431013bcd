"""mla-golden: record, replay and diff aiter MLA scheduling metadata.

Flow: a live planner call -> :class:`Call` (via :func:`spy`) -> :class:`Golden`
(safetensors, via the store) -> :class:`Diff` (via :func:`diff`) -> a report.

Exports load lazily so that ``import mla_golden`` (and the CLI's ``--help``)
does not pay for torch until it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Call": "mla_golden.call",
    "Calls": "mla_golden.call",
    "spy": "mla_golden.capture.recorder",
    "Spy": "mla_golden.capture.recorder",
    "replay": "mla_golden.capture.canary",
    "Golden": "mla_golden.golden.store",
    "GoldenStore": "mla_golden.golden.store",
    "WriteOutcome": "mla_golden.golden.store",
    "load": "mla_golden.golden.store",
    "derived_key": "mla_golden.golden.store",
    "MlaGoldenError": "mla_golden.errors",
    "GoldenError": "mla_golden.errors",
    "NotAGoldenError": "mla_golden.errors",
    "CallNotFound": "mla_golden.errors",
    "NothingToIntercept": "mla_golden.errors",
    "AdaptationError": "mla_golden.errors",
    "MatrixError": "mla_golden.errors",
    "BackendError": "mla_golden.errors",
    "AiterSourceError": "mla_golden.errors",
    "aiter_src": "mla_golden.aiter_build",
    "HookError": "mla_golden.errors",
    "Interrupted": "mla_golden.errors",
    "PlotExtraMissing": "mla_golden.errors",
    "AiterCheckError": "mla_golden.errors",
    "BufferTooSmallError": "mla_golden.errors",
    "UndefinedResultError": "mla_golden.errors",
    "UnknownVersionError": "mla_golden.errors",
    "SpecError": "mla_golden.errors",
    "SpaceError": "mla_golden.errors",
    "SweepError": "mla_golden.errors",
    "JournalError": "mla_golden.errors",
    "ExecutorError": "mla_golden.errors",
    "PreconditionError": "mla_golden.errors",
    "PlannerExited": "mla_golden.errors",
    "WorkerDied": "mla_golden.errors",
    "diff": "mla_golden.differ",
    "diff_trees": "mla_golden.runs",
    "Result": "mla_golden.runs",
    "Status": "mla_golden.runs",
    "invariants": "mla_golden.invariant_checks",
    "assert_invariants": "mla_golden.invariant_checks",
    "InvariantsViolated": "mla_golden.errors",
    "expect": "mla_golden.expectations",
    "GoldenMismatch": "mla_golden.errors",
    "Diff": "mla_golden.differ",
    "Cause": "mla_golden.differ",
    "recorded_planner": "mla_golden.planner_id",
    "render_text": "mla_golden.render.report",
    "to_json": "mla_golden.render.report",
    "assert_matches_golden": "mla_golden.assertions",
    "golden_key": "mla_golden.assertions",
    "sweep": "mla_golden.sweeper",
    "bisect": "mla_golden.triage.bisect",
    "Bisection": "mla_golden.triage.bisect",
    "history": "mla_golden.triage.changelog",
    "Changelog": "mla_golden.triage.changelog",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mla_golden' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
