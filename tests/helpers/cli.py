"""The mla-golden CLI run in-process, as the tests drive it."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from typer.testing import CliRunner

from mla_golden.cli import app


class Ran(NamedTuple):
    """One CLI run: exit code, stdout and stderr."""

    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """Both streams, for checks that a message was shown somewhere."""
        return self.stdout + self.stderr


def run(*args: object) -> Ran:
    """``mla-golden ARGS`` in-process; an exception other than the exit is re-raised (a traceback is a bug)."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Ran(result.exit_code, result.stdout, result.stderr)


def cli(*args: object) -> tuple[int, str]:
    """(exit code, stdout) of ``mla-golden ARGS``."""
    ran = run(*args)
    return ran.code, ran.stdout


def cli_json(*args: object) -> tuple[int, dict[str, Any]]:
    """(exit code, the JSON document) of ``mla-golden ARGS --format json``."""
    code, out = cli(*args, "--format", "json")
    return code, json.loads(out)
