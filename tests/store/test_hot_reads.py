"""The reads every chat makes run off the server's event loop, on connections of their own (issue 22).

Under an overload the reads every run makes (its chat's messages, the token's user) waited for a connection of
the aiosqlite pool and failed after its timeout: the run then failed with `store_unavailable`, and the bench
at N = 200 on a loaded machine lost chats to it. They now wait for one of the reader threads, with no timeout.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
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


async def test_reads_go_on_while_the_event_loop_is_busy(db_url: str) -> None:
    # On SQLite through `anyio.to_thread` under a limiter of four, a read's token went back only when its task ran
    # again; on PostgreSQL a read held its pooled connection until then. With the server's loop busy (1,000 chats
    # streaming), run starts queued by the hundreds for reads that took microseconds (and on PostgreSQL timed out
    # waiting for the pool). The reads now run on threads (SQLite) or a loop (PostgreSQL) of their own.
    import time

    from sqlalchemy import event

    store = SQLStore(db_url, lookup_seconds=0)
    async with store:
        user = await store.ensure_user("alice")
        await store.add_token(user.id, "token-a")
        executed: list[float] = []

        def on_statement(*_args: object) -> None:
            executed.append(time.monotonic())

        reader = store.read_engines[-1]
        event.listen(reader, "before_cursor_execute", on_statement)
        found: list[str] = []

        async def read() -> None:
            found.append((await store.user_for_token("token-a")).name)  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            for _ in range(40):  # ten per reader thread
                tg.start_soon(read)
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            time.sleep(0.3)  # noqa: ASYNC251 - the loop busy on purpose
            loop_free = time.monotonic()
        assert found == ["alice"] * 40
        assert sum(at < loop_free for at in executed) == 40, executed  # none needed the loop to be reached
