"""Every command's --help reads as prose, as git's and pytest's do: no type labels, usage lines naming arguments in
capitals, whole summaries, short metavars that leave the help text its column."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from mla_golden.cli import app

#: The longest value name an option may show (``--format text|json|github``); longer ones push its help aside.
MAX_METAVAR = 16
COMMANDS: dict[str, Any] = getattr(typer.main.get_command(app), "commands")  # noqa: B009 - a group, typed as a Command


def _help(*args: str) -> str:
    ran = CliRunner().invoke(app, [*args, "--help"], terminal_width=80)
    assert ran.exit_code == 0, ran.output
    return ran.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_has_no_type_labels_and_a_usage_line_as_git_writes_it(name: str) -> None:
    text = _help(name)
    assert not re.search(r"<[^>\s]*>|<\w+ range>", text), "a type label (<path>, <list[str]>, <int range>) leaks"
    assert "{" not in text.split("\n", 1)[0], "a required argument in braces"
    usage = text.split("\n", 1)[0]
    assert usage.startswith(f"Usage: mla-golden {name} [OPTIONS]"), usage
    for piece in usage.split()[4:]:  # arguments: NAME, [NAME], NAME..., [NAME]...
        assert re.fullmatch(r"\[?[A-Z][A-Z0-9_.]*\]?(\.\.\.)?", piece), (usage, piece)
    command = COMMANDS[name]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    assert len(usage.split()) - 4 == len(arguments), usage


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_metavars_are_short_and_every_options_help_keeps_its_column(name: str) -> None:
    text = _help(name)
    options = text[text.index("Options:") :].splitlines()[1:]
    for line in options:
        head = re.match(r"^  (?:-\w, )?(--[\w-]+)(?: (\S+))?", line)
        if head is None:
            continue  # a continuation line of some option's help
        flag, metavar = head.groups()
        assert metavar is None or len(metavar) <= MAX_METAVAR, (flag, metavar)
        assert re.match(r"^  \S.*?\S {2,}\S", line), f"{flag}: its help text is pushed to the next line: {line!r}"


def test_the_command_list_gives_each_summary_whole() -> None:
    text = _help()
    listed = text[text.index("Commands:") :].splitlines()[1:]
    summaries: dict[str, str] = {}
    for line in listed:
        if re.match(r"^  \S", line):
            name, summary = line.split(None, 1)
            summaries[name] = summary.strip()
        elif line.strip():
            summaries[name] += " " + line.strip()
    assert set(summaries) == set(COMMANDS)
    for name, summary in summaries.items():
        assert not summary.endswith("..."), (name, summary)
        assert summary == COMMANDS[name].short_help, (name, summary)
        assert summary.endswith("."), (name, summary)


def test_sweep_takes_the_ray_address_as_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    import mla_golden.sweeper
    from mla_golden.errors import MlaGoldenError

    asked: list[object] = []

    def sweep(*args: object, **kwargs: object) -> None:
        asked.append(kwargs["ray"])
        raise MlaGoldenError("stopped here")

    monkeypatch.setattr(mla_golden.sweeper, "sweep", sweep)
    for args, ray in ((["--ray-address", "ray://head:10001"], "ray://head:10001"), (["--ray"], "local"), ([], None)):
        ran = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "reference", *args])
        assert ran.exit_code == 2 and "stopped here" in ran.output, ran.output
        assert asked.pop() == ray
    ran = CliRunner().invoke(app, ["sweep", "--a", "reference", "--b", "reference", "--ray", "ray://head:10001"])
    assert ran.exit_code == 2 and "unexpected extra argument" in ran.output and not asked
