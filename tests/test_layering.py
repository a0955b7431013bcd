"""The house's layering, read from the package's own imports: the sweep and the matrix stand on one case module."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mla_golden"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports inside functions count), absolute names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import of {node.module}"
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_sweeper_does_not_import_the_matrix() -> None:
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted((PACKAGE / "sweeper").rglob("*.py"))
        if any(name == "mla_golden.matrix" or name.startswith("mla_golden.matrix.") for name in _imports(path))
    ]
    assert not offenders, f"the sweeper imports the case matrix: {offenders}"


def test_matrix_and_sweep_space_share_the_case_module() -> None:
    for module in ("matrix.py", "sweeper/space.py", "sweeper/evaluate.py"):
        assert "mla_golden.cases" in _imports(PACKAGE / module), f"{module} does not use mla_golden.cases"


def test_the_library_never_imports_the_cli() -> None:
    offenders = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if PACKAGE / "cli" not in path.parents and any(n == "mla_golden.cli" or n.startswith("mla_golden.cli.") for n in _imports(path))
    ]
    assert not offenders, f"library modules import the CLI: {offenders}"
