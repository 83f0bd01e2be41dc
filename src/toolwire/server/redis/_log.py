"""`RedisEventLog`: each chat's event log as a Redis stream, shared by every replica.

- **The cursor is the entry id.** Event `3-17` is written with `XADD <key> 3-17 ...` (ids chosen by the
  run, monotonic per chat), so a follower on any replica replays after its `Last-Event-ID` with one
  `XREAD`, whatever replica it was connected to before.
- **Retention.** Each stream is trimmed to about `max_events_per_chat` entries (`MAXLEN ~`). A run's
  `run_started` gives its stream a long time-to-live (`live_ttl_seconds`, a safety net should every
  replica vanish); its `run_finished` shortens it to `retention_seconds`, after which Redis deletes the
  key. The messages themselves are in the database: an expired log only means "reload the messages".
- **Writes are batched.** Every `append` waiting at one moment goes out in one pipeline, on the writer's
  own connection (`RedisHub.writer`). Entries reach this process's followers only once they are in
  Redis, so nothing is shown here that other replicas cannot see; a run waits for its `run_finished`.
- **Followers read from memory where possible.** The process keeps a copy of the streams it serves
  (an `InMemoryEventLog`): the runs it executes are copied as they are written, so their local followers
  never read Redis; streams written elsewhere are copied by the process's one reader (`RedisHub`) while
  some follower here waits on them. Every read the copy cannot answer for certain goes to Redis.

A chat has one active run at a time (the database says so), but two replicas can still write to one
stream a moment apart: the run manager starts a chat's next run only after the previous run's
`run_finished` is in the log (or after a wait), and an entry whose id is no longer above the stream's
last one is refused by Redis; it is dropped with a warning (it can only come from a run whose lease was
lost, whose events were already ended by the replica that recovered it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from ..eventlog import Cursor, CursorExpired, InMemoryEventLog, LogEntry, Position
from ._hub import RawEntry, RedisHub

__all__ = ["RedisEventLog"]

logger = logging.getLogger("toolwire.server")

_FOLLOW_LINGER = 10.0
"""Seconds a chat stays in the reader's set after its last follower here stopped waiting."""

_MAX_PENDING = 50_000
"""Appends queued for Redis at most; beyond, appending waits."""

_WRITE_PATIENCE = 15.0
"""Seconds a batch of events is retried while Redis is away, before it is dropped (with an error logged)."""

_TYPES: dict[bytes, str] = {}

_Pending = tuple[str, list[LogEntry], "asyncio.Future[None] | None"]


@dataclass(slots=True)
class _Interest:
    """Followers of one chat in this process that wait for entries written elsewhere."""

    waiters: int = 0
    touched: float = 0.0
    live: bool = False
    """The reader has read this chat's stream since it was added: the copy is current."""


def _entry(raw_id: bytes, fields: dict[bytes, bytes]) -> LogEntry:
    run, _, index = raw_id.partition(b"-")
    data = fields[b"d"]
    kind = fields[b"t"]
    type_ = _TYPES.get(kind)
    if type_ is None:
        type_ = _TYPES.setdefault(kind, kind.decode()) if len(_TYPES) < 256 else kind.decode()
    return LogEntry(Cursor(int(run), int(index)), type_, data=data)


def _cursor(raw_id: bytes) -> Cursor:
    run, _, index = raw_id.partition(b"-")
    return Cursor(int(run), int(index))


def _before(cursor: Cursor) -> Cursor:
    return Cursor(cursor.run, cursor.index - 1)


def _follows(tail: Cursor, tail_type: str | None, cursor: Cursor) -> bool:
    """Whether `cursor` is the entry right after `tail` (a later run starts at index 1 after a finished one)."""
    if cursor.run == tail.run:
        return cursor.index == tail.index + 1
    return cursor.run > tail.run and cursor.index == 1 and tail_type in ("run_finished", None)


class RedisEventLog:
    """An `EventLog` on Redis Streams (see the module docstring).

    Args:
        hub: The process's Redis connections (shared with `RedisSignals` and `RedisRateLimiter`).
        max_events_per_chat: Entries kept per chat stream (approximately; older cursors get 410).
        retention_seconds: How long a chat's stream is kept after a run's `run_finished`.
        live_ttl_seconds: The time-to-live of a stream while a run writes to it.
        memory_events: Most entries kept in this process's copy, over all chats.
    """

    shared = True
    """Every replica sees the same log (the server checks this before it lets several replicas run)."""

    def __init__(self, hub: RedisHub, *, max_events_per_chat: int = 10_000, retention_seconds: float = 900.0,
                 live_ttl_seconds: float = 86_400.0, memory_events: int = 500_000) -> None:
        self.hub = hub
        self.max_events_per_chat = max_events_per_chat
        self.retention_seconds = retention_seconds
        self.live_ttl_seconds = live_ttl_seconds
        self.copy = InMemoryEventLog(max_events_per_chat=max_events_per_chat, max_total_events=memory_events,
                                     retention_seconds=min(retention_seconds, 60.0))
        self._prefix = hub.key("events", "")
        self._prefix_bytes = self._prefix.encode()
        self._interest: dict[str, _Interest] = {}
        self._writing: set[str] = set()
        self._pending: list[_Pending] = []
        self._flush = asyncio.Event()
        self.redis_reads = 0
        """Reads that went to Redis (replays, and reads the copy could not answer)."""
        self.redis_writes = 0
        """Pipelines the writer sent (each carries every append that waited at that moment)."""
        hub.add_source(self)

    def key(self, chat_id: str) -> str:
        return self._prefix + chat_id

    # -- lifecycle (called by the app) ---------------------------------------------------------

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        await self.hub.start(tg)
        tg.start_soon(self._flush_loop)

    async def aclose(self) -> None:
        if self._pending and self.hub.writer is not None:  # the writer task has stopped: the rest goes now
            batch, self._pending = self._pending, []
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self._flush_batch(batch)
        await self.hub.aclose()

    async def opened(self, hub: RedisHub) -> None:
        return None

    # -- writing -----------------------------------------------------------------------------

    async def append(self, chat_id: str, entries: Sequence[LogEntry]) -> None:
        """Queue the entries for the next pipeline; a `run_finished` returns only once it is in Redis.

        A run does not wait for each event's write (under load that would cap every run at one event per
        round trip); it waits at its end, so that a run which has ended has all its events in Redis. The
        one writer task keeps the order of the queue.
        """
        if not entries:
            return
        # Redis away or slow: the runs wait rather than grow memory.
        while len(self._pending) >= _MAX_PENDING:  # noqa: ASYNC110 - drained by the writer task
            await anyio.sleep(0.05)
        done: asyncio.Future[None] | None = None
        if entries[-1].type == "run_finished":
            done = asyncio.get_running_loop().create_future()
        self._pending.append((chat_id, list(entries), done))
        self._flush.set()
        if done is not None:
            await done

    async def flush(self) -> None:
        """Wait until every entry appended so far is in Redis."""
        if not self._pending:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append(("", [], done))
        self._flush.set()
        await done

    async def _flush_loop(self) -> None:
        while True:
            await self._flush.wait()
            self._flush.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                await self._flush_batch(batch)

    async def _flush_batch(self, batch: list[_Pending]) -> None:
        delay = 0.05
        deadline = time.monotonic() + _WRITE_PATIENCE
        while True:
            try:
                results = await self._write(batch)
                break
            except Exception as exc:
                if time.monotonic() + delay > deadline:
                    logger.error("Writing %d event(s) to Redis failed for %.0f s (%s); they are dropped",
                                 sum(len(e) for _, e, _ in batch), _WRITE_PATIENCE, exc)
                    for _, _, done in batch:
                        if done is not None and not done.done():
                            done.set_exception(exc)
                    return
                logger.warning("Writing events to Redis failed (%s); trying again in %.2f s", exc, delay)
                await anyio.sleep(delay)
                delay = min(1.0, delay * 2)
        position = 0
        for chat_id, entries, done in batch:
            if not entries:  # a flush() waiting for what came before it
                if done is not None and not done.done():
                    done.set_result(None)
                continue
            written = []
            for entry in entries:
                outcome = results[position]
                position += 1
                if isinstance(outcome, Exception):
                    logger.warning("Redis refused event %s of chat %s (%s); it is dropped", entry.cursor, chat_id,
                                   outcome)
                else:
                    written.append(entry)
            if entries[-1].type in ("run_started", "run_finished"):
                position += 1  # the EXPIRE
            if entries[-1].type == "run_finished":
                self._writing.discard(chat_id)
                if chat_id in self._interest:
                    self.hub.wake_soon()  # followers here now read what other replicas write
            else:
                self._writing.add(chat_id)
            if written:
                await self._copy(chat_id, written)
            if done is not None and not done.done():
                done.set_result(None)

    async def _write(self, batch: list[_Pending]) -> list[Any]:
        pipe = self.hub.writer.pipeline(transaction=False)
        for chat_id, entries, _ in batch:
            if not entries:
                continue
            key = self.key(chat_id)
            for entry in entries:
                pipe.execute_command("XADD", key, "MAXLEN", "~", self.max_events_per_chat, str(entry.cursor),
                                     "t", entry.type, "d", entry.data)
            last = entries[-1].type
            if last == "run_finished":
                pipe.execute_command("EXPIRE", key, max(1, int(self.retention_seconds)))
            elif last == "run_started":
                pipe.execute_command("EXPIRE", key, max(1, int(self.live_ttl_seconds)))
        self.redis_writes += 1
        results: list[Any] = await pipe.execute(raise_on_error=False)
        return results

    async def _copy(self, chat_id: str, entries: list[LogEntry]) -> None:
        """Add entries read or written to this process's copy, keeping it a gapless slice of the stream."""
        held = self.copy.tail(chat_id)
        tail, tail_type = held if held is not None else (None, None)
        if tail is not None:
            entries = [e for e in entries if e.cursor > tail]
            if not entries:
                return
        if tail is None or not _follows(tail, tail_type, entries[0].cursor):
            # Not held, or something in between is missing here: the copy starts over from these entries.
            self.copy.seed(chat_id, _before(entries[0].cursor))
        await self.copy.append(chat_id, entries)

    # -- the reader's side (StreamSource) ---------------------------------------------------

    def streams(self) -> dict[bytes, bytes]:
        now = time.monotonic()
        wanted: dict[bytes, bytes] = {}
        for chat_id, interest in list(self._interest.items()):
            if interest.waiters == 0 and now - interest.touched > _FOLLOW_LINGER:
                del self._interest[chat_id]
                continue
            held = self.copy.tail(chat_id)
            if chat_id in self._writing or held is None or held[0] is None:
                interest.live = False
                continue
            wanted[self._prefix_bytes + chat_id.encode()] = str(held[0]).encode()
        return wanted

    async def deliver(self, key: bytes, entries: list[RawEntry]) -> None:
        chat_id = key[len(self._prefix_bytes):].decode()
        await self._copy(chat_id, [_entry(raw_id, fields) for raw_id, fields in entries])

    def caught_up(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            interest = self._interest.get(key[len(self._prefix_bytes):].decode())
            if interest is not None:
                interest.live = True

    # -- reading -----------------------------------------------------------------------------

    def _copy_current(self, chat_id: str) -> bool:
        """The copy holds everything of the chat written so far (give or take a read in flight)."""
        if chat_id in self._writing:
            return True
        interest = self._interest.get(chat_id)
        return interest is not None and interest.live

    async def read_after(self, chat_id: str, after: Cursor, limit: int = 512) -> list[LogEntry]:
        if await self.copy.position(chat_id, after) is Position.KNOWN:
            found = await self.copy.read_after(chat_id, after, limit)
            if found or self._copy_current(chat_id):
                return found
        return await self._read_redis(chat_id, after, limit)

    async def _read_redis(self, chat_id: str, after: Cursor, limit: int) -> list[LogEntry]:
        """One `XREAD` of the entries after `after`, and the stream's first id to tell if some were trimmed."""
        self.redis_reads += 1
        key = self.key(chat_id)
        pipe = self.hub.client.pipeline(transaction=False)
        pipe.execute_command("XREAD", "COUNT", limit, "STREAMS", key, str(after))
        pipe.execute_command("XRANGE", key, "-", "+", "COUNT", 1)
        reply, first = await pipe.execute()
        if not first:
            if after.index == 0:
                return []  # nothing published yet (a run about to start)
            raise CursorExpired(f"Nothing of chat {chat_id} is kept.")
        if _cursor(first[0][0]) > Cursor(after.run, after.index + 1):
            raise CursorExpired(f"The events after {after} were dropped.")
        raw: list[RawEntry] = []
        if reply:
            [(_key, raw)] = reply.items() if isinstance(reply, dict) else reply
        return [_entry(raw_id, fields) for raw_id, fields in raw]

    async def wait(self, chat_id: str, after: Cursor, timeout: float) -> bool:
        interest = self._interest.get(chat_id)
        if interest is None:
            interest = self._interest[chat_id] = _Interest()
        interest.waiters += 1
        interest.touched = time.monotonic()
        try:
            if not self.copy.holds(chat_id):
                self.copy.seed(chat_id, after)  # the follower read everything up to `after` a moment ago
                interest.live = False
                if chat_id not in self._writing:
                    await self.hub.wake()
            return await self.copy.wait(chat_id, after, timeout)
        finally:
            interest.waiters -= 1
            interest.touched = time.monotonic()

    async def position(self, chat_id: str, cursor: Cursor) -> Position:
        if await self.copy.position(chat_id, cursor) is Position.KNOWN:
            return Position.KNOWN
        key = self.key(chat_id)
        pipe = self.hub.client.pipeline(transaction=False)
        pipe.execute_command("XRANGE", key, "-", "+", "COUNT", 1)
        pipe.execute_command("XREVRANGE", key, cursor.run, cursor.run, "COUNT", 1)
        first, last = await pipe.execute()
        if not last:
            return Position.UNKNOWN
        if cursor.index > _cursor(last[0][0]).index:
            return Position.BEYOND
        if _cursor(first[0][0]) > Cursor(cursor.run, cursor.index + 1):
            return Position.EXPIRED
        return Position.KNOWN

    async def last_cursor(self, chat_id: str, run: int | None = None) -> Cursor | None:
        key = self.key(chat_id)
        if run is None:
            found = await self.hub.client.execute_command("XREVRANGE", key, "+", "-", "COUNT", 1)
        else:
            found = await self.hub.client.execute_command("XREVRANGE", key, run, run, "COUNT", 1)
        return _cursor(found[0][0]) if found else None

    async def runs_after(self, chat_id: str, run: int) -> list[int]:
        key = self.key(chat_id)
        later: list[int] = []
        while len(later) < 16:
            found = await self.hub.client.execute_command("XRANGE", key, (later[-1] if later else run) + 1, "+",
                                                          "COUNT", 1)
            if not found:
                break
            later.append(_cursor(found[0][0]).run)
        return later

    async def discard(self, chat_id: str) -> None:
        await self.hub.client.delete(self.key(chat_id))
        self.copy.forget(chat_id)
        self._writing.discard(chat_id)

    def sweep(self) -> None:
        self.copy.sweep()

    async def ttl(self, chat_id: str) -> float | None:
        """Seconds until the chat's stream expires (`None`: no stream, or no expiry)."""
        milliseconds = await self.hub.client.pttl(self.key(chat_id))
        return milliseconds / 1000 if milliseconds >= 0 else None
