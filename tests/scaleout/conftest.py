"""Several real `toolwire serve` replicas on loopback, sharing one PostgreSQL database and one Redis."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.databases import PostgresCluster
from tests.redis_server import RedisServer
from tests.server.conftest import _clean_gate as _clean_gate, gate as gate
from tests.server.support import GateServer, ServerProcess


@pytest.fixture
def shared_db(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh PostgreSQL database (cloned from the migrated template) for this test's replicas."""
    name = postgres_cluster.new_database()
    try:
        yield postgres_cluster.url(name)
    finally:
        postgres_cluster.drop_database(name)


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    redis_server.command("FLUSHALL")
    return redis_server.url


@pytest.fixture
def replica(shared_db: str, redis_url: str, gate: GateServer,
            tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start one more replica: `toolwire serve --db <shared> --redis <shared>` (`redis=False` leaves it out)."""
    started: list[ServerProcess] = []

    def start(*args: str, redis: bool = True, lease_seconds: float = 2.0) -> ServerProcess:
        folder = tmp_path / f"replica-{len(started)}"
        folder.mkdir()
        options = ["--redis", redis_url, *args] if redis else list(args)
        process = ServerProcess(db_url=shared_db, gate_url=gate.url, folder=folder, args=options,
                                lease_seconds=lease_seconds)
        started.append(process)
        process.start()
        return process

    yield start
    for process in started:
        process.stop()
