"""Structured logging for every ClaimTrail process.

One JSON object per line on stderr (time, level, logger, message, and any ``extra`` fields).
Tenant data (pod names, namespaces, labels) is logged only at DEBUG: callers pass it under
``extra={"tenant_data": {...}}`` and it is dropped at INFO and above.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD:
                continue
            if key == "tenant_data" and record.levelno > logging.DEBUG:
                continue
            out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


# The levels a process may be started at, quietest last.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def setup_logging(level: str = "WARNING") -> None:
    """Log at ``level`` (one of ``LEVELS``, any case); any other name is a ValueError, not WARNING."""
    if level.upper() not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (expected one of {', '.join(LEVELS)})")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper()))
