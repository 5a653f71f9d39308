"""`lithify ui` as a command: it serves until stopped, refuses to listen beyond loopback without
a store token, and `lithify demo` ends with the command that opens it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from lithify.store import open_store
from tests.http_client import request
from tests.ui.conftest import sample_facts

LITHIFY = str(Path(sys.executable).with_name("lithify"))


def test_lithify_ui_serves_until_stopped(sqlite_store_url: str) -> None:
    with open_store(sqlite_store_url) as store:
        store.insert_facts(sample_facts())
    proc = subprocess.Popen(
        [LITHIFY, "ui", "--store", sqlite_store_url, "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        m = re.match(r"lithify ui on http://127\.0\.0\.1:(\d+)/ \(store ", line)
        assert m, line
        reply = request(int(m.group(1)), "GET", "/api/overview")
        assert reply.status == 200 and reply.json()["calls"] == 7
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_beyond_loopback_without_a_token_it_does_not_start(sqlite_store_url: str) -> None:
    open_store(sqlite_store_url).close()  # a store that is there, without a token
    done = subprocess.run(
        [LITHIFY, "ui", "--store", sqlite_store_url, "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "lithify token create" in done.stderr


def test_demo_prints_the_command_that_opens_the_viewer(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'demo.db'}"
    done = subprocess.run(
        [LITHIFY, "demo", "-o", str(tmp_path / "out"), "--store", url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    assert f"lithify ui --store {url} --open" in done.stderr
