"""Each distinct blob once (docs/store.md, Blobs): long base64 cut out of fact bodies, spliced
back byte for byte, on both backends."""

from __future__ import annotations

import base64
import hashlib
import pickle
import random
import threading
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lithify.core import codec
from lithify.model import BlobPart, InferenceCall, Message, Source, TextPart
from lithify.store import FactFilter, open_store
from lithify.store.migrations import LATEST, MIGRATIONS
from tests.store.helpers import make_fact, raw_execute

_decoder = codec.Decoder(InferenceCall)


def _image(seed: int, size: int = 3000) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(size - 8)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _blob_part(data: bytes) -> BlobPart:
    return BlobPart("image", "image/png", len(data), hashlib.sha256(data).hexdigest(), _b64(data))


def media_fact(key: str, images: list[bytes], **fields: Any) -> InferenceCall:
    """A fact whose input holds these images as canonical parts and, in ``raw``, in two
    sources' spellings (a data URL and a bare base64 string), as translators record them."""
    parts: list[Any] = [TextPart(f"turn {key}")]
    parts += [_blob_part(d) for d in images]
    raw = {
        "request": {
            "messages": [
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{_b64(d)}"}}
                for d in images
            ],
            "anthropic": [{"source": {"type": "base64", "data": _b64(d)}} for d in images],
        },
        "key": key,
    }
    return make_fact(key, input_messages=[Message("user", parts)], raw=raw, **fields)


def _rows(url: str, table: str) -> int:
    return int(raw_execute(url, f"SELECT COUNT(*) FROM {table}")[0][0])


def _blob_bytes(url: str) -> int:
    fn = "octet_length" if url.startswith("postgres") else "length"
    return int(raw_execute(url, f"SELECT COALESCE(SUM({fn}(data)), 0) FROM blobs")[0][0])


def _stored_bodies(url: str) -> list[bytes]:
    if url.startswith("postgres"):
        return [bytes(r[0]) for r in raw_execute(url, "SELECT body FROM facts")]
    from lithify.store.sqlite import unpack_body

    rows = raw_execute(url, "SELECT body FROM fact_bodies")
    return [bytes(unpack_body(bytes(r[0])) or b"") for r in rows]


def _encoded(facts: Any) -> list[bytes]:
    return sorted(codec.encode(f) for f in facts)


# -- the codec's byte cut, without a database ------------------------------------------------


def test_split_cuts_bare_and_data_url_base64_and_joins_it_back() -> None:
    images = [_image(1), _image(2)]
    body = codec.encode(media_fact("a", images))
    stored, blobs = codec.split_blobs(body)
    assert sorted(blobs) == sorted(hashlib.sha256(d).digest() for d in images)
    assert sorted(blobs.values()) == sorted(images)
    # three spellings of each image (part, data URL, bare) refer to one blob
    assert len(codec.spliced(memoryview(stored))[1]) == 6
    assert len(stored) < 1500 < len(body) / 10
    assert codec.join_blobs(stored, lambda shas: {s: blobs[s] for s in shas}) == body
    assert codec.blob_refs(stored) == list(
        dict.fromkeys(r for _, r, _ in codec.spliced(memoryview(stored))[1])
    )


def test_a_body_without_long_base64_is_left_as_it_is() -> None:
    fact = make_fact("text", raw={"prompt": "hello world " * 500, "short": _b64(b"x" * 600)})
    body = codec.encode(fact)
    assert codec.split_blobs(body) == (body, {})
    assert codec.join_blobs(body, lambda shas: pytest.fail("nothing to fetch")) == body


@pytest.mark.parametrize(
    "spelling",
    [
        base64.encodebytes(_image(3)).decode(),  # MIME lines
        _b64(_image(4, 3001)).rstrip("="),  # padding dropped
        _b64(_image(5))[:99] + "-" + _b64(_image(5))[100:],  # two alphabets at once
        _b64(_image(6))[:-4] + "AAB=",  # non-zero pad bits: decodes, re-encodes otherwise
        " " + _b64(_image(7)),
    ],
)
def test_a_spelling_base64_cannot_give_back_is_kept_whole(spelling: str) -> None:
    body = codec.encode(make_fact("odd", raw={"data": spelling, "url": "data:;base64," + spelling}))
    stored, blobs = codec.split_blobs(body)
    assert blobs == {} and stored == body


_B64_TEXT = st.builds(
    lambda data, url, mime, safe: (
        (f"data:{mime};base64," if url else "")
        + (base64.urlsafe_b64encode(data).decode() if safe else _b64(data))
    ),
    st.binary(max_size=3000),
    st.booleans(),
    st.sampled_from(["image/png", "audio/wav", "", "image/svg+xml;charset=utf-8"]),
    st.booleans(),
)
_ODD_TEXT = _B64_TEXT.map(lambda s: s.replace("A", "A\n", 1))
_LEAF = st.one_of(st.text(max_size=40), _B64_TEXT, _ODD_TEXT, st.integers(), st.binary(max_size=64))
_RAW = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(raw=_RAW, min_len=st.sampled_from([1, 4, 16, 300, codec.BLOB_MIN]))
def test_split_then_join_gives_the_codec_bytes_back(raw: Any, min_len: int) -> None:
    body = codec.encode(InferenceCall(inference_call_id="k", source=Source("t"), raw=raw))
    stored, blobs = codec.split_blobs(body, min_len)
    assert codec.join_blobs(stored, lambda shas: {s: blobs[s] for s in shas}) == body
    assert all(hashlib.sha256(d).digest() == s for s, d in blobs.items())


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from([b"\xda", b"\xdb", b"\xda\x00\x14", b"\xdb\x00\x00\x00\x18"]),
            st.binary(max_size=60).map(lambda b: base64.b64encode(b)),
            st.just(b"data:x;base64,"),
        ),
        max_size=30,
    )
)
def test_the_cut_is_exact_on_any_bytes(chunks: list[bytes]) -> None:
    """Headers met anywhere, even where no msgpack string is, still splice back exactly."""
    body = b"\x01" + b"".join(chunks)
    stored, blobs = codec.split_blobs(body, 4)
    assert codec.join_blobs(stored, lambda shas: {s: blobs[s] for s in shas}) == body


def test_url_safe_base64_is_a_blob_too_and_keeps_its_alphabet() -> None:
    """pydantic writes bytes to JSON in the URL-safe alphabet (SDKs built on it may send it):
    the same image in both spellings is one blob, and each spelling comes back as it was."""
    image = _image(9, 30_000) + b"\xfb\xff" * 600  # bytes that spell `+/` and so `-_`
    safe = base64.urlsafe_b64encode(image).decode()
    assert "-" in safe and "_" in safe
    body = codec.encode(make_fact("safe", raw={"inlineData": {"data": safe}, "std": _b64(image)}))
    stored, blobs = codec.split_blobs(body)
    assert blobs == {hashlib.sha256(image).digest(): image}
    assert sorted(a for _, _, a in codec.spliced(memoryview(stored))[1]) == [0, 1]
    assert codec.join_blobs(stored, lambda shas: blobs) == body


def test_a_missing_blob_is_a_corrupt_fact() -> None:
    stored, _ = codec.split_blobs(codec.encode(media_fact("m", [_image(8)])))
    with pytest.raises(codec.CorruptFact, match="missing"):
        codec.join_blobs(stored, lambda shas: {})


# -- the store ---------------------------------------------------------------------------------


def test_facts_with_media_read_back_byte_for_byte_and_each_blob_is_kept_once(
    store_url: str,
) -> None:
    images = [_image(i) for i in range(5)]
    # a session that re-sends its history: call k holds images 0..k
    facts = [media_fact(f"t{k}", images[: k + 1], session_id="s") for k in range(5)]
    with open_store(store_url) as store:
        assert store.insert_facts(facts).inserted == 5
        assert _encoded(store.iter_facts()) == _encoded(facts)
        assert _encoded(store.iter_facts(FactFilter(order="session"))) == _encoded(facts)
        for f in facts:
            got = store.get_fact(f.inference_call_id)
            assert got is not None and codec.encode(got) == codec.encode(f)
        assert store.insert_facts(facts).duplicates == 5  # a redelivery, compared whole
    assert _rows(store_url, "blobs") == 5
    assert _blob_bytes(store_url) == sum(len(d) for d in images)
    # 15 images' base64 three times each would be ~180 KB; the bodies keep references
    assert sum(len(b) for b in _stored_bodies(store_url)) < 8_000


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raws=st.lists(_RAW, min_size=1, max_size=4), min_len=st.sampled_from([8, 64, codec.BLOB_MIN])
)
def test_random_facts_round_trip_through_the_store(
    new_store_url: Any, raws: list[Any], min_len: int
) -> None:
    facts = [make_fact(f"r{i}", raw=raw) for i, raw in enumerate(raws)]
    with open_store(new_store_url()) as store:
        store.blob_min = min_len
        store.insert_facts(facts)
        assert _encoded(store.iter_facts()) == _encoded(facts)
        assert store.insert_facts(facts).duplicates == len(facts)


def test_a_fact_without_media_is_stored_as_before(store_url: str) -> None:
    fact = make_fact("plain", raw={"prompt": "a long prompt " * 400, "id": "x" * 40})
    with open_store(store_url) as store:
        store.insert_facts([fact])
    assert _stored_bodies(store_url) == [codec.encode(fact)]
    assert _rows(store_url, "blobs") == 0


def test_prepared_rows_carry_their_blobs_one_by_one_from_a_worker(store_url: str) -> None:
    """The receiver builds rows in worker processes and moves them one at a time (its own
    ``Prepared``): the blobs ride in each row."""
    from lithify.store import Prepared

    images = [_image(10), _image(11)]
    facts = [media_fact("p1", images[:1]), media_fact("p2", images)]
    with open_store(store_url) as store:
        preparer = pickle.loads(pickle.dumps(store.preparer()))
        with ProcessPoolExecutor(1) as pool:
            built = [pool.submit(preparer, [f]).result() for f in facts]
        rows = Prepared([b.facts[0] for b in built], [])
        [(result, _)] = store.insert_prepared([rows])
        assert result.inserted == 2
        assert _encoded(store.iter_facts()) == _encoded(facts)
    assert _rows(store_url, "blobs") == 2


def test_captures_with_media_are_compared_and_kept_whole(store_url: str) -> None:
    """Two captures that share a response id and differ (two calls, one collision): the
    second is kept in fact_variants, its media as blobs too; both read back exact."""
    img = _image(20)
    a = media_fact("cap", [img], model_call_id="resp-1", session_id="s")
    b = media_fact("cap2", [img, _image(21)], model_call_id="resp-1", session_id="s")
    with open_store(store_url) as store:
        store.insert_facts([a])
        first = store.insert_facts([b])
        assert (first.inserted, first.collisions) == (1, 1)
        assert store.insert_facts([b]).duplicates == 1  # the variant again, compared whole
        assert _rows(store_url, "fact_variants") == 1
        caps = store.captures(a.inference_call_id)
        assert _encoded(c.fact for c in caps) == _encoded([a, b])
    assert _rows(store_url, "blobs") == 2
    fn = "octet_length" if store_url.startswith("postgres") else "length"
    # the variant refers to its blobs too: three spellings of two 4 KB base64 images are not in it
    assert raw_execute(store_url, f"SELECT {fn}(body) FROM fact_variants")[0][0] < 3000


def test_concurrent_writers_store_a_shared_blob_once(new_store_url: Any) -> None:
    url = new_store_url()
    shared = _image(30, 200_000)
    with open_store(url):
        pass  # migrated once, before the race
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        try:
            with open_store(url) as store:
                start.wait()
                for i in range(5):
                    store.insert_facts([media_fact(f"w{n}-{i}", [shared, _image(100 * n + i)])])
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _rows(url, "blobs") == 1 + 20
    assert _blob_bytes(url) == len(shared) + 20 * 3000
    with open_store(url) as store:
        assert store.count() == 20
        assert all(f.input_messages[0].parts[1].content == _b64(shared) for f in store.iter_facts())


def test_a_version_5_store_opens_migrated_and_its_media_facts_stay_exact(store_url: str) -> None:
    img = _image(40)
    old_facts = [media_fact("old", [img], session_id="s")]
    with open_store(store_url, migrations=MIGRATIONS[:5]) as old:
        assert old.schema_version() == 5
        old.blob_min = 1 << 62  # as version 5 wrote bodies: whole
        old.insert_facts(old_facts)
    bodies = _stored_bodies(store_url)
    assert bodies == [codec.encode(old_facts[0])]  # whole, as version 5 wrote it
    new = media_fact("new", [img, _image(41)], session_id="s")
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST == 12
        assert _encoded(store.iter_facts()) == _encoded(old_facts)
        # a redelivery of the whole-stored fact is still a duplicate, not another capture
        assert store.insert_facts(old_facts).duplicates == 1
        assert store.insert_facts([new]).inserted == 1
        assert _encoded(store.iter_facts()) == _encoded([*old_facts, new])
    assert _stored_bodies(store_url)[0] == bodies[0]  # written before: left as it was
    assert _rows(store_url, "blobs") == 2
