"""Who else serves this database: one server alone, or replicas that share a live event log.

A server whose event log, signals and rate limits live in its own memory must be the only server of its
database: a second one would not see the first one's streams or cancel its runs. Replicas that share a
log (Redis) may be many. Each server holds a lock in the database for as long as it runs:

- PostgreSQL: a session advisory lock on one connection kept for the purpose, exclusive for a server
  alone, shared for a replica;
- SQLite: `flock` on a file next to the database (`<database>.servers.lock`), exclusive or shared.

Either lock goes away with the process, however it ends (a killed process's connection or file
descriptor is closed by the operating system), so a crashed server never blocks the next one. A server
that cannot take its lock waits up to `wait_seconds` (a restart may overlap the old process's last
moments), then start-up fails with `ReplicaConflict`, whose message says what to configure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..exceptions import ToolwireError
from ..store import SQLStore, Store
from ..store._engine import redacted_url

__all__ = ["ReplicaConflict", "hold_replica_lock"]

_LOCK_KEY = 0x74772D7365727665
"""The advisory lock's key ("tw-serve" in ASCII; the migrations lock another one)."""


class ReplicaConflict(ToolwireError):
    """Another server uses this database in a way this one cannot run beside."""


def _conflict(store: SQLStore, shared: bool) -> ReplicaConflict:
    where = redacted_url(store.url)
    if shared:
        return ReplicaConflict(
            f"A toolwire server without --redis is already serving {where}. Stop it, or restart it with the same "
            "--redis URL as this one, so that every replica shares the live event log, cancellations and rate "
            "limits.")
    return ReplicaConflict(
        f"Another toolwire server is already serving {where}. Several replicas must share their live event log, "
        "cancellations and rate limits: start every one of them with --redis redis://HOST:6379/0 (or stop the "
        "other server first).")


@asynccontextmanager
async def hold_replica_lock(store: Store, *, shared: bool, wait_seconds: float = 10.0) -> AsyncIterator[bool]:
    """Hold this server's lock on its database while the block runs (see the module docstring); the block is
    given whether this server holds it alone (no other server writes to the database meanwhile).

    Stores other than `SQLStore` (and SQLite in memory) are not checked, and are not known to be alone.
    """
    if not isinstance(store, SQLStore):
        yield False
        return
    if store.dialect == "postgresql":
        async with _postgres_lock(store, shared, wait_seconds):
            yield not shared
        return
    database = store.url.database
    if not database or database == ":memory:" or os.name != "posix":
        yield False
        return
    async with _file_lock(store, f"{database}.servers.lock", shared, wait_seconds):
        yield not shared


@asynccontextmanager
async def _postgres_lock(store: SQLStore, shared: bool, wait_seconds: float) -> AsyncIterator[None]:
    from sqlalchemy import text

    function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
    conn = await store.engine.connect()
    try:
        deadline = anyio.current_time() + wait_seconds
        while True:
            taken = (await conn.execute(text(f"SELECT {function}(:key)"), {"key": _LOCK_KEY})).scalar_one()
            await conn.commit()  # the lock belongs to the session: no transaction is left open
            if taken:
                break
            if anyio.current_time() >= deadline:
                raise _conflict(store, shared)
            await anyio.sleep(0.25)
        yield
    finally:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):  # the connection may be gone with the database
                await conn.execute(text("SELECT pg_advisory_unlock_all()"))
                await conn.commit()
            await conn.close()


@asynccontextmanager
async def _file_lock(store: SQLStore, path: str, shared: bool, wait_seconds: float) -> AsyncIterator[None]:
    import fcntl

    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    handle: Any = open(path, "a+b")  # noqa: SIM115, ASYNC230 - a local lock file, held while the server runs
    try:
        deadline = anyio.current_time() + wait_seconds
        while True:
            try:
                fcntl.flock(handle.fileno(), mode)
                break
            except BlockingIOError:
                if anyio.current_time() >= deadline:
                    raise _conflict(store, shared) from None
                await anyio.sleep(0.25)
        yield
    finally:
        handle.close()
