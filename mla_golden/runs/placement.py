"""Where a run's goldens are: the files under the paths it was given, and goldens copied or renamed by hand.

A walked golden's key must agree with where it was found; a walk may start
inside a tree, so that check alone lets a golden copied beside others of
another folder pass: :func:`misplaced` compares it with its neighbours.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mla_golden.runs.results import PlacedGolden, Result, Status

if TYPE_CHECKING:
    from mla_golden.golden.store import GoldenFile

def misplaced(results: Sequence[Result]) -> None:
    """Make 'bad' each result holding a golden copied or renamed into a walked tree by hand (see
    :func:`misplaced_files`): a walk may start inside a tree, so a key is checked against its path only as far
    as the path under the walked folder goes, and that alone lets such a golden pass."""
    holding: dict[tuple[str, str], list[Result]] = {}
    for result in results:
        for spot in result.placed:
            holding.setdefault((spot.root, spot.path), []).append(result)
    for file, message in misplaced_files([spot for result in results for spot in result.placed]).items():
        for result in holding[file]:
            result.status, result.message = Status.BAD, message


def misplaced_files(placed: Sequence[PlacedGolden]) -> dict[tuple[str, str], str]:
    """(folder walked, file) -> why, for ``placed`` goldens of one walk that cannot all be where they are: goldens
    in one folder whose keys name other folders than most of their neighbours' do (a tie names none). A golden
    alone in its folder is judged by its path only; one key in two places is allowed (a folder may hold several
    trees, a whole one and a part)."""
    by_folder: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for spot in placed:
        by_folder.setdefault((spot.root, os.path.dirname(spot.path)), []).append((spot.path, spot.key.rpartition("/")[0]))
    out = {}
    for (root, _), files in by_folder.items():
        counts = Counter(folder for _, folder in files)
        (top, most), *rest = counts.most_common()
        for path, folder in files:
            if folder != top or (rest and rest[0][1] == most):
                beside = len(files) - counts[folder]
                out[root, path] = (
                    f"its key names the folder {_folder(folder)}, where the {beside} golden(s) beside it name "
                    f"{'others' if folder == top else _folder(top)} (copied or renamed here by hand?)"
                )
    return out


def _folder(name: str) -> str:
    return f"{name}/" if name else "the top of the tree"


def placements(found: Iterable[tuple[GoldenFile, str]]) -> list[PlacedGolden]:
    """Where each of ``found`` (file, key) that a walk found is."""
    return [PlacedGolden(file.path[: len(file.path) - len(file.under)], file.path, key)
            for file, key in found if file.under is not None]  # fmt: skip


def note_placements(results: Sequence[Result], found: Sequence[tuple[GoldenFile, str]]) -> None:
    """Give each result the walk, file and key of the golden it reports on (by path), for :func:`misplaced`."""
    spots = {spot.path: spot for spot in placements(found)}
    for result in results:
        if result.path in spots:
            result.placed.append(spots[result.path])


def path_problem(path: Path) -> str | None:
    """Why ``path`` gives no golden to work on (missing, or a folder without goldens), or None: every command's wording."""
    from mla_golden.golden.store import SUFFIX, GoldenStore

    if not path.exists() and not path.is_symlink():
        return f"no such file or folder (goldens are *{SUFFIX} files)"
    if path.is_dir() and next(GoldenStore(path).paths(), None) is None:
        return f"a folder holding no goldens (*{SUFFIX} files)"
    return None


def golden_files(paths: Sequence[Path]) -> tuple[list[GoldenFile], list[Result]]:
    """Golden files under ``paths`` (files or folders), and a 'bad' result for each path that is neither."""
    from mla_golden.golden.store import GoldenFile, GoldenStore

    files: list[GoldenFile] = []
    bad: list[Result] = []
    for path in paths:
        if path.is_dir():
            files.extend(GoldenFile(str(p), p.relative_to(path).as_posix()) for p in GoldenStore(path).paths())
        elif path.exists() or path.is_symlink():  # a FIFO or a dangling link too: the reader reports it
            files.append(GoldenFile(str(path), None))
        else:
            bad.append(Result(str(path), Status.BAD, str(path), path_problem(path) or "unreadable"))
    return files, bad
