"""Generated facts for the distributed tests: sessions with tool loops and branches, calls
without a session, captures of one call across sessions (``captured_twice``), and feedback
that scores calls and sessions, names a dropped capture, or joins nothing; written as fact
files in any order and any split."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import orjson

from lithify.core.factfile import encode_line
from lithify.model import Feedback, InferenceCall
from tests.conftest import CORPUS
from tests.export.helpers import (
    assistant,
    call,
    captured_twice,
    fact,
    feedback,
    replay,
    system,
    text,
    tool,
    tool_session,
    user,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "lithify" / "examples"
ANSWERS = {None: "Windy.", 0.1: "Rainy.", 0.5: "Cloudy.", 0.9: "Sunny."}


def generated(seed: int, sessions: int = 40) -> tuple[list[InferenceCall], list[Feedback]]:
    rng = random.Random(seed)
    facts: list[InferenceCall] = []
    fb: list[Feedback] = []
    for i in range(sessions):
        sid = f"g-{i:04d}"
        score = rng.choice([None, 0.1, 0.5, 0.9])
        a, b = tool_session(sid, answer=ANSWERS[score])  # a pair's completions differ
        facts += [a, b]
        if score is not None:
            fb.append(feedback(b.inference_call_id, score))
        if rng.random() < 0.2:
            fb.append(feedback(sid, round(rng.random(), 3), kind="session"))
        if rng.random() < 0.3:  # a new conversation in the session: a segment of its own
            inputs = [system("Be brief."), user(f"And in Rome? {i % 3}")]
            facts.append(
                fact(f"{sid}-c", inputs, [assistant(text("Warm."))], session=sid, second=3)
            )
    for i in range(sessions // 4):
        inputs = [user(f"Translate {i % 5}")]
        facts.append(fact(f"n-{i:04d}", inputs, [assistant(text(f"T{i}"))], second=i % 7))
    facts += captured_twice()
    fb.append(feedback("proxy-pa", 0.7))  # a dropped capture: joins the call it is one of
    fb.append(feedback("nothing-at-all", 1.0))  # unmatched
    return facts, fb


def write_files(
    folder: Path, facts: list[InferenceCall], fb: list[Feedback], seed: int, files: int
) -> list[Path]:
    """The facts and feedback as ``files`` fact files (some gzipped), lines shuffled."""
    rng = random.Random(seed)
    lines = [encode_line(x) for x in [*facts, *fb]]
    rng.shuffle(lines)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(files):
        chunk = b"".join(lines[k::files])
        path = folder / f"part-{k:03d}.jsonl"
        if rng.random() < 0.3:
            path = path.with_name(path.name + ".gz")
            chunk = gzip.compress(chunk, mtime=0)
        path.write_bytes(chunk)
        paths.append(path)
    return paths


def one_big_session(calls: int) -> list[InferenceCall]:
    """A session of ``calls`` calls: tool loops of two calls, each its own conversation (a
    segment), all in one session, as a long-running agent service logs them."""
    facts = []
    for k in range(calls // 2):
        first = [system("Be brief."), user(f"Weather in city {k}?")]
        out = assistant(call(f"c{k}", city=f"city {k}"), finish="tool_call")
        second = [*first, replay(out), tool(f"c{k}", {"temp": k % 30})]
        facts.append(fact(f"big-{k:06d}-a", first, [out], session="big", second=k % 3600))
        answer = [assistant(text(f"{k % 30} degrees."))]
        facts.append(fact(f"big-{k:06d}-b", second, answer, session="big", second=k % 3600))
    return facts


def otlp_lines() -> list[bytes]:
    """The shipped examples and the corpus's OTLP/JSON requests, one line each: what the
    Collector's file exporter writes."""
    lines = []
    for folder in (EXAMPLES, CORPUS / "otlp"):
        for path in sorted(folder.glob("*.json")):
            lines.append(orjson.dumps(orjson.loads(path.read_bytes())) + b"\n")
    return lines


def jsonl_input(seed: int, sessions: int = 10) -> bytes:
    """A JSON lines input as telemetry files come: OTLP requests, fact and feedback lines,
    blank lines, CRLF ends, corrupt lines, and no newline after the last line."""
    rng = random.Random(seed)
    facts, fb = generated(seed, sessions=sessions)
    lines = otlp_lines() * 2 + [encode_line(x) for x in [*facts, *fb]]
    lines += [b"\n", b"  \t\r\n", b"\r\n", b"{not json\n", b'{"inference_call_id": 1}\n']
    rng.shuffle(lines)
    lines = [ln[:-1] + b"\r\n" if rng.random() < 0.2 else ln for ln in lines]
    return b"".join(lines).rstrip(b"\r\n")
