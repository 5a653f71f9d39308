"""A real Ray cluster for the tests: a head node and a second node on this machine, each its
own ``ray start`` with its own CPU count, stopped (every process they started) at the end."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.scale.s3 import FAKE_AWS

RAY = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ray"
# One authentication token for every cluster this test process starts: Ray keeps the first token
# a process used, so a later cluster with another one could not be joined from it.
_TOKEN = secrets.token_hex(16)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # Its own session: stopping it stops what it started, and nothing else.
    with open(log, "wb") as fh:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--disable-usage-stats", *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def session_pids(sid: int) -> set[int]:
    """The processes of session ``sid`` (what one ``ray start`` started, its workers too)."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.add(int(stat.parent.name))
    return pids


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the node's session, then SIGKILL to whatever of it is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_pids(proc.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and session_pids(proc.pid):
            time.sleep(0.1)
            proc.poll()
    proc.wait(timeout=10)


def _wait_nodes(address: str, n: int, env: dict[str, str], timeout: float = 90) -> None:
    code = f"import ray; ray.init(address={address!r}); print(sum(x['Alive'] for x in ray.nodes()))"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(
            [str(RAY.with_name("python")), "-c", code], capture_output=True, env=env, text=True
        )
        if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == [str(n)]:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Ray cluster at {address} did not come up with {n} nodes")


@contextmanager
def ray_cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """The address of a two-node cluster (one CPU each), and the environment a driver joins
    it with (its own authentication token); torn down on leaving. Its workers read s3:// with
    the fake S3's credentials (tests/scale/s3.py)."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": _TOKEN}
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **FAKE_AWS, **auth}
    env.pop("RAY_ADDRESS", None)
    with tempfile.TemporaryDirectory(prefix="lray-", dir="/tmp") as tmp:
        logs = Path(tmp)
        common = ["--node-ip-address", "127.0.0.1", "--object-store-memory", str(300 << 20)]
        head = _start(
            [
                "--head",
                "--port",
                str(port),
                "--num-cpus",
                "1",
                "--include-dashboard",
                "false",
                "--temp-dir",
                str(logs / "ray"),
                *common,
            ],
            logs / "head.log",
            env,
        )
        nodes = [head]
        try:
            _wait_nodes(address, 1, env)
            nodes.append(
                _start(["--address", address, "--num-cpus", "1", *common], logs / "w.log", env)
            )
            _wait_nodes(address, 2, env)
            yield address, auth
        finally:
            for proc in reversed(nodes):
                _stop(proc)
            left = [pid for proc in nodes for pid in session_pids(proc.pid)]
            assert not left, f"Ray processes outlived their cluster: {left}"


@pytest.fixture(scope="module")
def ray_joined() -> Iterator[tuple[str, dict[str, str]]]:
    """A cluster this test process has joined (``ray_session``) for one test module, stopped
    after it: Ray's threads outliving their tests raced the AST parser of later ones (CPython
    3.11's "AST constructor recursion depth mismatch"). Tests that use it run in the ``ray``
    xdist group."""
    from lithify.cli.engine import ray_session

    with ray_cluster() as (address, auth):
        saved = {k: os.environ.get(k) for k in auth}
        os.environ.update(auth)
        try:
            with ray_session(address):
                yield address, auth
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
