"""The `lithify` command group: every command registered by name (registry.py's ``COMMANDS``), in
the order `lithify --help` lists them, its module imported when the command is run or its help
shown, not before; each module imports the stages it uses inside its functions
(docs/development.md, Start-up)."""

from __future__ import annotations

import importlib

import click

from lithify import __version__
from lithify.cli.options import Group
from lithify.cli.registry import COMMANDS, HELP, VERSION_HELP


class _LazyGroup(Group):
    """The top-level group: a command's module is imported when it is looked up, and the list
    of commands is the registry's written-out summaries, so listing them imports none."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, attribute, _ = entry
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            import difflib

            close = difflib.get_close_matches(args[0], list(COMMANDS)) if args else []
            if close:
                e.message += f" Did you mean {close[0]!r}?"
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry[2]) for name, entry in COMMANDS.items()])


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"lithify {__version__}")
        ctx.exit()


@click.group(
    "lithify",
    cls=_LazyGroup,
    help=HELP,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "auto_envvar_prefix": "LITHIFY",
        "show_default": True,
    },
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    # Not LITHIFY_VERSION: a deployment may well set that, and every command would exit.
    allow_from_autoenv=False,
    help=VERSION_HELP,
)
def app() -> None:
    """lithify: capture model calls, keep them as canonical facts, export training rows."""
