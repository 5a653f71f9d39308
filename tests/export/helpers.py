"""Facts, segments and feedback for export tests, built from the contract types."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import msgspec
import orjson

from lithify.derive import Segment, Turn
from lithify.export import ExportOptions, ExportSummary, export, from_facts
from lithify.ingest.files import read_file, read_pair
from lithify.model import (
    BlobPart,
    Feedback,
    InferenceCall,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolCallResponsePart,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
    ToolDefinition,
)
from lithify.translate._common import Degradations, blob_part, file_part, url_part
from tests.conftest import CORPUS

# Message builders shared with the derive tests (re-exported for the export tests).
from tests.derive.helpers import assistant as assistant
from tests.derive.helpers import system as system
from tests.derive.helpers import user as user

WEATHER = ToolDefinition(
    "get_weather",
    "Weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def text(content: str) -> TextPart:
    return TextPart(content)


def think(content: str) -> ReasoningPart:
    return ReasoningPart(content)


def call(id_: str, name: str = "get_weather", **arguments: Any) -> ToolCallPart:
    return ToolCallPart(id_, name, arguments)


def tool(id_: str, result: Any) -> Message:
    return Message("tool", [ToolCallResponsePart(id_, result)])


def replay(m: Message) -> Message:
    return Message(m.role, m.parts, None)


def at(second: int) -> str:
    return f"2025-06-01T10:{second // 60:02d}:{second % 60:02d}.000000000Z"


def fact(
    id_: str,
    inputs: list[Message],
    outputs: list[Message],
    *,
    session: str | None = None,
    second: int = 0,
    tools: list[ToolDefinition] | None = None,
    model: str = "m-1",
    degradations: dict[str, int] | None = None,
    trace: str | None = None,
) -> InferenceCall:
    return InferenceCall(
        inference_call_id=id_,
        session_id=session,
        trace_id=trace,
        source=Source("test"),
        model=model,
        input_messages=inputs,
        output_messages=outputs,
        tools=[WEATHER] if tools is None else tools,
        started_at=at(second),
        degradations=degradations or {},
    )


def segment(*calls: InferenceCall, session: str | None = "s-1", seg_id: str = "seg-1") -> Segment:
    """A segment of calls whose inputs replay each other (new messages computed here)."""
    turns = []
    seen = 0
    for c in calls:
        turns.append(Turn(call=c, new_messages=list(c.input_messages[seen:]), chosen=0))
        seen = len(c.input_messages) + 1
    return Segment(segment_id=seg_id, session_id=session, index=0, split_reason=None, turns=turns)


def feedback(target: str, value: Any, *, kind: str = "call", name: str = "score") -> Feedback:
    return Feedback(
        feedback_id=f"fb-{kind}-{target}-{name}",
        target_kind=kind,  # type: ignore[arg-type]
        target_id=target,
        name=name,
        value=value,
        source="test",
    )


def tool_session(session: str = "s-1", *, answer: str = "Sunny.") -> list[InferenceCall]:
    """A two-call agent turn: a tool call, then the answer after the tool result."""
    first_in = [system("Be brief."), user("Weather in Paris?")]
    first_out = assistant(think("Need the tool."), call("c1", city="Paris"), finish="tool_call")
    second_in = [*first_in, replay(first_out), tool("c1", {"temp": 21, "sky": "clear"})]
    second_out = assistant(text(answer))
    return [
        fact(f"{session}-a", first_in, [first_out], session=session, second=1),
        fact(f"{session}-b", second_in, [second_out], session=session, second=2),
    ]


def corpus_facts() -> list[InferenceCall]:
    """Every fact the corpus converts to: single payloads and request/response pairs."""
    out: list[InferenceCall] = []
    for p in sorted(CORPUS.rglob("*")):
        if not p.is_file() or p.name == "SOURCES.md" or p.parent.name == "nemo-gym":
            continue
        for located in read_file(p):
            if isinstance(located.result, InferenceCall):
                out.append(located.result)
    for req in sorted(CORPUS.rglob("*.request.json")):
        for suffix in (".response.json", ".response.sse"):
            resp = req.with_name(req.name.replace(".request.json", suffix))
            if resp.exists():
                result = read_pair(req, resp).result
                if isinstance(result, InferenceCall):
                    out.append(result)
    return out


def run_export(
    facts: list[InferenceCall],
    out: Path,
    fb: list[Feedback] | None = None,
    **options: Any,
) -> ExportSummary:
    return export(from_facts(facts, fb or []), out, ExportOptions(**options))


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _recapture(f: InferenceCall, **changes: Any) -> InferenceCall:
    return msgspec.structs.replace(f, **changes)


def captured_twice() -> list[InferenceCall]:
    """Calls captured more than once, with different content each time, as telemetry does.

    - ``s-log``: spans that carry the session, and the log event of each span (same identity,
      no session, another raw): one later than its span, one at the same time (a tie the
      digest breaks).
    - ``s-proxy``: spans and the proxy's captures of the same responses (same
      ``model_call_id``, another identity); the instrumentation lost the reasoning the proxy
      kept of the first call (its capture wins, though later); the second is the same in both
      (the span wins, being earlier).
    - ``s-three``: one call as a span, its log event and the proxy's capture; and a chain: a
      capture sharing an identity with one call and a response id with another.
    """
    out: list[InferenceCall] = []
    a, b = tool_session("s-log")
    out += [a, b]
    out.append(_recapture(a, session_id=None, started_at=None, observed_at=at(40), raw={"log": 1}))
    out.append(_recapture(b, session_id=None, raw={"log": 2}))

    a, b = tool_session("s-proxy", answer="Cloudy.")
    a = _recapture(a, model_call_id="resp-pa", raw={"span": 1})
    b = _recapture(b, model_call_id="resp-pb", raw={"span": 2})
    span_a = _recapture(
        a,
        output_messages=[
            Message(
                m.role, [p for p in m.parts if not isinstance(p, ReasoningPart)], m.finish_reason
            )
            for m in a.output_messages
        ],
    )
    out += [span_a, b]
    # Later than the span it beats (the rule ranks what a capture lacks before its time), and
    # still before the session's next call.
    later = "2025-06-01T10:00:01.500000000Z"
    out.append(
        _recapture(a, inference_call_id="proxy-pa", started_at=later, source=Source("proxy"))
    )
    out.append(
        _recapture(b, inference_call_id="proxy-pb", started_at=at(9), source=Source("proxy"))
    )

    a, b = tool_session("s-three", answer="Windy.")
    a = _recapture(a, model_call_id="resp-3a")
    out += [a, b]
    out.append(_recapture(a, session_id=None, observed_at=at(50), raw={"log": 3}))
    out.append(_recapture(a, inference_call_id="proxy-3a", started_at=at(3), raw={"proxy": 3}))
    # Same identity as b, the response id of a: the rule keeps at most one capture of each.
    out.append(_recapture(b, model_call_id="resp-3a", raw={"chain": 1}, started_at=at(1)))
    return out


def lost_to_the_session(richer: bool = True) -> list[InferenceCall]:
    """A session's two calls, the first also captured by the proxy, which got no session
    header: the span is read (the rule ranks a session first). With ``richer`` the span
    dropped the reasoning the proxy kept, so the capture dropped holds a part the rows lack;
    else both hold the same parts."""
    a, b = tool_session("s-lost", answer="Hazy.")
    a = _recapture(a, model_call_id="resp-lost")
    span = _recapture(
        a,
        output_messages=[
            Message(
                m.role, [p for p in m.parts if not isinstance(p, ReasoningPart)], m.finish_reason
            )
            for m in a.output_messages
        ],
    )
    proxy = _recapture(
        a if richer else span,
        inference_call_id="proxy-lost",
        session_id=None,
        started_at=at(0),  # earlier than the span: the rule still reads the span
        source=Source("proxy"),
    )
    return [span, proxy, b]


def export_files(folder: Path) -> dict[str, bytes]:
    """Every file of an export, but its manifest and card without where the facts came from
    (a store or fact files: the one thing that differs between the exports compared)."""
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    manifest = orjson.loads(files["manifest.json"])
    del manifest["provenance"], manifest["files"]["README.md"]
    files["manifest.json"] = orjson.dumps(manifest)
    files["README.md"] = files["README.md"].split(b"\n## Provenance\n")[0]
    return files


def cli_export(*args: str) -> dict[str, object]:
    """`lithify export ARGS --json`, which must succeed: its summary."""
    from click.testing import CliRunner

    from lithify.cli import app

    res = CliRunner().invoke(app, ["export", *args, "--json"])
    assert res.exit_code == 0, res.output
    return orjson.loads(res.stdout)  # type: ignore[no-any-return]


# -- processes made to fail (sitecustomize hooks) ----------------------------------------------


def hooked(folder: Path, source: str) -> str:
    """A ``PYTHONPATH`` under which every Python process started runs ``source`` first (as its
    ``sitecustomize``, written into ``folder``)."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(source)
    return os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])


def at_fact(call_id: str, action: str, *, workers_only: bool) -> str:
    """A hook's source that runs ``action`` (one statement) as a process makes the JSON of the
    fact ``call_id``: any process, or only an export's workers (``python -c``)."""
    guard = 'sys.argv[:1] == ["-c"]' if workers_only else "True"
    return f"""
import os, signal, sys
from lithify.core import factfile

if {guard}:
    real = factfile.fact_json

    def fact_json(fact):
        if fact.inference_call_id == {call_id!r}:
            {action}
        return real(fact)

    factfile.fact_json = fact_json
"""


# As the kernel's out-of-memory killer kills.
SIGKILL_SELF = "os.kill(os.getpid(), signal.SIGKILL)"


# -- media and server tools (docs/export.md, Media and server tools) ----------------------------


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG (8-bit RGB, one colour), written by hand: any image library reads it."""
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


RED = png(3, 2, (255, 0, 0))
BLUE = png(2, 3, (0, 0, 255))
SCREEN = png(4, 4, (10, 200, 30))
PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"
COMPUTER = ToolDefinition(
    "computer",
    "Use the computer",
    {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
)
SEARCH_CALL = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "who won the match"},
}


def blob(data: bytes, mime: str | None, modality: str | None = None) -> BlobPart:
    part = blob_part(data, mime, Degradations(), modality)
    assert part is not None
    return part


def media_sessions() -> list[InferenceCall]:
    """One session per kind of media part and a server tool, as translators make them (parts
    from ``translate._common``), with what each records as lost (``content_reference``)."""
    out: list[InferenceCall] = []
    # Two images over two turns; the red one again in another session (one file for both).
    a_in = [
        system("Describe images."),
        Message("user", [text("What is this?"), blob(RED, "image/png")]),
    ]
    a_out = assistant(text("A red rectangle."))
    b_in = [*a_in, replay(a_out), Message("user", [blob(BLUE, None, "image"), text("And this?")])]
    out += [
        fact("vision-a", a_in, [a_out], session="s-vision", second=1, tools=[]),
        fact(
            "vision-b",
            b_in,
            [assistant(text("A blue one."))],
            session="s-vision",
            second=2,
            tools=[],
        ),
        fact("again", a_in, [assistant(text("Red."))], session="s-again", second=3, tools=[]),
    ]
    # Computer use: the tool's result and the screenshot it returned, in one tool message.
    c_in = [user("Open the settings.")]
    c_out = assistant(call("cu1", "computer", action="screenshot"), finish="tool_call")
    d_in = [
        *c_in,
        replay(c_out),
        Message("tool", [ToolCallResponsePart("cu1", "done"), blob(SCREEN, "image/png")]),
    ]
    out += [
        fact("computer-a", c_in, [c_out], session="s-computer", second=4, tools=[COMPUTER]),
        fact(
            "computer-b",
            d_in,
            [assistant(text("Settings are open."))],
            session="s-computer",
            second=5,
            tools=[COMPUTER],
        ),
    ]
    # A provider-run web search, then the answer, in one assistant message.
    search = Message(
        "assistant",
        [
            ServerToolCallPart("ws_1", "web_search", SEARCH_CALL),
            ServerToolCallResponsePart("ws_1", {"type": "web_search_result", "urls": ["u"]}),
            text("Team A won."),
        ],
        "stop",
    )
    out.append(fact("search", [user("Who won?")], [search], session="s-search", second=6))
    # References: an image at a URL, an uploaded file; and a document sent inline.
    deg = Degradations()
    uri = url_part("https://example.com/cat.png", "image/png", deg)
    file = file_part("file-abc123", "image/png", deg)
    out += [
        fact(
            "uri",
            [Message("user", [text("See:"), uri])],
            [assistant(text("A cat."))],
            session="s-uri",
            second=7,
            degradations={"content_reference": 1},
        ),
        fact(
            "file",
            [Message("user", [text("See:"), file])],
            [assistant(text("A file."))],
            session="s-file",
            second=8,
            degradations={"content_reference": 1},
        ),
        fact(
            "pdf",
            [Message("user", [text("Summarize."), blob(PDF, "application/pdf")])],
            [assistant(text("An empty PDF."))],
            session="s-pdf",
            second=9,
        ),
    ]
    return out
