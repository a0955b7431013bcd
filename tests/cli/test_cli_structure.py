"""The CLI's shape: a module per command, none long, and an option two commands share declared once."""

from __future__ import annotations

from typing import Any

import typer.main
from helpers.repo import ROOT

from mla_golden.cli import app

CLI = ROOT / "mla_golden" / "cli"
MAX_LINES = 400


def test_no_cli_module_is_over_400_lines() -> None:
    long = {p.name: n for p in sorted(CLI.glob("*.py")) if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"CLI modules over {MAX_LINES} lines: {long}"


def _options() -> dict[str, dict[str, Any]]:
    """Each command's parameters by their longest flag (or name for arguments)."""
    group = typer.main.get_command(app)
    commands: dict[str, Any] = getattr(group, "commands")  # noqa: B009 - a group (typer's own click), typed as a Command
    return {
        name: {max(p.opts, key=len): p for p in command.params}
        for name, command in commands.items()
    }


def test_shared_options_read_the_same_in_every_command_that_takes_them() -> None:
    commands = _options()
    shared = {"--aiter-repo": {"record", "diff", "bisect", "history"}, "--max-items": {"record", "diff"}, "--junit-xml": {"diff", "check"},
              "--jobs": {"record", "diff", "check", "bisect", "history"}, "--quiet": {"record", "diff", "check"}}  # fmt: skip
    for flag, names in shared.items():
        assert names <= {n for n, params in commands.items() if flag in params}, flag
        seen = {
            (getattr(commands[n][flag], "help", None), commands[n][flag].default, tuple(commands[n][flag].opts), commands[n][flag].envvar)
            for n in names
        }
        assert len(seen) == 1, (flag, seen)
    formats = {n: getattr(params["--format"], "help", None) for n, params in commands.items() if "--format" in params}
    assert set(formats) == {"record", "diff", "check", "show", "list", "versions", "sweep", "bisect", "history"}
    assert len({formats[n] for n in ("record", "show", "list", "versions", "sweep", "bisect", "history")}) == 1
    assert formats["diff"] == formats["check"] != formats["record"]
