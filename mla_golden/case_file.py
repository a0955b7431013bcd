"""The TOML layout case matrices and sweep spaces share, read with errors that name file, line and key.

Both are ``format``, ``devices`` and ``[[decode]]`` / ``[[prefill]]`` tables
(:mod:`mla_golden.matrix`, :mod:`mla_golden.sweeper.space`); a :class:`Table`
gives a table's values typed, raising a :class:`MatrixError` located at the
key's line when one is wrong.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from typing import Any

from mla_golden.cases import CONTEXT_MODES
from mla_golden.errors import MatrixError
from mla_golden.schema import ENV_VARS

_CONTEXT_RE = re.compile(rf"^({'|'.join(CONTEXT_MODES)}):([1-9][0-9]*)$")


def read_document(text: str, source: str, fmt: str) -> tuple[dict[str, Any], Locator]:
    """A matrix-like TOML document (``format``, ``devices``, ``[[decode]]``, ``[[prefill]]``) and its locator; MatrixError otherwise.

    Sweep spaces share the layout (:mod:`mla_golden.sweeper.space`).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(f"{source}: not valid TOML: {exc}") from exc
    where = Locator(text, source)
    unknown = sorted(set(data) - {"format", "devices", "decode", "prefill"})
    if unknown:
        raise where.error(None, 0, unknown[0], "unknown top-level key (known: format, devices, [[decode]], [[prefill]])")
    if data.get("format", fmt) != fmt:
        raise where.error(None, 0, "format", f"unknown format {data['format']!r}; this mla-golden reads {fmt!r}")
    return data, where


class Locator:
    """Finds the line of a key in the TOML text, so errors can name it."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        #: (kind, index) -> (first line, last line) of that [[kind]] table, 1-based.
        self.tables: dict[tuple[str, int], tuple[int, int]] = {}
        counts: dict[str, int] = {}
        current: tuple[str, int] | None = None
        self.top_end = len(self.lines)
        for number, line in enumerate(self.lines, start=1):
            header = re.match(r"^\s*\[\[\s*([A-Za-z0-9_.-]+)\s*\]\]", line) or re.match(r"^\s*\[\s*([A-Za-z0-9_.-]+)\s*\]", line)
            if header:
                if current is not None:
                    start, _ = self.tables[current]
                    self.tables[current] = (start, number - 1)
                else:
                    self.top_end = number - 1
                kind = header.group(1)
                current = (kind, counts.get(kind, 0))
                counts[kind] = counts.get(kind, 0) + 1
                self.tables[current] = (number, len(self.lines))

    def line_of(self, kind: str | None, index: int, key: str) -> int | None:
        start, end = self.tables.get((kind, index), (0, 0)) if kind else (1, self.top_end)
        head = key.split(".")[0]
        pattern = re.compile(rf"^\s*[\"']?{re.escape(head)}[\"']?\s*=")
        for number in range(max(start, 1), end + 1):
            if pattern.match(self.lines[number - 1]):
                return number
        return start or None

    def tables_of(self, data: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        """The ``[[kind]]`` tables of ``data`` (none when absent)."""
        tables = data.get(kind, [])
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise self.error(None, 0, kind, f"must be an array of tables: [[{kind}]]")
        return tables

    def error(self, kind: str | None, index: int, key: str, problem: str, name: str | None = None) -> MatrixError:
        line = self.line_of(kind, index, key)
        place = f"{self.source}:{line}" if line else self.source
        table = f" [[{kind}]] #{index + 1}" + (f" ({name!r})" if name else "") + ":" if kind else ""
        return MatrixError(f"{place}:{table} key {key!r}: {problem}")


class Table:
    """One [[decode]] / [[prefill]] table, with typed accessors that raise located errors."""

    def __init__(self, where: Locator, kind: str, index: int, data: dict[str, Any]) -> None:
        self.where, self.kind, self.index, self.data = where, kind, index, data
        self.name = data.get("name") if isinstance(data.get("name"), str) else None

    def fail(self, key: str, problem: str) -> MatrixError:
        return self.where.error(self.kind, self.index, key, problem, self.name)

    def check_keys(self, allowed: Sequence[str], required: Sequence[str]) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, f"unknown key (allowed here: {', '.join(allowed)})")
        for key in required:
            if key not in self.data:
                raise self.fail(key, "missing (required)")

    def text(self, key: str, default: str | None = None, pattern: str = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$") -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str) or not re.match(pattern, value):
            raise self.fail(key, f"expected a name matching {pattern}, got {value!r}")
        return value

    def ints(self, key: str, default: Any = None, low: int = 1, high: int = 1 << 24) -> list[int]:
        value = self.data.get(key, default)
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values):
            raise self.fail(key, f"expected an integer in [{low}, {high}] or a non-empty list of them, got {value!r}")
        return values

    def choices(self, key: str, allowed: Sequence[str], default: Any = None) -> list[str]:
        value = self.data.get(key, default)
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v in allowed for v in values):
            raise self.fail(key, f"expected one of {list(allowed)} or a list of them, got {value!r}")
        return values

    def contexts(self, key: str) -> list[tuple[str, int]]:
        value = self.data.get(key)
        values = value if isinstance(value, list) else [value]
        parsed = []
        for item in values:
            match = _CONTEXT_RE.match(item) if isinstance(item, str) else None
            if match is None:
                raise self.fail(key, f"expected 'uniform:N' or 'jitter:N' (or a list of them), got {item!r}")
            parsed.append((match.group(1), int(match.group(2))))
        return parsed

    def env(self) -> dict[str, str | None]:
        value = self.data.get("env", {})
        if not isinstance(value, dict):
            raise self.fail("env", f"expected a table such as {{ AITER_ENABLE_EXPERIMENTAL = \"1\" }}, got {value!r}")
        env: dict[str, str | None] = dict.fromkeys(ENV_VARS)
        for name, setting in value.items():
            if name not in ENV_VARS:
                raise self.fail(f"env.{name}", f"not a planner env var (known: {', '.join(ENV_VARS)})")
            if not isinstance(setting, str):
                raise self.fail(f"env.{name}", f"expected a string value, got {setting!r}")
            env[name] = setting
        return env

    def tags(self) -> tuple[str, ...]:
        value = self.data.get("tags", [])
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise self.fail("tags", f"expected a list of strings, got {value!r}")
        return tuple(value)
