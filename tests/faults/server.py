"""A fault-injecting HTTP server on 127.0.0.1: each test writes the exact bytes, timing and framing.

A real server (asyncio streams, HTTP/1.1 written by hand) so that httpx meets what a hostile provider,
proxy or gateway does on the wire: a status line and headers of the test's choosing, bodies trickled a
byte at a time, gzip corrupted mid-stream, huge error bodies, connections held open without an answer.
Handlers run in the test's event loop; the server closes every connection when the test leaves it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["FaultServer", "Request", "Writer"]


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True)
class Writer:
    """Writes one response; `head` first, then `send`/`chunk` as the fault needs."""

    stream: asyncio.StreamWriter
    chunked: bool = False
    sent: int = field(default=0)

    async def head(self, status: int = 200, headers: dict[str, str] | None = None, *, chunked: bool = False,
                   reason: str = "OK") -> None:
        lines = [f"HTTP/1.1 {status} {reason}"]
        all_headers = {"connection": "close", **(headers or {})}
        if chunked:
            all_headers["transfer-encoding"] = "chunked"
            self.chunked = True
        lines += [f"{k}: {v}" for k, v in all_headers.items()]
        self.stream.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.stream.drain()

    async def send(self, data: bytes) -> None:
        """Body bytes (one HTTP chunk when the response is chunked)."""
        if not data:
            return
        if self.chunked:
            self.stream.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        else:
            self.stream.write(data)
        self.sent += len(data)
        await self.stream.drain()

    async def end(self) -> None:
        if self.chunked:
            self.stream.write(b"0\r\n\r\n")
            await self.stream.drain()


Handler = Callable[[Request, Writer], Awaitable[None]]


class FaultServer:
    """`async with FaultServer(handler) as server:` then point a model at `server.base_url`."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.base_url = ""

    async def __aenter__(self) -> FaultServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {}
            for line in header_lines:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Request(method, path, headers, body)
            self.requests.append(request)
            writer = Writer(stream)
            await self.handler(request, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing: this connection's task ends here (asyncio would log it otherwise)
        finally:
            stream.close()
            self._tasks.discard(task)  # type: ignore[arg-type]
