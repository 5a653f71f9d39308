"""Store URLs, the default location and the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from lithify.store import (
    InvalidStoreURL,
    StoreUnavailable,
    default_store_path,
    display_url,
    open_store,
    sqlite_path,
)
from tests.store.helpers import make_fact


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///abs/path.db", "/abs/path.db"),
        ("sqlite:////abs/path.db", "//abs/path.db"),
        ("sqlite:relative.db", "relative.db"),
        ("sqlite:dir/relative.db", "dir/relative.db"),
        ("SQLite:///abs/with%20space.db", "/abs/with space.db"),
        ("/plain/file.db", "/plain/file.db"),
        ("facts.db", "facts.db"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    assert sqlite_path(url) == Path(path)


def test_home_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sqlite_path("sqlite:~/x.db") == tmp_path / "x.db"
    assert sqlite_path("~/y.db") == tmp_path / "y.db"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://host/x.db",
        "sqlite::memory:",
        "sqlite:",
        "sqlite:///x.db?mode=ro",
        "mysql://h/db",
        " ",
    ],
)
def test_urls_lithify_cannot_read(url: str) -> None:
    with pytest.raises(InvalidStoreURL):
        open_store(url)


def test_relative_sqlite_url_is_relative_to_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:sub/facts.db") as store:
        store.insert_facts([make_fact("x")])
    assert (tmp_path / "sub" / "facts.db").is_file()


def test_default_location(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LITHIFY_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_path() == tmp_path / ".local/share/lithify/lithify.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")
    assert default_store_path() == tmp_path / ".local/share/lithify/lithify.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg/lithify/lithify.db"
    monkeypatch.setenv("LITHIFY_HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home/lithify.db"


def test_open_store_none_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LITHIFY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LITHIFY_STORE", raising=False)
    with open_store(None) as store:
        store.insert_facts([make_fact("default")])
    assert (tmp_path / "home" / "lithify.db").is_file()
    monkeypatch.setenv("LITHIFY_STORE", f"sqlite://{tmp_path / 'env.db'}")
    with open_store() as store:
        assert store.count() == 0
    assert (tmp_path / "env.db").is_file()


def test_postgres_scheme_alias(pg_store_url: str) -> None:
    alias = pg_store_url.replace("postgresql://", "postgres://", 1)
    with open_store(alias) as store:
        assert store.insert_facts([make_fact("x")]).inserted == 1
    with open_store(pg_store_url) as store:
        assert store.count() == 1


def test_unreachable_postgres_is_unavailable_with_the_password_masked() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://me:s3cret@127.0.0.1:{port}/db"
    with pytest.raises(StoreUnavailable) as info:
        open_store(url)
    assert "s3cret" not in str(info.value) and "me:***@127.0.0.1" in str(info.value)


def test_display_url() -> None:
    assert display_url("postgresql://u:pw@h:5/db?x=1") == "postgresql://u:***@h:5/db?x=1"
    assert display_url("postgresql://h/db") == "postgresql://h/db"
