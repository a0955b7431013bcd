"""The sweep's journal in ``--out``: what a killed sweep has done, so a rerun resumes.

``OUT/sweep.jsonl``: a header line naming the sweep (both planner specs, the
space's digest, the seed), then one line per judged point, appended and
synced chunk by chunk. A torn last line (killed mid-write) is ignored; a
journal of another sweep is refused rather than mixed with this one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mla_golden.errors import JournalError
from mla_golden.files import atomic_write
from mla_golden.sweeper.work import CaseResult

FORMAT = "mla-golden-sweep-journal/1"
NAME = "sweep.jsonl"



class Journal:
    """Append-only record of one sweep's verdicts."""

    def __init__(self, out: Path, header: dict[str, Any]) -> None:
        self.path = Path(out) / NAME
        self.header = {"format": FORMAT, **header}

    def resume(self) -> list[CaseResult]:
        """Verdicts already recorded (none for a new journal, which this creates)."""
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._rewrite([json.dumps(self.header)])
            return []
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            header = None
        if header != self.header:
            theirs = {k: header.get(k) for k in ("a", "b", "space", "seed")} if isinstance(header, dict) else "unreadable"
            raise JournalError(
                f"{self.path}: the journal of another sweep ({theirs}); use another --out or remove it"
            )
        results = []
        for number, line in enumerate(lines[1:], start=2):
            try:
                results.append(CaseResult(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as exc:
                if number == len(lines):  # torn by a kill mid-append: drop it, that chunk runs again
                    self._rewrite(lines[:-1])
                    break
                raise JournalError(f"{self.path}:{number}: not a journal line: {exc}") from exc
        return results

    def _rewrite(self, lines: list[str]) -> None:
        atomic_write(self.path, "".join(line + "\n" for line in lines))

    def append(self, results: list[CaseResult]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write("".join(json.dumps(r.to_dict()) + "\n" for r in results))
            fh.flush()
            os.fsync(fh.fileno())
