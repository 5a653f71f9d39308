"""Running a uvicorn server the way `lithify serve` and `lithify proxy` both do."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from lithify.exits import Exit


def run(server: Any, on_listening: Callable[[str, str, int], None]) -> None:
    """Run ``server`` until SIGINT/SIGTERM have let it drain; ``on_listening(url, host, port)``
    once it is bound (``port`` 0 picks one). A server that cannot start (its address in use:
    uvicorn logs why) exits with ``Exit.FAILED``, not uvicorn's own 3, which reads as
    ``--strict`` here."""
    startup = server.startup

    async def started(sockets: Any = None) -> None:
        await startup(sockets=sockets)
        if not server.started:
            return
        bound = [s.getsockname() for srv in server.servers for s in srv.sockets]
        host, port = bound[0][:2] if bound else (server.config.host, server.config.port)
        on_listening(f"http://{'[' + host + ']' if ':' in host else host}:{port}", host, port)

    server.startup = started
    # uvicorn re-raises the signal that stopped it once it has drained, under the handlers in
    # place before it ran: make those no-ops, so a graceful stop exits 0 (not -15, nor a
    # KeyboardInterrupt traceback).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    try:
        server.run()
    except SystemExit as e:
        if e.code not in (None, 0):
            sys.exit(Exit.FAILED)
        raise
    if not server.started:
        sys.exit(Exit.FAILED)
