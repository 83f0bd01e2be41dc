"""Server-sent events: a pure, incremental decoder and an encoder.

The decoder takes raw bytes in chunks of any size (a chunk may end inside a line, inside a CRLF pair or
inside a multi-byte UTF-8 character) and returns complete events as `(event_name, data_bytes)`.
Data stays bytes because the JSON parser reads bytes directly; it is never decoded twice.

Only the incomplete last event is buffered, so the cost is linear in the stream size for any read size:
reads that cannot complete an event (no blank line, or no line end in line-by-line mode) are kept as
pieces and joined once, when the event completes, never re-copied per read. An event that grows past
`max_event_bytes` raises `EventTooLarge` (memory stays bounded whatever the sender does). Comment lines
(`: OPENROUTER PROCESSING`), `id:` and `retry:` fields are skipped. Line endings may be LF or CRLF.

Speed: LF-only streams are cut into whole events at blank lines, and the two shapes nearly every event
has (`data: ...` alone, or `event: ...` then `data: ...`) are read without going line by line. Once a CR
appears the decoder reads line by line for the rest of the stream.
"""

from __future__ import annotations

__all__ = ["MAX_EVENT_BYTES", "EventTooLarge", "SSEDecoder", "encode_sse"]

MAX_EVENT_BYTES = 32 * 1024 * 1024
"""The default largest single event (or JSON line) a stream may send: 32 MiB.

Gemini sends a whole call, possibly a whole file in its arguments, as one event, and image models send
images inline, so the limit is generous; it exists so that a sender cannot make the reader buffer
without bound."""


class EventTooLarge(ValueError):
    """One event (or line) grew past the configured limit before it ended."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"one event grew to {size} bytes without ending, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class SSEDecoder:
    """Incremental `text/event-stream` decoder."""

    __slots__ = ("_data", "_data_size", "_event", "_lines", "_names", "_pending", "_pending_size", "_prefix",
                 "_prefix_name", "_tail", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        self._tail = b""
        # Reads that could not complete anything, kept apart so that a long event costs one join.
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._data_size = 0  # bytes in `_data` (line-by-line mode)
        self._event: str | None = None
        self._data: list[bytes] = []
        self._lines = False  # line-by-line mode: the stream has CRs (the tail is then one partial line)
        self._names: dict[bytes, str] = {}  # `event:` lines seen, decoded once
        # The head of the last event read on the fast path ("event: NAME\ndata: "): most events repeat it.
        self._prefix = b"data: "
        self._prefix_name: str | None = None

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        """Add bytes; return the events they completed, in order (`EventTooLarge` past the limit)."""
        tail = self._tail
        if not tail and chunk[-2:] == b"\n\n" and not self._lines:
            # A live stream flushes each event as it is made, so a read is usually exactly one event with
            # the head of the previous one: that is checked with two scans and no split.
            prefix = self._prefix
            size = len(prefix)
            if chunk.startswith(prefix) and chunk.find(b"\n", size) == len(chunk) - 2 and b"\r" not in chunk:
                return [(self._prefix_name, chunk[size:-2])]
        if tail:
            if self._pending or len(tail) > 65536:
                # A long event is arriving: join only once a read can complete something.
                if not self._completes(tail, chunk):
                    return self._hold(chunk)
                if self._pending:
                    tail = b"".join(self._pending)
                    self._pending = []
                    self._pending_size = 0
            chunk = tail + chunk
        out: list[tuple[str | None, bytes]] = []
        if self._lines or b"\r" in chunk:
            self._lines = True
            lines = chunk.split(b"\n")
            self._tail = lines.pop()
            for line in lines:
                self._line(line, out)
            if len(self._tail) + self._data_size > self.max_event_bytes:
                raise EventTooLarge(len(self._tail) + self._data_size, self.max_event_bytes)
            return out
        # LF only: whole events end at a blank line; the tail is the event still arriving.
        blocks = chunk.split(b"\n\n")
        self._tail = blocks.pop()
        prefix, prefix_name = self._prefix, self._prefix_name
        size = len(prefix)
        for block in blocks:
            if block.startswith(prefix) and block.find(b"\n", size) < 0:
                out.append((prefix_name, block[size:]))
                continue
            newline = block.find(b"\n")
            if newline < 0:
                if block[:5] == b"data:":
                    out.append((None, block[6:] if block[5:6] == b" " else block[5:]))
                continue  # a lone comment, `event:`, `id:` or blank line dispatches nothing
            if block[:6] == b"event:" and block[newline + 1 : newline + 6] == b"data:" \
                    and block.find(b"\n", newline + 1) < 0:
                name = self._names.get(block[:newline])
                if name is None:
                    name = self._name(block[:newline])
                value = block[newline + 6 :]
                if value[:1] == b" ":
                    value = value[1:]
                    prefix, prefix_name = block[: newline + 7], name
                    size = len(prefix)
                    self._prefix, self._prefix_name = prefix, prefix_name
                out.append((name, value))
                continue
            for line in block.split(b"\n"):
                self._line(line, out)
            self._dispatch(out)
        if len(self._tail) > self.max_event_bytes:
            raise EventTooLarge(len(self._tail), self.max_event_bytes)
        return out

    def _completes(self, tail: bytes, chunk: bytes) -> bool:
        """Whether `chunk`, following `tail`, may end a line (line mode) or an event (blank line)."""
        if self._lines or b"\r" in chunk:
            return b"\n" in chunk
        return b"\n\n" in chunk or (chunk[:1] == b"\n" and tail[-1:] == b"\n")

    def _hold(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        if not self._pending:
            self._pending.append(self._tail)
            self._pending_size = len(self._tail)
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        self._tail = chunk  # only its last byte is looked at, to find a blank line split across reads
        size = self._pending_size + self._data_size
        if size > self.max_event_bytes:
            raise EventTooLarge(size, self.max_event_bytes)
        return []

    def close(self) -> list[tuple[str | None, bytes]]:
        """End of stream: flush an event that was not followed by a blank line."""
        out: list[tuple[str | None, bytes]] = []
        tail = b"".join(self._pending) if self._pending else self._tail
        self._pending = []
        self._pending_size = 0
        if tail:
            for line in [tail] if self._lines else tail.split(b"\n"):
                self._line(line, out)
            self._tail = b""
        self._dispatch(out)
        return out

    def _name(self, line: bytes) -> str:
        name = line[6:].strip().decode("utf-8", "replace")
        if len(self._names) < 64:
            self._names[line] = name
        return name

    def _line(self, line: bytes, out: list[tuple[str | None, bytes]]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            self._dispatch(out)
            return
        if line.startswith(b"data:"):
            value = line[5:]
            if value.startswith(b" "):
                value = value[1:]
            self._data.append(value)
            self._data_size += len(value)
        elif line.startswith(b"event:"):
            self._event = line[6:].strip().decode("utf-8", "replace")
        # Comments (":..."), "id:", "retry:" and unknown fields carry nothing we use.

    def _dispatch(self, out: list[tuple[str | None, bytes]]) -> None:
        if self._data:
            data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
            out.append((self._event, data))
            self._data = []
            self._data_size = 0
        self._event = None


def encode_sse(data: str | bytes, event: str | None = None) -> bytes:
    """One SSE event; multi-line data becomes several `data:` lines."""
    raw = data.encode() if isinstance(data, str) else data
    head = f"event: {event}\n".encode() if event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in raw.split(b"\n")) + b"\n"
