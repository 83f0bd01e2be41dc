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


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_server(request: pytest.FixtureRequest, gate: GateServer,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `toolwire serve` per database for a module's tests that only read from it (bad requests, refusals):
    it starts once for all of them instead of once each (a start is seconds of imports; module scope, so
    that pytest regroups tests by database within a module only).
    A test that writes (chats, runs, quotas) or whose result depends on what the server holds takes `server`."""
    folder = tmp_path_factory.mktemp("shared-serve")
    database = fresh_database(request, folder, request.param)
    process = ServerProcess(db_url=next(database), gate_url=gate.url, folder=folder)
    process.start()
    yield process
    process.stop()
    database.close()  # drops a PostgreSQL database
