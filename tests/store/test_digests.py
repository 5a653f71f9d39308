"""Each fact's digest, kept from the moment it is written (version 12): the SHA-256 of its JSON,
as an export's facts.sha256 names it, so that an export need not encode and hash every fact
again. A kept digest is always the one of the fact as read; where there is none (a store written
before version 12, a capture read under its call's id) the reader gets ``None`` and computes it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import pytest
from hypothesis import given

from lithify.core import codec
from lithify.core.factfile import encode_line, fact_sha256
from lithify.export import ExportOptions, export, from_facts, from_store
from lithify.model import InferenceCall, Source
from lithify.store import FactFilter, open_store
from lithify.store.migrations import LATEST
from tests.export.helpers import assistant, captured_twice, fact, text, tool_session, user
from tests.store.helpers import EDGE_VALUES, VALUES, drop_digests, raw_execute

SESSION = FactFilter(order="session")


def _odd() -> InferenceCall:
    # JSON cannot hold a lone surrogate: its digest is of the escaped line a fact file holds.
    return fact("odd\ud800", [user("half \ud83d")], [assistant(text("ok"))], session="s-odd")


def _digested(url: str, filters: FactFilter = SESSION) -> list[tuple[InferenceCall, bytes | None]]:
    with open_store(url) as store:
        return list(store.iter_digested(filters))


@given(VALUES)
def test_a_fact_read_back_has_the_digest_it_was_written_with(raw: object) -> None:
    """What the digest is made of survives the store's codec: any value a fact can hold (NUL,
    lone surrogates, integers past 64 bits, NaN, -0.0) gives the same JSON read back."""
    written = InferenceCall(inference_call_id="k", source=Source("t"), raw=raw)
    read = codec.FactReader().decode(codec.encode(written))
    assert fact_sha256(read) == fact_sha256(written)


def test_every_edge_value_is_read_with_its_kept_digest(store_url: str) -> None:
    facts = [
        InferenceCall(inference_call_id=f"k-{i}", source=Source("t"), raw={key: value})
        for i, (key, value) in enumerate(sorted(EDGE_VALUES.items()))
    ]
    with open_store(store_url) as store:
        store.insert_facts(facts)
    read = _digested(store_url)
    assert len(read) == len(facts)
    assert [sha for _, sha in read] == [fact_sha256(f) for f, _ in read]


@pytest.mark.parametrize("path", ["insert_facts", "insert_prepared"])
def test_a_stored_fact_is_read_with_the_digest_of_its_json(store_url: str, path: str) -> None:
    facts = [*tool_session("s-1"), *tool_session("s-2", answer="Rain."), _odd()]
    with open_store(store_url) as store:
        if path == "insert_facts":
            store.insert_facts(facts)
        else:  # as the receiver writes: rows prepared apart (its worker processes), then stored
            store.insert_prepared([store.preparer()(facts)])
    for filters in (SESSION, FactFilter()):
        read = _digested(store_url, filters)
        assert sorted(f.inference_call_id for f, _ in read) == sorted(
            f.inference_call_id for f in facts
        )
        assert [sha for _, sha in read] == [fact_sha256(f) for f, _ in read]
    odd = next(sha for f, sha in read if f.inference_call_id == "odd\ud800")
    assert odd == hashlib.sha256(encode_line(_odd())[:-1]).digest()


def test_captures_of_one_call_are_read_with_their_own_digest_or_none(store_url: str) -> None:
    """Variants and fills keep the digest of their own fact; a capture read under its call's
    id is not the JSON it was written as, so it comes without one."""
    # One id, two different conversations (a server that reuses its ids): two calls, the
    # second read under a derived id.
    first = tool_session("s-9")[0]
    other = msgspec.structs.replace(
        first, input_messages=[user("Another question?")], output_messages=[assistant(text("No."))]
    )
    captures = [*captured_twice(), first, other]
    with open_store(store_url) as store:
        store.insert_facts(captures)
        read = list(store.iter_digested(SESSION))
        assert [f for f, _ in read] == list(store.iter_facts(SESSION))
    kept = [(f, sha) for f, sha in read if sha is not None]
    assert all(sha == fact_sha256(f) for f, sha in kept)
    assert 0 < len(kept) < len(read)
    renamed = [f for f, sha in read if sha is None]
    assert [f.input_messages for f in renamed] == [other.input_messages]
    assert renamed[0].inference_call_id != other.inference_call_id


def test_a_store_written_before_version_12_exports_the_same_bytes(
    store_url: str, tmp_path: Path
) -> None:
    """Facts stored before digests were kept have none: the export computes theirs, and the
    manifest is the one the same facts give from memory; facts written since have theirs."""
    old = [*tool_session("s-1"), _odd()]
    new = tool_session("s-2", answer="Rain.")
    with open_store(store_url) as store:
        store.insert_facts(old)
    raw_execute(
        store_url, *drop_digests(store_url), f"DELETE FROM schema_version WHERE version >= {LATEST}"
    )
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        assert [sha for _, sha in store.iter_digested(SESSION)] == [None] * len(old)
        store.insert_facts(new)
        read = list(store.iter_digested(SESSION))
        known = {f.inference_call_id for f, sha in read if sha is not None}
        assert known == {f.inference_call_id for f in new}
        export(from_store(store, FactFilter()), tmp_path / "store", ExportOptions("sft"))
    export(from_facts([*new, *old]), tmp_path / "memory", ExportOptions("sft"))
    for name in ("facts.sha256", "train.jsonl"):
        assert (tmp_path / "store" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes()


def test_a_kept_digest_that_no_longer_matches_is_never_trusted_silently(store_url: str) -> None:
    """The digest is the fact's own: a fact whose JSON differs (here, another raw) has another,
    so a redelivery that differs is a variant with a digest of its own."""
    a = tool_session("s-1")[0]
    b = msgspec.structs.replace(a, raw={"other": 1})
    with open_store(store_url) as store:
        store.insert_facts([a])
        assert store.insert_facts([b]).variants == 1
    rows = raw_execute(store_url, "SELECT json_sha256 FROM fact_variants")
    assert [bytes(r[0]) for r in rows] == [fact_sha256(b)] != [fact_sha256(a)]
