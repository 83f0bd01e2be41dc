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
"""Appends queued for Redis at most. While Redis is away the queue keeps every event (nothing is dropped);
once it is full, appending waits: the runs pause until Redis answers again."""

_WRITE_PAUSE_MAX = 0.5
"""Longest pause between two tries of a write while Redis is away (how late the events follow it back)."""

_FENCE_SECONDS = 3600.0
"""How long a deleted chat's runs are kept from writing to the stream of a chat that reuses its id."""

_TYPES: dict[bytes, str] = {}

_Pending = tuple[str, list[LogEntry], "asyncio.Future[None] | None"]


@dataclass(slots=True)
class _Interest:
    """Followers of one chat in this process that wait for entries written elsewhere."""

    waiters: int = 0
    touched: float = 0.0
    live: bool = False
    """The reader has read this chat's stream since it was added: the copy is current."""


class _StreamGone(CursorExpired):
    """Redis holds nothing of the chat (expired, deleted, or lost with Redis's data)."""


class _Deletions:
    """The stream of deleted chats (`<prefix>:deleted`) that every replica's reader follows: each replica
    forgets its copy of a deleted chat the moment it reads the entry. Kept to the last thousand deletions."""

    def __init__(self, log: RedisEventLog, key: bytes) -> None:
        self.log = log
        self.key = key
        self._last = b"0-0"

    async def opened(self, hub: RedisHub) -> None:
        newest = await hub.client.execute_command("XREVRANGE", self.key, "+", "-", "COUNT", 1)
        if newest:
            self._last = newest[0][0]  # deletions from before this process started concern no copy of it

    def streams(self) -> dict[bytes, bytes]:
        return {self.key: self._last}

    async def deliver(self, key: bytes, entries: list[RawEntry]) -> None:
        self._last = entries[-1][0]
        for _id, fields in entries:
            chat_id = fields.get(b"chat")
            if chat_id is not None:
                self.log.deleted_elsewhere(chat_id.decode())

    def caught_up(self, keys: Sequence[bytes]) -> None:
        return None

    def lost(self) -> None:
        self._last = b"0-0"


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
        self._owned: dict[str, float] = {}
        """Chats this process wrote events of (monotonic time of the last write): what it writes again when
        Redis lost its data."""
        self._deleted: dict[str, tuple[float, set[int]]] = {}
        """Chats deleted lately (when, and the runs started since under the same id): see `_fenced`."""
        self._rewrite_wanted = False
        self._deletions = _Deletions(self, hub.key("deleted").encode())
        hub.add_source(self._deletions)
        self._pending: list[_Pending] = []
        self._waiting: set[asyncio.Future[None]] = set()
        """The runs' waits for their `run_finished` to be in Redis (`append`), until `stop_waiting`."""
        self._stopped_waiting = False
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
        if chat_id in self._deleted:
            entries = self._fenced(chat_id, entries)
            if not entries:
                return
        # Redis away or slow: the runs wait rather than grow memory (see `_MAX_PENDING`).
        while len(self._pending) >= _MAX_PENDING and not self._stopped_waiting:  # noqa: ASYNC110 - the writer drains
            await anyio.sleep(0.05)
        done: asyncio.Future[None] | None = None
        if entries[-1].type == "run_finished" and not self._stopped_waiting:
            done = asyncio.get_running_loop().create_future()
            self._waiting.add(done)
        self._pending.append((chat_id, list(entries), done))
        self._flush.set()
        if done is not None:
            try:
                await done
            finally:
                self._waiting.discard(done)

    def stop_waiting(self) -> None:
        """The server is stopping and its runs had their grace: none waits any longer for Redis to take its
        events (they stay queued, and `aclose` tries once more). With Redis away, a run that had ended waited
        for it inside its shielded end, and the process never exited."""
        self._stopped_waiting = True
        for done in self._waiting:
            if not done.done():
                done.set_result(None)

    def _fenced(self, chat_id: str, entries: Sequence[LogEntry]) -> list[LogEntry]:
        """The entries of a deleted chat that belong to runs started after its deletion (its id used again)."""
        _since, started = self._deleted[chat_id]
        kept = []
        for entry in entries:
            if entry.type == "run_started" and entry.cursor.index == 1:
                started.add(entry.cursor.run)
            if entry.cursor.run in started:
                kept.append(entry)
        if len(kept) < len(entries):
            logger.info("Dropped %d event(s) of a run of deleted chat %s", len(entries) - len(kept), chat_id)
        return kept

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
            if self._rewrite_wanted:
                await self._flush_batch([])
            while self._pending:
                batch, self._pending = self._pending, []
                await self._flush_batch(batch)

    async def _flush_batch(self, batch: list[_Pending]) -> None:
        """Write the batch, trying again for as long as Redis is away (the queue behind it is bounded)."""
        groups = [(chat_id, entries) for chat_id, entries, _ in batch if entries]
        replies: list[Any] = []
        retry: list[tuple[str, list[LogEntry]]] | None = None
        delay = 0.05
        failing_since: float | None = None
        while True:
            try:
                if self._rewrite_wanted:
                    await self._rewrite_owned()
                epoch = self.hub.epoch
                if retry is None:
                    replies = await self._write(groups)
                else:
                    replies = self._merge(replies, await self._write(retry))
                # No reply: the stream is gone. Redis lost its data (write again what this process holds,
                # then these), or the chat was deleted (they are dropped below). The check first: the reader
                # may be finding the same loss at this moment.
                if None in replies and (await self.hub.check_lost() or self.hub.epoch != epoch):
                    retry = self._missing(groups, replies)
                    continue
                break
            except Exception as exc:
                if failing_since is None:
                    failing_since = time.monotonic()
                    logger.warning("Writing events to Redis failed (%s); they are kept and written once it answers",
                                   exc)
                await anyio.sleep(delay)
                delay = min(_WRITE_PAUSE_MAX, delay * 2)
        if failing_since is not None:
            logger.warning("Redis answers again: %d event(s) written after %.1f s", len(replies),
                           time.monotonic() - failing_since)
        position = 0
        for chat_id, entries, done in batch:
            written = []
            for entry in entries:
                reply = replies[position]
                position += 1
                if reply is None:
                    self._fence(chat_id)  # deleted while its run was writing: nothing recreates its stream
                elif isinstance(reply, Exception):
                    logger.warning("Redis refused event %s of chat %s (%s); it is dropped", entry.cursor, chat_id,
                                   reply)
                else:
                    written.append(entry)
            if entries and entries[-1].type == "run_finished":
                self._writing.discard(chat_id)
                if chat_id in self._interest:
                    self.hub.wake_soon()  # followers here now read what other replicas write
            elif written:
                self._writing.add(chat_id)
            if written:
                self._owned[chat_id] = time.monotonic()
                await self._copy(chat_id, written)
            if done is not None and not done.done():
                done.set_result(None)

    @staticmethod
    def _missing(groups: list[tuple[str, list[LogEntry]]], replies: list[Any]) -> list[tuple[str, list[LogEntry]]]:
        """The entries that got no reply, grouped as they were."""
        missing = []
        position = 0
        for chat_id, entries in groups:
            again = [entry for number, entry in enumerate(entries) if replies[position + number] is None]
            position += len(entries)
            if again:
                missing.append((chat_id, again))
        return missing

    @staticmethod
    def _merge(replies: list[Any], again: list[Any]) -> list[Any]:
        """`replies` with the replies to the entries written again (those that had none) put in their place."""
        taken = iter(again)
        return [next(taken) if reply is None else reply for reply in replies]

    async def _write(self, groups: list[tuple[str, list[LogEntry]]]) -> list[Any]:
        """XADD each entry (with its cursor as the id); the replies to the XADDs, in order.

        Only a run's first event may create its stream: every other one is written with NOMKSTREAM, so that
        a stream that is gone (Redis lost it, or the chat was deleted) is never started again half-way.
        """
        if not groups:
            return []
        pipe = self.hub.writer.pipeline(transaction=False)
        command = pipe.execute_command
        maxlen = self.max_events_per_chat
        expires: list[int] = []
        count = 0
        for chat_id, entries in groups:
            key = self.key(chat_id)
            for entry in entries:
                if entry.type == "run_started" and entry.cursor.index == 1:
                    command("XADD", key, "MAXLEN", "~", maxlen, str(entry.cursor), "t", entry.type, "d", entry.data)
                else:
                    command("XADD", key, "NOMKSTREAM", "MAXLEN", "~", maxlen, str(entry.cursor), "t", entry.type,
                            "d", entry.data)
            count += len(entries)
            last = entries[-1].type
            if last in ("run_started", "run_finished"):
                ttl = self.retention_seconds if last == "run_finished" else self.live_ttl_seconds
                command("EXPIRE", key, max(1, int(ttl)))
                expires.append(count + len(expires))
        self.redis_writes += 1
        results: list[Any] = await pipe.execute(raise_on_error=False)
        for position in reversed(expires):
            del results[position]
        return results

    def lost(self) -> None:
        """Redis lost its data: the writer writes again what this process wrote; followers read Redis again."""
        self._rewrite_wanted = True
        self._flush.set()
        for interest in self._interest.values():
            interest.live = False
        self.hub.wake_soon()

    async def _rewrite_owned(self) -> None:
        """Write again, with their own ids, the events this process holds of the chats it wrote to lately (the
        runs it runs, and those that ended here within the copy's retention): the followers on every replica
        then resume with the cursors they had. Ids Redis already holds are refused, harmlessly."""
        self._rewrite_wanted = False
        chats = [chat_id for chat_id in self._owned if chat_id not in self._deleted and self.copy.holds(chat_id)]
        count = 0
        try:
            for chat_id in chats:
                entries = self.copy.entries(chat_id)
                if not entries:
                    continue
                key = self.key(chat_id)
                for start in range(0, len(entries), 1000):
                    pipe = self.hub.writer.pipeline(transaction=False)
                    for entry in entries[start:start + 1000]:
                        pipe.execute_command("XADD", key, "MAXLEN", "~", self.max_events_per_chat,
                                             str(entry.cursor), "t", entry.type, "d", entry.data)
                    await pipe.execute(raise_on_error=False)
                ttl = self.live_ttl_seconds if chat_id in self._writing else self.retention_seconds
                await self.hub.writer.expire(key, max(1, int(ttl)))
                count += len(entries)
        except Exception:
            self._rewrite_wanted = True
            raise
        logger.warning("Wrote %d event(s) of %d chat(s) to Redis again, after it lost its data", count, len(chats))

    async def _copy(self, chat_id: str, entries: list[LogEntry]) -> None:
        """Add entries read or written to this process's copy, keeping it a gapless slice of the stream."""
        held = self.copy.tail(chat_id)
        tail, tail_type = held if held is not None else (None, None)
        if tail is not None:
            first = entries[0]
            if first.type == "run_started" and first.cursor <= tail:
                # A run starting before the copy's end (only this process's own appends can, and a run's
                # start is its first): the chat was deleted and its id used again.
                self.copy.forget(chat_id)
                tail, tail_type = None, None
            else:
                entries = [e for e in entries if e.cursor > tail]
                if not entries:
                    return
        if tail is None or not _follows(tail, tail_type, entries[0].cursor):
            # Not held, or something in between is missing here: the copy starts over from these entries.
            self.copy.seed(chat_id, _before(entries[0].cursor))
        await self.copy.append(chat_id, entries)

    # -- deleted chats -------------------------------------------------------------------------

    def _fence(self, chat_id: str) -> None:
        """Forget the chat here, and drop whatever a run of it still writes (see `_fenced`)."""
        if chat_id not in self._deleted:
            self._deleted[chat_id] = (time.monotonic(), set())
        self._writing.discard(chat_id)
        self._owned.pop(chat_id, None)
        self._forget(chat_id)

    def _forget(self, chat_id: str) -> None:
        """Drop the copy (its followers here wake up and read again, from Redis if need be)."""
        self.copy.forget(chat_id)
        interest = self._interest.get(chat_id)
        if interest is not None:
            interest.live = False

    def deleted_elsewhere(self, chat_id: str) -> None:
        """A replica deleted the chat (read from the deletions stream): the copy goes. A run of it that this
        process still runs finds its stream gone at its next write and is fenced then (see `_flush_batch`);
        a run of a new chat under the same id, started meanwhile, goes on."""
        self._forget(chat_id)

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
            try:
                return await self._read_redis(chat_id, after, limit)
            except _StreamGone:
                return found  # Redis lost the stream: the run's replica writes it again (see `lost`)
            except CursorExpired:
                raise
            except Exception as exc:
                # Redis away: the follower waits on the copy, which the reader fills once Redis answers again.
                logger.debug("Reading chat %s from Redis failed (%s); following the copy", chat_id, exc)
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
            raise _StreamGone(f"Nothing of chat {chat_id} is kept.")
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
                    try:
                        await self.hub.wake()
                    except Exception as exc:  # Redis away: the reader takes the chat in when it reads again
                        logger.debug("Waking the Redis reader failed (%s)", exc)
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
        """Delete the chat's stream and tell every replica to forget its copy (raises if Redis is away, before
        anything is deleted: the caller deletes the chat's rows only after this)."""
        pipe = self.hub.client.pipeline(transaction=False)
        pipe.execute_command("XADD", self._deletions.key, "MAXLEN", "~", 1000, "*", "chat", chat_id)
        pipe.execute_command("DEL", self.key(chat_id))
        await pipe.execute()
        self._fence(chat_id)

    async def expect_run(self, chat_id: str, run: int, run_id: str) -> None:
        held = self.copy.run_id(chat_id, run)
        if held is not None and held != run_id:
            logger.info("Forgot this process's copy of chat %s: it held a deleted chat's run %d", chat_id, run)
            self._forget(chat_id)

    def sweep(self) -> None:
        self.copy.sweep()
        now = time.monotonic()
        for chat_id, since in list(self._owned.items()):
            if chat_id not in self._writing and now - since > self.copy.retention_seconds:
                del self._owned[chat_id]
        for chat_id, (since, _started) in list(self._deleted.items()):
            if now - since > _FENCE_SECONDS:
                del self._deleted[chat_id]

    async def ttl(self, chat_id: str) -> float | None:
        """Seconds until the chat's stream expires (`None`: no stream, or no expiry)."""
        milliseconds = await self.hub.client.pttl(self.key(chat_id))
        return milliseconds / 1000 if milliseconds >= 0 else None
