"""Structured logs of the servers: one JSON object per line on stderr, and the event helper."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

log = logging.getLogger("lithify.serve")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, event, and the record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        t = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "ts": f"{t:%Y-%m-%dT%H:%M:%S}.{t.microsecond // 1000:03d}Z",
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.name.startswith("uvicorn"):
            out["logger"] = record.name
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def log_config(level: str = "info") -> dict[str, Any]:
    """logging.config for uvicorn and lithify: JSON lines on stderr."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    lvl = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": lvl, "propagate": False},
            "uvicorn.error": {"level": lvl},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "lithify.serve": {"handlers": ["stderr"], "level": lvl, "propagate": False},
        },
    }


def _event(level: int, event: str, **fields: Any) -> None:
    log.log(level, event, extra={"fields": fields})
