"""The per-chat event log that followers read: cursors, entries, the `EventLog` interface and its in-memory form.

A run publishes every event into its chat's log; any number of followers read the log from a cursor
and then wait for more. Nothing is pushed into per-follower queues, so a slow follower costs nothing
but its place in the log, and a follower that reconnects reads exactly what it missed.

Cursors are `<run_number>-<index>`: the chat's run count and the event's position in its run, both
from 1 (`<run>-0` means "before the run's first event"). They are ordered as pairs of integers, and a
cursor is also a valid Redis stream entry id, which is what a Redis-backed log uses it as.

`InMemoryEventLog` keeps each chat's recent events in one process: at most `max_events_per_chat`
(older entries are dropped from the front: a cursor pointing before them is `CursorExpired`), chats
idle for `retention_seconds` after their last run ended are forgotten, and at most `max_total_events`
are kept over all chats (least recently written chats are forgotten first).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import anyio
import orjson

__all__ = ["Cursor", "CursorExpired", "EventLog", "InMemoryEventLog", "LogEntry", "Position"]

_CURSOR = re.compile(r"(\d{1,15})-(\d{1,15})")
_MAX_PART = 2**31 - 1


@dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """A position in a chat's event stream: `run` (the chat's run number) and `index` within that run."""

    run: int
    index: int

    def __str__(self) -> str:
        return f"{self.run}-{self.index}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """Read `"<run>-<index>"`; raises `ValueError` with a full sentence for anything else."""
        match = _CURSOR.fullmatch(text.strip())
        # Run numbers and indexes are 32-bit integers in the store: a larger one names no event (and must
        # not reach a database column as a value it cannot hold).
        if match is None or not 1 <= int(match.group(1)) <= _MAX_PART or int(match.group(2)) > _MAX_PART:
            raise ValueError(f"{text[:40]!r} is not an event id; event ids look like '3-17' (run 3, event 17), as "
                             "sent in each event's `id:` line.")
        return cls(int(match.group(1)), int(match.group(2)))


class LogEntry:
    """One published event: its cursor, its type and its JSON bytes (encoded once, shared by every follower).

    `event` is the event as a mapping, read from the JSON bytes each time it is asked for: a log keeps
    many thousands of entries, and the bytes alone are a third of the memory the parsed event would
    add. The native encoder never asks for it.
    """

    __slots__ = ("cursor", "data", "type")

    cursor: Cursor
    type: str
    data: bytes

    def __init__(self, cursor: Cursor, type: str, event: Mapping[str, Any] | None = None,
                 data: bytes | None = None) -> None:
        if data is None:
            if event is None:
                raise TypeError("A LogEntry needs the event or its JSON bytes.")
            data = orjson.dumps(event)
        # orjson hands out its whole write buffer (kilobytes for a small event); a kept entry keeps a copy
        # of just the bytes.
        object.__setattr__(self, "cursor", cursor)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "data", bytes(memoryview(data)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LogEntry is immutable.")

    @property
    def event(self) -> dict[str, Any]:
        event: dict[str, Any] = orjson.loads(self.data)
        return event

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogEntry):
            return NotImplemented
        return (self.cursor, self.type, self.data) == (other.cursor, other.type, other.data)

    def __hash__(self) -> int:
        return hash((self.cursor, self.type, self.data))

    def __repr__(self) -> str:
        return f"LogEntry({self.cursor}, {self.type!r}, {self.data[:80]!r})"


class CursorExpired(Exception):
    """The events after this cursor are no longer kept; the client must reload the chat's messages."""


class Position(Enum):
    """What a log knows about a cursor."""

    KNOWN = "known"
    """The cursor is in the kept part of the log (or just before it): reading after it works."""
    EXPIRED = "expired"
    """The events right after the cursor were dropped."""
    BEYOND = "beyond"
    """The run is known but has no event at that index yet (or ever)."""
    UNKNOWN = "unknown"
    """The log holds nothing of that run (never seen here, or forgotten)."""


@runtime_checkable
class EventLog(Protocol):
    """Where runs publish events and followers read them. A Redis Streams log implements the same calls
    (`append` = XADD with the cursor as the entry id, `read_after` = XRANGE, `wait` = XREAD BLOCK)."""

    async def append(self, chat_id: str, entries: Sequence[LogEntry]) -> None:
        """Publish entries, in order; their cursors come after everything already in the chat's log."""
        ...

    async def read_after(self, chat_id: str, after: Cursor, limit: int = 512) -> list[LogEntry]:
        """Up to `limit` entries after `after`, oldest first; raises `CursorExpired` if they were dropped."""
        ...

    async def wait(self, chat_id: str, after: Cursor, timeout: float) -> bool:
        """Return `True` as soon as an entry after `after` exists, `False` after `timeout` seconds."""
        ...

    async def position(self, chat_id: str, cursor: Cursor) -> Position: ...

    async def last_cursor(self, chat_id: str, run: int | None = None) -> Cursor | None:
        """The newest cursor of the chat (or of one of its runs) that the log holds."""
        ...

    async def runs_after(self, chat_id: str, run: int) -> list[int]:
        """The run numbers greater than `run` of which the log holds events."""
        ...

    async def discard(self, chat_id: str) -> None:
        """Forget a chat (it was deleted)."""
        ...

    async def expect_run(self, chat_id: str, run: int, run_id: str) -> None:
        """Say which run a follower is about to read as the chat's run number `run` (the database's word).

        A log that holds another run under that number holds a deleted chat whose id was used again:
        it forgets everything it holds of the chat, so nothing of the deleted chat is served.
        """
        ...

    def sweep(self) -> None:
        """Periodic housekeeping (forget idle chats); called by the server every few seconds."""
        ...


@dataclass(slots=True)
class _ChatLog:
    entries: list[LogEntry] = field(default_factory=list)
    offset: int = 0
    """Absolute position of `entries[0]` (how many entries were dropped from the front)."""
    run_start: dict[int, int] = field(default_factory=dict)
    """Absolute position of each run's first event."""
    run_length: dict[int, int] = field(default_factory=dict)
    waiters: list[Any] = field(default_factory=list)
    """Followers waiting for the next append: asyncio futures, or `anyio.Event`s on other backends."""
    touched: float = field(default_factory=time.monotonic)
    finished: bool = True
    """The last run published its `run_finished` (the chat may be forgotten once idle)."""
    tail: Cursor | None = None
    """The cursor of the last entry (or where the log was seeded, before any entry)."""
    tail_type: str | None = None
    """The type of the last entry (`None` for a seeded log without entries)."""

    @property
    def end(self) -> int:
        return self.offset + len(self.entries)

    def locate(self, cursor: Cursor) -> tuple[Position, int]:
        start = self.run_start.get(cursor.run)
        if start is None:
            return Position.UNKNOWN, -1
        if cursor.index > self.run_length[cursor.run]:
            return Position.BEYOND, -1
        position = start + cursor.index
        if position < self.offset:
            return Position.EXPIRED, position
        return Position.KNOWN, position


def _wake(log: _ChatLog) -> int:
    """Wake every follower waiting on the chat; returns how many."""
    waiters, log.waiters = log.waiters, []
    for waiter in waiters:
        if isinstance(waiter, anyio.Event):
            waiter.set()
        elif not waiter.done():
            waiter.set_result(True)
    return len(waiters)


async def _wait(log: _ChatLog, timeout: float) -> None:
    """Until the log's next append (or it is forgotten), at most `timeout` seconds.

    A follower waits here after every event it sends, so on asyncio this is a bare future and a timer
    handle, a fraction of what a cancel scope with a deadline and an `anyio.Event` cost; other
    backends take the portable way.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        event = anyio.Event()
        log.waiters.append(event)
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            if not event.is_set():  # timed out or cancelled: still listed
                with contextlib.suppress(ValueError):
                    log.waiters.remove(event)
        return
    future: asyncio.Future[bool] = loop.create_future()
    log.waiters.append(future)
    timer = loop.call_later(timeout, _expire, future)
    try:
        await future
    finally:
        timer.cancel()
        # Woken by an append, the future is no longer listed; timed out or cancelled, it still is (a
        # search through the chat's waiters, done only then).
        if future.cancelled() or not future.done() or future.result() is False:
            with contextlib.suppress(ValueError):
                log.waiters.remove(future)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


class InMemoryEventLog:
    """An `EventLog` in this process's memory (one server process; see the module docstring)."""

    def __init__(self, *, max_events_per_chat: int = 10_000, max_total_events: int = 500_000,
                 retention_seconds: float = 900.0) -> None:
        self.max_events_per_chat = max_events_per_chat
        self.max_total_events = max_total_events
        self.retention_seconds = retention_seconds
        self._chats: dict[str, _ChatLog] = {}
        self._total = 0
        self.wakeups = 0
        """Followers woken by appends so far: one per follower per append, however many events it holds (for
        tests and benchmarks)."""

    async def append(self, chat_id: str, entries: Sequence[LogEntry]) -> None:
        log = self._chats.get(chat_id)
        if log is None:
            log = self._chats[chat_id] = _ChatLog()
        else:  # most recently written last: eviction takes from the front
            self._chats[chat_id] = self._chats.pop(chat_id)
        for entry in entries:
            run = entry.cursor.run
            if run not in log.run_start:
                log.run_start[run] = log.end
                log.run_length[run] = 0
            log.run_length[run] = entry.cursor.index
            log.entries.append(entry)
            log.finished = entry.type == "run_finished"
        if entries:
            log.tail, log.tail_type = entries[-1].cursor, entries[-1].type
        self._total += len(entries)
        log.touched = time.monotonic()
        excess = len(log.entries) - self.max_events_per_chat
        if excess > 0:
            del log.entries[:excess]
            log.offset += excess
            self._total -= excess
        if log.waiters:
            self.wakeups += _wake(log)
        self._evict(keep=chat_id)

    def _evict(self, keep: str) -> None:
        if self._total <= self.max_total_events:
            return
        for chat_id in list(self._chats):
            if self._total <= self.max_total_events:
                break
            log = self._chats[chat_id]
            if chat_id != keep and log.finished:
                self._forget(chat_id)

    def _forget(self, chat_id: str) -> None:
        log = self._chats.pop(chat_id, None)
        if log is not None:
            self._total -= len(log.entries)
            _wake(log)

    async def read_after(self, chat_id: str, after: Cursor, limit: int = 512) -> list[LogEntry]:
        log = self._chats.get(chat_id)
        if log is None:
            raise CursorExpired(f"Nothing of chat {chat_id} is kept.")
        where, position = log.locate(after)
        if where is Position.UNKNOWN:
            if log.run_start and after.run > max(log.run_start) and after.index == 0:
                return []  # a run that has not published yet
            raise CursorExpired(f"Run {after.run} of chat {chat_id} is not kept.")
        if where is Position.EXPIRED:
            raise CursorExpired(f"The events after {after} were dropped.")
        if where is Position.BEYOND:
            return []
        start = position - log.offset
        return log.entries[start:start + limit]

    async def wait(self, chat_id: str, after: Cursor, timeout: float) -> bool:
        log = self._chats.get(chat_id)
        if log is None:
            await anyio.sleep(timeout)
            return False
        if self._has_after(log, after):
            return True
        await _wait(log, timeout)
        current = self._chats.get(chat_id)
        return (current is not None and self._has_after(current, after)) or current is not log

    @staticmethod
    def _has_after(log: _ChatLog, after: Cursor) -> bool:
        where, position = log.locate(after)
        if where is Position.KNOWN:
            return position < log.end
        return where is Position.EXPIRED

    async def position(self, chat_id: str, cursor: Cursor) -> Position:
        log = self._chats.get(chat_id)
        if log is None:
            return Position.UNKNOWN
        return log.locate(cursor)[0]

    async def last_cursor(self, chat_id: str, run: int | None = None) -> Cursor | None:
        log = self._chats.get(chat_id)
        if log is None or not log.run_start:
            return None
        if run is None:
            run = max(log.run_start)
        length = log.run_length.get(run)
        return Cursor(run, length) if length else None

    async def runs_after(self, chat_id: str, run: int) -> list[int]:
        log = self._chats.get(chat_id)
        return sorted(r for r in log.run_start if r > run) if log is not None else []

    async def discard(self, chat_id: str) -> None:
        self._forget(chat_id)

    async def expect_run(self, chat_id: str, run: int, run_id: str) -> None:
        held = self.run_id(chat_id, run)
        if held is not None and held != run_id:
            self._forget(chat_id)

    def run_id(self, chat_id: str, run: int) -> str | None:
        """The id of the run held as number `run` (read from its first held entry), or `None` if none is held."""
        log = self._chats.get(chat_id)
        start = log.run_start.get(run) if log is not None else None
        if log is None or start is None:
            return None
        position = max(start, log.offset) - log.offset
        if position >= len(log.entries) or log.entries[position].cursor.run != run:
            return None
        found = orjson.loads(log.entries[position].data).get("run_id")
        return found if isinstance(found, str) else None

    def entries(self, chat_id: str) -> list[LogEntry]:
        """Every entry held of the chat, oldest first."""
        log = self._chats.get(chat_id)
        return list(log.entries) if log is not None else []

    # -- a partial copy of a log kept elsewhere (the Redis log keeps one per chat it serves) ------

    def seed(self, chat_id: str, before: Cursor) -> None:
        """Start (or restart) the chat's log empty, positioned just after `before`: the next entry appended
        must be the one following it, and reading after `before` works (earlier cursors are `EXPIRED`)."""
        self._forget(chat_id)
        log = self._chats[chat_id] = _ChatLog(tail=before)
        log.run_start[before.run] = -before.index
        log.run_length[before.run] = before.index

    def tail(self, chat_id: str) -> tuple[Cursor | None, str | None] | None:
        """The chat's last cursor and its entry's type (`None` as type when only seeded); `None` if not held."""
        log = self._chats.get(chat_id)
        return (log.tail, log.tail_type) if log is not None else None

    def holds(self, chat_id: str) -> bool:
        return chat_id in self._chats

    def forget(self, chat_id: str) -> None:
        """Drop the chat's log (its waiters wake up and read again)."""
        self._forget(chat_id)

    def sweep(self) -> None:
        """Forget chats idle past the retention time whose last run has finished."""
        limit = time.monotonic() - self.retention_seconds
        for chat_id, log in list(self._chats.items()):
            if log.finished and log.touched < limit:
                self._forget(chat_id)

    @property
    def total_events(self) -> int:
        return self._total
