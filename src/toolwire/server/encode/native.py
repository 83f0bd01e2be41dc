"""toolwire's native SSE format: each event as `id: <cursor>` and `data: <the event's JSON>`.

The JSON is the log entry's bytes, encoded once when the event was published and shared by every
follower; a frame is that plus two short lines. Event JSON never contains a raw newline (JSON escapes
them), so one `data:` line always holds the whole event.
"""

from __future__ import annotations

from typing import ClassVar

from ..eventlog import LogEntry

__all__ = ["NativeEncoder"]


class NativeEncoder:
    """Frames for `text/event-stream`: `id: 3-17\\ndata: {...}\\n\\n`; `: ping` comments as heartbeats."""

    media_type: ClassVar[str] = "text/event-stream"

    def encode(self, entry: LogEntry) -> bytes:
        return b"id: " + str(entry.cursor).encode() + b"\ndata: " + entry.data + b"\n\n"

    def heartbeat(self) -> bytes:
        return b": ping\n\n"
