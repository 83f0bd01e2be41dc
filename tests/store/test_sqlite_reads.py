"""SQLite's one-statement reads run in one worker-thread hop each, on connections of their own (issue 22).

Under an overload the reads every run makes (its chat's messages, the token's user) waited for a connection of
the aiosqlite pool and failed after its timeout: the run then failed with `store_unavailable`, and the bench
at N = 200 on a loaded machine lost chats to it. They now wait for one of the reader threads, with no timeout.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolwire.messages import Message
from toolwire.store import SQLStore

pytestmark = pytest.mark.anyio


async def test_reads_do_not_wait_for_the_pool_or_fail_on_its_timeout(tmp_path: Path) -> None:
    # The pool of one connection with a short timeout stands for a pool that every request is using at once.
    store = SQLStore(f"sqlite:///{tmp_path / 'app.db'}",
                     engine_options={"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2})
    async with store:
        user = await store.ensure_user("alice")
        await store.add_token(user.id, "token-a")
        chat = await store.create_chat(user.id, "a chat")
        await store.append_messages(chat.id, [Message.user("hello")])
        found: list[int] = []

        async def read() -> None:
            found.append(len(await store.list_messages(chat.id)))
            assert await store.user_for_token("nobody's") is None  # not cached: a read each time

        # The pool's one connection, held throughout.
        async with store.engine.connect(), anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(read)
        assert found == [1] * 20
