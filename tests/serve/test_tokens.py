"""Ingest tokens (store, CLI, receiver) and the store additions the receiver writes through."""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

import msgspec
import orjson
import pytest
from click.testing import CliRunner

from lithify.cli import app
from lithify.ingest.tokens import TokenCache, new_token, token_hash, token_prefix
from lithify.store import TokenExists, open_store, prepare
from tests.serve.conftest import BASE
from tests.serve.helpers import PB, genai_spans, get, live_server, post, status_message, traces_pb
from tests.store.helpers import make_fact, raw_execute

# -- the store ---------------------------------------------------------------------------------


def test_tokens_are_stored_hashed_and_listed_without_secrets(store_url: str) -> None:
    token = new_token()
    assert token.startswith("lith_") and len(token) >= 45
    with open_store(store_url) as store:
        info = store.create_token("ci", token_hash(token), token_prefix(token))
        assert (info.name, info.active) == ("ci", True)
        with pytest.raises(TokenExists, match="already named 'ci'"):
            store.create_token("ci", token_hash(new_token()), "lith_x")
        with pytest.raises(ValueError):
            store.create_token("  ", token_hash(new_token()), "lith_x")
        [listed] = store.list_tokens()
        assert (
            listed.prefix == token[:11]
            and token not in orjson.dumps(msgspec.to_builtins(listed)).decode()
        )
        assert store.token_hashes() == [(hashlib.sha256(token.encode()).hexdigest(), "ci", True)]

        assert store.revoke_token("ci") == 1
        assert store.revoke_token("ci") == 0
        assert store.token_hashes()[0][2] is False
        # The name is free again; the revoked token stays listed.
        store.create_token("ci", token_hash(new_token()), "lith_y")
        assert [(t.name, t.active) for t in store.list_tokens()] == [("ci", False), ("ci", True)]
    rows = raw_execute(store_url, "SELECT token_hash, prefix FROM ingest_tokens")
    assert all(token not in str(r) for r in rows)


def test_insert_prepared_is_one_transaction_split_per_batch(store_url: str) -> None:
    """A group commit answers each batch as if it had been inserted alone, in order."""
    with open_store(store_url) as store:
        assert store.insert_facts([make_fact("old")]).inserted == 1
        a = prepare([make_fact("a1"), make_fact("a2"), make_fact("old")])
        b = prepare([make_fact("a2"), make_fact("b1")])  # a2 again: the earlier batch wins
        c = prepare([], [])
        results = store.insert_prepared([a, b, c])
        assert [(f.inserted, f.duplicates) for f, _ in results] == [(2, 1), (1, 1), (0, 0)]
        assert results[0][0].duplicate_ids == [make_fact("old").inference_call_id]
        assert results[1][0].duplicate_ids == [make_fact("a2").inference_call_id]
        assert store.count() == 4
        ingested = raw_execute(store_url, "SELECT DISTINCT ingested_at FROM facts")
        assert len(ingested) == 2 and all(r[0] for r in ingested)  # stamped at commit
        assert store.insert_prepared([]) == []


# -- the CLI -----------------------------------------------------------------------------------


def test_token_commands(sqlite_store_url: str) -> None:
    runner = CliRunner()
    created = runner.invoke(app, ["token", "create", "svc-a", "--store", sqlite_store_url])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip().splitlines()[0]
    assert token.startswith("lith_")
    again = runner.invoke(app, ["token", "create", "svc-a", "--store", sqlite_store_url])
    assert again.exit_code == 1
    listed = runner.invoke(app, ["token", "list", "--json", "--store", sqlite_store_url])
    assert listed.exit_code == 0
    [entry] = orjson.loads(listed.stdout)
    assert entry["name"] == "svc-a" and entry["active"] is True
    assert token not in listed.stdout and token_hash(token) not in listed.stdout
    assert (
        runner.invoke(app, ["token", "revoke", "svc-a", "--store", sqlite_store_url]).exit_code == 0
    )
    assert (
        runner.invoke(app, ["token", "revoke", "svc-a", "--store", sqlite_store_url]).exit_code == 5
    )  # no active token of that name: not found
    listed = runner.invoke(app, ["token", "list", "--json", "--store", sqlite_store_url])
    assert orjson.loads(listed.stdout)[0]["active"] is False


# -- the receiver ------------------------------------------------------------------------------


def test_the_token_cache_compares_every_live_token() -> None:
    cache = TokenCache(require=False)
    a, b = new_token(), new_token()
    cache.load([(token_hash(a), "a", True), (token_hash(b), "b", False)])
    assert cache.required
    assert cache.check(f"Bearer {a}") == "a"
    assert cache.check(f"bearer   {a}") == "a"  # the scheme is case-insensitive
    assert cache.check(f"Bearer {b}") is None  # revoked
    assert cache.check(a) is None and cache.check(f"Basic {a}") is None
    assert cache.check(None) is None and cache.check("Bearer ") is None


def test_ingest_needs_a_live_token_once_one_exists(sqlite_store_url: str) -> None:
    body = traces_pb(genai_spans("auth", 2))
    with (
        open_store(sqlite_store_url) as store,
        live_server(replace(BASE, store=sqlite_store_url), open_store(sqlite_store_url)) as srv,
    ):
        assert post(srv.port, "/v1/traces", traces_pb(genai_spans("open", 1))).status == 200
        token = new_token()
        store.create_token("app", token_hash(token), token_prefix(token))
        time.sleep(0.5)  # the receiver reloads tokens every 0.2 s here
        for headers in ({}, {"Authorization": "Bearer lith_wrong"}, {"Authorization": token}):
            r = post(srv.port, "/v1/traces", body, PB, headers)
            assert r.status == 401, headers
            assert r.headers["www-authenticate"] == 'Bearer realm="lithify"'
            assert "valid ingest token is required" in status_message(r)
        assert post(srv.port, "/v1/feedback", b"{}", "application/json").status == 401
        assert store.count() == 1  # nothing of the refused requests

        ok = post(srv.port, "/v1/traces", body, PB, {"Authorization": f"Bearer {token}"})
        assert ok.status == 200
        assert store.count() == 3
        assert get(srv.port, "/health").json()["auth"] == "token"

        store.revoke_token("app")
        time.sleep(0.5)
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("late", 1)), PB,
                 {"Authorization": f"Bearer {token}"})  # fmt: skip
        assert r.status == 401
        assert store.count() == 3


def test_a_token_created_after_start_works_at_once(sqlite_store_url: str) -> None:
    config = replace(BASE, store=sqlite_store_url, token_refresh=3600)
    with (
        open_store(sqlite_store_url) as store,
        live_server(config, open_store(sqlite_store_url)) as srv,
    ):
        first = new_token()
        store.create_token("first", token_hash(first), token_prefix(first))
        time.sleep(1.1)  # an unknown token triggers a reload, at most once a second
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("fresh", 1)), PB,
                 {"Authorization": f"Bearer {first}"})  # fmt: skip
        assert r.status == 200


def test_require_token_refuses_everything_until_a_token_exists(sqlite_store_url: str) -> None:
    config = replace(BASE, store=sqlite_store_url, require_token=True)
    with (
        open_store(sqlite_store_url) as store,
        live_server(config, open_store(sqlite_store_url)) as srv,
    ):
        r = post(srv.port, "/v1/traces", traces_pb(genai_spans("req", 1)))
        assert r.status == 401
        assert store.count() == 0
        assert get(srv.port, "/health").status == 200  # health needs no token


# -- `lithify serve` flags ---------------------------------------------------------------------


def test_sizes_and_bad_flags() -> None:
    from lithify.cli.serve import parse_size

    assert parse_size("20MiB") == parse_size("20M") == 20 * 1024 * 1024
    assert parse_size("1048576") == 1024 * 1024 and parse_size("512 KiB") == 512 * 1024
    runner = CliRunner()
    bad = runner.invoke(app, ["serve", "--max-body-size", "huge"])
    assert bad.exit_code == 2 and "not a size" in bad.output
    url = runner.invoke(app, ["serve", "--store", "mysql://x/y", "--port", "0"])
    assert url.exit_code == 4 and "unknown store URL scheme" in url.output  # the store code
    proxy = runner.invoke(
        app,
        [
            "proxy",
            "--store",
            "mysql://x/y",
            "-u",
            "openai=http://127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
        ],
    )
    assert proxy.exit_code == 4 and "unknown store URL scheme" in proxy.output
