"""The reads every chat makes run on connections of their own, never waiting for a pool (issue 22).

Under an overload the reads every run makes (its chat's messages, the token's user) waited for a connection of
the aiosqlite pool and failed after its timeout: the run then failed with `store_unavailable`, and the bench
at N = 200 on a loaded machine lost chats to it. A read of several statements now waits for one of the reader
threads, with no timeout; on SQLite a one-statement read runs on the caller's loop on a connection that never
waits for a lock, and goes to the reader threads when SQLite answers busy.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from toolwire.messages import Message
from toolwire.store import SQLStore, User
from toolwire.store._reads import _busy

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def alice_on_sqlite(folder: Path) -> AsyncIterator[tuple[SQLStore, User]]:
    """A SQLite store with no lookup cache (every lookup reads), and its user alice, whose token is `token-a`."""
    async with SQLStore(f"sqlite:///{folder / 'app.db'}", lookup_seconds=0) as store:
        user = await store.ensure_user("alice")
        await store.add_token(user.id, "token-a")
        yield store, user


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
    # waiting for the pool). The reads now run at once when their task runs (SQLite: on the loop, on a connection
    # of their own) or on a loop of their own (PostgreSQL).
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
            # The loop busy on purpose, for long enough that the reader pool's first connections are made meanwhile
            # too: on a loaded machine, right after a test restarted PostgreSQL, 0.3 s was not always enough for
            # them (the reads all ran after it, on the reader's loop all the same).
            time.sleep(2.0)  # noqa: ASYNC251
            loop_free = time.monotonic()
        assert found == ["alice"] * 40
        assert sum(at < loop_free for at in executed) == 40, executed  # none needed the loop to be reached


async def test_one_statement_reads_on_sqlite_run_on_the_loop_and_reads_of_several_on_reader_threads(
        tmp_path: Path) -> None:
    async with alice_on_sqlite(tmp_path) as (store, user):
        chat = await store.create_chat(user.id, "a chat")
        start = await store.start_run(chat.id, user_message=Message.user("hello"), client_message_id="c-1",
                                      owner="proc", lease_seconds=30)
        threads: dict[str, set[str]] = {}

        def on_statement(conn: object, cursor: object, statement: str, *rest: object) -> None:
            kind = "history" if "WITH RECURSIVE" in statement.upper() else statement.split()[0]
            threads.setdefault(kind, set()).add(threading.current_thread().name)

        for engine in store.read_engines:
            event.listen(engine, "before_cursor_execute", on_statement)
        here = threading.current_thread().name
        assert (await store.user_for_token("token-a")).name == "alice"  # type: ignore[union-attr]
        assert not await store.interrupt_waiting(chat.id)
        assert [m.text for m in await store.run_history(chat.id, start.run.id)] == ["hello"]
    assert threads["SELECT"] >= {here}, threads
    assert here not in threads["history"] and all(name.startswith("toolwire-sqlite-reader")
                                                   for name in threads["history"]), threads


async def test_a_one_statement_read_sqlite_answers_busy_waits_on_a_reader_thread_not_on_the_loop(
        tmp_path: Path) -> None:
    # A real busy answer from SQLite (a database file another connection holds exclusively) is what the read on
    # the loop gets the first time; the read then goes to a reader thread, whose connection waits for locks.
    holder = sqlite3.connect(tmp_path / "held.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        sqlite3.connect(tmp_path / "held.db", timeout=0).execute("SELECT 1 FROM sqlite_master").fetchall()
    except sqlite3.OperationalError as exc:
        busy = exc
    holder.execute("ROLLBACK")
    assert _busy(OperationalError("SELECT 1", {}, busy))
    assert not _busy(OperationalError("SELECT 1", {}, sqlite3.OperationalError("no such table: chats")))

    async with alice_on_sqlite(tmp_path) as (store, _):
        inline = store.read_engines[-1]
        refused: list[str] = []

        def refuse_once(conn: object, cursor: object, statement: str, *rest: object) -> None:
            if not refused:
                refused.append(statement)
                raise OperationalError(statement, {}, busy)

        event.listen(inline, "before_cursor_execute", refuse_once)
        threaded: list[str] = []
        event.listen(store.read_engines[-2], "before_cursor_execute",
                     lambda *_args: threaded.append(threading.current_thread().name))
        found = await store.user_for_token("token-a")
        assert found is not None and found.name == "alice"
        assert len(refused) == 1
        assert len(threaded) == 1 and threaded[0].startswith("toolwire-sqlite-reader"), threaded
        # Another kind of failure is the caller's, as before.
        event.remove(inline, "before_cursor_execute", refuse_once)

        def fail(conn: object, cursor: object, statement: str, *rest: object) -> None:
            raise OperationalError(statement, {}, sqlite3.OperationalError("disk I/O error"))

        event.listen(inline, "before_cursor_execute", fail)
        with pytest.raises(Exception, match="disk I/O error"):
            await store.user_for_token("token-a")
        event.remove(inline, "before_cursor_execute", fail)


async def test_a_one_statement_read_whose_connection_another_thread_holds_goes_to_a_reader_thread(
        tmp_path: Path) -> None:
    # Two event loops in two threads sharing one store: the loop's own read connection is in use by the other
    # thread at this moment; the read must neither wait for it (blocking this loop) nor fail.
    async with alice_on_sqlite(tmp_path) as (store, _):
        inline = store.read_engines[-1]
        taken, release = threading.Event(), threading.Event()

        def hold() -> None:
            with inline.connect():
                taken.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert taken.wait(5)
            began = time.monotonic()
            found = await store.user_for_token("token-a")
            assert time.monotonic() - began < 3  # the holder keeps the connection for 10 s
            assert found is not None and found.name == "alice"
        finally:
            release.set()
            holder.join()
