"""`AsyncioNetwork`: an httpcore network backend on asyncio's own transports, for the chat server's model client.

httpcore reads through anyio's socket streams, and on asyncio each read that has to wait resumes the
transport's reading and pauses it again afterwards (two `epoll_ctl` system calls), opens a cancel scope for its
timeout, and maps exceptions in two context managers. The pool's bookkeeping asks each idle connection whether
its socket is readable, with a `poll` system call each. Under hundreds of streaming model responses that is a
share of the server's one event-loop thread you can measure (`bench/README.md`).

Here a connection's protocol keeps reading while less than `_HIGH_WATER` bytes wait in its buffer, so a read
that waits costs one future, and its timeout one timer. An idle connection is readable when its protocol holds
data or has seen the end: the event loop has told it already, so no system call is needed.

Used only where the running library is asyncio; under trio (or where anything else fails to match) httpcore's
own backend is used (`AsyncioNetwork.fallback`). Errors are httpcore's own (`ConnectError`, `ReadTimeout`...),
which httpx maps as it always does.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import Any

import httpcore
import sniffio

__all__ = ["AsyncioNetwork", "use_asyncio_network"]

_HIGH_WATER = 256 * 1024
"""Bytes buffered unread after which the connection stops reading (until they fall below `_LOW_WATER`)."""
_LOW_WATER = 64 * 1024
_EXTRA_INFO = {"ssl_object": "ssl_object", "client_addr": "sockname", "server_addr": "peername", "socket": "socket"}
"""httpcore's names of a connection's details, and asyncio's."""


class _Protocol(asyncio.Protocol):
    """One connection's buffer and the wake-ups of its one reader and one writer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.ended = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.reader: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        _wake(self.reader)

    def eof_received(self) -> bool:
        self.ended = True
        _wake(self.reader)
        return False  # the transport closes itself: HTTP/1.1 never writes after the server's end

    def connection_lost(self, exc: BaseException | None) -> None:
        self.ended = True
        self.error = exc
        _wake(self.reader)
        _wake(self.drained)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _wake(self.drained)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], error: type[Exception], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(error(message))


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks:
            if not protocol.ended:
                await self._wait("reader", timeout, httpcore.ReadTimeout, "The server sent nothing in time.")
            if not protocol.chunks:
                if protocol.error is not None:
                    raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
                return b""
        chunk = protocol.chunks.popleft()
        if len(chunk) > max_bytes:
            protocol.chunks.appendleft(chunk[max_bytes:])
            chunk = chunk[:max_bytes]
        protocol.size -= len(chunk)
        if protocol.reading_paused and protocol.size < _LOW_WATER:
            protocol.reading_paused = False
            self._transport.resume_reading()
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.ended or self._transport.is_closing():
            raise httpcore.WriteError("The connection is closed.")
        self._transport.write(buffer)
        if protocol.writing_paused:
            await self._wait("drained", timeout, httpcore.WriteTimeout, "The server took nothing in time.")
            if protocol.writing_paused:
                raise httpcore.WriteError("The connection closed while writing.")

    async def _wait(self, which: str, timeout: float | None, error: type[Exception], message: str) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        setattr(self._protocol, which, waiter)
        timer = loop.call_later(timeout, _expire, waiter, error, message) if timeout is not None else None
        try:
            await waiter
        finally:
            setattr(self._protocol, which, None)
            if timer is not None:
                timer.cancel()

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(self._transport, self._protocol, ssl_context,
                                                 server_hostname=server_hostname)
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("The TLS handshake did not finish in time.") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        assert transport is not None
        self._protocol.transport = transport
        return _Stream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # asked of idle connections: data or an end the loop already delivered
            return bool(self._protocol.chunks) or self._protocol.ended
        name = _EXTRA_INFO.get(info)
        if name is None or self._transport.is_closing():  # a closed TLS transport raises instead of answering
            return None
        return self._transport.get_extra_info(name)


class AsyncioNetwork(httpcore.AsyncNetworkBackend):
    """See the module docstring."""

    def __init__(self) -> None:
        self.fallback = httpcore.AnyIOBackend()
        self.connections = 0
        """Connections this backend opened itself (not through `fallback`)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
                          ) -> httpcore.AsyncNetworkStream:
        if sniffio.current_async_library() != "asyncio":
            return await self.fallback.connect_tcp(host, port, timeout, local_address, socket_options)
        loop = asyncio.get_running_loop()
        return await self._connect(loop.create_connection(
            _Protocol, host, port, local_addr=(local_address, 0) if local_address else None),
            f"{host}:{port}", timeout, socket_options)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
                                  ) -> httpcore.AsyncNetworkStream:
        if sniffio.current_async_library() != "asyncio":
            return await self.fallback.connect_unix_socket(path, timeout, socket_options)
        loop = asyncio.get_running_loop()
        return await self._connect(loop.create_unix_connection(_Protocol, path), path, timeout, socket_options)

    async def _connect(self, opening: Coroutine[Any, Any, tuple[asyncio.BaseTransport, asyncio.BaseProtocol]],
                       where: str, timeout: float | None,
                       socket_options: Iterable[httpcore.SOCKET_OPTION] | None) -> _Stream:
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await opening
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"Connecting to {where} did not finish in time.") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        assert isinstance(transport, asyncio.Transport)
        assert isinstance(protocol, _Protocol)
        self.connections += 1
        sock = transport.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return _Stream(transport, protocol)

    async def sleep(self, seconds: float) -> None:
        if sniffio.current_async_library() != "asyncio":
            await self.fallback.sleep(seconds)
            return
        await asyncio.sleep(seconds)


def use_asyncio_network(transport: Any, backend: AsyncioNetwork) -> bool:
    """Make `transport` (an `httpx.AsyncHTTPTransport` without a proxy) open its connections with `backend`;
    `False` where its pool is not the kind this knows (a proxy, another httpx), which is then left as it is."""
    pool = getattr(transport, "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not hasattr(pool, "_network_backend"):
        return False
    pool._network_backend = backend
    return True
