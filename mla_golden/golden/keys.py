"""A golden's key, the one home of every check on it: what a key may be, the file it is stored in, and whether a file
holds the key its place says.

A key is a relative '/'-path of plain parts (:func:`check_key`: the writer and
the reader hold a call's key to it, :mod:`mla_golden.golden.rules`). It names
its file under a folder, each part sanitised (:func:`key_path`), and a golden
read back must hold the key it was looked up by (:func:`check_read`) or, found
by a walk, one that agrees with where it was found (:func:`check_placed`).
Nothing read from a file ever becomes a path.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path
from typing import Any

from mla_golden.errors import GoldenError

SUFFIX = ".safetensors"
#: A failed comparison's actual call may sit next to its golden as ``<name>.obtained.safetensors``.
OBTAINED = ".obtained"

_KEY_PART = 200
_KEY_LEN = 1024
#: Characters a key part keeps as they are (pytest's parametrize ids mostly stay readable: ``test[fp8-16]``).
_UNSAFE = re.compile(r"[^A-Za-z0-9._\[\]=+,@-]+")


def check_key(key: Any) -> list[str]:
    """A key is a relative '/'-path of plain parts: no NUL, no absolute path, no '.' or '..', bounded length."""
    if not isinstance(key, str) or not key:
        return ["key: must be a non-empty string"]
    if "\x00" in key:
        return ["key: contains a NUL character"]
    if len(key) > _KEY_LEN:
        return [f"key: {len(key)} characters (limit {_KEY_LEN})"]
    if key.startswith("/") or re.match(r"[A-Za-z]:[\\/]", key):
        return [f"key: {key[:80]!r} is an absolute path"]
    parts = key.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return [f"key: {key[:80]!r} has an empty, '.' or '..' part"]
    if any(len(part) > _KEY_PART for part in parts):
        return [f"key: a part longer than {_KEY_PART} characters"]
    return []


def key_path(root: Path, key: str) -> Path:
    """Where ``key`` lives under ``root``: each '/'-part sanitised; GoldenError for a key that is no name.

    A NUL, an absolute path, an empty, '.' or '..' part, or an absurd length
    is refused; other characters are replaced, with a hash so distinct keys
    stay distinct.
    """
    parts = _key_parts(root, key)
    return root.joinpath(*parts).with_name(parts[-1] + SUFFIX)


def _key_parts(root: Path, key: str) -> list[str]:
    """The sanitised '/'-parts of ``key`` (the last without the suffix); see :func:`key_path`."""
    problems = check_key(key)
    if problems:
        raise GoldenError(root, f"bad golden name {str(key)[:80]!r}: {problems[0].removeprefix('key: ')}")
    return list(_clean_parts(key))


@functools.lru_cache(maxsize=8192)
def _clean_parts(key: str) -> tuple[str, ...]:
    """:func:`_key_parts` of a valid key, remembered: a tree diff asks for each key twice, and trees repeat keys."""
    parts = []
    split = key.split("/")
    for index, part in enumerate(split):
        clean = _UNSAFE.sub("_", part).strip("_") or "_"
        if clean.startswith("."):
            clean = "_" + clean
        # A last part ending in .obtained would name another golden's obtained file.
        looks_obtained = index == len(split) - 1 and part.endswith(OBTAINED)
        if len(clean) > 120 or clean != part or looks_obtained:
            # Keep distinct keys distinct after sanitising.
            clean = f"{clean[:100]}-{hashlib.sha256(part.encode()).hexdigest()[:8]}"
        parts.append(clean)
    return tuple(parts)


def key_matches_path(key: str, under: str) -> bool:
    """Whether ``key`` and ``under``, the path of its file under the folder walked, agree as far as both go, from
    the file name up: a walk may start inside a key's folders (a copied part of a tree) or above them.

    ``under`` is the path as walked, never a resolved one: a symlink named like one key and leading to another
    key's golden would pass as the first. Goldens beside each other must also name one folder
    (``runs.misplaced_files``): a golden copied in by hand with only its file name under the walk passes here.
    """
    want, have = _stored_parts(key), tuple(under.split("/"))
    common = min(len(want), len(have))
    return want[-common:] == have[-common:]


@functools.lru_cache(maxsize=8192)
def _stored_parts(key: str) -> tuple[str, ...]:
    """The path parts ``key`` is stored under, file name included (a tree diff asks for each key twice)."""
    parts = _key_parts(Path(), key)
    return (*parts[:-1], parts[-1] + SUFFIX)


def check_placed(path: Path | str, key: str, under: str) -> None:
    """GoldenError unless ``key``, read from the file at ``path`` found by a walk, agrees with ``under``, its path
    under the folder walked (:func:`key_matches_path`)."""
    if not key_matches_path(key, under):
        raise GoldenError(path, f"key {key[:80]!r} does not match the file's path (moved, copied or renamed?)")


def check_read(path: Path | str, key: str, wanted: str) -> None:
    """GoldenError unless ``key``, read from the file at ``path``, is ``wanted``, the key it was looked up by."""
    if key != wanted:
        raise GoldenError(path, f"holds the golden of key {key[:80]!r}, not {wanted[:80]!r} (copied or renamed by hand?)")
