"""The capture rule: which of several captures of one call counts (docs/store.md).

Captures of one call share an ``inference_call_id`` (a span and the log event of the same span)
or a ``model_call_id`` (an instrumentation and the proxy saw one response). They are ranked by
what they lack (``lack``: the richest first), then time, ``inference_call_id`` and the digest of
the lossless bytes, and taken in that order: a capture is kept unless a kept capture ranked
before it has its ``inference_call_id`` or its ``model_call_id``; a dropped capture claims
nothing. Fact files (derive.sessions) and stores apply this one rule, so both keep the same
captures whatever the order they came in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec

from lithify.model import InferenceCall

Identity = tuple[str, str | None]  # (inference_call_id, model_call_id)

_content = msgspec.json.Encoder()
_PARTS = 2**20 - 1
_SIZE = 2**40 - 1


def part_count(fact: InferenceCall) -> int:
    """The canonical parts of a fact's messages, input and output."""
    return sum(len(m.parts) for m in fact.input_messages) + sum(
        len(m.parts) for m in fact.output_messages
    )


def lack(fact: InferenceCall) -> int:
    """What a capture lacks, as one integer that ranks a call's captures (the least first): a
    session (without one the call leaves its trajectory), then message parts (a capture that
    lost a reasoning step or a tool result has fewer), then content, as the bytes of its
    messages and tools in JSON (an instrumentation may cut text short)."""
    parts = part_count(fact)
    content = (fact.input_messages, fact.output_messages, fact.tools)
    try:
        size = len(_content.encode(content))
    except (UnicodeEncodeError, TypeError, ValueError):  # lone surrogates, 2⁶⁴ and beyond
        size = len(repr(content))
    return (
        ((fact.session_id is None) << 60)
        | ((_PARTS - min(parts, _PARTS)) << 40)
        | (_SIZE - min(size, _SIZE))
    )


def capture_digest(body: bytes) -> bytes:
    """Tells captures apart and breaks ties between them: 128 bits of BLAKE2b over the fact's
    lossless bytes (``codec.encode``), so a rank can live in a database column."""
    return hashlib.blake2b(body, digest_size=16).digest()


def keep_first(
    ranked: Iterable[Identity],
    claimed_ids: set[str] | None = None,
    claimed_model_ids: set[str] | None = None,
) -> list[bool]:
    """Whether each capture, given in rank order, is kept; ``claimed_*``: the identities held by
    kept captures ranked before the first one given (a store resolving part of a call)."""
    ids = set() if claimed_ids is None else claimed_ids
    model_ids = set() if claimed_model_ids is None else claimed_model_ids
    out: list[bool] = []
    for inference_call_id, model_call_id in ranked:
        if inference_call_id in ids or (model_call_id is not None and model_call_id in model_ids):
            out.append(False)
            continue
        ids.add(inference_call_id)
        if model_call_id is not None:
            model_ids.add(model_call_id)
        out.append(True)
    return out


def aliases(kept: Iterable[Identity], dropped: Iterable[Identity]) -> dict[str, str]:
    """Other names of kept calls, for feedback that names a dropped capture's id: a dropped
    capture's ``inference_call_id`` that no kept capture has stands for the kept capture that
    has its ``model_call_id``. An id that would stand for two calls stands for none (a join
    that is ambiguous is dropped, not guessed).

    ``kept`` needs only the kept captures sharing an identity with those ``dropped``.
    """
    dropped = list(dropped)
    if not dropped:
        return {}
    kept_ids: set[str] = set()
    by_model_id: dict[str, str] = {}
    for inference_call_id, model_call_id in kept:
        kept_ids.add(inference_call_id)
        if model_call_id is not None:
            by_model_id[model_call_id] = inference_call_id
    found: dict[str, set[str]] = {}
    for inference_call_id, model_call_id in dropped:
        if inference_call_id in kept_ids or model_call_id not in by_model_id:
            continue
        found.setdefault(inference_call_id, set()).add(by_model_id[model_call_id])
    return {alias: next(iter(to)) for alias, to in found.items() if len(to) == 1}
