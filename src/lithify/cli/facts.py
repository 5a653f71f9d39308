"""`lithify facts` and `lithify stats`: what the store holds, listed, shown and counted."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from lithify.cli.exits import Exit
from lithify.cli.options import (
    argument,
    err,
    fact_filter,
    filter_options,
    json_flag,
    leave,
    opened_store,
    option,
    store_option,
)

if TYPE_CHECKING:
    from lithify.model import InferenceCall
    from lithify.store import StoredCapture

# The stages and rich are imported inside the commands: importing this module for `lithify
# --help` costs neither.


def _preview(call: InferenceCall) -> str:
    from lithify.model import TextPart, ToolCallPart

    for m in reversed(call.output_messages or call.input_messages):
        for p in m.parts:
            if isinstance(p, TextPart):
                return p.content.replace("\n", " ")[:60]
            if isinstance(p, ToolCallPart):
                return f"→ {p.name}(…)"
    return ""


@click.command("facts")
@argument(
    "fact_id",
    help="Show this one fact (its inference_call_id) in full.",
    required=False,
    default=None,
)
@store_option
@filter_options
@option("--limit", type=int, default=50, help="At most this many facts (0: all).")
@json_flag("Facts as JSON lines (the full facts): a fact file `lithify import` reads.")
@option(
    "--captures",
    is_flag=True,
    help="With an id: every stored capture of that call, the one exports use marked.",
)
def facts_cmd(
    fact_id: str | None,
    store: str | None,
    session: list[str] | None,
    model: list[str] | None,
    source: list[str] | None,
    provider: list[str] | None,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    captures: bool,
) -> None:
    """List stored facts (newest last), or show one in full."""
    import orjson
    from rich.console import Console
    from rich.table import Table

    from lithify.core.factfile import encode_line
    from lithify.ingest.convert import JsonlSink
    from lithify.model import encode

    with opened_store(store, existing=True) as opened:
        if fact_id is not None and captures:
            _show_captures(opened.captures(fact_id), fact_id, opened.url, as_json)
            return
        if fact_id is not None:
            call = opened.get_fact(fact_id)
            if call is None:
                err.print(f"[red]no fact[/] {fact_id} in {opened.url}")
                leave(Exit.NOT_FOUND)
            if as_json:  # a line of a fact file: `lithify import` reads it back exactly
                sys.stdout.buffer.write(encode_line(call))
                sys.stdout.buffer.flush()
            else:
                click.echo(orjson.dumps(orjson.loads(encode(call)), option=orjson.OPT_INDENT_2))
            return
        filters = fact_filter(session, model, source, provider, since, until, limit or None)
        if as_json:
            sink = JsonlSink(sys.stdout.buffer)  # a fact file, as `lithify convert` writes
            for call in opened.iter_facts(filters):
                sink.fact(call)
            sink.flush()
            sys.stdout.buffer.flush()
            return
        t = Table(show_header=True, header_style="bold", title=f"facts in {opened.url}")
        t.add_column("id", no_wrap=True)
        t.add_column("time (UTC)", no_wrap=True)
        t.add_column("model", overflow="fold")
        t.add_column("msgs", justify="right", no_wrap=True)
        t.add_column("tokens", justify="right", no_wrap=True)
        t.add_column("last part", overflow="ellipsis", no_wrap=True)
        shown = 0
        for call in opened.iter_facts(filters):
            shown += 1
            tin = "-" if call.input_tokens is None else str(call.input_tokens)
            tout = "-" if call.output_tokens is None else str(call.output_tokens)
            t.add_row(
                call.inference_call_id[:12],
                (call.started_at or call.observed_at or "")[:16].replace("T", " "),
                call.model or "",
                f"{len(call.input_messages)}→{len(call.output_messages)}",
                f"{tin}/{tout}",
                _preview(call),
            )
        total = opened.count(fact_filter(session, model, source, provider, since, until, None))
    Console().print(t)
    err.print(
        f"{shown} of {total} matching facts" + ("; --limit 0 shows all" if shown < total else "")
    )


def _show_captures(found: list[StoredCapture], fact_id: str, url: str, as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from lithify.core.identity import part_count
    from lithify.model import encode

    if not found:
        err.print(f"[red]no fact[/] {fact_id} in {url}")
        leave(Exit.NOT_FOUND)
    if as_json:
        for c in found:
            click.echo(
                b'{"call_id":%s,"kept":%s,"fact":%s}'
                % (encode(c.call_id), b"true" if c.first else b"false", encode(c.fact))
            )
        return
    t = Table(show_header=True, header_style="bold", title=f"captures of {fact_id}")
    for col in ("kept", "call", "id", "source", "session", "time (UTC)", "parts", "degradations"):
        t.add_column(col, no_wrap=col != "degradations")
    for c in found:
        call = c.fact
        t.add_row(
            "yes" if c.first else "",
            c.call_id[:12],
            call.inference_call_id[:12],
            call.source.name,
            call.session_id or "-",
            (call.started_at or call.observed_at or "")[:19].replace("T", " "),
            str(part_count(call)),
            ", ".join(f"{k} {v}" for k, v in call.degradations.items()),
        )
    Console().print(t)
    err.print(
        "Ranked by the identity rule (docs/store.md): what a capture lacks, then its time. "
        "Captures are one call only when their content agrees; exports use each call's kept one."
    )


@click.command("stats")
@store_option
@filter_options
@json_flag("Print the stats as JSON.")
@option(
    "--flags",
    is_flag=True,
    help="Also count the quality flags an SFT row of each call would carry (reads every "
    "selected call; docs/export.md, Quality flags).",
    envvar="LITHIFY_STATS_FLAGS",
)
def stats_cmd(
    store: str | None,
    session: list[str] | None,
    model: list[str] | None,
    source: list[str] | None,
    provider: list[str] | None,
    since: str | None,
    until: str | None,
    as_json: bool,
    flags: bool,
) -> None:
    """Counts of stored facts by model, provider, source, session and degradation reason, with tokens."""
    import dataclasses
    from collections import Counter

    import orjson
    from rich.console import Console
    from rich.table import Table

    from lithify.model import DEGRADATION_REASONS, to_builtins

    selected = fact_filter(session, model, source, provider, since, until, None)
    flagged: Counter[str] = Counter()
    with opened_store(store, existing=True) as opened:
        st = opened.stats(selected)
        url = opened.url
        if flags:
            from lithify.export.flags import call_flags

            calls = opened.iter_facts(dataclasses.replace(selected, order="session"))
            for _, found in call_flags(calls):
                flagged.update(found)
    counted = {"flags": dict(sorted(flagged.items()))} if flags else {}
    if as_json:
        doc = {"store": url, **to_builtins(st), **counted}
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    out = Console()
    out.print(
        f"[bold]{st.facts}[/] facts, {st.sessions} sessions, {st.feedback} feedback, "
        f"tokens in {st.input_tokens:,} / out {st.output_tokens:,} — {url}"
    )
    if st.dropped_captures or st.id_collisions:
        # Calls captured more than once, and ids that several calls share (docs/store.md).
        out.print(
            f"{st.dropped_captures} other captures of calls kept apart (left out of exports), "
            f"{st.id_collisions} calls sharing an id with another call (id_collision)"
        )
    if st.richer_dropped:
        out.print(
            f"{st.richer_dropped} of those other captures hold message parts the one read lacks "
            "(reasoning, tool results): no export carries them (docs/store.md)"
        )
    for title, groups in (
        ("by model", st.by_model),
        ("by provider", st.by_provider),
        ("by source", st.by_source),
        ("by session (top)", st.by_session),
    ):
        t = Table(title=title, show_header=True, header_style="bold")
        for col in ("value", "facts", "tokens in", "tokens out"):
            t.add_column(col, justify="left" if col == "value" else "right")
        for g in groups:
            t.add_row(
                g.key if g.key is not None else "(none)",
                str(g.facts),
                f"{g.input_tokens:,}",
                f"{g.output_tokens:,}",
            )
        out.print(t)
    if st.degradations:
        t = Table(title="degradations", show_header=True, header_style="bold")
        for col in ("reason", "facts", "count", "meaning"):
            t.add_column(col)
        for d in st.degradations:
            t.add_row(d.reason, str(d.facts), str(d.count), DEGRADATION_REASONS.get(d.reason, ""))
        out.print(t)
    if flags:
        from lithify.export.flags import DEFAULT_DROP, FLAGS

        t = Table(title="quality flags (calls)", show_header=True, header_style="bold")
        for col in ("flag", "calls", "export", "meaning"):
            t.add_column(col)
        for name, n in sorted(flagged.items()):
            what = "dropped" if name in DEFAULT_DROP else "kept"
            t.add_row(name, str(n), what, FLAGS[name])
        out.print(t if flagged else "no call carries a quality flag")
