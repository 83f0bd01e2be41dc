"""Protocol tests: the real `toolwire serve` (from the server tests' fixtures) driven by each protocol's own client.

The databases: SQLite, except where a test asks for PostgreSQL too (`db_url` parametrized indirectly).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.databases import PostgresCluster, sqlite_url
from tests.server.protocols.clients import NodeClients
from tests.server.support import ServerProcess

EXTRA_TOOLS = ("--tools", "tests.server.protocols.tools:TOOLS")


@pytest.fixture(params=["sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path)
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    name = cluster.new_database()
    try:
        yield cluster.url(name)
    finally:
        cluster.drop_database(name)


@pytest.fixture
def server(serve: Callable[..., ServerProcess]) -> ServerProcess:
    return serve(*EXTRA_TOOLS)


@pytest.fixture(scope="session")
def node() -> Iterator[NodeClients]:
    clients = NodeClients()
    yield clients
    clients.close()
