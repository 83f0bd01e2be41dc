"""The reads every chat makes (one SELECT, or a read of several statements), never waiting for a pool.

A server under load has a busy event loop: with 1,000 chats streaming, each of its turns takes tens of
milliseconds. A read that holds a connection (or a thread's token) until its task runs again holds it for
that long, however quick its statement is, and the reads of run starts queued for them by the hundreds: 557
run starts were waiting in a snapshot of such a run on SQLite, and on PostgreSQL the pool's 30 s timeout
failed requests and runs. So the hot reads (`SQLStore._select`, `SQLStore._read_many`) run where nothing
else waits:

- SQLite, one SELECT (`select`: a token's user, a chat, the queue checks): on the caller's event loop, on a
  connection of its own that never waits for a lock. In WAL mode a reader takes no lock a writer holds, so a
  point lookup is tens of microseconds of SQLite's work, about what one loop turn costs. Handing it to a thread
  cost far more than it saved: on a 2-core VM one hop there and back is ~170 us of CPU (a wake-up of a sleeping
  thread, then of the loop through its self-pipe), and a reader thread needing the GIL back from the busy loop
  after each sqlite3 call traded it back and forth dozens of times per read (`futex`, counted with strace). When
  SQLite does answer busy (another process holds the database exclusively, a WAL being recovered), or a loop in
  another thread is reading on that connection, the read goes to the reader threads below, which wait.
- SQLite, a read of several statements (`many`: a run's history): on reader connections of their own
  (`create_sqlite_reader`), one per thread of a `ThreadPoolExecutor`. A read is handed to the first thread free,
  which goes on to the next as soon as it is done; the result comes back to the caller's loop by
  `call_soon_threadsafe`. A long chat's history is too much work to do on the loop.
- PostgreSQL: on a pool of their own made on an event loop of its own, in a thread (`LoopThread`), which
  runs nothing else, so a connection is back in its pool as soon as its statement has answered. The pool is
  half the size the store was given (`READ_POOL_SHARE`), and the main pool's burst overflow is smaller by as
  much (`cli/serve.py`), so a process keeps to the connections it kept before.
- SQLite through a pool class of the caller's (an in-memory database lives in its one connection): on the
  store's own pool, as every other read.

Other reads (listing chats, a chat's whole history) stay on the store's pool: they are one per request, not
several per chat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import anyio.to_thread
from sqlalchemy import Connection, Engine, Row
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError, TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine

from ._engine import (
    POSTGRES_POOL,
    SINGLE_READ_OPTION,
    SQLITE_READERS,
    StoreHealth,
    create_engine_for,
    create_sqlite_reader,
    watch_health,
)
from ._writer import LoopThread

__all__ = ["READ_POOL_SHARE", "Reads"]

_T = TypeVar("_T")

READ_POOL_SHARE = 0.5
"""The share of the store's PostgreSQL pool size that the hot reads' own pool gets."""


def read_pool_size(engine_options: Mapping[str, Any]) -> int:
    """The size of the PostgreSQL read pool for a store given `engine_options`."""
    return max(1, int(engine_options.get("pool_size", POSTGRES_POOL["pool_size"]) * READ_POOL_SHARE))


class Reads:
    """Where a store's hot reads run (see the module docstring). `open` once the schema is current."""

    def __init__(self, url: URL, engine_options: Mapping[str, Any], health: StoreHealth) -> None:
        self._url = url
        self._engine_options = dict(engine_options)
        self._health = health
        self._fallback: AsyncEngine | None = None
        self._sqlite: Engine | None = None
        self._inline: Engine | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._postgres: AsyncEngine | None = None
        self._postgres_autocommit: AsyncEngine | None = None
        self._loop: LoopThread | None = None

    @property
    def engines(self) -> list[Engine]:
        """The engines of its own the reads go through (a listener on one sees its reads)."""
        if self._sqlite is not None:
            return [self._sqlite] if self._inline is None else [self._sqlite, self._inline]
        if self._postgres is not None:
            return [self._postgres.sync_engine]
        return []

    def open(self, store_engine: AsyncEngine) -> None:
        self._fallback = store_engine
        own_pool = "poolclass" not in self._engine_options
        if self._url.get_backend_name() == "sqlite":
            if own_pool:
                self._sqlite = create_sqlite_reader(self._url)
                # Never waits: neither for a lock (busy) nor for its one connection (another thread reading on it).
                self._inline = create_sqlite_reader(self._url, connections=1, busy_timeout_ms=0, pool_timeout=0)
                self._threads = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="toolwire-sqlite-reader")
            return
        size = {"pool_size": read_pool_size(self._engine_options), "max_overflow": 0} if own_pool else {}
        self._loop = LoopThread("toolwire-postgres-reader")
        self._postgres = create_engine_for(self._url, **{**self._engine_options, **size})
        # One SELECT is its own snapshot: in autocommit it spares the `BEGIN` and `ROLLBACK` round trips.
        self._postgres_autocommit = self._postgres.execution_options(isolation_level="AUTOCOMMIT")
        watch_health(self._postgres, self._health)

    async def close(self) -> None:
        sqlite, threads, postgres, loop = self._sqlite, self._threads, self._postgres, self._loop
        if self._inline is not None:
            self._inline.dispose()
        self._sqlite = self._inline = self._threads = self._postgres = self._postgres_autocommit = self._loop = None
        self._fallback = None
        if sqlite is not None and threads is not None:
            def finish_reads() -> None:
                threads.shutdown(wait=True)  # the reads in flight end first
                sqlite.dispose()

            await anyio.to_thread.run_sync(finish_reads)
        if loop is not None:
            try:
                if postgres is not None:
                    await loop.run(postgres.dispose())
            finally:
                loop.stop()

    async def select(self, query: Any, params: Mapping[str, Any] | None = None) -> Sequence[Row[Any]]:
        """The rows of one SELECT."""
        if self._inline is not None:
            try:
                with self._inline.connect() as here:
                    return here.execute(query, params).all()
            except OperationalError as exc:
                if not _busy(exc):
                    raise
            except PoolTimeout:  # a loop in another thread is reading on it this moment
                pass
        if self._sqlite is not None:
            sqlite = self._sqlite

            def in_thread() -> Sequence[Row[Any]]:
                with sqlite.connect() as conn:
                    return conn.execute(query, params).all()

            return await self._in_thread(in_thread)
        if self._postgres_autocommit is not None and self._loop is not None:
            engine = self._postgres_autocommit

            async def on_reader_loop() -> Sequence[Row[Any]]:
                async with engine.connect() as conn:
                    return (await conn.execute(query, params)).all()

            return await self._loop.run(on_reader_loop())
        async with self._store_engine().connect() as conn:
            conn = await conn.execution_options(**{SINGLE_READ_OPTION: True})
            return (await conn.execute(query, params)).all()

    async def many(self, read: Callable[..., _T], *args: Any, snapshot: bool = True) -> _T:
        """`read(conn, *args)`, a read of several statements. With `snapshot` they share one transaction;
        without, each is its own (PostgreSQL then spares the `BEGIN` and `ROLLBACK` round trips), for reads whose
        statements cannot disagree (rows they read are never rewritten)."""
        if self._sqlite is not None:
            sqlite = self._sqlite

            def in_thread() -> _T:
                with sqlite.connect() as conn:
                    if not snapshot:
                        return read(conn, *args)
                    # The reader's connections skip `BEGIN` (one statement is its own snapshot); several need one.
                    with conn.execution_options(**{SINGLE_READ_OPTION: False}).begin():
                        return read(conn, *args)

            return await self._in_thread(in_thread)
        if self._postgres is not None and self._postgres_autocommit is not None and self._loop is not None:
            engine = self._postgres if snapshot else self._postgres_autocommit

            async def on_reader_loop() -> _T:
                async with engine.connect() as conn:
                    return await conn.run_sync(_call, read, args)

            return await self._loop.run(on_reader_loop())
        async with self._store_engine().connect() as conn:
            return await conn.run_sync(_call, read, args)

    def _store_engine(self) -> AsyncEngine:
        if self._fallback is None:
            raise RuntimeError("The store is not open: use `async with SQLStore(...)` or await store.open().")
        return self._fallback

    async def _in_thread(self, function: Callable[[], _T]) -> _T:
        threads = self._threads
        if threads is None:
            raise RuntimeError("The store is not open: use `async with SQLStore(...)` or await store.open().")
        # A cancelled caller leaves a read that has started to finish in its thread (it only reads).
        return await asyncio.wrap_future(threads.submit(function))


_SQLITE_BUSY = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (primary codes: the low byte of an extended one)


def _busy(error: OperationalError) -> bool:
    """Whether SQLite refused the read for a lock (it would have waited, had the connection been let to)."""
    code = getattr(error.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _SQLITE_BUSY


def _call(conn: Connection, read: Callable[..., _T], args: tuple[Any, ...]) -> _T:
    return read(conn, *args)
