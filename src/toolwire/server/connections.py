"""What one HTTP connection may cost: limits on request heads and on the time to send one, for uvicorn.

    import uvicorn
    from toolwire.server.connections import ConnectionLimits, uvicorn_options

    uvicorn.run(app, **uvicorn_options(ConnectionLimits(header_timeout=10.0)))

`toolwire serve` runs uvicorn with these options (docs/guides/security.md: "Connection limits and the reverse proxy"):

- A request head (request line and header fields) larger than its limits is refused at once, with a JSON
  error: 414 `uri_too_long` for a long request line, 431 `request_header_fields_too_large` for too many
  fields, one too large or all of them too large. Without this, httptools keeps every header line of a
  head that never ends (a connection sending header lines forever grows the process by what it sent), and
  rebuilds a long header value at every read (a single 32 MiB value cost the server 1.9 s of CPU).
- A connection must send a request's whole head within `header_timeout` seconds of opening (or of its
  next request's first byte); otherwise it gets 408 `request_timeout` (closed without a word if it said
  nothing). Half-open sockets would otherwise hold their descriptors forever: 300 of them used up a
  256-descriptor process, whose `accept()` then failed for every user.
- An idle kept-alive connection is closed after `keep_alive_timeout` seconds (uvicorn's own timer).
- Past `max_connections` open connections, a request is answered 503 (uvicorn's `limit_concurrency`).

None of these timers runs once a request's head is complete: an event stream (a run followed for minutes,
heartbeats every 15 s) is never cut by them. What a single process cannot judge (slow bodies, connections
per client address, TLS) is the reverse proxy's job (docs/guides/security.md).

Why a subclass of uvicorn's httptools protocol and not uvicorn's h11 mode, which bounds a head with
`h11_max_incomplete_event_size` (a maintained limit, but one number for the whole head): h11 sends each
SSE frame through its state machine in Python, where the httptools protocol writes the bytes straight to
the transport. Measured (uvicorn 0.54, 100,000 frames of 90 bytes on one loopback stream, server CPU per
frame, three rounds): h11 9.6-11.7 µs, httptools 5.3-6.4 µs, this subclass 4.6-5.9 µs (5.0-5.3 µs with
`BrowserHeaders` too): h11 would add about 5 µs to every event, and the per-event path is the one that
must not get slower. The checks here run only while a head is being read (a counter per read, a check
per header field), never per event written. uvicorn offers no head limit for httptools, hence these
few lines.
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["ConnectionLimits", "LimitedHttpToolsProtocol", "default_max_connections", "uvicorn_options"]

_LINGER_SECONDS = 2.0
"""After an error answer, how long what the client still sends is read and dropped before closing (as
nginx's lingering close does): closing with unread data would reset the connection, and the client
could lose the answer saying why."""


def default_max_connections() -> int:
    """Half the process's open-file limit (`ulimit -n`): the other half is left to the database pool, the
    model's connections (one per running run), Redis and MCP servers. 512 under Linux's usual 1024."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, soft // 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionLimits:
    """Limits on one connection's request heads and timers, and on connections at once.

    Attributes:
        max_request_line_bytes: The longest request line (method, target, version): 414 past it.
        max_header_fields: The most header fields in one request: 431 past it.
        max_header_field_bytes: The longest header field (name and value): 431 past it.
        max_header_bytes: The longest request head in all (request line and fields): 431 past it.
        header_timeout: Seconds a connection has, from its opening (or its next request's first byte), to
            send a whole request head: 408 after.
        keep_alive_timeout: Seconds an idle kept-alive connection stays open.
        max_connections: Connections open at once; a request past it gets 503. `None`: half the process's
            open-file limit (`default_max_connections`).
    """

    max_request_line_bytes: int = 8190
    max_header_fields: int = 100
    max_header_field_bytes: int = 8190
    max_header_bytes: int = 32_768
    header_timeout: float = 10.0
    keep_alive_timeout: int = 5
    max_connections: int | None = None


class _Refusal(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _too_large(limits: ConnectionLimits) -> _Refusal:
    return _Refusal(431, "request_header_fields_too_large",
                    f"The request's header fields are too large: at most {limits.max_header_fields} fields of "
                    f"{limits.max_header_field_bytes} bytes each and {limits.max_header_bytes} bytes in all.")


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with limits on request heads and a deadline for sending one."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Bytes read of the current request's head; None once it is complete (a body or a response follows).
        self._head_bytes: int | None = 0
        self._fields = 0
        self._field_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the answer is sent; what still comes is dropped until the connection closes
        if self._head_bytes is not None:
            self._head_bytes += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Refusal):
                self._refuse(exc.__context__)
                return
            self._invalid()
            return
        except httptools.HttpParserError:
            self._invalid()
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        # A head that has not ended: its complete fields were counted exactly by `on_header`; this catches
        # the field (or request line) that never ends, before the parser keeps more of it.
        if self._head_bytes is not None and self._head_bytes > self.limits.max_header_bytes:
            self._refuse(_too_large(self.limits))

    def _invalid(self) -> None:
        message = "Invalid HTTP request received."
        self.logger.warning(message)
        self.send_400_response(message)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._fields = 0
        self._field_bytes = 0
        if self._head_timer is None:  # a kept-alive connection's next request: its head has the same deadline
            self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_request_line_bytes:
            raise _Refusal(414, "uri_too_long", f"The request's target is too long: at most "
                                                f"{self.limits.max_request_line_bytes} bytes.")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self.limits
        self._fields += 1
        size = len(name) + len(value)
        self._field_bytes += size + 4  # ": " and CRLF
        if (self._fields > limits.max_header_fields or size > limits.max_header_field_bytes
                or self._field_bytes + len(self.url) > limits.max_header_bytes):
            raise _too_large(limits)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._head_bytes = 0  # what follows on this connection is the next request's head
        super().on_message_complete()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # The next head arrives while a response is still being sent: its deadline counts once that
            # response is over (the connection is busy with a request meanwhile).
            self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)
            return
        if not self._head_bytes:
            self.transport.close()  # it asked nothing: closed as an idle connection is
            return
        # Everything sent was read: nothing unread can turn the close into a reset, so no lingering.
        self._refuse(_Refusal(408, "request_timeout", f"The request's head did not arrive within "
                                                      f"{self.limits.header_timeout:g} seconds."), linger=False)

    def _refuse(self, refusal: _Refusal, *, linger: bool = True) -> None:
        self._refused = True
        self._cancel_head_timer()
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer now would land in the middle of the response being sent
            return
        body = orjson.dumps({"error": {"code": refusal.code, "message": refusal.message}})
        content = [STATUS_LINE[refusal.status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode(),
                        b"\r\nconnection: close\r\n\r\n", body])
        self.transport.write(b"".join(content))
        if linger and self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()


def uvicorn_options(limits: ConnectionLimits) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments enforcing `limits` (the HTTP protocol class among them)."""
    protocol = type("LimitedHttpToolsProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})
    cap = limits.max_connections if limits.max_connections is not None else default_max_connections()
    # uvicorn answers 503 once `limit_concurrency` connections are open, counting the one asking: + 1 lets
    # `cap` connections be served at once.
    return {"http": protocol, "limit_concurrency": cap + 1, "timeout_keep_alive": limits.keep_alive_timeout}
