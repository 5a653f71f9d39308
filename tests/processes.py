"""A real lithify server process under test (`lithify serve`, `lithify proxy`): its JSON log
lines, SIGKILL and a graceful stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass
class LoggedProcess:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The process's JSON log lines (of the event ``name`` only, when given)."""
        out = []
        # "\n" alone ends a JSON line: str.splitlines also splits at U+0085 and U+2028, which
        # a log line may hold inside a string (a fuzzed header's session id did).
        for line in self.log.read_text().split("\n"):
            if line.startswith("{"):
                ev = orjson.loads(line)
                if name is None or ev.get("event") == name:
                    out.append(ev)
        return out

    def wait_event(
        self, name: str, wanted: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        """The first ``name`` event ``wanted`` accepts, once logged: a server answers a request
        before it writes the request's log line."""
        deadline = time.monotonic() + timeout
        while True:
            found = [ev for ev in self.events(name) if wanted(ev)]
            if found or time.monotonic() > deadline:
                assert found, f"no {name} event as wanted within {timeout} s"
                return found[0]
            time.sleep(0.02)

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)
