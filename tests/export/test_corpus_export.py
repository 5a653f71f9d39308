"""Every row exported from the whole corpus, of every kind and profile, validates — checked here
against the schemas directly, not only by the exporter's own validation."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema_rs
import msgspec
import pytest

from lithify.export import SKIP_REASONS
from lithify.export.profiles import SUPPORTED
from lithify.export.validate import _rust_patterns, native_schema
from lithify.ingest.files import read_file
from lithify.model import Feedback, InferenceCall
from lithify.schemas import schema, validator
from tests.export.helpers import corpus_facts, feedback, read_rows, run_export
from tests.export.test_trainer import assert_trainer_valid

EXAMPLES = Path(str(files("lithify") / "examples"))


def _score(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) / 0xFFFF


@cache
def corpus() -> tuple[list[InferenceCall], list[Feedback]]:
    """The corpus and the shipped examples, with feedback on every call and session, and a
    second answer (another call's output) to every prompt so that preference pairs exist."""
    facts = corpus_facts()
    for p in sorted(EXAMPLES.iterdir()):
        facts.extend(loc.result for loc in read_file(p) if isinstance(loc.result, InferenceCall))
    outputs = [f.output_messages for f in facts if f.output_messages]
    variants = []
    for i, f in enumerate(facts):
        if f.output_messages and f.input_messages:
            other = outputs[(i + 1) % len(outputs)]
            variants.append(
                msgspec.structs.replace(
                    f,
                    inference_call_id=f.inference_call_id + "-alt",
                    model_call_id=None,
                    session_id=None,
                    output_messages=other,
                )
            )
    facts += variants
    fb = [feedback(f.inference_call_id, _score(f.inference_call_id)) for f in facts]
    sessions = sorted({f.session_id for f in facts if f.session_id})
    fb += [feedback(s, _score(s), kind="session") for s in sessions]
    return facts, fb


CASES = [
    (kind, profile, shape)
    for kind, profiles in SUPPORTED.items()
    for profile in profiles
    for shape in (
        ["messages", "prompt-completion"] if kind == "sft" and profile != "openai" else [None]
    )
]

# The params schema refers to inference-message v2 for its media and server-tool parts.
NEMO_GYM = jsonschema_rs.validator_for(
    _rust_patterns(schema("nemo-gym-responses-create-params")),
    registry=jsonschema_rs.Registry(
        [(schema("inference-message")["$id"], schema("inference-message"))]
    ),
)
NATIVE = jsonschema_rs.validator_for(native_schema())
ITEM = jsonschema_rs.validator_for({"$defs": native_schema()["$defs"], "$ref": "#/$defs/InputItem"})


def _canonical_messages(messages: list[dict[str, Any]]) -> None:
    """Trainer messages of the canonical profile: the trainer schemas, exactly."""
    assert_trainer_valid(messages)


def check_row(kind: str, profile: str, row: dict[str, Any]) -> None:
    meta = row["metadata"]
    assert meta["source_call_ids"] and meta["split"] in ("train", "eval")
    if profile == "nemo-gym":
        assert NATIVE.is_valid(row["responses_create_params"]), row
        for item in row["recorded_output"]:
            assert ITEM.is_valid(item), item
        return
    if kind in ("nemo-gym", "rl") and "turns" in row:
        assert NEMO_GYM.is_valid(row["responses_create_params"]), row["responses_create_params"]
        v = validator("inference-message")
        for t in row["turns"]:
            for m in t["messages"] + ([t["output"]] if t["output"] else []):
                assert v.is_valid(m), m
        return
    if profile == "canonical":
        for key in ("messages", "prompt", "completion", "chosen", "rejected"):
            if key in row:
                _canonical_messages(row[key])


@pytest.mark.parametrize(("kind", "profile", "shape"), CASES)
@pytest.mark.parametrize("keep_degraded", [False, True])
def test_every_row_from_the_corpus_validates(
    tmp_path: Path, kind: str, profile: str, shape: str | None, keep_degraded: bool
) -> None:
    facts, fb = corpus()
    summary = run_export(
        facts,
        tmp_path,
        fb,
        kind=kind,
        profile=profile,
        shape=shape,
        eval_fraction=0.3,
        keep_degraded=keep_degraded,
    )
    rows = read_rows(tmp_path / "train.jsonl") + read_rows(tmp_path / "eval.jsonl")
    assert len(rows) == summary.rows["train"] + summary.rows["eval"]
    assert rows, summary.to_json()  # every kind and profile exports something from the corpus
    for row in rows:
        assert row["metadata"]["schema"] == summary.schema
        check_row(kind, profile, row)
    # Whatever was not exported is accounted for by reason.
    assert set(summary.skipped) <= set(SKIP_REASONS)
