"""Which database errors are an outage (503 `store_unavailable`, retried by runs) and which are not."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import exc as sa_exc

from toolwire.store import StoreUnavailable
from toolwire.store._engine import StoreHealth, unavailable


@pytest.mark.parametrize("error", [
    sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full")),
    sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("disk I/O error")),
    sa_exc.DBAPIError("SELECT 1", {}, Exception("connection was closed in the middle of operation"),
                      connection_invalidated=True),
    ConnectionRefusedError(111, "Connect call failed"),
    TimeoutError(),
    StoreUnavailable("The database is away."),
])
def test_outages(error: BaseException) -> None:
    assert unavailable(error)


@pytest.mark.parametrize("error", [
    sa_exc.OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: chats")),
    sa_exc.IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed")),
    ValueError("not a database problem"),
])
def test_refusals_and_bugs_are_not_outages(error: BaseException) -> None:
    assert not unavailable(error)


def test_health_remembers_a_failed_write_until_a_write_succeeds() -> None:
    health = StoreHealth()
    health.failed(ConnectionRefusedError(111, "refused"), write=True)
    assert health.failed_at is not None and health.write_error is not None
    health.succeeded(write=False)  # a read works again: checkouts stop pinging, the write is still failed
    assert health.failed_at is None and health.write_error is not None
    health.succeeded(write=True)
    assert health.write_error is None
