"""Assertions shared by the tests."""

from __future__ import annotations

from typing import Any

import msgspec

from lithify.model import InferenceCall, Skip
from lithify.schemas import validator


def assert_valid_messages(fact: InferenceCall) -> None:
    """Every message of a fact validates against the canonical inference-message schema."""
    v = validator("inference-message")
    for m in [*fact.input_messages, *fact.output_messages]:
        doc = msgspec.to_builtins(m)
        errors = [e.message for e in v.iter_errors(doc)]
        assert not errors, (doc, errors)


def result_line(result: InferenceCall | Skip) -> Any:
    """How a golden file spells one translator result."""
    if isinstance(result, Skip):
        return {"skip": result.reason, "detail": result.detail}
    return msgspec.to_builtins(result)
