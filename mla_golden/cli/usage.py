"""How the commands' help reads: usage lines in the conventions of git and pytest (``show [OPTIONS] GOLDEN``,
``diff [OPTIONS] [PATH]...``) and arguments without typer's type labels (``<list[Path]>``).

Options name their values with a short metavar each (``--jobs N``, ``--backend SPEC``), set where they are
declared; the details go in their help text.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand


class _PlainArgument(TyperArgument):
    """An argument listed by its metavar alone (typer adds its type, ``GOLDEN <path>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class Command(TyperCommand):
    """A command whose arguments read as git's: upper-case names, ``[NAME]`` when optional, ``...`` when repeated."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.__class__ = _PlainArgument  # the same object, without the type label
                param.metavar = param.metavar or (param.name or "").upper()

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument):
                name = param.metavar or (param.name or "").upper()
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces
