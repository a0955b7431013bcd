"""The house's layering, read from the package's own imports: the sweep and the matrix stand on one case module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers.repo import ROOT

PACKAGE = ROOT / "mla_golden"


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


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _layers() -> dict[str, int]:
    """docs/architecture.md's Layers table: unit (a top-level module or a subpackage) -> its layer."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Layers") :]
    section = section[: section.index("\n## ", 1)]
    found: dict[str, int] = {}
    for row in re.findall(r"^\| (\d+) \| [^|]+ \| (.+) \|$", section, re.MULTILINE):
        for unit in re.findall(r"`([a-z_.]+)`", row[1]):
            assert unit not in found, f"{unit} is in two layers of docs/architecture.md"
            found[unit] = int(row[0])
    return found


#: Packages that only group modules by concept: each of their modules (or subpackages) is a unit of its own, in its own layer.
GROUPS = ("golden", "capture", "render")


def _unit(module: str) -> str | None:
    """``mla_golden.sweeper.driver`` -> ``sweeper``, ``mla_golden.render.html.diff`` -> ``render.html``; a package that
    exports nothing (``mla_golden``, a grouping package) -> None."""
    parts = module.split(".")
    if parts[0] != "mla_golden" or len(parts) < 2:
        return None
    if parts[1] in GROUPS:
        return ".".join(parts[1:3]) if len(parts) > 2 else None
    return parts[1]


def _runtime_imports(path: Path) -> set[str]:
    """The ``mla_golden`` modules ``path`` imports when it runs (lazily too), not those only annotations need."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from mla_golden import reference` imports mla_golden.reference, `from mla_golden.golden import store` the store
            packages = {"mla_golden", *(f"mla_golden.{group}" for group in GROUPS)}
            names.update({node.module} if node.module not in packages else {f"{node.module}.{a.name}" for a in node.names})
    return {n for n in names if n.startswith("mla_golden.")}


def _unit_of_file(path: Path) -> str:
    parts = [part.removesuffix(".py") for part in path.relative_to(PACKAGE).parts]
    return ".".join(parts[:2]) if parts[0] in GROUPS else parts[0]


def _grouping_inits() -> set[Path]:
    return {PACKAGE / group / "__init__.py" for group in GROUPS}


def _units() -> set[str]:
    files = set(PACKAGE.rglob("*.py")) - {PACKAGE / "__init__.py", PACKAGE / "__main__.py"} - _grouping_inits()
    return {_unit_of_file(p) for p in files}


def test_grouping_packages_export_nothing() -> None:
    """Importing ``mla_golden.capture.aliases`` (layer 1) must not load the capture (layer 5) through the package."""
    for init in sorted(_grouping_inits()):
        body = ast.parse(init.read_text(encoding="utf-8")).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{init.relative_to(PACKAGE.parent)} holds more than its docstring"


def _unit_imports() -> dict[str, set[str]]:
    """unit -> the other units it imports, over every file of the package but its lazy front door (__init__.py)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py" or path in _grouping_inits():
            continue
        unit = _unit_of_file(path)
        imported = {_unit(name) for name in _runtime_imports(path)} - {unit, None}
        edges.setdefault(unit, set()).update(u for u in imported if u is not None)
    return edges


def test_every_unit_is_in_one_layer_of_the_architecture_doc() -> None:
    units = _units()
    layers = _layers()
    assert sorted(units - set(layers)) == [], "units missing from docs/architecture.md's Layers table"
    assert sorted(set(layers) - units) == [], "docs/architecture.md's Layers table names units that do not exist"


def test_every_import_runs_down_the_layers() -> None:
    """The table is the rule; every runtime import of every module is held to it."""
    layers = _layers()
    upward = sorted(
        f"{unit} (layer {layers[unit]}) imports {other} (layer {layers[other]})"
        for unit, others in _unit_imports().items()
        for other in others
        if layers[other] > layers[unit]
    )
    assert not upward, upward


def test_no_two_units_import_each_other_even_through_others() -> None:
    edges = _unit_imports()
    circles: list[list[str]] = []

    def visit(unit: str, path: list[str], done: set[str]) -> None:
        for other in sorted(edges.get(unit, ())):
            if other in path:
                circles.append([*path[path.index(other) :], other])
            elif other not in done:
                visit(other, [*path, other], done)
        done.add(unit)

    done: set[str] = set()
    for unit in sorted(edges):
        if unit not in done:
            visit(unit, [unit], done)
    assert not circles, [" -> ".join(c) for c in circles[:5]]
