"""The session's Redis server for the tests (`tests.services.start_redis`: `redis-server` on a free loopback
port, no persistence). Without the binary the tests that need it are skipped, saying why, except under
`CI=true`, where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.services import RedisServer as RedisServer, ServiceMissing, start_redis


def missing_redis(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Redis is needed in CI but {reason}; scripts/test-services installs it.")
    pytest.skip(f"These tests need a Redis server: {reason} (scripts/test-services installs it)")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's Redis server (started on first use)."""
    try:
        with start_redis() as server:
            yield server
    except ServiceMissing as exc:
        missing_redis(str(exc))
