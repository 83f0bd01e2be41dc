"""`/readyz` of a replica names each dependency it needs: Redis frozen or stopped turns it 503 with `redis` in
its body, and 200 again once Redis answers (issue #28, item 8). Redis is frozen with SIGSTOP inside the test."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import anyio
import pytest

from tests.redis_server import RedisServer
from tests.server.support import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def test_readyz_says_redis_is_down_while_it_is_frozen(replica: Callable[..., ServerProcess],
                                                            redis_server: RedisServer) -> None:
    server = replica()
    async with server.api() as api:
        ready = await api.client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
        os.kill(redis_server.process.pid, signal.SIGSTOP)
        try:
            asked = time.monotonic()
            frozen = await api.client.get("/readyz")
            answered_in = time.monotonic() - asked
        finally:
            os.kill(redis_server.process.pid, signal.SIGCONT)
        assert frozen.status_code == 503, frozen.text
        assert list(frozen.json()["down"]) == ["redis"], frozen.text
        assert answered_in < 15, answered_in  # bounded by the check's own timeout, never a hang
        with anyio.fail_after(30):
            while (await api.client.get("/readyz")).status_code != 200:  # noqa: ASYNC110 - another process
                await anyio.sleep(0.1)
    print(f"\nRedis frozen: /readyz answered 503 naming redis in {answered_in:.2f} s")
