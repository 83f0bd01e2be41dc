"""Double texting, the answering side: a message that waits for its turn is answered with its own run's events.

The run manager queues a message sent while the chat's run is going (`enqueue`, `interrupt`; see `runs.py`).
Its request still gets an event stream, as for any message: on the native route it opens with a
`run_queued` event (the queued run's id, its place in the queue, the run it waits for), then carries the
queued run from its `run_started` to its `run_finished`, like any run's stream. The events of the runs
ahead of it are read from the chat's log and left out (the chat's stream, `GET /api/chats/{id}/stream`,
shows them); only `run_started` entries are parsed to find where the queued run begins, so the run's own
events pass through as they do for any follower.

A queued run that is cancelled before it starts leaves the queue without a run (its message is not
stored): its follower then gets a `run_finished` with the status `cancelled`, once the run ahead of it
ended, and the stream ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import orjson

from .errors import ApiError
from .eventlog import Cursor, EventLog, LogEntry
from .runs import RunHandle, RunManager
from .sse import Encoder, EventStreamResponse, follow

__all__ = ["queued_response"]

_POLL_SECONDS = 0.5
"""How often a follower asks the store about its queued run while the log has nothing it can read."""


class _OneRun:
    """An encoder that passes on only one run's events (from its `run_started`) and remembers the last cursor read."""

    __slots__ = ("done", "inner", "last", "mine", "run_id")

    def __init__(self, inner: Encoder, run_id: str) -> None:
        self.inner = inner
        self.run_id = run_id
        self.mine = False
        self.done = False
        self.last: Cursor | None = None

    @property
    def media_type(self) -> str:
        return self.inner.media_type

    def encode(self, entry: LogEntry) -> bytes:
        self.last = entry.cursor
        if not self.mine:
            if entry.type != "run_started" or entry.event.get("run_id") != self.run_id:
                return b""
            self.mine = True
        if entry.type == "run_finished":
            self.done = True
        return self.inner.encode(entry)

    def heartbeat(self) -> bytes:
        return self.inner.heartbeat()


async def _frames(manager: RunManager, log: EventLog, chat_id: str, run_id: str, after: Cursor, one: _OneRun, *,
                  heartbeat: float, first: bytes | None) -> AsyncIterator[bytes]:
    if first is not None:
        yield first
    cursor = after
    while True:
        async for frame in follow(log, chat_id, cursor, one, heartbeat=heartbeat):
            if frame:
                yield frame
        if one.done:
            return
        progressed = one.last is not None and one.last != cursor
        if one.last is not None:
            cursor = one.last
        if one.mine:
            return  # the log lost the run's events mid-way: the client reconnects with its last id (410, reload)
        # The queue first: starting a queued run takes it out of the queue and stores its run at once, so a run
        # neither queued nor stored after that was cancelled.
        queued = manager.queue is not None and any(q.id == run_id for q in await manager.queue.queued_runs(chat_id))
        run = None if queued else await manager.store.get_run(chat_id, run_id)
        if run is not None:
            if cursor.run < run.run_number:
                cursor = Cursor(run.run_number, 0)  # it started: read it from its start
                continue
        elif not queued:
            ended = {"type": "run_finished", "run_id": run_id, "step": None, "status": "cancelled",
                     "error": {"code": "cancelled", "message": "The queued message was cancelled before its run "
                                                               "started; it was not stored."}}
            yield one.inner.encode(LogEntry(cursor, "run_finished", data=orjson.dumps(ended)))
            return
        if not progressed:
            await anyio.sleep(_POLL_SECONDS)  # the log holds nothing to wait on here yet


async def queued_response(manager: RunManager, log: EventLog, chat_id: str, handle: RunHandle, encoder: Encoder, *,
                          heartbeat: float, headers: dict[str, str], announce: bool,
                          cancel_on_disconnect: bool = False) -> EventStreamResponse:
    """The stream answering a queued message (see the module docstring); `announce` opens it with `run_queued`
    (the native route; a protocol's encoder has no such event)."""
    queued = handle.queued
    assert queued is not None
    ahead = handle.run if handle.run.id != queued.id else None
    last = await log.last_cursor(chat_id, ahead.run_number if ahead is not None else None)
    after = last or Cursor(ahead.run_number if ahead is not None else 1, 0)
    first = None
    if announce:
        event: dict[str, Any] = {"type": "run_queued", "run_id": queued.id, "step": None, "strategy": queued.strategy,
                                 "ahead_run_id": ahead.id if ahead is not None else None}
        # Its id is where the stream was when the message was queued: resuming from it misses nothing.
        first = encoder.encode(LogEntry(after, "run_queued", data=orjson.dumps(event)))
    on_disconnect = None
    if cancel_on_disconnect:
        async def cancel() -> None:
            try:
                await manager.cancel(chat_id, queued.id)
            except ApiError:
                pass  # it ended meanwhile

        on_disconnect = cancel
    frames = _frames(manager, log, chat_id, queued.id, after, _OneRun(encoder, queued.id), heartbeat=heartbeat,
                     first=first)
    return EventStreamResponse(frames, media_type=encoder.media_type,
                               headers={**headers, "X-Run-Id": queued.id, "X-Run-State": "queued"},
                               on_disconnect=on_disconnect)
