"""Protocol tests: the real `toolwire serve` (the server tests' process and gate) driven by each protocol's own client.

`server` is one SQLite server per module; `serve` starts one for a single test (other options, or PostgreSQL
too where a test parametrizes `db_url` indirectly).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.databases import fresh_database, sqlite_url
from tests.server.protocols.clients import NodeClients
from tests.server.support import GateServer, ServerProcess

EXTRA_TOOLS = ("--tools", "tests.server.protocols.tools:TOOLS")


@pytest.fixture(params=["sqlite"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite only here, unless a test parametrizes `db_url` itself (`indirect=True`)."""
    yield from fresh_database(request, tmp_path, request.param)


@pytest.fixture(scope="module")
def server(gate: GateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `toolwire serve` (SQLite) per module: every test uses its own chats and gate tags, so they share
    it, which saves a server start per test (rate limits raised so that the tests' runs never meet them)."""
    folder = tmp_path_factory.mktemp("protocols")
    process = ServerProcess(db_url=sqlite_url(folder), gate_url=gate.url, folder=folder,
                            args=[*EXTRA_TOOLS, "--runs-per-minute", "100000", "--tool-calls-per-minute", "100000",
                                  "--writes-per-minute", "100000"])
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def node() -> Iterator[NodeClients]:
    clients = NodeClients()
    yield clients
    clients.close()
