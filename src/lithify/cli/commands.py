"""The `lithify` command group: every command registered by name, in the order `lithify --help`
lists them, its module imported when the command is run or its help shown, not before; each
module imports the stages it uses inside its functions (docs/development.md, Start-up)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo

from lithify import __version__
from lithify.cli.values import plain_value, plain_values

# name: (module, attribute), in the order `lithify --help` lists them (typer lists a group such as
# `token` after the commands).
COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("lithify.cli.convert", "convert_cmd"),
    "import": ("lithify.cli.convert", "import_cmd"),
    "facts": ("lithify.cli.facts", "facts_cmd"),
    "stats": ("lithify.cli.facts", "stats_cmd"),
    "demo": ("lithify.cli.demo", "demo_cmd"),
    "serve": ("lithify.cli.serve", "serve_cmd"),
    "export": ("lithify.cli.export", "export_cmd"),
    "proxy": ("lithify.cli.proxy", "proxy_cmd"),
    "ui": ("lithify.cli.ui", "ui_cmd"),
    "token": ("lithify.cli.serve", "token_app"),
}


class _Commands(MutableMapping[str, Any]):
    """The group's commands, each made from its module when first looked up: naming them (for
    suggestions, say) imports nothing."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            module, attribute = COMMANDS[name]  # KeyError: no such command
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
    its text and path values read without pydantic (values.py)."""
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
    return command


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


app = typer.Typer(
    name="lithify",
    cls=_LazyGroup,
    help="Turn LLM agent telemetry and provider traffic into canonical facts and training data.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
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
            help="Show the version.",
        ),
    ] = False,
) -> None:
    """lithify: capture model calls, keep them as canonical facts, export training rows."""
