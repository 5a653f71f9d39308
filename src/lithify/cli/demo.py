"""`lithify demo`: the main job on the example telemetry shipped in the package: `lithify
import` of it, then `lithify export` of its facts, through the same stages."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from lithify.cli.exits import Exit
from lithify.cli.options import err, json_flag, json_text, leave, option, store_option

if TYPE_CHECKING:
    from lithify.export import ExportSummary

# The stages are imported inside the functions: importing this module for `lithify --help` costs
# none of them.


def example_files() -> list[Path]:
    """The example telemetry shipped with the package (recorded from real instrumentations)."""
    from importlib.resources import files

    root = files("lithify") / "examples"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith((".json", ".pb")))


@click.command("demo")
@option(
    "--output",
    "-o",
    "out_dir",
    type=click.Path(path_type=Path),
    default=Path("lithify-demo"),
    help="Folder for the demo's output.",
)
@store_option
@json_flag("Print the summary as JSON.")
def demo_cmd(out_dir: Path, store: str | None, as_json: bool) -> None:
    """The main job on the shipped example telemetry: import it into the store, derive the sessions, and export SFT and NeMo Gym rows into a folder."""
    from lithify.store import StoreError

    try:
        result = run_demo(example_files(), out_dir, store)
    except StoreError as e:
        err.print(f"[red]store error:[/] {e}")
        leave(Exit.STORE)
    if as_json:
        click.echo(json_text(result))
        return
    print_demo(result)


@dataclass(kw_only=True)  # msgspec encodes it as it would a Struct: fields in this order
class DemoResult:
    """What `lithify demo` did: the import of the examples (as `lithify import` counts it),
    then one export per row kind. Fields in the order ``--json`` prints them."""

    store: str
    examples: list[str]
    facts: int  # facts the examples converted to
    stored: int
    duplicates: int
    variants: int
    collisions: int
    feedback_stored: int
    feedback_duplicates: int
    exports: dict[str, ExportSummary]


def run_demo(examples: list[Path], out_dir: Path, store_url: str | None) -> DemoResult:
    """Import the example telemetry into the store, then export SFT rows and NeMo Gym rows of
    those facts (selected by their trace ids) into ``out_dir``.

    A call captured as a span and as a log event is one call: the capture rule keeps the span
    (it starts first), the capture that carries the session, whatever the import order.
    """
    from lithify.export import ExportOptions, export, from_store
    from lithify.ingest.convert import run
    from lithify.ingest.importer import StoreSink
    from lithify.model import Feedback, InferenceCall
    from lithify.store import FactFilter, open_store

    examples = sorted(examples, key=lambda p: (".logs." in p.name, p.name))

    class _Traces:
        """The store sink, noting the trace ids of the facts that pass."""

        def __init__(self, inner: StoreSink) -> None:
            self.inner = inner
            self.traces: set[str] = set()

        def fact(self, call: InferenceCall) -> None:
            if call.trace_id:
                self.traces.add(call.trace_id)
            self.inner.fact(call)

        def feedback(self, item: Feedback) -> None:
            self.inner.feedback(item)

        def flush(self) -> None:
            self.inner.flush()

    with open_store(store_url) as store:
        sink = _Traces(StoreSink(store))
        converted = run(examples, sink)
        filters = FactFilter(trace_id=sorted(sink.traces))
        exports = {
            name: export(from_store(store, filters), out_dir / name, options)
            for name, options in (
                ("sft", ExportOptions(kind="sft")),
                ("nemo-gym", ExportOptions(kind="nemo-gym", profile="nemo-gym")),
            )
        }
        url = store.url
    return DemoResult(
        store=url,
        examples=[str(p) for p in examples],
        facts=converted.facts,
        **sink.inner.counts(),  # the counts `lithify import --json` prints: fields of their own
        exports=exports,
    )


def print_demo(result: DemoResult) -> None:
    from rich.markup import escape

    from lithify.cli.export import summary_table

    err.print(
        f"Imported {len(result.examples)} example files recorded from real instrumentations: "
        f"{result.facts} facts, [green]{result.stored}[/] new calls in {result.store}, "
        f"{result.variants} other captures of them kept as variants, "
        f"{result.duplicates} already there."
    )
    for summary in result.exports.values():
        err.print(summary_table(summary))
    sft = result.exports["sft"].files["train"]
    gym = result.exports["nemo-gym"].files["train"]
    err.print(f"SFT rows: [bold]{sft}[/]; NeMo Gym rows: [bold]{gym}[/]. Look at one with:")
    err.print(f"  head -n 1 {sft} | python3 -m json.tool")
    err.print("Next: `lithify export --help` for profiles (trl, openai, axolotl, nemo-gym).")
    command = escape(f"lithify ui --store {shlex.quote(result.store)} --open")
    err.print(f"Read and curate them in a browser: [bold]{command}[/]")
