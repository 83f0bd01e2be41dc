"""Real databases for the store and server tests: a SQLite file, or the session's PostgreSQL server.

PostgreSQL is started once per test session by `tests.services.start_postgres` (a cluster on a free
loopback port; every test gets its own database cloned from a migrated template). Without PostgreSQL
binaries the PostgreSQL variants are skipped, saying why, except under `CI=true`, where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import PostgresCluster as PostgresCluster, ServiceMissing, free_port as free_port, start_postgres


def missing_postgres(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL is needed in CI but {reason}; scripts/test-services installs it.")
    pytest.skip(f"PostgreSQL tests need a PostgreSQL server: {reason} (scripts/test-services installs it)")


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'toolwire.db'}"


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """The session's PostgreSQL server (started on first use)."""
    try:
        with start_postgres() as cluster:
            yield cluster
    except ServiceMissing as exc:
        missing_postgres(str(exc))


def fresh_database(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> Iterator[str]:
    """A fresh, empty database for one test: a SQLite file, or a PostgreSQL database cloned from the template."""
    if kind == "sqlite":
        yield sqlite_url(tmp_path)
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    name = cluster.new_database()
    try:
        yield cluster.url(name)
    finally:
        cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database for one test, on each database."""
    yield from fresh_database(request, tmp_path, request.param)
