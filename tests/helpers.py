"""Assertions and helpers shared by the tests."""

from __future__ import annotations

import random
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


def in_pieces(text: str, rng: random.Random, most: int) -> list[str]:
    """``text`` in pieces of 1 to ``most`` characters, cut at random, as a stream's deltas are
    (none for the empty string)."""
    out, at = [], 0
    while at < len(text):
        n = rng.randint(1, most)
        out.append(text[at : at + n])
        at += n
    return out
