"""docs/architecture.md's module map names every module of the package, so the map cannot fall behind the code."""

from __future__ import annotations

import re

from helpers.repo import ROOT

PACKAGE = ROOT / "mla_golden"


def _map_sections() -> dict[str, set[str]]:
    """Backticked names per part of the "Module map": "" for the top-level table, "pkg/" for each ``### `pkg/` `` table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Module map") :]
    section = section[: section.index("\n## ", 1)]
    parts = re.split(r"^### `([\w/]+)`\s*$", section, flags=re.M)
    names = {"": set(re.findall(r"`([^`]+)`", parts[0]))}
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        names[heading] = set(re.findall(r"`([^`]+)`", body))
    return names


def test_the_module_map_names_every_module() -> None:
    sections = _map_sections()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        where = "" if len(relative.parts) == 1 else "/".join(relative.parts[:-1]) + "/"
        # a package's row is in its parent's table: `render/` in the top one, `html/` in `render/`'s
        parent, _, name = where.rstrip("/").rpartition("/")
        if where and f"{name}/" not in sections.get(f"{parent}/" if parent else "", set()):
            missing.append(f"{where} (package row)")
        if relative.name not in sections.get(where, set()):
            missing.append(str(relative))
    assert not missing, f"docs/architecture.md's module map does not name: {', '.join(missing)}"


def test_every_mapped_module_exists() -> None:
    for where, names in _map_sections().items():
        for name in names:
            if re.fullmatch(r"[\w]+\.py", name):
                assert (PACKAGE / where / name).is_file(), f"docs/architecture.md maps {where}{name}, which does not exist"
