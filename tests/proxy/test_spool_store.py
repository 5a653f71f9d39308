"""A spool belongs to one store: without --spool each store has its own, and a spool refuses to
be drained into a store other than the one it was first used with (real `lithify proxy`
processes, SQLite and PostgreSQL stores)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import orjson
import pytest

from lithify.cli.exits import Exit
from lithify.ingest.recorder import Recorder, RecorderConfig, RecorderProcess, encode_exchange
from lithify.ingest.spool import (
    SpoolError,
    SpoolOfAnotherStore,
    SpoolReader,
    SpoolWriter,
    claim,
    default_spool,
    spool_owner,
    store_key,
)
from tests.fakes import FakeProvider, answer
from tests.proxy.conftest import through, upstreams_of
from tests.proxy.helpers import LITHIFY, start_proxy, stored_facts, wait_facts
from tests.proxy.test_spool import CHAT_RESP, exchange
from tests.store.conftest import SCRIPT, start_postgres
from tests.test_provider_sdks import _openai


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user data folder, for this test and the proxies it starts."""
    monkeypatch.setenv("LITHIFY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LITHIFY_STORE", raising=False)
    return tmp_path / "home"


def test_a_store_is_named_the_same_however_its_url_is_spelled(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.db").symlink_to(tmp_path / "facts.db")
    same_file = {"facts.db", "sqlite:facts.db", f"sqlite://{tmp_path}/facts.db", "link.db"}
    assert {store_key(u) for u in same_file} == {f"sqlite://{tmp_path}/facts.db"}
    assert store_key(None) == f"sqlite://{home}/lithify.db"
    monkeypatch.setenv("LITHIFY_STORE", "facts.db")
    assert store_key(None) == f"sqlite://{tmp_path}/facts.db"

    pg = "postgresql://team@db.example:5432/facts?options=-csearch_path%3Dcapture"
    spellings = [
        pg,
        pg.replace("team@", "team:s3cret@"),
        pg.replace("postgresql:", "postgres:").replace("db.example", "DB.example"),
        pg + "&password=s3cret&connect_timeout=3&sslmode=require",
    ]
    assert {store_key(u) for u in spellings} == {pg}
    others = [pg.replace("/facts", "/other"), pg.replace("capture", "other"), pg.split("?")[0]]
    assert len({store_key(u) for u in [pg, *others]}) == 4


def test_each_store_has_its_own_default_spool(tmp_path: Path, home: Path) -> None:
    assert default_spool(None) == home / "lithify.db.proxy-spool"
    assert default_spool(f"sqlite://{tmp_path}/a.db") == tmp_path / "a.db.proxy-spool"
    a = "postgresql://u:one@h/db"
    assert default_spool(a) == default_spool("postgresql://u:two@h/db?connect_timeout=1")
    assert default_spool(a).parent == home and default_spool(a).name.startswith("proxy-spool-")
    assert len({default_spool(a), default_spool("postgresql://u@h/db2"), default_spool(None)}) == 3


def test_a_spool_records_its_store_and_refuses_another(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    a, b = store_key(f"{tmp_path}/a.db"), store_key("postgresql://u:pw@h/b")
    with SpoolWriter(spool, 1 << 20, store=a) as w:
        w.put(encode_exchange(exchange(response=orjson.dumps(CHAT_RESP))))
    assert spool_owner(spool) == a
    with SpoolWriter(spool, 1 << 20, store=a):  # its own store: fine, again and again
        pass
    with pytest.raises(SpoolOfAnotherStore) as e:
        SpoolWriter(spool, 1 << 20, store=b).open()
    message = str(e.value)
    assert f"belongs to the store {a}, not to {b}" in message
    assert f"--spool {spool} --store {a}" in message and "pw" not in message
    SpoolWriter(spool, 1 << 20, store=a).open().close()  # the refusal released the lock
    with pytest.raises(SpoolOfAnotherStore):
        SpoolReader(spool, store=b)
    assert len(SpoolReader(spool, store=a).read()) == 1  # nothing was consumed


def test_the_recorder_never_drains_another_stores_spool(tmp_path: Path) -> None:
    spool, a, b = tmp_path / "spool", f"sqlite://{tmp_path}/a.db", f"sqlite://{tmp_path}/b.db"
    with SpoolWriter(spool, 1 << 20, store=store_key(a)) as w:
        w.put(encode_exchange(exchange(response=orjson.dumps(CHAT_RESP))))
    with pytest.raises(SpoolOfAnotherStore):
        Recorder(RecorderConfig(spool=str(spool), store=b))
    assert not Path(f"{tmp_path}/b.db").exists()
    rec = Recorder(RecorderConfig(spool=str(spool), store=a))
    rec.drain()
    assert rec.status.facts_stored == 1 and [f.model_call_id for f in stored_facts(a)] == [
        CHAT_RESP["id"]
    ]


def test_before_the_recorder_reports_its_backlog_is_what_the_spool_holds(tmp_path: Path) -> None:
    """A health check waiting for an idle recorder (backlog 0) must not pass on the status the
    proxy holds before the recorder's first report (it once read 0, and a test that restarted
    a proxy over a full spool passed its wait before anything was recorded)."""
    spool, url = tmp_path / "spool", f"sqlite://{tmp_path}/a.db"
    config = RecorderConfig(spool=str(spool), store=url)
    assert RecorderProcess(config, {}).status["backlog_bytes"] == 0  # no spool yet
    with SpoolWriter(spool, 1 << 20, store=store_key(url)) as w:
        w.put(encode_exchange(exchange(response=orjson.dumps(CHAT_RESP))))
    held = SpoolReader(spool).backlog()[0]
    assert held > 0 and RecorderProcess(config, {}).status["backlog_bytes"] == held
    Recorder(config).drain()  # recorded and committed: nothing is held any more
    assert RecorderProcess(config, {}).status["backlog_bytes"] == 0


def test_a_spool_that_records_no_store_is_claimed_by_one_claim_only(tmp_path: Path) -> None:
    # A spool written before spools recorded their store (or by a writer not given one).
    spool = tmp_path / "spool"
    with SpoolWriter(spool, 1 << 20):
        pass
    assert spool_owner(spool) is None
    stores = [store_key(f"{tmp_path}/{i}.db") for i in range(8)]
    barrier = threading.Barrier(len(stores))
    won: list[str] = []

    def race(key: str) -> None:
        barrier.wait()
        try:
            claim(spool, key)
            won.append(key)
        except SpoolError:
            pass

    threads = [threading.Thread(target=race, args=(k,)) for k in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and spool_owner(spool) == won[0]
    assert sorted(p.name for p in spool.iterdir() if p.name.startswith("store")) == ["store"]


def _call(fake: FakeProvider, url: str, tag: str) -> str:
    fake.id_prefix = f"{tag}-"
    fake.script(answer(f"Answer {tag}."))
    reply = _openai(through(fake, url)).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": f"Question {tag}?"}]
    )
    return reply.id


def test_a_proxy_for_another_store_neither_drains_nor_takes_a_stores_spool(
    fake: FakeProvider, own_postgres: tuple[Path, str], tmp_path: Path, home: Path
) -> None:
    folder, pg = own_postgres
    sqlite = f"sqlite://{tmp_path / 'b.db'}"
    # The team's PostgreSQL is down: a proxy for it keeps its exchanges in its spool.
    subprocess.run(["bash", str(SCRIPT), "stop", "--dir", str(folder)], check=True)
    a = start_proxy(tmp_path, upstreams_of(fake), store=pg, store_spool=True, log_name="a.log")
    try:
        for_a = [_call(fake, a.url, f"a{i}") for i in range(3)]
        a.wait_health("spooled", lambda h: h["spool"]["synced"] == 3)
    finally:
        assert a.stop() == 0
    assert a.spool == default_spool(pg) and a.spool.parent == home
    assert spool_owner(a.spool) == store_key(pg)
    backlog = SpoolReader(a.spool).backlog()[0]
    assert backlog > 0

    # Then a proxy for a SQLite store, without --spool, on the same machine and account: it
    # uses its own spool, and records its own calls only (it used to drain the other's).
    b = start_proxy(tmp_path, upstreams_of(fake), store=sqlite, store_spool=True, log_name="b.log")
    try:
        for_b = [_call(fake, b.url, f"b{i}") for i in range(2)]
        assert sorted(f.model_call_id for f in wait_facts(sqlite, 2)) == sorted(for_b)
    finally:
        assert b.stop() == 0
    assert b.spool == tmp_path / "b.db.proxy-spool" and spool_owner(b.spool) == store_key(sqlite)
    assert len(stored_facts(sqlite)) == 2

    # Pointed at the other store's spool, it refuses to start, and says how to record it.
    refused = subprocess.run(
        [str(LITHIFY), "proxy", "--upstream", f"openai={fake.url}", "--listen", "127.0.0.1:0",
         "--store", sqlite, "--spool", str(a.spool)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == Exit.USAGE, refused.stderr
    said = " ".join(refused.stderr.split())
    assert f"belongs to the store {store_key(pg)}, not to {store_key(sqlite)}" in said
    assert f"lithify proxy --spool {a.spool} --store {store_key(pg)}" in said
    assert len(stored_facts(sqlite)) == 2
    assert SpoolReader(a.spool).backlog()[0] == backlog

    # The PostgreSQL store is back: a proxy for it finds its spool and records it there.
    assert start_postgres(folder) == pg
    again = start_proxy(tmp_path, upstreams_of(fake), store=pg, store_spool=True, log_name="c.log")
    try:
        assert sorted(f.model_call_id for f in wait_facts(pg, 3)) == sorted(for_a)
        again.wait_health("an idle recorder", lambda h: h["recorder"]["backlog_bytes"] == 0)
    finally:
        assert again.stop() == 0
    assert again.spool == a.spool
    assert len(stored_facts(pg)) == 3 and len(stored_facts(sqlite)) == 2


def test_the_spool_every_proxy_shared_before_is_pointed_out(
    fake: FakeProvider, tmp_path: Path, home: Path
) -> None:
    shared = home / "proxy-spool"
    with SpoolWriter(shared, 1 << 20) as w:  # as an earlier lithify left it: no store noted
        w.put(encode_exchange(exchange(response=orjson.dumps(CHAT_RESP))))
    store = f"sqlite://{tmp_path / 'facts.db'}"
    p = start_proxy(tmp_path, upstreams_of(fake), store=store, store_spool=True)
    try:
        _call(fake, p.url, "new")
        wait_facts(store, 1)
    finally:
        assert p.stop() == 0
    log = " ".join(p.log.read_text().split())
    assert f"{shared} holds exchanges an earlier lithify proxy spooled but did not record" in log
    assert f"lithify proxy --spool {shared} --store URL" in log
    assert len(stored_facts(store)) == 1 and spool_owner(shared) is None
    assert os.listdir(shared)  # left as it was
