"""Facts for derivation tests: real ones from the corpus and the shipped examples, and small
constructed ones; and the replay check every segmentation must pass."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import msgspec

from lithify.derive import Segment
from lithify.derive.canonical import canonical_messages
from lithify.ingest.files import read_file, read_pair
from lithify.model import (
    Feedback,
    InferenceCall,
    Message,
    Part,
    Source,
    TextPart,
    ToolCallPart,
    ToolCallResponsePart,
)
from tests.conftest import CORPUS

EXAMPLES = Path(str(files("lithify") / "examples"))


def facts_of(path: Path) -> list[InferenceCall]:
    out = []
    for located in read_file(path):
        if isinstance(located.result, InferenceCall):
            out.append(located.result)
    return out


def corpus_pair(request: str, response: str | None = None) -> InferenceCall:
    result = read_pair(CORPUS / request, CORPUS / response if response else None).result
    assert isinstance(result, InferenceCall), result
    return result


def corpus_file(name: str) -> InferenceCall:
    [fact] = facts_of(CORPUS / name)
    return fact


def with_(fact: InferenceCall, **changes: Any) -> InferenceCall:
    return msgspec.structs.replace(fact, **changes)


def at(second: int) -> str:
    return f"2025-06-01T10:00:{second:02d}.000000000Z"


def system(text: str) -> Message:
    return Message("system", [TextPart(text)])


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


def assistant(*parts: Part, finish: str | None = "stop") -> Message:
    return Message("assistant", list(parts), finish)


def tool_call(id_: str, name: str = "lookup", **arguments: Any) -> ToolCallPart:
    return ToolCallPart(id_, name, arguments)


def tool(id_: str, result: Any) -> Message:
    return Message("tool", [ToolCallResponsePart(id_, result)])


def replayed(message: Message) -> Message:
    """An output message as the next call's input carries it."""
    return msgspec.structs.replace(message, finish_reason=None)


def call(
    id_: str,
    inp: list[Message],
    out: list[Message],
    *,
    session: str | None = "s",
    second: int = 0,
    **fields: Any,
) -> InferenceCall:
    return InferenceCall(
        inference_call_id=id_,
        session_id=session,
        source=Source("test"),
        input_messages=inp,
        output_messages=out,
        started_at=at(second),
        **fields,
    )


def feedback(
    fid: str, kind: str, target: str, name: str, value: Any, *, second: int = 0
) -> Feedback:
    return Feedback(
        feedback_id=fid,
        target_kind=kind,  # type: ignore[arg-type]
        target_id=target,
        name=name,
        value=value,
        source="test",
        observed_at=at(second),
    )


def assert_replays(segments: list[Segment]) -> None:
    """Each turn's input is, in canonical form, the segment's history so far (new messages and
    chosen outputs of the earlier turns) followed by the turn's new messages."""
    for seg in segments:
        history: list[Message] = []
        for turn in seg.turns:
            got = canonical_messages(history + turn.new_messages)
            assert got == canonical_messages(turn.call.input_messages), (seg.segment_id, turn)
            outs = turn.call.output_messages
            assert sorted([turn.chosen, *turn.alternatives]) == list(range(max(1, len(outs))))
            history = history + turn.new_messages + outs[turn.chosen : turn.chosen + 1]


def shape(segments: list[Segment]) -> list[tuple[int, str | None, list[str]]]:
    """(index, split reason, call ids) per segment: what a test asserts about a segmentation."""
    return [
        (s.index, s.split_reason, [t.call.inference_call_id for t in s.turns]) for s in segments
    ]
