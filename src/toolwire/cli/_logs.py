"""The logging of `toolwire serve`: toolwire's own events on stderr, one line each, as text or JSON.

The library installs only a `NullHandler` (a library leaves logging to its application); the server is an
application, so it sends the `toolwire` loggers to stderr itself. A line names the run and chat it is about
(`run_id`, `chat_id`, fields of their own in JSON) and never holds a token or a database password:
messages carry ids and error sentences, and database URLs are logged redacted. A bug of the server's own
is logged with its traceback (in JSON, in the `exc` field of its line).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

__all__ = ["JsonFormatter", "configure_logging"]

_FIELDS = ("run_id", "chat_id")
"""Record attributes (given with `extra=`) that a line carries as fields of their own."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `time` (UTC, ISO 8601), `level`, `logger`, `message`, the run's ids, `exc`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure_logging(level: str, log_format: str) -> None:
    """Send the `toolwire` loggers' events at `level` and above to stderr, as `text` or `json` lines."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        formatter = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s",
                                      datefmt="%Y-%m-%dT%H:%M:%S")
        formatter.converter = time.gmtime
        handler.setFormatter(formatter)
    logger = logging.getLogger("toolwire")
    for old in [h for h in logger.handlers if getattr(h, "toolwire_serve", False)]:
        logger.removeHandler(old)
    handler.toolwire_serve = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # an application configuring the root logger too would print each line twice
