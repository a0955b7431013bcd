"""Where the repository's parts are, for tests in any folder of tests/ (and the helpers beside them)."""

from __future__ import annotations

from pathlib import Path

#: The tests folder (on sys.path under pytest: the helpers import as ``helpers.NAME``).
TESTS = Path(__file__).resolve().parent.parent
#: The repository: the package, goldens/, docs/, README.md, tools/.
ROOT = TESTS.parent
