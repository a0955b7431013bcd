"""Where the pytest plugin keeps a test's goldens, and which goldens no test used.

Layout: ``<golden dir>/<test file path relative to the rootdir>/<class>/<test
name with its parametrize id>/<name>.safetensors``, e.g.
``goldens/tests/kernels/test_mla.py/test_decode[fp8-16]/decode.safetensors``; a test file outside the
rootdir is kept under its path relative to it, each ``..`` written ``[..]`` (:func:`file_of_test`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from mla_golden.golden.keys import key_path
from mla_golden.golden.store import GoldenStore

#: How a key writes a ``..`` of a test file outside the rootdir (a key part is never ``..``).
PARENT = "[..]"
_DRIVE = re.compile(r"[A-Za-z]:")


def file_of_test(nodeid: str, location: str | None = None) -> str:
    """The test file part of a test's keys: the node id's, its path relative to the rootdir.

    A test file outside the rootdir has no such part in its node id (pytest writes ``::test_a``, or
    ``../other/test_a.py``): then ``location``, pytest's path of the file relative to the rootdir
    (``item.location[0]``), is taken with each ``..`` written ``[..]`` (and, on another drive, its root
    dropped), so the keys stay relative and their goldens inside the goldens folder.
    """
    file = nodeid.split("::")[0]
    parts = file.split("/")
    relative = bool(file) and not file.startswith("/") and not _DRIVE.match(parts[0]) and ".." not in parts
    if relative or location is None:
        return file
    parts = [part for part in re.split(r"[\\/]", location) if part not in ("", ".")]
    if parts and _DRIVE.fullmatch(parts[0]):
        parts = parts[1:]
    return "/".join(PARENT if part == ".." else part for part in parts)


def key_of_test(nodeid: str, location: str | None = None) -> str:
    """The key prefix of a test's goldens: its test file (:func:`file_of_test`), then the rest of its node id with
    ``::`` as ``/``.

    A ``/`` inside a parametrize id is not a folder: it is escaped (``%2F``),
    which keys.key_path then hashes like any character a path cannot keep.
    """
    _, *names = nodeid.split("::")
    return "/".join([file_of_test(nodeid, location), *(n.replace("/", "%2F") for n in names)])


def folder_of_test(golden_dir: Path, nodeid: str, location: str | None = None) -> Path:
    """The folder holding the goldens of the test ``nodeid`` (its file at ``location``: :func:`file_of_test`)."""
    return key_path(golden_dir, f"{key_of_test(nodeid, location)}/_").parent


def unused_goldens(
    golden_dir: Path, touched: Iterable[Path], tests: Mapping[str, bool], rootdir: Path, locations: Mapping[str, str] | None = None
) -> list[Path]:
    """Goldens under the folders of the test files that ran which no test read or wrote.

    ``tests``: every test that ran, by node id, True when it passed; ``locations``: their files' paths relative
    to the rootdir, where pytest knows them (:func:`file_of_test`). A test
    that failed or was skipped may not have reached its goldens, so its
    folder is left out. The folder of a test file that no longer exists, next
    to one that ran, is unused as a whole. Every other golden is left out
    (written by other means, or by test files this run did not collect).
    """
    where = locations or {}
    used = {p.resolve() for p in touched}
    files = {file_of_test(nodeid, where.get(nodeid)) for nodeid in tests}
    protected = [folder_of_test(golden_dir, nodeid, where.get(nodeid)).resolve() for nodeid, passed in tests.items() if not passed]
    for parent in sorted({PurePosixPath(f).parent for f in files}):
        mirror = golden_dir if parent == PurePosixPath(".") else key_path(golden_dir, f"{parent}/_").parent
        if mirror.is_dir():
            beside = rootdir.joinpath(*(".." if part == PARENT else part for part in parent.parts))
            for folder in sorted(mirror.glob("*.py")):
                if folder.is_dir() and not (beside / folder.name).exists():
                    files.add((parent / folder.name).as_posix())  # a deleted test file: none of its goldens is read
    unused = []
    for file in sorted(files):
        folder = key_path(golden_dir, f"{file}/_").parent
        for path in GoldenStore(folder).paths():
            resolved = path.resolve()
            if resolved in used or any(resolved.is_relative_to(p) for p in protected):
                continue
            unused.append(path)
    return unused
