"""Test-wide setup: no real network, the recorded fixtures, and anyio on asyncio.

The recorded provider streams live outside the repository, in `../shared/fixtures` (see docs/development.md,
"Running the tests"). Where that folder is absent, every test that reads it is skipped with a reason
saying so; under `CI=true` its absence fails the run at once, since CI must test against them.
"""

from __future__ import annotations

import compileall
import ipaddress
import os
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.databases import db_url as db_url, postgres_cluster as postgres_cluster  # shared database fixtures
from tests.redis_server import redis_server as redis_server

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"
"""Recorded provider streams, read in place (never copied into the repository)."""

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths and the like
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise RuntimeError(f"A test tried to reach {address!r}; tests may only use loopback addresses.")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if not _is_local(address):
        raise RuntimeError(f"A test tried to reach {address!r}; tests may only use loopback addresses.")
    return _real_connect_ex(self, address)


def pytest_configure(config: pytest.Config) -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    if not hasattr(config, "workerinput"):  # once, in the controller, before the xdist workers start
        compile_sources()


IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FIXTURES_MISSING = (f"needs the recorded provider streams in {FIXTURES}, which this checkout does not have "
                    "(they sit beside the repository as shared/fixtures; see docs/development.md)")


def pytest_sessionstart(session: pytest.Session) -> None:
    if IN_CI and not FIXTURES.is_dir():
        pytest.exit(f"CI=true, but the recorded provider fixtures are missing: the suite {FIXTURES_MISSING}.",
                    returncode=1)


def compile_sources() -> None:
    """Write the bytecode of src/ and tests/ (each file whose bytecode is missing or older than it).

    The suite starts `toolwire serve` and other Python programs in subprocesses some two hundred times, and each
    imports toolwire and the test helpers afresh. Where PYTHONDONTWRITEBYTECODE is set (as in CI's containers)
    Python never writes the bytecode it compiles, so every one of those starts compiled the whole package
    again: 0.9 s of CPU of the 3 s a start took. Python reads bytecode under that setting, and recompiles a
    file whose source changed since, so what runs is always the source as it is."""
    for folder in (REPO / "src" / "toolwire", REPO / "tests"):
        compileall.compile_dir(folder, quiet=1, rx=re.compile(r"node_modules"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the fixtures: skip, with the reason, each test that reads them (not the rest of its module)."""
    if FIXTURES.is_dir():
        return
    skip = pytest.mark.skip(reason=FIXTURES_MISSING)
    for item in items:
        if _reads_fixtures(item):
            item.add_marker(skip, append=False)  # this reason first, before "got empty parameter set"


def _reads_fixtures(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    if function is None:
        return False
    empty_parameters = any(str(m.kwargs.get("reason", "")).startswith("got empty parameter set")
                           for m in item.iter_markers("skip"))
    if empty_parameters:
        return True
    module_globals = function.__globals__
    for name in function.__code__.co_names:
        value = module_globals.get(name)
        if value is fixture_files or value is fixture_path:
            return True
        # A module-level list of recordings (SSE_FILES = fixture_files(...)) is empty without them.
        if name.isupper() and isinstance(value, list) and not value:
            return True
    return False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fixture_path(relative: str) -> Path:
    """A recorded stream; skips the test (saying why) where the shared fixtures are not present."""
    path = FIXTURES / relative
    if not FIXTURES.is_dir():
        if IN_CI:
            pytest.fail(f"CI=true, but this test {FIXTURES_MISSING}.")
        pytest.skip(FIXTURES_MISSING)
    if not path.exists():
        raise FileNotFoundError(f"Recorded fixture {path} is missing.")
    return path


def fixture_files(folder: str, *suffixes: str) -> list[str]:
    """Names of the recordings in a fixtures folder (for parametrising; empty where absent)."""
    base = FIXTURES / folder
    if not base.is_dir():
        return []
    return sorted(
        f"{folder}/{p.name}" for p in base.iterdir()
        if p.name.endswith(suffixes) and not p.name.endswith(".request.json")
    )
