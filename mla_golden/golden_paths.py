"""Where the pytest plugin keeps a test's goldens, and which goldens no test used.

Layout: ``<golden dir>/<test file path relative to the rootdir>/<class>/<test
name with its parametrize id>/<name>.safetensors``, e.g.
``goldens/tests/kernels/test_mla.py/test_decode[fp8-16]/decode.safetensors``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from mla_golden.store import GoldenStore, key_path


def key_of_test(nodeid: str) -> str:
    """The key prefix of a test's goldens: its node id with ``::`` as ``/``.

    A ``/`` inside a parametrize id is not a folder: it is escaped (``%2F``),
    which store.key_path then hashes like any character a path cannot keep.
    """
    file, *names = nodeid.split("::")
    return "/".join([file, *(n.replace("/", "%2F") for n in names)])


def folder_of_test(golden_dir: Path, nodeid: str) -> Path:
    """The folder holding the goldens of the test ``nodeid``."""
    return key_path(golden_dir, f"{key_of_test(nodeid)}/_").parent


def unused_goldens(golden_dir: Path, touched: Iterable[Path], tests: Mapping[str, bool], rootdir: Path) -> list[Path]:
    """Goldens under the folders of the test files that ran which no test read or wrote.

    ``tests``: every test that ran, by node id, True when it passed. A test
    that failed or was skipped may not have reached its goldens, so its
    folder is left out. The folder of a test file that no longer exists, next
    to one that ran, is unused as a whole. Every other golden is left out
    (written by other means, or by test files this run did not collect).
    """
    used = {p.resolve() for p in touched}
    files = {nodeid.split("::")[0] for nodeid in tests}
    protected = [folder_of_test(golden_dir, nodeid).resolve() for nodeid, passed in tests.items() if not passed]
    for parent in sorted({PurePosixPath(f).parent for f in files}):
        mirror = golden_dir / parent
        if mirror.is_dir():
            for folder in sorted(mirror.glob("*.py")):
                if folder.is_dir() and not (rootdir / parent / folder.name).exists():
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
