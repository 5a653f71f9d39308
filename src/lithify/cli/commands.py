"""The `lithify` command group: every command registered by name (registry.py's ``COMMANDS``), in
the order `lithify --help` lists them, its module imported when the command is run or its help
shown, not before; each module imports the stages it uses inside its functions
(docs/development.md, Start-up)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

from lithify import __version__
from lithify.cli.registry import COMMANDS, HELP, VERSION_HELP
from lithify.cli.values import plain_value, plain_values


def summary(help_text: str | None) -> str:
    """The first paragraph of a command's help, on one line: what a command list shows."""
    return " ".join(inspect.cleandoc(help_text or "").split("\n\n")[0].split())


class _Commands(MutableMapping[str, Any]):
    """The group's commands, each made from its module when first looked up: naming them (for
    suggestions, say) imports nothing."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            module, attribute, _ = COMMANDS[name]  # KeyError: no such command
            self._made[name] = _command(name, getattr(importlib.import_module(module), attribute))
        return self._made[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("lithify's commands are fixed")

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._made if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS.keys() | self._made.keys())


def _command(name: str, target: Any) -> Any:
    """The click command typer would have made of ``target`` registered eagerly as ``name``,
    its text and path values read without pydantic (values.py), its help plain (``_plain``)."""
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
        command.name = name
    else:
        command = typer.main.get_command_from_info(
            CommandInfo(name=name, callback=target, cls=_Command),
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
        )
    plain_values(command)
    _plain(command)
    return command


def _plain(command: Any) -> None:
    """Help and errors in click's plain text, not typer's rich panels: rich and what it imports
    cost more than the rest of `lithify --help`. A group's own commands are listed with their
    whole summary, as the top level lists them, where click would cut each at the width."""
    command.rich_markup_mode = None
    for param in command.params:
        # A repeatable value reads as its item (`--model <str>`), not `<list[str]>`.
        many = get_origin(getattr(getattr(param, "type_descriptor", None), "annotation", None))
        if many is list and param.metavar is None and param.param_type_name == "option":
            (item,) = get_args(param.type_descriptor.annotation)
            param.metavar = f"<{'path' if item is Path else 'str'}>"
    for sub in getattr(command, "commands", {}).values():
        sub.short_help = sub.short_help or summary(sub.help)
        _plain(sub)


class _Command(TyperCommand):
    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # made on first use: plain_values never saw it
        plain_value(option)
        return option


class _LazyGroup(TyperGroup):
    def __init__(self, *, commands: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands()
        for name, command in (commands or {}).items():
            self.commands[name] = command

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        plain_value(option)
        return option

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # From the written-out summaries: listing the commands imports none of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[2]) for name, entry in COMMANDS.items()])


app = typer.Typer(
    name="lithify",
    cls=_LazyGroup,
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "LITHIFY"},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lithify {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            # Not LITHIFY_VERSION: a deployment may well set that, and every command would exit.
            allow_from_autoenv=False,
            help=VERSION_HELP,
        ),
    ] = False,
) -> None:
    """lithify: capture model calls, keep them as canonical facts, export training rows."""
