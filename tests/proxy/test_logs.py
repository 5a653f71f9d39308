"""The proxy's log lines stay whole when the recorder process writes to the same stderr."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import orjson

from lithify.ingest.proxy import BackgroundStreamHandler


def test_lines_of_two_processes_on_one_stderr_pipe_never_cut_each_other() -> None:
    """The proxy writes its lines in batches from a thread; the recorder, a process of its own,
    writes to the same stderr, a pipe under a service manager or a container. A write to a pipe
    is whole only up to PIPE_BUF bytes: a batch written at once was cut by the recorder's
    lines."""
    read_end, write_end = os.pipe()
    received = bytearray()
    reader = threading.Thread(target=lambda: received.extend(_read_all(read_end)))
    reader.start()
    n = 20_000
    other = (
        f"import sys\nfor i in range({n}):\n    sys.stderr.write('{{\"recorder\": %d}}\\n' % i)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", other], stderr=write_end)
    with os.fdopen(write_end, "w") as stream:
        handler = BackgroundStreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(message)s"))
        pad = "x" * 300
        for i in range(n):
            line = orjson.dumps({"proxy": i, "pad": pad}).decode()
            handler.emit(logging.makeLogRecord({"msg": line}))
        handler.flush()
        assert child.wait(60) == 0
    reader.join(60)
    docs = [orjson.loads(line) for line in received.splitlines()]  # every line whole
    # Lines the writer could not keep up with are dropped and counted, by design.
    proxy_lines = sorted(d["proxy"] for d in docs if "proxy" in d)
    assert len(proxy_lines) == len(set(proxy_lines)) == n - handler.dropped
    assert len(proxy_lines) >= 10_000  # the queue holds that many, however slow the writer
    assert sorted(d["recorder"] for d in docs if "recorder" in d) == list(range(n))


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        return f.read()
