"""The commands `lithify --help` lists, and that page without click (docs/development.md,
Start-up).

``COMMANDS`` registers every command by name; cli/commands.py makes the click group from it and
from the texts here. The entry point answers a lone ``--help`` or ``-h`` with ``help_page``: the
page that group prints, written as click's ``HelpFormatter`` writes it, since importing click
and making the group were half of what `lithify --help` cost. So this module imports nothing at
its top, and only textwrap to write the page; tests/test_startup.py checks the page against the
group's own at many widths.
"""

from __future__ import annotations

# The group's description and its options' help (the help option's is click's own text).
HELP = "Turn LLM agent telemetry and provider traffic into canonical facts and training data."
VERSION_HELP = "Show the version."
HELP_OPTION_HELP = "Show this message and exit."

# name: (module, attribute, summary), in the order `lithify --help` lists them. The summary is
# the first paragraph of the command's help, written out so that `lithify --help` imports no
# command module; tests/test_startup.py checks each against the command's own.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "convert": (
        "lithify.cli.convert",
        "convert_cmd",
        "Convert telemetry and provider payloads into canonical facts, one JSON object per line.",
    ),
    "import": (
        "lithify.cli.convert",
        "import_cmd",
        "Import whatever `lithify convert` reads (and feedback documents), or what it writes "
        "(fact files, plain or .gz), into the fact store.",
    ),
    "facts": (
        "lithify.cli.facts",
        "facts_cmd",
        "List stored facts (newest last), or show one in full.",
    ),
    "stats": (
        "lithify.cli.facts",
        "stats_cmd",
        "Counts of stored facts by model, provider, source, session and degradation reason, "
        "with tokens.",
    ),
    "demo": (
        "lithify.cli.demo",
        "demo_cmd",
        "The main job on the shipped example telemetry: import it into the store, derive the "
        "sessions, and export SFT and NeMo Gym rows into a folder.",
    ),
    "serve": (
        "lithify.cli.serve",
        "serve_cmd",
        "Receive OTLP traces and logs over HTTP (protobuf or JSON, gzip) and gRPC; store their "
        "facts.",
    ),
    "export": (
        "lithify.cli.export",
        "export_cmd",
        "Export training rows: SFT conversations, NeMo Gym rows, preference pairs, RL rows.",
    ),
    "proxy": (
        "lithify.cli.proxy",
        "proxy_cmd",
        "Forward model calls to the providers unchanged and record each one as a fact.",
    ),
    "ui": (
        "lithify.cli.ui",
        "ui_cmd",
        "Read sessions and curate them before training: a web viewer over the store, with a "
        "JSON twin of every page.",
    ),
    "token": (
        "lithify.cli.serve",
        "token_app",
        "Ingest tokens for `lithify serve` (Authorization: Bearer <token>).",
    ),
}


def help_page(prog: str, width: int) -> str:
    """`PROG --help`, ending in a newline, as the group prints it when click's help formatter is
    ``width`` wide (the terminal's columns, at most 80, less 2, and at least 50)."""
    args = "[OPTIONS] COMMAND [ARGS]..."
    prefix = f"Usage: {prog.lstrip()} "  # click's command path is left-stripped
    if width >= len(prefix) + 20:
        usage = _wrap(args, width, prefix, " " * len(prefix))
    else:  # click moves the arguments under a prefix that leaves them too little room
        usage = f"{prefix}\n{_wrap(args, width, ' ' * 11, ' ' * 11)}"
    options = [("--version", VERSION_HELP), ("-h, --help", HELP_OPTION_HELP)]
    commands = [(name, entry[2]) for name, entry in COMMANDS.items()]
    page = (
        f"{usage}\n\n{_wrap(HELP, width, '  ', '  ', paragraphs=True)}\n"
        f"\nOptions:\n{_definitions(options, width)}"
        f"\nCommands:\n{_definitions(commands, width)}"
    )
    return page.rstrip("\n") + "\n"


def _definitions(rows: list[tuple[str, str]], width: int) -> str:
    """click's ``write_dl`` two spaces in: each name, then its text wrapped in a column two
    spaces past the longest name (at most 30), the text on the next line if the name is longer."""
    column = min(max(len(name) for name, _ in rows), 30) + 2
    out = []
    for name, text in rows:
        out.append(f"  {name}")
        if not text:
            out.append("\n")
            continue
        out.append(
            " " * (column - len(name)) if len(name) <= column - 2 else "\n" + " " * (column + 2)
        )
        lines = _wrap(text, max(width - column - 2, 10), paragraphs=True).splitlines() or [""]
        out.append(f"{lines[0]}\n")
        out.extend(f"{' ' * (column + 2)}{line}\n" for line in lines[1:])
    return "".join(out)


def _wrap(text: str, width: int, first: str = "", rest: str = "", paragraphs: bool = False) -> str:
    """click's ``wrap_text``. With ``paragraphs``, paragraphs (split at empty lines) are wrapped
    each on its own, indented as its first line is; one whose first line is ``\\b`` is kept as
    written."""
    import textwrap

    class Wrapper(textwrap.TextWrapper):
        def _handle_long_word(
            self, chunks: list[str], line: list[str], used: int, width: int
        ) -> None:
            # click's: a word too long for a line is cut at the line's end, even after others.
            room = max(width - used, 1)
            line.append(chunks[-1][:room])
            chunks[-1] = chunks[-1][room:]

    def fill(body: str, first: str, rest: str) -> str:
        return Wrapper(width, first, rest, replace_whitespace=False).fill(body)

    text = text.expandtabs()
    if not paragraphs:
        return fill(text, first, rest)
    found: list[tuple[str, list[str]]] = []  # (indent, lines) of each paragraph
    for line in text.splitlines():
        if not line:
            found.append(("", []))
        elif not found or not found[-1][1]:
            found.append((" " * (len(line) - len(line.lstrip())), [line.lstrip()]))
        else:
            found[-1][1].append(line)
    out = []
    for indent, lines in found:
        if not lines:
            continue
        if lines[0].strip() == "\b":
            out.append(
                "\n".join(f"{rest if i else first}{indent}{ln}" for i, ln in enumerate(lines[1:]))
            )
        else:
            out.append(fill(" ".join(lines), first + indent, rest + indent))
    return "\n\n".join(out)
