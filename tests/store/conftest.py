"""Every store test runs on SQLite and on a real PostgreSQL server (`db_url`, see tests/databases.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from toolwire.store import SQLStore


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[SQLStore]:
    async with SQLStore(db_url) as opened:
        yield opened
