"""Server-sent events: following a chat's log from a cursor, and the response that streams it.

`follow` reads the log after a cursor and then waits for more, yielding encoded frames until the
run's `run_finished`; when nothing happens for `heartbeat` seconds it yields a comment, which keeps
proxies from closing an idle connection. Frames already in the log are sent together (one write for
a follower catching up); live frames are sent one by one, the moment they are published.

`EventStreamResponse` sends the headers at once, then the frames, racing them against the client
going away (`http.disconnect`): a disconnect stops the following at once, and calls `on_disconnect`
(which cancels the run for `on_disconnect: "cancel"`). Following never affects the run otherwise. Once a
stop handed this server's runs over (`--drain-handover`), its streams end whole: their clients follow on from
another server with their last id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .eventlog import Cursor, CursorExpired, EventLog, LogEntry
from .metrics import of_scope

__all__ = ["SSE_HEADERS", "Encoder", "EventStreamResponse", "StreamCloser", "follow"]

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

_READ_LIMIT = 512
"""Entries read from the log at once."""

_CATCH_UP_BYTES = 256 * 1024
"""The most bytes of already-published frames sent in one write."""


class Encoder(Protocol):
    """A browser protocol's writer for the server's events (see `encode/`)."""

    @property
    def media_type(self) -> str: ...

    def encode(self, entry: LogEntry) -> bytes: ...

    def heartbeat(self) -> bytes: ...


async def follow(log: EventLog, chat_id: str, after: Cursor, encoder: Encoder, *,
                 heartbeat: float) -> AsyncIterator[bytes]:
    """Frames of the events after `after`, then live ones, up to and including the next `run_finished`.

    Ends early (without `run_finished`) when the log no longer holds the events the follower needs:
    reconnecting with the last id then answers 410 and the client reloads the messages.
    """
    cursor = after
    caught_up = False
    while True:
        # After a read that reached the end of the log, wait first (it returns at once if more came
        # meanwhile) instead of reading again to find nothing.
        if caught_up and not await log.wait(chat_id, cursor, heartbeat):
            yield encoder.heartbeat()
            continue
        try:
            entries = await log.read_after(chat_id, cursor, _READ_LIMIT)
        except CursorExpired:
            return
        caught_up = len(entries) < _READ_LIMIT
        if not entries:
            continue
        batch: list[bytes] = []
        size = 0
        for entry in entries:
            frame = encoder.encode(entry)
            batch.append(frame)
            size += len(frame)
            cursor = entry.cursor
            if entry.type == "run_finished":
                yield b"".join(batch)
                return
            if size >= _CATCH_UP_BYTES:
                yield b"".join(batch)
                batch, size = [], 0
        if batch:
            yield b"".join(batch)


class EventStreamResponse(Response):
    """`text/event-stream` from an async iterator of frames, stopped by a client disconnect."""

    def __init__(self, frames: AsyncIterator[bytes], *, media_type: str = "text/event-stream",
                 headers: Mapping[str, str] | None = None,
                 on_disconnect: Callable[[], Awaitable[None]] | None = None) -> None:
        # No `body`: Starlette then sets no Content-Length (the stream has no length).
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers({**SSE_HEADERS, **(headers or {})})
        self.frames = frames
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = False

        async def watch(cancel: anyio.CancelScope) -> None:
            nonlocal disconnected
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    disconnected = True
                    cancel.cancel()
                    return

        metrics = of_scope(scope)  # counts open streams when /metrics is on (metrics.py)
        if metrics is not None:
            metrics.followers.inc()
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch, tg.cancel_scope)
                frames = anyio.CancelScope()
                closer = _handed_over(scope)
                if closer is not None:  # the stream ends (whole) once this server handed its runs over
                    closer.add(frames)
                try:
                    with frames:
                        async for frame in self.frames:
                            await send({"type": "http.response.body", "body": frame, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:  # the connection is gone (some servers say so on send)
                    disconnected = True
                finally:
                    if closer is not None:
                        closer.discard(frames)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if metrics is not None:
                    metrics.followers.dec()
                aclose = getattr(self.frames, "aclose", None)
                if aclose is not None:
                    await aclose()
                if disconnected and self.on_disconnect is not None:
                    await self.on_disconnect()


class StreamCloser:
    """Ends the event streams it holds, all at once, and any added later: a stop that hands this server's runs over
    (`RunManager.handed_over`) ends every stream, whose clients then follow on from another server. Each stream adds
    its scope while it runs; no task per stream waits for the moment."""

    def __init__(self) -> None:
        self.closed = False
        self._scopes: set[anyio.CancelScope] = set()

    def close(self) -> None:
        self.closed = True
        for scope in list(self._scopes):
            scope.cancel()

    def add(self, scope: anyio.CancelScope) -> None:
        if self.closed:
            scope.cancel()
        else:
            self._scopes.add(scope)

    def discard(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)


def _handed_over(scope: Scope) -> StreamCloser | None:
    """What a stop that hands the runs over closes (`RunManager.handed_over`), if the app has a run manager."""
    app = scope.get("app")
    state = getattr(getattr(app, "state", None), "toolwire", None)
    return getattr(getattr(state, "manager", None), "handed_over", None)
