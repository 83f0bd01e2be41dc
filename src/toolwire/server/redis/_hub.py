"""The Redis connections of one server process, and the one task that reads from Redis.

Per process, however many followers it serves, there are:

- one *reader* connection, used only by the reader task, which blocks in a single `XREAD` over every
  stream this process follows: the chat streams that followers here wait on (and that no run of this
  process writes), the signals stream (cancellations), and this process's wake-up stream. Whenever the
  set of followed streams changes, one entry is added to the wake-up stream, so the blocked read
  returns at once and starts over with the new set;
- one *writer* connection (`writer`), used only by the event log's writer task: every append waiting at
  one moment goes out in one pipeline on it, so the events of many runs cost one round trip, and that
  round trip never queues behind a replay or a script for a pool connection (under load it did, and every
  run's events waited with it);
- a small *pool* (`max_connections`, 4 by default) for everything else: replays, the rate-limit script,
  signals, and the wake-ups of the reader (coalesced: all the wake-ups asked for while one is on its way
  go out together in the next).

Nothing here opens a connection per follower, per chat or per run: `CLIENT LIST` shows at most
`max_connections + 2` connections named `toolwire:<process>:...` per process.

Whatever reads through the reader is a `StreamSource`: it says which streams it follows and from which
entry id, and gets the entries the read returns. redis-py's asyncio client ties this package to the
asyncio event loop (the server runs on it anyway).

Redis losing its data. A Redis restarted without persistence (or flushed) comes back empty while runs
go on. Each process keeps a key of its own (`<prefix>:alive:<process>`, which nothing else writes or
deletes); when it is missing, Redis lost what it held. The hub looks after every failed read (so at
once when Redis is back) and every few seconds, and on demand (`check_lost`, which the event log's
writer asks when a stream it writes to is gone). Then every source hears `lost()` (the event log
writes again the events of the runs this process ran) and `epoch` counts one more loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, Protocol

import anyio
import anyio.abc

from ...exceptions import ToolwireError
from ...store import new_id

__all__ = ["RawEntry", "RedisHub", "RedisUnavailable", "StreamSource"]

logger = logging.getLogger("toolwire.server")

_ALIVE_TTL = 7 * 86_400
"""Seconds this process's own key lives without a check (it is renewed at every check)."""

_ALIVE_CHECK_SECONDS = 5.0
"""How often the reader checks that Redis still holds this process's key."""

_READ_PAUSE_MAX = 0.5
"""Longest pause between two failed reads (Redis away): how late followers here learn that it is back."""

RawEntry = tuple[bytes, dict[bytes, bytes]]
"""A stream entry as redis-py returns it: its id and its fields."""


class RedisUnavailable(ToolwireError):
    """Redis could not be reached (at start-up, or for longer than the retries allow)."""


class StreamSource(Protocol):
    """Something the reader reads streams for."""

    async def opened(self, hub: RedisHub) -> None:
        """Called once the hub is connected, before the reader starts."""
        ...

    def streams(self) -> dict[bytes, bytes]:
        """The streams to read now (key → the id of the last entry already had)."""
        ...

    async def deliver(self, key: bytes, entries: list[RawEntry]) -> None:
        """New entries of one of the streams."""
        ...

    def caught_up(self, keys: Sequence[bytes]) -> None:
        """A read over these streams returned: everything written to them before it was delivered."""
        ...

    def lost(self) -> None:
        """Redis lost its data (it restarted empty, or was flushed): streams and ids start over."""
        ...


def _redacted(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    return f"{scheme}{sep}{rest}"


class RedisHub:
    """A Redis server shared by the event log, the signals and the rate limiter of one process.

    Args:
        url: `redis://[:password@]host:port/db` (or `rediss://` for TLS, `unix:///path.sock`).
        prefix: Prefix of every key this server writes (several deployments may share one Redis).
        max_connections: Size of the pool for replays, scripts, signals and wake-ups (the reader and the
            event writer have a connection each besides).
        block_seconds: Longest a blocked `XREAD` waits before it starts over (it also returns at once
            whenever there is something to read or the set of streams changes).
    """

    def __init__(self, url: str, *, prefix: str = "toolwire", max_connections: int = 4,
                 block_seconds: float = 5.0) -> None:
        self.url = url
        self.prefix = prefix
        self.process_id = new_id("proc")
        self.max_connections = max_connections
        self.block_seconds = block_seconds
        self.client: Any = None
        self.writer: Any = None
        """The event log writer's own connection (one task writes on it, so it never waits for another)."""
        self._pool: Any = None
        self._reader: Any = None
        self._wake_wanted = asyncio.Event()
        self._wake_waiters: list[asyncio.Future[None]] = []
        self._sources: list[StreamSource] = []
        self._owners: dict[bytes, StreamSource] = {}
        self._wake_key = f"{prefix}:wake:{self.process_id}".encode()
        self._wake_last = b"0-0"
        self._alive_key = f"{prefix}:alive:{self.process_id}"
        self._alive_checked = 0.0
        self._loss_lock = asyncio.Lock()
        self.epoch = 0
        """How many times this process found that Redis had lost its data."""
        self._started = False
        self._closed = False
        self.reads = 0
        """How many `XREAD` calls the reader made (for tests and benchmarks)."""

    def __repr__(self) -> str:
        return f"RedisHub({_redacted(self.url)!r})"

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def add_source(self, source: StreamSource) -> None:
        self._sources.append(source)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Connect (failing with a sentence if Redis does not answer) and start the reader; idempotent."""
        if self._started:
            return
        import redis.asyncio as aioredis

        name = f"toolwire:{self.process_id}"
        pool = aioredis.BlockingConnectionPool.from_url(self.url, max_connections=self.max_connections, timeout=30,
                                                        client_name=f"{name}:pool", socket_connect_timeout=5)
        self._pool = pool
        self.client = aioredis.Redis(connection_pool=pool)
        self.writer = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(
            self.url, max_connections=1, timeout=30, client_name=f"{name}:writer", socket_connect_timeout=5))
        # The reader blocks for `block_seconds`: its socket timeout must be longer.
        self._reader = aioredis.Redis.from_url(self.url, single_connection_client=True, client_name=f"{name}:reader",
                                               socket_connect_timeout=5, socket_timeout=self.block_seconds + 30)
        try:
            with anyio.fail_after(10):
                await self.client.ping()
        except Exception as exc:
            await self._close_clients()
            raise RedisUnavailable(f"Cannot reach Redis at {_redacted(self.url)} ({exc or type(exc).__name__}); "
                                   "start it, or correct the Redis URL (--redis).") from None
        await self.client.set(self._alive_key, b"1", ex=_ALIVE_TTL)
        self._alive_checked = time.monotonic()
        self._started = True
        for source in self._sources:
            await source.opened(self)
        tg.start_soon(self._read_loop)
        tg.start_soon(self._wake_loop)

    async def ready(self) -> None:
        """Raise unless Redis answers a PING now (`/readyz`; its caller bounds the wait)."""
        await self.client.ping()

    async def aclose(self) -> None:
        """Close the connections (the reader task ends with the task group that runs it); idempotent."""
        if self._closed or not self._started:
            return
        self._closed = True
        with anyio.move_on_after(2), contextlib.suppress(Exception):
            await self.client.delete(self._alive_key)
        await self._close_clients()

    async def check_lost(self) -> bool:
        """Whether Redis lost its data since this process last looked (then every source has heard `lost()`).

        Raises the Redis error when Redis cannot be reached.
        """
        async with self._loss_lock:
            self._alive_checked = time.monotonic()
            if await self.client.set(self._alive_key, b"1", ex=_ALIVE_TTL, xx=True):
                return False
            await self.client.set(self._alive_key, b"1", ex=_ALIVE_TTL)
            self.epoch += 1
            logger.warning("Redis lost its data (it restarted empty or was flushed); the events of the runs this "
                           "process ran are written to it again")
            self._wake_last = b"0-0"
            for source in self._sources:
                source.lost()
            return True

    async def _close_clients(self) -> None:
        with anyio.CancelScope(shield=True):
            for client in (self._reader, self.client, self.writer):
                if client is not None:
                    await client.aclose()
            if self._pool is not None:
                await self._pool.disconnect()
            if self.writer is not None:
                await self.writer.connection_pool.disconnect()

    # -- the reader --------------------------------------------------------------------------

    async def wake(self) -> None:
        """Make the reader start its read over (the streams it should follow changed); returns once the wake-up
        is in Redis."""
        done = asyncio.get_running_loop().create_future()
        self._wake_waiters.append(done)
        self._wake_wanted.set()
        await done

    def wake_soon(self) -> None:
        """`wake()` without waiting for it."""
        self._wake_wanted.set()

    async def _wake_loop(self) -> None:
        # A wake-up made after the set of streams changed restarts the read with the new set; several changes
        # that happen while one wake-up is on its way are all covered by the next one.
        while True:
            await self._wake_wanted.wait()
            self._wake_wanted.clear()
            waiters, self._wake_waiters = self._wake_waiters, []
            try:
                pipe = self.client.pipeline(transaction=False)
                pipe.execute_command("XADD", self._wake_key, "MAXLEN", "~", 16, "*", "w", 1)
                pipe.execute_command("EXPIRE", self._wake_key, 3600)
                await pipe.execute()
            except Exception as exc:  # Redis away: the reader's own retries and its block timeout cover it
                if not waiters:
                    logger.warning("Waking the Redis reader failed (%s)", exc)
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
                continue
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def _read_loop(self) -> None:
        pause = 0.05
        block_ms = int(self.block_seconds * 1000)
        suspect = False
        while True:
            if suspect or time.monotonic() - self._alive_checked > _ALIVE_CHECK_SECONDS:
                try:
                    await self.check_lost()
                except Exception as exc:  # still away: the read below fails too, and waits
                    logger.debug("Checking Redis failed (%s)", exc)
                else:
                    suspect = False
            streams: dict[bytes, bytes] = {self._wake_key: self._wake_last}
            owners: dict[bytes, StreamSource] = {}
            for source in self._sources:
                for key, last in source.streams().items():
                    streams[key] = last
                    owners[key] = source
            self._owners = owners
            keys = list(streams)
            try:
                reply = await self._reader.execute_command("XREAD", "COUNT", 512, "BLOCK", block_ms, "STREAMS",
                                                           *keys, *streams.values())
            except Exception as exc:  # Redis away for a moment: the connection is made again on the next read
                logger.warning("Reading from Redis failed (%s); trying again in %.1f s", exc, pause)
                suspect = True
                await anyio.sleep(pause)
                pause = min(_READ_PAUSE_MAX, pause * 2)
                continue
            pause = 0.05
            self.reads += 1
            for key, entries in _stream_entries(reply):
                if key == self._wake_key:
                    self._wake_last = entries[-1][0]
                    continue
                owner = owners.get(key)
                if owner is not None and entries:
                    try:
                        await owner.deliver(key, entries)
                    except Exception:  # one bad entry must not stop every follower of this process
                        logger.exception("Delivering entries of %r failed", key)
            if reply and len(keys) > 64:
                # Each read costs in proportion to the streams it names: with many, let a few milliseconds of
                # entries gather rather than read one entry at a time.
                await anyio.sleep(min(0.005, len(keys) * 0.000005))
            by_source: dict[int, list[bytes]] = {}
            for key, source in owners.items():
                by_source.setdefault(id(source), []).append(key)
            for source in self._sources:
                if id(source) in by_source:
                    source.caught_up(by_source[id(source)])

    async def connections(self) -> dict[str, int]:
        """This process's connections to Redis as Redis sees them (`CLIENT LIST`), by role."""
        listing = await self.client.execute_command("CLIENT", "LIST")
        text = listing.decode() if isinstance(listing, bytes) else str(listing)
        counts: dict[str, int] = {}
        for line in text.splitlines():
            fields = dict(item.partition("=")[::2] for item in line.split(" "))
            name = fields.get("name", "")
            if name.startswith(f"toolwire:{self.process_id}:"):
                role = name.rpartition(":")[2]
                counts[role] = counts.get(role, 0) + 1
        return counts


def _stream_entries(reply: Any) -> list[tuple[bytes, list[RawEntry]]]:
    """`XREAD`'s answer as (key, entries) pairs (RESP2 gives a list of pairs, RESP3 a map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return [(key, list(value[0] if value and isinstance(value[0], list) else value)) for key, value in
                reply.items()]
    return [(key, list(entries)) for key, entries in reply]


