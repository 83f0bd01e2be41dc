"""Test-wide setup: no real network, the recorded fixtures, and anyio on asyncio."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.databases import db_url as db_url, postgres_cluster as postgres_cluster  # shared database fixtures

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def fixture_path(relative: str) -> Path:
    """A recorded stream; skips the test (saying why) where the shared fixtures are not present."""
    path = FIXTURES / relative
    if not FIXTURES.is_dir():
        pytest.skip(f"the recorded provider fixtures ({FIXTURES}) are not present in this checkout")
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
