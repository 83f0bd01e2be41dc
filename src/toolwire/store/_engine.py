"""Database URLs, engines and migrations: what differs between SQLite and PostgreSQL lives here.

- URLs: `sqlite:///path`, a bare path, `postgresql://...` and `postgres://...` are accepted and given
  their async driver (aiosqlite, asyncpg).
- SQLite: WAL (readers never block the writer), foreign keys on, a busy timeout, and transactions
  begun by SQLAlchemy: `BEGIN IMMEDIATE` for writes, so two writers queue for the lock at the start
  instead of failing halfway with "database is locked"; plain `BEGIN` for reads.
- Migrations: Alembic, with the scripts shipped inside this package, run when a store opens. On
  PostgreSQL an advisory lock makes concurrent start-ups of several servers migrate once.
- PostgreSQL's connection pool: `POSTGRES_POOL`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..exceptions import UserError

__all__ = ["MIGRATIONS", "POSTGRES_POOL", "WRITE_OPTION", "create_engine_for", "normalize_url", "redacted_url",
           "upgrade_schema"]

MIGRATIONS = Path(__file__).parent / "migrations"

WRITE_OPTION = "toolwire_write"
"""Execution option marking a connection that will write (SQLite then begins `IMMEDIATE`)."""

POSTGRES_POOL: dict[str, Any] = {"pool_size": 20, "max_overflow": 20, "pool_pre_ping": False, "pool_recycle": 1800,
                                 "pool_timeout": 30}
"""The PostgreSQL connection pool of one process (`SQLStore(engine_options=...)` overrides any of it).

Twenty connections, and twenty more while a burst lasts: a run holds one only for the moment of a
transaction, so this serves several hundred concurrent runs; PostgreSQL's default `max_connections`
(100) then takes two replicas (`toolwire serve --db-pool-size` sets `pool_size`, the overflow follows).
No ping before each checkout: under load that round trip was paid by every transaction, while a
connection the server dropped fails the one transaction that meets it, and SQLAlchemy then discards the
pool's connections and opens new ones. Connections are replaced after 30 minutes so that none outlives a failover
behind a proxy for long."""

_MIGRATION_LOCK = 0x746F6F6C77697265  # "toolwire": the advisory lock id for migrations on PostgreSQL


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
            raise UserError("PostgreSQL needs the asyncpg driver: pip install 'toolwire[postgres]'.")
        return create_async_engine(url, **{**POSTGRES_POOL, **kwargs})
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": 30}, **kwargs)
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # SQLAlchemy emits BEGIN itself (below); the driver must not.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=30000"):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


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
