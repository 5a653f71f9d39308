"""The viewer over real HTTP, without a browser: the JSON twins (on SQLite and PostgreSQL),
curation's rules, CSRF, the Host check, tokens beyond loopback, bounded request heads."""

from __future__ import annotations

import html
import importlib.util
import re
import socket
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import orjson
import pytest

from lithify.ingest.tokens import new_token, token_hash, token_prefix
from lithify.store import FactStore, FeedbackFilter, open_store
from lithify.ui import UiConfig, render
from lithify.ui.server import NoToken, make_server
from tests.export.helpers import cli_export
from tests.http_client import Reply, request
from tests.ui.conftest import DEGRADED_SESSION, HOSTILE_SESSION, Running, running, sample_facts

FORM = {"content-type": "application/x-www-form-urlencoded"}


def _get(v: Running, path: str, **headers: str) -> Reply:
    return request(v.port, "GET", path, headers=headers)


def _csrf(v: Running) -> str:
    return str(_get(v, "/api/csrf").json()["csrf"])


def _label(v: Running, body: dict[str, object], **headers: str) -> Reply:
    h = {"content-type": "application/json", "x-csrf-token": _csrf(v), **headers}
    return request(v.port, "POST", "/api/feedback", orjson.dumps(body), h)


@pytest.fixture(params=["sqlite", "postgres"])
def both(request: pytest.FixtureRequest) -> FactStore:
    url = request.getfixturevalue(
        {"sqlite": "sqlite_store_url", "postgres": "pg_store_url"}[request.param]
    )
    store = open_store(url)
    store.insert_facts(sample_facts())
    request.addfinalizer(store.close)
    return store


def test_json_twins(both: FactStore) -> None:
    with running(both) as v:
        overview = _get(v, "/api/overview").json()
        assert (overview["calls"], overview["sessions"]) == (7, 4)
        assert overview["models"][0] == {
            "key": "gpt-4o", "facts": 4, "input_tokens": 360, "output_tokens": 100
        }  # fmt: skip
        listed = _get(v, "/api/sessions?limit=2").json()
        assert [s["session_id"] for s in listed["sessions"]] == [HOSTILE_SESSION, "chat-3"]
        rest = _get(v, "/api/sessions?" + urlencode({"limit": 2, "after": listed["next"]})).json()
        assert [s["session_id"] for s in rest["sessions"]] == ["chat-2", "agent-1"]
        assert rest["next"] is None
        assert [
            s["session_id"] for s in _get(v, "/api/sessions?provider=anthropic").json()["sessions"]
        ] == ["chat-2"]
        session = _get(v, "/api/sessions/agent-1").json()
        assert [s["split_reason"] for s in session["segments"]] == [None, "input_history_changed"]
        first, second = session["segments"][0]["turns"]
        assert first["new_messages"][1] == {
            "role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}], "finish_reason": None,
        }  # fmt: skip
        assert [m["role"] for m in second["new_messages"]] == ["tool"]  # only what is new
        assert session["segments"][0]["tool_results"] == {"c1": {"temp": 21, "sky": "clear"}}
        call = _get(v, f"/api/calls/{quote(first['call_id'])}").json()
        assert [c["used"] for c in call["captures"]] == [True]
        assert call["fact"]["inference_call_id"] == first["call_id"]
        hostile = _get(v, "/api/sessions/" + quote(HOSTILE_SESSION, safe="")).json()
        assert (
            len(hostile["segments"][0]["turns"][0]["new_messages"][1]["parts"][0]["content"])
            > 2_000_000
        )
        for path in ("/api/sessions/nope", "/api/calls/nope", "/sessions/nope"):
            assert _get(v, path).status == 404
        assert _get(v, "/api/sessions?feedback=maybe").status == 400
        assert _get(v, "/api/sessions?after=garbage").status == 400


def test_curation_stores_feedback_facts_and_never_changes_one(viewer: Running) -> None:
    ok = _label(
        viewer, {"target_kind": "session", "target_id": "chat-3", "name": "label", "value": "good"}
    )
    assert ok.status == 201 and ok.json()["source"] == "ui" and ok.json()["by"]
    again = _label(
        viewer, {"target_kind": "session", "target_id": "chat-3", "name": "label", "value": "good"}
    )
    assert again.status == 200 and again.json()["duplicates"] == 1
    other = _label(
        viewer, {"target_kind": "session", "target_id": "chat-3", "name": "label", "value": "bad"}
    )
    assert other.status == 409 and "never edited" in other.json()["error"]
    missing = _label(
        viewer, {"target_kind": "call", "target_id": "nope", "name": "score", "value": 1}
    )
    assert missing.status == 404
    bad = _label(viewer, {"target_kind": "trace", "target_id": "t", "name": "score", "value": 1})
    assert bad.status == 400
    (fb,) = viewer.store.iter_feedback(FeedbackFilter(source="ui"))
    assert (fb.target_kind, fb.target_id, fb.name, fb.value) == (
        "session",
        "chat-3",
        "label",
        "good",
    )
    assert fb.raw["by"] and fb.observed_at


def test_every_state_changing_request_needs_the_csrf_token(viewer: Running) -> None:
    body = urlencode({"target_kind": "session", "target_id": "chat-3", "action": "good"}).encode()
    assert request(viewer.port, "POST", "/curate", body, FORM).status == 403
    wrong = body + b"&csrf=wrong"
    assert request(viewer.port, "POST", "/curate", wrong, FORM).status == 403
    right = body + f"&csrf={_csrf(viewer)}&next=//elsewhere.example/".encode()
    cross = {**FORM, "origin": "http://elsewhere.example", "sec-fetch-site": "cross-site"}
    assert request(viewer.port, "POST", "/curate", right, cross).status == 403
    done = request(viewer.port, "POST", "/curate", right, FORM)
    assert (done.status, done.headers["location"]) == (303, "/")  # never a redirect elsewhere
    json_body = orjson.dumps(
        {"target_kind": "session", "target_id": "chat-2", "name": "x", "value": 1}
    )
    plain = request(
        viewer.port, "POST", "/api/feedback", json_body, {"content-type": "application/json"}
    )
    assert plain.status == 403
    big = request(viewer.port, "POST", "/curate", b"x" * 70_000, FORM)
    assert big.status == 413
    assert viewer.store.count_feedback() == 1


def test_security_headers_and_the_host_check(viewer: Running) -> None:
    page = _get(viewer, "/sessions")
    assert page.headers["content-security-policy"].startswith(
        "default-src 'none'; script-src 'self'"
    )
    assert page.headers["x-frame-options"] == "DENY"
    assert _get(viewer, "/", host="localhost:1").status == 200
    rebound = _get(viewer, "/api/overview", host="attacker.example")
    assert rebound.status == 421  # a rebound DNS name cannot read a loopback viewer


def test_request_heads_are_bounded_as_serves_are(viewer: Running) -> None:
    with socket.create_connection(("127.0.0.1", viewer.port), timeout=10) as s:
        head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(
            b"X-%d: y\r\n" % i for i in range(150)
        )
        s.sendall(head + b"\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")


def test_beyond_loopback_a_token_is_required(store: FactStore) -> None:
    with pytest.raises(NoToken):
        make_server(store, UiConfig(host="0.0.0.0"))
    token = new_token()
    store.create_token("alice", token_hash(token), token_prefix(token))
    with running(store, UiConfig(host="0.0.0.0")) as v:  # its rules; it listens on loopback
        assert _get(v, "/api/overview").status == 401
        page = _get(v, "/sessions")
        assert (page.status, page.headers["location"]) == (303, "/login")
        assert _get(v, "/api/overview", authorization="Bearer lith_wrong").status == 401
        assert _get(v, "/api/overview", authorization=f"Bearer {token}").status == 200
        csrf = _get(v, "/api/csrf", authorization=f"Bearer {token}").json()["csrf"]
        login = urlencode({"token": token, "csrf": csrf}).encode()
        failed = request(
            v.port, "POST", "/login", urlencode({"token": "x", "csrf": csrf}).encode(), FORM
        )
        assert failed.status == 401
        signed = request(v.port, "POST", "/login", login, FORM)
        assert signed.status == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        jar = cookie.split(";", 1)[0]
        assert _get(v, "/sessions", cookie=jar).status == 200
        body = orjson.dumps(
            {"target_kind": "session", "target_id": "chat-2", "name": "label", "value": "good"}
        )
        json_h = {"content-type": "application/json"}
        # the cookie alone, as a forged request would carry it: refused without the CSRF token
        assert (
            request(v.port, "POST", "/api/feedback", body, {**json_h, "cookie": jar}).status == 403
        )
        # a script holding the token itself needs no CSRF token: no browser sends that header
        made = request(
            v.port, "POST", "/api/feedback", body, {**json_h, "authorization": f"Bearer {token}"}
        )
        assert made.status == 201 and made.json()["by"] == "alice"
        assert store.revoke_token("alice") == 1
        deadline = time.monotonic() + 5
        while _get(v, "/api/overview", authorization=f"Bearer {token}").status == 200:
            assert time.monotonic() < deadline, "a revoked token still works"
            time.sleep(0.2)
        assert _get(v, "/sessions", cookie=jar).status == 303


@pytest.mark.parametrize(
    ("kind", "profile"),
    [("sft", "trl"), ("sft", "openai"), ("nemo-gym", "nemo-gym"), ("sft", "canonical")],
)
def test_rows_are_the_bytes_the_cli_writes(
    sqlite_store_url: str, tmp_path: Path, kind: str, profile: str
) -> None:
    store = open_store(sqlite_store_url)
    store.insert_facts(sample_facts())
    try:
        with running(store) as v:
            q = urlencode({"session": "agent-1", "kind": kind, "profile": profile})
            page = _get(v, "/api/rows?" + q).json()
            html = _get(v, "/rows?" + q)
            missing = _get(v, "/api/rows?" + urlencode({"session": "nope"}))
            wrong = _get(v, "/api/rows?" + urlencode({"session": "agent-1", "kind": "sft",
                                                       "profile": "nemo-gym"}))  # fmt: skip
    finally:
        store.close()
    out = tmp_path / "out"
    summary = cli_export(kind, "--profile", profile, "--session", "agent-1", "--store",
                         sqlite_store_url, "-o", str(out))  # fmt: skip
    written = (out / "train.jsonl").read_bytes()
    assert written  # the session gives rows of this kind
    assert "".join(r["line"] + "\n" for r in page["rows"]).encode() == written
    assert page["schema"] == summary["schema"]
    assert page["command"].startswith(f"lithify export {kind} --profile {profile} --session")
    assert html.status == 200 and b"lithify export" in html.body
    assert missing.status == 404 and wrong.status == 400


def _png(width: int, height: int) -> bytes:
    """A valid RGB PNG, made by hand so the test needs no imaging library."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    rows = b"".join(b"\x00" + bytes([x % 256, y % 256, 128]) * 1 for y in range(height)
                    for x in range(width))  # fmt: skip
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_media_is_linked_not_inlined_and_served_safely(sqlite_store_url: str) -> None:
    from lithify.model import Message
    from lithify.translate._common import Degradations, blob_part
    from tests.export.helpers import assistant, fact, text, user

    deg = Degradations()
    png = _png(1, 1)
    shot = blob_part(png, "image/png", deg)
    page = blob_part(b"<script>window.__pwned = 9</script>", "text/html", deg, "image")
    svg = blob_part(b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>',
                    "image/svg+xml", deg)  # fmt: skip
    assert shot and page and svg
    msg = Message("user", [*user("What is on screen?").parts, shot, page, svg])
    store = open_store(sqlite_store_url)
    store.insert_facts([fact("vision-a", [msg], [assistant(text("A pixel."))], session="vision")])
    try:
        with running(store) as v:
            session = _get(v, "/api/sessions/vision").json()
            parts = session["segments"][0]["turns"][0]["new_messages"][0]["parts"]
            blobs = [p for p in parts if p["type"] == "blob"]
            assert [p["sha256"] for p in blobs] == [shot.sha256, page.sha256, svg.sha256]
            assert all("content" not in p for p in blobs)  # linked, not inlined
            got = [_get(v, p["url"]) for p in blobs]
            html = _get(v, "/sessions/vision")
            found = _get(v, "/api/sessions?q=on+screen").json()  # a search reads past media
            nope = _get(v, f"/media/{'0' * 64}?call=" + blobs[0]["url"].split("call=")[1])
    finally:
        store.close()
    assert got[0].body == png and got[0].headers["content-type"] == "image/png"
    for hostile in got[1:]:  # never shown inline in the viewer's origin
        assert hostile.headers["content-type"] == "application/octet-stream"
        assert hostile.headers["content-disposition"] == "attachment"
    assert got[1].body == b"<script>window.__pwned = 9</script>"
    assert f'<img src="{blobs[0]["url"]}"'.replace("&", "&amp;").encode() in html.body
    assert nope.status == 404
    assert [x["session_id"] for x in found["sessions"]] == ["vision"]


def test_label_and_export_every_session_a_filter_selects(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    import io
    import zipfile

    store = open_store(sqlite_store_url)
    store.insert_facts(sample_facts())
    try:
        with running(store) as v:
            assert _label(v, {"target_kind": "session", "target_id": "chat-3", "name": "label",
                              "value": "bad"}).status == 201  # fmt: skip
            h = {"content-type": "application/json", "x-csrf-token": _csrf(v)}
            body = {"filter": {"model": "gpt-4o"}, "name": "label", "value": "good"}
            done = request(v.port, "POST", "/api/feedback-selection", orjson.dumps(body), h)
            unguarded = request(v.port, "POST", "/api/feedback-selection", orjson.dumps(body),
                                {"content-type": "application/json"})  # fmt: skip
            q = urlencode({"model": "gpt-4o", "kind": "sft", "profile": "trl"})
            page = _get(v, "/api/export?" + q).json()
            html = _get(v, "/export?" + q)
            archive = _get(v, page["download"])
            out = tmp_path / "out"  # the CLI's export, before the labels below change it
            cli_export("sft", "--profile", "trl", "--session", "agent-1", "--session", "chat-3",
                       "--store", sqlite_store_url, "-o", str(out))  # fmt: skip
            form = request(v.port, "POST", "/curate-selection", urlencode({
                "csrf": _csrf(v), "model": "gpt-4o", "action": "exclude"}).encode(), FORM)  # fmt: skip
            labels = {(f.target_id, f.name, f.value) for f in store.iter_feedback(FeedbackFilter())}
    finally:
        store.close()
    assert done.status == 200, done.body
    assert done.json() == {"sessions": 2, "stored": 1, "duplicates": 0, "conflicts": ["chat-3"]}
    assert unguarded.status == 403  # state-changing: the CSRF token is required
    assert form.status == 200 and b"Labelled 2 of 2 sessions" in form.body
    assert {("agent-1", "label", "good"), ("chat-3", "label", "bad"), ("agent-1", "exclude", True),
            ("chat-3", "exclude", True)} <= labels  # fmt: skip
    assert ("chat-3", "label", "good") not in labels  # a contradicting label is never added
    assert sorted(page["sessions"]) == ["agent-1", "chat-3"]
    assert html.status == 200 and b"Download the export" in html.body
    assert archive.headers["content-type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(archive.body)).namelist()
    assert {"train.jsonl", "manifest.json", "README.md"} <= set(names)
    assert page["command"] == (
        "lithify export sft --profile trl --session agent-1 --session chat-3 -o OUT"
    ) or page["command"] == (
        "lithify export sft --profile trl --session chat-3 --session agent-1 -o OUT"
    )
    zipped = zipfile.ZipFile(io.BytesIO(archive.body)).read("train.jsonl")
    assert zipped == (out / "train.jsonl").read_bytes()


def test_activity_and_the_degradation_and_score_filters(both: FactStore) -> None:
    with running(both) as v:
        overview = _get(v, "/api/overview").json()
        assert _label(v, {"target_kind": "session", "target_id": "chat-3", "name": "score",
                          "value": 0.8}).status == 201  # fmt: skip
        call = _get(v, "/api/sessions/agent-1").json()["segments"][0]["turns"][0]["call_id"]
        assert _label(v, {"target_kind": "call", "target_id": call, "name": "score",
                          "value": 0.2}).status == 201  # fmt: skip

        def listed(**q: str) -> list[str]:
            return [
                s["session_id"] for s in _get(v, "/api/sessions?" + urlencode(q)).json()["sessions"]
            ]

        degraded = listed(degradation="opaque_reasoning")
        high, low = listed(score_min="0.5"), listed(score_max="0.5")
        both_bounds, none = listed(score_min="0.1", score_max="0.9"), listed(score_min="0.9")
        bad = [_get(v, "/api/sessions?" + q).status for q in
               ("degradation=nonsense", "score_min=high", "score_max=nan")]  # fmt: skip
        html = _get(v, "/")
    assert overview["activity"] == [
        {"day": "2025-06-01", "calls": 7, "input_tokens": sum(
            g["input_tokens"] for g in overview["models"]), "output_tokens": 175}
    ]  # fmt: skip
    assert b'<svg class="chart"' in html.body and b"/sessions?degradation=" in html.body
    assert degraded == ["chat-2"]
    assert (high, low) == (["chat-3"], ["agent-1"])  # a call's score counts for its session
    assert sorted(both_bounds) == ["agent-1", "chat-3"] and none == []
    assert bad == [400, 400, 400]


def test_degradations_are_marked_on_the_parts_that_show_them(degraded_viewer: Running) -> None:
    session = _get(degraded_viewer, "/api/sessions/" + DEGRADED_SESSION).json()
    chat, otlp = (t for s in session["segments"] for t in s["turns"])
    marks = [
        (p["type"], p.get("degradations"))
        for m in [*chat["new_messages"], chat["output"]]
        for p in m["parts"]
    ]
    assert marks == [
        ("text", ["redacted_provider_key"]),  # the key, replaced in the text
        ("file", ["content_reference"]),
        ("tool_call", ["synthesized_id"]),  # it came without an id
        ("tool_call_response", ["synthesized_id"]),  # its result reuses that id
        ("tool_call_response", ["orphan_tool_response"]),  # the result that answers no call
        ("text", None),
        ("tool_call", ["malformed_arguments"]),  # "not json", carried as {}
    ]
    assert chat["degradations"] == {
        "content_reference": 1, "malformed_arguments": 1, "orphan_tool_response": 1,
        "redacted_provider_key": 2, "synthesized_id": 1,
    }  # fmt: skip
    user = otlp["new_messages"][1]["parts"][0]
    assert user["content"].endswith("\ufffd") and user["degradations"] == ["invalid_text"]
    # the call page marks the same parts of the whole call
    call = _get(degraded_viewer, "/api/calls/" + quote(chat["call_id"], safe="")).json()
    assert [p.get("degradations") for m in call["input_messages"] for p in m["parts"]] == [
        m for _, m in marks[:5]
    ]
    # a call with no located degradation marks nothing, however its parts look
    plain = _get(degraded_viewer, "/api/sessions/agent-1").json()
    assert not any(
        "degradations" in p
        for s in plain["segments"]
        for t in s["turns"]
        for m in [*t["new_messages"], t["output"]]
        for p in m["parts"]
    )
    page = _get(degraded_viewer, "/sessions/" + DEGRADED_SESSION).body.decode()
    assert page.count('<div class="partdeg">') == 7
    assert '<a class="deg" href="/sessions?degradation=orphan_tool_response" title="a tool ' in page


def test_without_trl_the_rows_page_says_so(viewer: Running) -> None:
    assert importlib.util.find_spec("trl") is None  # lithify's own venv: TRL is a consumer's
    for query in ("", "&template=qwen3"):
        rows = _get(viewer, f"/api/rows?session=agent-1&profile=trl{query}").json()
        assert rows["chat_template"] == {
            "templates": [], "template": None, "note": render.NOT_INSTALLED
        }  # fmt: skip
        assert rows["rows"] and all("rendered" not in r for r in rows["rows"])
        page = _get(viewer, f"/rows?session=agent-1&profile=trl{query}")
        assert page.status == 200
        assert "TRL is not installed where this viewer runs" in page.body.decode()
    # only SFT rows are rendered: other kinds say nothing of it
    dpo = _get(viewer, "/api/rows?session=agent-1&kind=dpo").json()
    assert dpo["chat_template"] == {"templates": [], "template": None, "note": None}


def test_every_page_links_its_json_twin(viewer: Running) -> None:
    """The JSON link in every page's header answers that page's data."""
    pages = {
        "/": "calls",
        "/sessions?model=gpt-4o": "sessions",
        "/sessions/agent-1": "segments",
        "/calls/agent-1-a": "captures",
        "/rows?session=agent-1&kind=rl&profile=trl": "rows",
        "/export?model=gpt-4o&kind=dpo": "rows_written",
    }
    for path, key in pages.items():
        page = _get(viewer, path)
        assert page.status == 200, path
        m = re.search(r'<a class="twin" href="([^"]+)"', page.body.decode())
        assert m, path
        twin_path = html.unescape(m.group(1))
        assert twin_path == ("/api/overview" if path == "/" else "/api" + path)
        twin = _get(viewer, twin_path)
        assert twin.status == 200 and twin.headers["content-type"] == "application/json"
        assert key in twin.json(), path
    # a form's answer is no page of data: it links no twin (its script twin is a POST)
    form = request(viewer.port, "POST", "/curate-selection", urlencode({
        "csrf": _csrf(viewer), "model": "gpt-4o", "action": "good"}).encode(), FORM)  # fmt: skip
    assert form.status == 200 and b"Labelled 2 of 2 sessions" in form.body
    assert b'class="twin"' not in form.body


def test_calls_without_a_time_or_without_messages_show(store: FactStore) -> None:
    """A call whose capture has no time (a file without one) has no day on the chart: the
    overview still renders, and counts it. A span that kept only its metadata (capture off) is a
    call without messages: its session shows it with its model and the degradation."""
    from tests.store.helpers import make_fact

    untimed = make_fact("untimed", session_id="no-time")
    bare = make_fact(
        "bare",
        session_id="capture-off",
        started_at="2025-06-02T08:00:00Z",
        model="gpt-5",
        input_tokens=12,
        input_messages=[],
        output_messages=[],
        degradations={"content_not_captured": 1},
    )
    store.insert_facts([untimed, bare])
    with running(store) as v:
        overview = _get(v, "/")
        activity = _get(v, "/api/overview").json()["activity"]
        session = _get(v, "/sessions/capture-off")
        twin = _get(v, "/api/sessions/capture-off").json()
    assert overview.status == 200 and b'<svg class="chart"' in overview.body
    assert {"", "2025-06-01", "2025-06-02"} <= {a["day"] for a in activity}
    assert session.status == 200
    assert b"gpt-5" in session.body and b"content_not_captured" in session.body
    [segment] = twin["segments"]
    assert [t["call_id"] for t in segment["turns"]] == [bare.inference_call_id]
