"""Server tests: the real `toolwire serve` in a subprocess, on SQLite and PostgreSQL, driven through the gate."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.databases import fresh_database
from tests.server.support import GateServer, ServerProcess


@pytest.fixture(scope="session")
def gate() -> Iterator[GateServer]:
    server = GateServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _clean_gate(gate: GateServer) -> None:
    gate.reset()


@pytest.fixture
def serve(db_url: str, gate: GateServer, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start `toolwire serve` on this test's fresh database (extra command-line options allowed)."""
    started: list[ServerProcess] = []

    def start(*args: str, lease_seconds: float = 2.0) -> ServerProcess:
        process = ServerProcess(db_url=db_url, gate_url=gate.url, folder=tmp_path, args=args,
                                lease_seconds=lease_seconds)
        process.start()
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def server(serve: Callable[..., ServerProcess]) -> ServerProcess:
    return serve()


SHARED_SERVER_ARGS = ("--runs-per-minute", "100000", "--tool-calls-per-minute", "100000",
                      "--writes-per-minute", "100000")
"""A shared server's rate limits, raised so that a module's tests together never meet them (the tests of the
limits start servers of their own)."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_server(request: pytest.FixtureRequest, gate: GateServer,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `toolwire serve` per database for a module's tests that need only chats of their own on a server:
    it starts once for all of them instead of once each (a start is seconds of imports; module scope, so
    that pytest regroups tests by database within a module only). A module whose tests all qualify says so
    by overriding `server` with it.

    A test whose result depends on what else the server holds or did (search over every chat, metrics, rate
    limits, quotas, a token revoked), or that restarts, kills or configures the server, takes `serve`."""
    folder = tmp_path_factory.mktemp("shared-serve")
    database = fresh_database(request, folder, request.param)
    process = ServerProcess(db_url=next(database), gate_url=gate.url, folder=folder, args=SHARED_SERVER_ARGS)
    process.start()
    yield process
    process.stop()
    database.close()  # drops a PostgreSQL database


SQLITE_ONLY = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
"""Which tests run on both databases: a server test runs on SQLite and PostgreSQL when what it checks goes
through the store in a way that can differ between them (SQL, transactions and locking, the order the
database commits in, migrations, recovery after a crash, values a database refuses such as NUL characters
or integers past 64 bits). A test of what happens above the store (option parsing, HTTP bodies, rate limits
counted in memory, heartbeats, redaction, the agent's tool concurrency) runs on SQLite only, marked with
this, and names in a comment the PostgreSQL test that still covers the store path it uses."""
