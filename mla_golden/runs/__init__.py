"""Runs over many goldens: record a matrix, replay goldens, pair two golden trees, check; one result per golden.

The CLI is a thin layer over this package: :mod:`.results` (statuses, the exit
policy, cause groups), :mod:`.placement` (the goldens under the given paths,
and misplaced copies), :mod:`.pool` (the fan-out over the process pool, :mod:`mla_golden.pool`), :mod:`.work`
(record, replay and check, one golden at a time) and :mod:`.pairing` (two
trees compared call by call).
"""

from mla_golden.pool import STOP_GRACE_S
from mla_golden.runs.pairing import GoldenPair, diff_trees, pair_trees, pair_worker
from mla_golden.runs.placement import golden_files, misplaced, misplaced_files, path_problem
from mla_golden.runs.pool import Advance, run_items
from mla_golden.runs.results import (
    EXIT_BAD,
    EXIT_DIVERGED,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    STATUS_EXIT,
    CauseGroup,
    PlacedGolden,
    Result,
    Status,
    by_cause,
    exit_code,
    exit_words,
    not_comparable,
    note_copies,
    soundness_verdict,
)
from mla_golden.runs.work import check_worker, command_results, record_worker, replay_worker

__all__ = [
    "EXIT_BAD", "EXIT_DIVERGED", "EXIT_INCONCLUSIVE", "EXIT_OK", "STATUS_EXIT", "STOP_GRACE_S", "Advance", "CauseGroup",
    "GoldenPair", "PlacedGolden", "Result", "Status", "by_cause", "check_worker", "command_results", "diff_trees",
    "exit_code", "exit_words", "golden_files", "misplaced", "misplaced_files", "not_comparable", "note_copies",
    "pair_trees", "pair_worker", "path_problem", "record_worker", "replay_worker", "run_items", "soundness_verdict",
]  # fmt: skip
