"""How lithify runs an HTTP server, for the faces outside ingest (``lithify ui``): the bounded
request-head protocol, the uvicorn configuration and the run loop of ``_server``, which ``serve``
and ``proxy`` use, named here so that no package imports another's private module."""

from __future__ import annotations

from lithify.ingest._server import HeadLimits, Refusal, ServerFailed, config, run

__all__ = ["HeadLimits", "Refusal", "ServerFailed", "config", "run"]
