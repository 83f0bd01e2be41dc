"""Server-sent events: a pure, incremental decoder and an encoder.

The decoder takes raw bytes in chunks of any size (a chunk may end inside a line, inside a CRLF pair or
inside a multi-byte UTF-8 character) and returns complete events as `(event_name, data_bytes)`.
Data stays bytes because the JSON parser reads bytes directly; it is never decoded twice.

Only the incomplete last line is buffered, so the cost is linear in the stream size. Comment lines
(`: OPENROUTER PROCESSING`), `id:` and `retry:` fields are skipped. Line endings may be LF or CRLF.
"""

from __future__ import annotations

__all__ = ["SSEDecoder", "encode_sse"]


class SSEDecoder:
    """Incremental `text/event-stream` decoder."""

    __slots__ = ("_data", "_event", "_tail")

    def __init__(self) -> None:
        self._tail = b""
        self._event: str | None = None
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        """Add bytes; return the events they completed, in order."""
        if self._tail:
            chunk = self._tail + chunk
        lines = chunk.split(b"\n")
        self._tail = lines.pop()
        out: list[tuple[str | None, bytes]] = []
        for line in lines:
            self._line(line, out)
        return out

    def close(self) -> list[tuple[str | None, bytes]]:
        """End of stream: flush an event that was not followed by a blank line."""
        out: list[tuple[str | None, bytes]] = []
        if self._tail:
            self._line(self._tail, out)
            self._tail = b""
        self._dispatch(out)
        return out

    def _line(self, line: bytes, out: list[tuple[str | None, bytes]]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            self._dispatch(out)
            return
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        elif line.startswith(b"event:"):
            self._event = line[6:].strip().decode("utf-8", "replace")
        # Comments (":..."), "id:", "retry:" and unknown fields carry nothing we use.

    def _dispatch(self, out: list[tuple[str | None, bytes]]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append((self._event, data))
            self._data = []
        self._event = None


def encode_sse(data: str | bytes, event: str | None = None) -> bytes:
    """One SSE event; multi-line data becomes several `data:` lines."""
    raw = data.encode() if isinstance(data, str) else data
    head = f"event: {event}\n".encode() if event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in raw.split(b"\n")) + b"\n"
