"""A small SSE client on raw asyncio sockets, for a thousand streams at once on a small machine.

An httpx client per stream costs more CPU than the server it measures; this one is an
`asyncio.Protocol`: it writes one HTTP/1.1 request, reads the status line and headers, undoes chunked
transfer encoding and calls `on_event(event_id, data, received_at)` per SSE event (comments are
skipped). Only what `toolwire serve` sends is understood: `id:` and `data:` lines, `\\n\\n` between
events, chunked or close-delimited bodies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

__all__ = ["SSEStream", "open_stream"]

OnEvent = Callable[[bytes, bytes, float], None]
OnHeaders = Callable[[int, float], None]


class SSEStream(asyncio.Protocol):
    """One streaming response; `headers_done` resolves with the status, `closed` when the body ended."""

    def __init__(self, request: bytes, on_event: OnEvent, on_headers: OnHeaders | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.request = request
        self.on_event = on_event
        self.on_headers = on_headers
        self.headers_done: asyncio.Future[int] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.transport: asyncio.Transport | None = None
        self._head = b""
        self._raw = b""  # chunked bytes not yet decoded
        self._body = b""  # decoded bytes not yet split into events
        self._chunked = False
        self._ended = False
        self.events = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if not self.headers_done.done():
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end], self._head[end + 4:]
            lines = head.decode("latin-1").split("\r\n")
            self.status = int(lines[0].split(" ", 2)[1])
            for line in lines[1:]:
                name, _, value = line.partition(":")
                self.headers[name.strip().lower()] = value.strip()
            self._chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
            self.headers_done.set_result(self.status)
            if self.on_headers is not None:  # before the events that came with the headers
                self.on_headers(self.status, now)
        if self._chunked:
            self._raw += data
            self._dechunk()
        else:
            self._body += data
        self._events(now)
        if self._ended and self.transport is not None:
            self.transport.close()

    def _dechunk(self) -> None:
        raw = self._raw
        position = 0
        parts = [self._body]
        while True:
            line_end = raw.find(b"\r\n", position)
            if line_end < 0:
                break
            size = int(raw[position:line_end].split(b";", 1)[0], 16)
            start = line_end + 2
            if size == 0:
                self._ended = True
                position = len(raw)
                break
            if len(raw) < start + size + 2:
                break
            parts.append(raw[start:start + size])
            position = start + size + 2
        self._raw = raw[position:]
        self._body = b"".join(parts)

    def _events(self, now: float) -> None:
        body = self._body
        start = 0
        while True:
            end = body.find(b"\n\n", start)
            if end < 0:
                break
            block = body[start:end]
            start = end + 2
            if block.startswith(b":"):
                continue
            event_id = b""
            data = b""
            for line in block.split(b"\n"):
                if line.startswith(b"id: "):
                    event_id = line[4:]
                elif line.startswith(b"data: "):
                    data = line[6:]
            self.events += 1
            self.on_event(event_id, data, now)
        self._body = body[start:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.headers_done.done():
            self.headers_done.set_exception(exc or ConnectionError("The connection closed before the headers."))
        if not self.closed.done():
            self.closed.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def open_stream(host: str, port: int, method: str, path: str, *, headers: Mapping[str, str] | None = None,
                      body: bytes | None = None, on_event: OnEvent,
                      on_headers: OnHeaders | None = None) -> SSEStream:
    """Send the request; returns once the response's headers are in (see `SSEStream.status`).

    `on_headers(status, received_at)` is called when the headers are in, before any event.
    """
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")
    loop = asyncio.get_running_loop()
    _transport, stream = await loop.create_connection(lambda: SSEStream(request, on_event, on_headers), host, port)
    await stream.headers_done
    return stream
