"""Database URLs, engines and migrations: what differs between SQLite and PostgreSQL lives here.

- URLs: `sqlite:///path`, a bare path, `postgresql://...` and `postgres://...` are accepted and given
  their async driver (aiosqlite, asyncpg).
- SQLite: WAL (readers never block the writer), foreign keys on, a busy timeout, and transactions
  begun by SQLAlchemy: `BEGIN IMMEDIATE` for writes, so two writers queue for the lock at the start
  instead of failing halfway with "database is locked"; plain `BEGIN` for reads. The reads every chat
  makes have reader connections of their own (`create_sqlite_reader`, `_reads.py`), the others go through
  aiosqlite; the store's writer has a synchronous `sqlite3` engine of its own (`create_sqlite_writer`).
- Migrations: Alembic, with the scripts shipped inside this package, run when a store opens. On
  PostgreSQL an advisory lock makes concurrent start-ups of several servers migrate once.
- PostgreSQL's connection pool: `POSTGRES_POOL`.
- Outages: `unavailable(exc)` tells a database that cannot be reached (or a disk that refuses writes) from
  a refusal or a bug; `StoreHealth` remembers the last failure. After one, every connection is pinged when
  it is taken from the pool until an operation succeeds again (`watch_health`): a healthy pool pays no
  round trip, a pool that met a restart replaces its stale connections instead of failing with them.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc as sa_exc, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .._install import install_hint
from ..exceptions import ToolwireError, UserError

__all__ = ["MIGRATIONS", "POSTGRES_POOL", "SINGLE_READ_OPTION", "SQLITE_READERS", "WRITE_OPTION", "StoreHealth",
           "StoreUnavailable", "create_engine_for", "create_sqlite_reader", "create_sqlite_writer", "normalize_url",
           "redacted_url", "unavailable", "upgrade_schema", "watch_health"]

MIGRATIONS = Path(__file__).parent / "migrations"

WRITE_OPTION = "toolwire_write"
"""Execution option marking a connection that will write (SQLite then begins `IMMEDIATE`)."""

SINGLE_READ_OPTION = "toolwire_single_read"
"""Execution option marking a connection lent for one SELECT: SQLite then sends no `BEGIN` (the statement is
its own transaction, one snapshot anyway), which spares a round trip to aiosqlite's thread per lookup."""

POSTGRES_POOL: dict[str, Any] = {"pool_size": 20, "max_overflow": 10, "pool_pre_ping": False, "pool_recycle": 1800,
                                 "pool_timeout": 30, "connect_args": {"timeout": 5, "command_timeout": 15}}
"""The PostgreSQL connection pool of one process (`SQLStore(engine_options=...)` overrides any of it).

Twenty connections, and ten more while a burst lasts, plus the ten of the hot reads' own pool (`_reads.py`,
half the pool size): a run holds one only for the moment of a transaction, so this serves several hundred
concurrent runs; PostgreSQL's default `max_connections` (100) then takes two replicas (`toolwire serve
--db-pool-size` sets `pool_size`, the rest follows).
No ping before each checkout: under load that round trip was paid by every transaction, while a
connection the server dropped fails the one transaction that meets it, and SQLAlchemy then discards the
pool's connections and opens new ones (and, after a failure, `watch_health` pings each connection it lends
until the database answers again, and each connection older than the outage once after that). Connections are
replaced after 30 minutes so that none outlives a failover behind a proxy for long. A connection attempt gives up
after 5 s and a statement after 15 s: a database that is down or frozen fails the operation (503
`store_unavailable` for a request) instead of hanging it."""

_MIGRATION_LOCK = 0x746F6F6C77697265  # "toolwire": the advisory lock id for migrations on PostgreSQL


class StoreUnavailable(ToolwireError):
    """The database could not be reached, or refused to write (a full or failing disk): an outage, not a refusal.

    Requests answer 503 `store_unavailable` with `Retry-After`; a run retries its writes for a while
    (`ServerConfig.store_retry_seconds`) before it fails with this code.
    """

    code = "store_unavailable"


_SQLITE_OUTAGE = ("disk", "i/o", "full", "locked", "unable to open", "readonly", "read-only")
"""Words of SQLite's errors that mean the file cannot be written now (not a wrong statement)."""


def unavailable(error: BaseException) -> bool:
    """Whether `error` says the database is away (connection refused, reset, timed out, a server starting or
    stopping) or its disk refuses writes, rather than refusing this operation."""
    if isinstance(error, StoreUnavailable):
        return True
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        original = error.orig
        if isinstance(original, sqlite3.Error) or type(original).__module__.startswith("sqlite3"):
            return any(word in str(original).lower() for word in _SQLITE_OUTAGE)
        if isinstance(error, (sa_exc.OperationalError, sa_exc.InterfaceError)):
            return True
        return original is not None and unavailable(original)
    if isinstance(error, (OSError, TimeoutError, sa_exc.TimeoutError)):
        return True
    if isinstance(error, sqlite3.OperationalError):
        return any(word in str(error).lower() for word in _SQLITE_OUTAGE)
    kind = type(error)
    if kind.__module__.startswith("asyncpg"):
        # Connection-level errors (a server shutting down or starting up, a dropped connection), not SQL errors.
        return any(name in kind.__name__ for name in ("Connection", "CannotConnectNow", "AdminShutdown",
                                                      "CrashShutdown", "InterfaceError", "TooManyConnections"))
    cause = error.__cause__
    return cause is not None and cause is not error and unavailable(cause)


class StoreHealth:
    """What the store saw of its database lately: read by `/readyz` and by the pool's checkout.

    `failed_at` is set by any operation that met an outage and cleared by the next that succeeded;
    `write_error` is set by a write that met one and cleared by the next write that succeeded. `outages` counts
    the outages met (a failure after a success starts a new one): a pooled connection older than the last one is
    pinged before it is lent (`watch_health`).
    """

    __slots__ = ("failed_at", "last_error", "outages", "write_error")

    def __init__(self) -> None:
        self.failed_at: float | None = None
        self.last_error = ""
        self.write_error: str | None = None
        self.outages = 0

    def failed(self, error: BaseException, *, write: bool) -> None:
        if self.failed_at is None:
            self.outages += 1
        self.failed_at = self.failed_at or time.monotonic()
        self.last_error = describe_outage(error)
        if write:
            self.write_error = self.last_error

    def succeeded(self, *, write: bool) -> None:
        self.failed_at = None
        if write:
            self.write_error = None


def describe_outage(error: BaseException) -> str:
    """One line naming what failed (no URL, so no password)."""
    original = getattr(error, "orig", None) or error.__cause__ or error
    text_ = str(original).strip().splitlines()[0] if str(original).strip() else ""
    return f"{type(original).__name__}: {text_}"[:300] if text_ else type(original).__name__


def watch_health(engine: AsyncEngine, health: StoreHealth) -> None:
    """After an outage, ping each connection the pool lends before using it, once, if it is older than the outage's
    start; a stale one (the database restarted since it was opened) is replaced there, not met by the operation.

    Once, per connection, and not only while the outage lasts: the store has several pools (the writer's, the
    hot reads', the others), and the first success on one of them ended the pinging for all. The first read on
    each of the others' connections from before a PostgreSQL restart then failed with 503 (`store_unavailable`)."""
    dialect = engine.sync_engine.dialect

    @event.listens_for(engine.sync_engine, "connect")
    def _connect(_dbapi_connection: Any, record: Any) -> None:
        record.info["toolwire_outages"] = health.outages  # opened now: it is not stale

    @event.listens_for(engine.sync_engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.get("toolwire_outages", 0) >= health.outages and health.failed_at is None:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise sa_exc.DisconnectionError(f"a pooled connection is stale: {exc}") from exc
        if not alive:
            raise sa_exc.DisconnectionError("a pooled connection is stale")
        record.info["toolwire_outages"] = health.outages


def normalize_url(url: str | URL) -> URL:
    """The SQLAlchemy async URL for a database URL or a SQLite file path."""
    if isinstance(url, str):
        raw = url.strip()
        if not raw:
            raise UserError("The database URL is empty; pass a SQLite file path or a postgresql:// URL.")
        if "://" not in raw:
            raw = f"sqlite:///{raw}"
        elif raw.startswith("postgres://"):
            raw = "postgresql://" + raw.removeprefix("postgres://")
        try:
            parsed = make_url(raw)
        except Exception as exc:
            raise UserError(f"{url!r} is not a database URL; use sqlite:///path/to/file.db or "
                            "postgresql://user:password@host:port/database.") from exc
    else:
        parsed = url
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite":
        if driver not in ("", "aiosqlite"):
            raise UserError(f"SQLite is used through aiosqlite; drop '+{driver}' from the URL.")
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend == "postgresql":
        if driver not in ("", "asyncpg"):
            raise UserError(f"PostgreSQL is used through asyncpg; drop '+{driver}' from the URL.")
        return parsed.set(drivername="postgresql+asyncpg")
    raise UserError(f"toolwire stores chats in SQLite or PostgreSQL, not {backend!r}; use sqlite:///file.db "
                    "or postgresql://user:password@host/database.")


def redacted_url(url: URL) -> str:
    """The URL with its password hidden (for messages and logs)."""
    return url.render_as_string(hide_password=True)


def create_engine_for(url: URL, **kwargs: Any) -> AsyncEngine:
    """An async engine for a normalised URL, set up for its database."""
    if url.get_backend_name() == "postgresql":
        if importlib.util.find_spec("asyncpg") is None:
            raise UserError(f"PostgreSQL needs the asyncpg driver: {install_hint('postgres')}.")
        return create_async_engine(url, **{**POSTGRES_POOL, **kwargs})
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)
    _set_up_sqlite(engine.sync_engine)
    return engine


def create_sqlite_writer(url: URL, **kwargs: Any) -> Engine:
    """The synchronous engine of a SQLite store's writer: one `sqlite3` connection, used by one thread at a time
    (the writer's batches never overlap), so a whole batch runs in the writer's thread (see `_writer.py`)."""
    # No rollback when a connection goes back to the pool: a batch always ends its transaction (`run_batch`).
    engine = create_engine(url.set(drivername="sqlite"), pool_size=1, max_overflow=0, pool_reset_on_return=None,
                           connect_args={"timeout": 30, "check_same_thread": False},
                           execution_options={WRITE_OPTION: True}, **kwargs)
    _set_up_sqlite(engine)
    return engine


SQLITE_READERS = 4
"""Connections (and worker threads) of a SQLite store's reads: WAL lets them read alongside the writer."""


def create_sqlite_reader(url: URL, *, connections: int = SQLITE_READERS, busy_timeout_ms: int = 30_000,
                         pool_timeout: float = 30.0) -> Engine:
    """The synchronous engine of a SQLite store's hot reads (`_reads.py`). The reader threads' engine: each read is
    one hop to a worker thread that runs its statements and fetches their rows there (through aiosqlite, every
    execute, fetch, pool check-in and rollback was a hop of its own); at most `SQLITE_READERS` run at once, so a
    read waits for a thread, never for a pool timeout. The engine of the one-statement reads made on the event loop
    itself: one connection that never waits, for a lock or for the connection (`busy_timeout_ms=0`,
    `pool_timeout=0`)."""
    # No rollback when a connection goes back to the pool: a one-statement read opens no transaction, and a read
    # of several ends its own (`SQLStore._read_many`).
    engine = create_engine(url.set(drivername="sqlite"), pool_size=connections, max_overflow=0,
                           pool_timeout=pool_timeout, pool_reset_on_return=None,
                           connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
                           execution_options={SINGLE_READ_OPTION: True})
    _set_up_sqlite(engine, busy_timeout_ms=busy_timeout_ms)
    return engine


def _set_up_sqlite(sync_engine: Engine, *, busy_timeout_ms: int = 30_000) -> None:
    @event.listens_for(sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy emits BEGIN itself (below); the driver must not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", f"busy_timeout={busy_timeout_ms}"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        if options.get(SINGLE_READ_OPTION, False):
            return
        conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_OPTION, False) else "BEGIN")


def upgrade_schema(connection: Connection) -> None:
    """Run the packaged Alembic migrations up to the newest, on a connection inside a transaction."""
    from alembic import command
    from alembic.config import Config

    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
