"""The store's writer: concurrent writes share transactions, fail alone, resolve only once committed, and
survive their callers' cancellation (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import Connection, event, insert, text

from toolwire.messages import Message
from toolwire.store import ChatIdTaken, ChatNotFound, RunConflict, SQLStore, StoreUnavailable
from toolwire.store._schema import users

pytestmark = pytest.mark.anyio


def write_engine(store: SQLStore) -> Any:
    return getattr(store, "write_engine", store.engine.sync_engine)  # (the pool's, before the writer had one)


@contextmanager
def counting_commits(store: SQLStore) -> Iterator[list[int]]:
    """Counts the write transactions the store commits (a SQLAlchemy listener on the writer's engine)."""
    commits = [0]

    def on_commit(_conn: Any) -> None:
        commits[0] += 1

    event.listen(write_engine(store), "commit", on_commit)
    try:
        yield commits
    finally:
        event.remove(write_engine(store), "commit", on_commit)


@contextmanager
def counting_savepoints(engine: Any) -> Iterator[dict[str, int]]:
    """The transactions begun and rolled back, and the SAVEPOINT statements run, on `engine` (a sync engine)."""
    seen = {"begin": 0, "rollback": 0, "savepoint": 0, "rollback_savepoint": 0, "release_savepoint": 0}
    kinds = {"SAVEPOINT": "savepoint", "ROLLBACK TO SAVEPOINT": "rollback_savepoint",
             "RELEASE SAVEPOINT": "release_savepoint"}

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        for start, kind in kinds.items():
            if statement.startswith(start):
                seen[kind] += 1

    listeners = {"begin": lambda *_args: seen.__setitem__("begin", seen["begin"] + 1),
                 "rollback": lambda *_args: seen.__setitem__("rollback", seen["rollback"] + 1),
                 "before_cursor_execute": on_statement}
    for name, listener in listeners.items():
        event.listen(engine, name, listener)
    try:
        yield seen
    finally:
        for name, listener in listeners.items():
            event.remove(engine, name, listener)


def counting_checkouts(store: SQLStore) -> list[int]:
    """Counts, from now on, the connections the writer checks out of its pool."""
    checkouts = [0]

    def on_checkout(*_args: Any) -> None:
        checkouts[0] += 1

    event.listen(write_engine(store), "checkout", on_checkout)
    return checkouts


@contextmanager
def slow_commits(store: SQLStore, seconds: float) -> Iterator[None]:
    """Each commit waits `seconds` first: in the writer's thread on SQLite, so the event loop runs meanwhile."""

    def on_commit(_conn: Any) -> None:
        time.sleep(seconds)

    event.listen(write_engine(store), "commit", on_commit)
    try:
        yield
    finally:
        event.remove(write_engine(store), "commit", on_commit)


def add_user(name: str, fail: bool = False) -> Any:
    """A write operation that adds a user, then refuses (raises) after writing if `fail`."""
    from toolwire.store._records import utc_now

    def operation(conn: Connection) -> str:
        conn.execute(insert(users).values(id=f"id-{name}", name=name, created_at=utc_now()))
        if fail:
            raise ValueError(f"{name} refused after writing")
        return name
    return operation


def committed_chats(url: str, chat_ids: list[str]) -> int:
    """How many of the chats another connection sees committed, read synchronously (the event loop stops)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            marks = ",".join("?" * len(chat_ids))
            return int(conn.execute(f"SELECT count(*) FROM chats WHERE id IN ({marks})", chat_ids).fetchone()[0])
    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(url)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM chats WHERE id = ANY($1::text[])", chat_ids))
        finally:
            await conn.close()

    found: list[int] = []
    reader = threading.Thread(target=lambda: found.append(asyncio.run(count())))
    reader.start()
    reader.join()
    return found[0]


async def test_concurrent_writes_share_few_commits(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    with counting_commits(store) as commits:
        async with anyio.create_task_group() as tg:
            for index in range(100):
                tg.start_soon(store.create_chat, user.id, f"chat {index}")
    assert len(await store.list_chats(user.id)) == 100
    # One transaction each before the writer; now the first write commits alone and the 99 that queued behind it
    # share two batches (64 at most each).
    assert commits[0] <= 10, commits[0]
    assert store.writer.largest <= 64


async def test_a_batch_holds_at_most_write_batch_operations(db_url: str) -> None:
    async with SQLStore(db_url, write_batch=8) as store:
        user = await store.ensure_user("alice")
        with counting_commits(store) as commits:
            async with anyio.create_task_group() as tg:
                for index in range(40):
                    tg.start_soon(store.create_chat, user.id, f"chat {index}")
        assert store.writer.largest == 8
        assert commits[0] >= 5
        assert len(await store.list_chats(user.id)) == 40


async def test_batches_follow_each_other_while_the_event_loop_is_busy(db_url: str) -> None:
    # Led from the server's loop, each batch cost that loop two turns (its result, then waking the next leader):
    # with 1,000 chats streaming, writes queued faster than they committed. The writer's own thread goes from one
    # batch to the next by itself.
    async with SQLStore(db_url, write_batch=8) as store:
        user = await store.ensure_user("alice")
        committed_at: list[float] = []

        def on_commit(_conn: Any) -> None:
            committed_at.append(time.monotonic())

        event.listen(write_engine(store), "commit", on_commit)
        async with anyio.create_task_group() as tg:
            for index in range(40):
                tg.start_soon(store.create_chat, user.id, f"chat {index}")
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            time.sleep(0.5)  # noqa: ASYNC251 - the loop busy on purpose
            loop_free = time.monotonic()
        event.remove(write_engine(store), "commit", on_commit)
        assert sum(at < loop_free for at in committed_at) >= 5, committed_at  # all 40, in batches of 8
        assert len(await store.list_chats(user.id)) == 40


async def test_an_operation_that_fails_in_a_batch_fails_alone(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    busy = await store.create_chat(user.id, "busy")
    await store.start_run(busy.id, user_message=Message.user("first"), client_message_id="c1", owner="p",
                          lease_seconds=30)
    taken = await store.create_chat(user.id, "taken")
    outcomes: dict[str, object] = {}

    async def attempt(name: str, write: Any) -> None:
        try:
            outcomes[name] = await write
        except Exception as exc:
            outcomes[name] = exc

    with counting_commits(store) as commits:
        async with anyio.create_task_group() as tg:
            for index in range(10):
                tg.start_soon(attempt, f"new{index}", store.create_chat(user.id, f"new {index}", chat_id=f"new-{index}"))
            tg.start_soon(attempt, "conflict", store.start_run(
                busy.id, user_message=Message.user("second"), client_message_id="c2", owner="p", lease_seconds=30))
            tg.start_soon(attempt, "taken", store.create_chat(user.id, "again", chat_id=taken.id))
            tg.start_soon(attempt, "missing", store.append_messages("no-such-chat", [Message.user("x")]))
            for index in range(10, 20):
                tg.start_soon(attempt, f"new{index}", store.create_chat(user.id, f"new {index}", chat_id=f"new-{index}"))
    assert isinstance(outcomes["conflict"], RunConflict)
    assert isinstance(outcomes["taken"], ChatIdTaken)
    assert isinstance(outcomes["missing"], ChatNotFound)
    for index in range(20):
        assert (await store.get_chat(user.id, f"new-{index}")) is not None, outcomes[f"new{index}"]
    assert commits[0] < 20  # they were batched, and the three failures did not cost the others their batch
    # The refused start rolled back its numbers and left no message behind.
    chat = await store.get_chat(user.id, busy.id)
    assert chat is not None and (chat.run_count, chat.last_sequence) == (1, 1)
    assert [row.messages[0].text for row in await store.list_messages(busy.id)] == ["first"]
    assert (await store.get_chat(user.id, taken.id)) == taken


async def test_the_same_message_twice_in_one_batch_starts_one_run(store: SQLStore) -> None:
    """The second copy is refused ("already started") by the first's uncommitted run, in a savepoint: the first's
    run commits with the batch, so every copy gets the run that exists (before savepoints, the rollback that
    dropped the second copy undid that run too, and the second got the id of a run that was never committed)."""
    user = await store.ensure_user("alice")
    chats = [await store.create_chat(user.id, f"chat {i}") for i in range(8)]
    starts: dict[str, list[tuple[str, bool]]] = {chat.id: [] for chat in chats}

    async def start(chat_id: str) -> None:
        begun = await store.start_run(chat_id, user_message=Message.user("same"), client_message_id="same",
                                      owner="p", lease_seconds=30)
        starts[chat_id].append((begun.run.id, begun.created))

    with counting_commits(store) as commits:
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                for chat in chats:
                    tg.start_soon(start, chat.id)
    assert commits[0] < 32  # they shared batches, so copies of one message met in one transaction
    for chat in chats:
        ids = {run_id for run_id, _ in starts[chat.id]}
        assert len(ids) == 1 and sum(created for _, created in starts[chat.id]) == 1, starts[chat.id]
        stored = await store.get_run(chat.id, ids.pop())
        assert stored is not None and stored.status == "running"
        assert [row.messages[0].text for row in await store.list_messages(chat.id)] == ["same"]


async def test_a_failing_operation_leaves_nothing_of_what_it_wrote(store: SQLStore) -> None:
    """`run_batch` directly: the failing operation had written a row before it raised; the row is gone, the
    others' rows are there."""

    from toolwire.store._writer import run_batch

    writer = store.writer
    results = []
    async with anyio.create_task_group() as tg:
        async def one(name: str, fail: bool) -> None:
            try:
                results.append(await writer.write(add_user(name, fail)))
            except ValueError as exc:
                results.append(str(exc))
        for name, fail in (("a", False), ("b", True), ("c", False), ("d", True), ("e", False)):
            tg.start_soon(one, name, fail)
    assert sorted(results) == ["a", "b refused after writing", "c", "d refused after writing", "e"]
    async with store.engine.connect() as conn:
        names = sorted((await conn.execute(text("SELECT name FROM users"))).scalars())
    assert names == ["a", "c", "e"]
    assert run_batch  # the function the writer runs each batch with


async def test_refusals_after_other_operations_undo_only_their_own_writes(store: SQLStore) -> None:
    """`refusable` operations after the first run in a savepoint: their refusals roll back to it, and the batch
    commits in one transaction instead of running again once per refusal (the cost grew with the square of the
    refusals, and every attempt held the chats' locks)."""
    from toolwire.store._writer import Operation, run_batch

    loop = asyncio.get_running_loop()
    plan = [(f"u{index}", index % 3 == 1) for index in range(12)]
    batch = [Operation(add_user(name, fail), None, loop, refusable=True) for name, fail in plan]
    with counting_savepoints(store.engine.sync_engine) as seen:
        async with store.engine.connect() as conn:
            await conn.run_sync(run_batch, batch)
    outcomes = [str(op.error) if op.error is not None else op.value for op in batch]
    assert outcomes == [f"{name} refused after writing" if fail else name for name, fail in plan]
    # The first has none; each of the others is released or rolled back to.
    assert seen == {"begin": 1, "rollback": 0, "savepoint": 11, "rollback_savepoint": 4, "release_savepoint": 7}
    async with store.engine.connect() as conn:
        names = set((await conn.execute(text("SELECT name FROM users"))).scalars())
    assert names == {name for name, fail in plan if not fail}
    # Under one name: a statement text asyncpg has prepared once (a new name each time was prepared each time).
    texts: set[str] = set()

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "SAVEPOINT" in statement:
            texts.add(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", on_statement)
    try:
        again = [Operation(add_user(f"again-{name}", fail), None, loop, refusable=True) for name, fail in plan]
        async with store.engine.connect() as conn:
            await conn.run_sync(run_batch, again)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", on_statement)
    assert len(texts) == 3, texts  # SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT of one name


async def test_new_chats_refused_for_a_taken_id_need_no_savepoint(store: SQLStore) -> None:
    """A new chat's first run refuses only when its id is taken, which it finds before writing anything: after
    other operations it runs without a SAVEPOINT (two round trips to PostgreSQL saved on every new chat), and a
    taken id is refused at once while the rest of the batch commits in one transaction."""
    from functools import partial

    from toolwire.store import new_chat
    from toolwire.store._writer import Operation, run_batch

    user = await store.ensure_user("alice")
    await store.create_chat(user.id, "taken", chat_id="c-taken")
    loop = asyncio.get_running_loop()
    ids = ["c-0", "c-taken", "c-1", "c-taken", "c-2"]
    batch = [Operation(partial(store._writes.start_run, chat_id=chat_id, user_message=Message.user(f"hi {n}"),
                               client_message_id=f"m-{n}", owner="p", lease_seconds=30, title=None,
                               new_chat=new_chat(user.id, "new", chat_id=chat_id)),
                       None, loop, refuses_first=(ChatIdTaken,)) for n, chat_id in enumerate(ids)]
    with counting_savepoints(store.engine.sync_engine) as seen:
        async with store.engine.connect() as conn:
            await conn.run_sync(run_batch, batch)
    assert seen == {"begin": 1, "rollback": 0, "savepoint": 0, "rollback_savepoint": 0, "release_savepoint": 0}
    assert [type(op.error).__name__ if op.error else op.value[0].run.chat_id for op in batch] == \
        ["c-0", "ChatIdTaken", "c-1", "ChatIdTaken", "c-2"]
    for chat_id in ("c-0", "c-1", "c-2"):
        rows = await store.list_messages(chat_id)
        assert [row.messages[0].text for row in rows] == [f"hi {ids.index(chat_id)}"]
    assert await store.list_messages("c-taken") == []  # the taken chat got nothing of the refused starts
    # Through the store: twenty new chats at once, two of them on taken ids, share batches and no SAVEPOINT.
    outcomes: dict[str, str] = {}

    async def start(chat_id: str) -> None:
        try:
            begun = await store.start_run(chat_id, user_message=Message.user("hello"), client_message_id="m",
                                          owner="p", lease_seconds=30, new_chat=new_chat(user.id, chat_id=chat_id))
            outcomes[chat_id] = begun.run.chat_id
        except ChatIdTaken:
            outcomes[chat_id] = "taken"

    with counting_commits(store) as commits, counting_savepoints(write_engine(store)) as seen:
        async with anyio.create_task_group() as tg:
            for index in range(20):
                tg.start_soon(start, "c-1" if index in (5, 15) else f"new-{index}")
    assert seen["savepoint"] == 0 and commits[0] < 18, (seen, commits)
    assert outcomes == {**{f"new-{i}": f"new-{i}" for i in range(20) if i not in (5, 15)}, "c-1": "taken"}


async def test_a_rider_goes_with_the_next_batch_or_after_a_while_in_its_own(store: SQLStore) -> None:
    """`Writer.ride`: a write nobody waits for joins the batch another write starts (no transaction of its own);
    with none started it is written after `RIDE_SECONDS`; a newer rider of the same key replaces one not yet
    taken; closing the writer writes the riders left."""
    from toolwire.store._writer import RIDE_SECONDS

    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id, "c")
    begun = await store.start_run(chat.id, user_message=Message.user("hi"), client_message_id="m", owner="p",
                                  lease_seconds=30)
    run_id = begun.run.id

    async def stored_text() -> Any:
        async with store.engine.connect() as conn:
            return (await conn.execute(text("SELECT step_text FROM runs WHERE id = :id"), {"id": run_id})).scalar()

    writer = store.writer
    with counting_commits(store) as commits:
        store.checkpoint_step_text(run_id, 0, "older")
        store.checkpoint_step_text(run_id, 0, "newer")  # replaces the one not taken yet
        await store.ensure_user("bob")  # starts a batch: the rider goes with it
        assert commits[0] == 1 and '"newer"' in await stored_text()
        operations = writer.operations
        store.checkpoint_step_text(run_id, 0, "alone")
        await anyio.sleep(RIDE_SECONDS / 4)
        assert '"newer"' in await stored_text() and commits[0] == 1  # nothing started a batch yet
        await anyio.sleep(RIDE_SECONDS * 2)
        assert '"alone"' in await stored_text() and commits[0] == 2 and writer.operations == operations + 1
        store.checkpoint_step_text(run_id, 0, "at the close")
    await store.close()
    await store.open()
    assert '"at the close"' in await stored_text()


async def test_every_write_of_a_chat_is_ordered_by_that_chat(store: SQLStore, monkeypatch: Any) -> None:
    """The writer sorts a batch by the chat each operation locks, so two replicas' batches lock chats in one
    order. A round stored with its usage wraps its rows' insert: it reported no chat, sorted first, and two
    replicas deadlocked on it. The writes keyed by a run (its journal, its end) sorted first too, though the
    chat's next run start waits for the run's row they lock."""
    from toolwire.store._writer import Operation

    written: list[str] = []
    write = store.writer.write

    async def recording(function: Any, **options: Any) -> Any:
        written.append(Operation(function, None, asyncio.get_running_loop(), chat=options.get("chat")).chat)
        return await write(function, **options)

    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id, "c")
    monkeypatch.setattr(store.writer, "write", recording)
    begun = await store.start_run(chat.id, user_message=Message.user("hi"), client_message_id="m", owner="p",
                                  lease_seconds=30)
    await store.record_journal(begun.run.id, step_message=Message.assistant("hel"))
    await store.record_step_text(begun.run.id, 1, "hel")
    await store.append_messages(chat.id, [Message.assistant("hello")], run_id=begun.run.id,
                                usage={"input_tokens": 1})
    await store.append_messages(chat.id, [Message.assistant("again")])
    assert await store.finish_run(begun.run.id, status="completed", usage=None, error=None, steps=1, event_count=3)
    assert written == [chat.id] * 6
    # Its end forgets the run; a write of a run the store never saw names no chat, as before.
    await store.release_lease(begun.run.id, owner="p")
    assert written[-1] == ""


async def test_a_caller_is_resolved_only_after_its_commit(store: SQLStore, db_url: str) -> None:
    user = await store.ensure_user("alice")
    seen: list[tuple[str, int]] = []

    async def create(index: int) -> None:
        chat = await store.create_chat(user.id, chat_id=f"chat-{index}")
        # No await between the return and this read: another connection must already see the commit.
        seen.append((chat.id, committed_chats(db_url, [chat.id])))

    with slow_commits(store, 0.05):
        async with anyio.create_task_group() as tg:
            for index in range(12):
                tg.start_soon(create, index)
    assert len(seen) == 12
    assert all(count == 1 for _, count in seen), seen


async def test_cancelled_callers_lose_nothing_and_break_no_batch(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    finished: dict[int, str] = {}
    scopes: dict[int, anyio.CancelScope] = {}

    async def create(index: int) -> None:
        with anyio.CancelScope() as scope:
            scopes[index] = scope
            chat = await store.create_chat(user.id, chat_id=f"chat-{index}")
            finished[index] = chat.id
            await anyio.lowlevel.checkpoint()  # a cancelled caller sees its cancellation here, after its write returned

    with slow_commits(store, 0.02):
        async with anyio.create_task_group() as tg:
            for index in range(40):
                tg.start_soon(create, index)
            await anyio.sleep(0.01)
            for index in range(0, 40, 3):  # the first caller (leading the first batch) among them
                scopes[index].cancel()
    cancelled = set(range(0, 40, 3))
    assert all(scopes[index].cancelled_caught for index in cancelled)
    assert set(finished) == set(range(40))  # every write returned, cancelled or not
    assert all(finished[index] == f"chat-{index}" for index in range(40))
    assert len(await store.list_chats(user.id)) == 40
    # The writer still leads: a write after all that commits at once.
    again = await store.create_chat(user.id, "after")
    assert await store.get_chat(user.id, again.id) == again


async def test_an_outage_fails_each_caller_of_the_batch_with_its_own_error(tmp_path: Any) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 'toolwire.db'}")
    async with store:
        user = await store.ensure_user("alice")

        def outage(_conn: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        event.listen(store.write_engine, "commit", outage)
        errors: list[BaseException] = []

        async def create(index: int) -> None:
            try:
                await store.create_chat(user.id, chat_id=f"c{index}")
            except StoreUnavailable as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for index in range(5):
                tg.start_soon(create, index)
        event.remove(store.write_engine, "commit", outage)
        assert len(errors) == 5 and len({id(e) for e in errors}) == 5
        assert store.health.write_error is not None
        await store.create_chat(user.id, chat_id="after")
        assert store.health.write_error is None
        assert [c.id for c in await store.list_chats(user.id)] == ["after"]


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # SQLite has one writer: no deadlock to break
async def test_a_batch_that_postgres_aborts_to_break_a_deadlock_runs_again(db_url: str) -> None:
    """Two replicas' batches lock two chats in opposite orders: PostgreSQL aborts one, whose batch runs again."""
    async with SQLStore(db_url) as first, SQLStore(db_url, migrate=False) as second:
        user = await first.ensure_user("alice")
        x, y = (await first.create_chat(user.id, "x")).id, (await first.create_chat(user.id, "y")).id

        def cross(one: str, other: str) -> Any:
            def operation(conn: Connection) -> str:
                conn.execute(text("UPDATE chats SET title = title || '+' WHERE id = :id"), {"id": one})
                conn.execute(text("SELECT pg_sleep(0.3)"))
                conn.execute(text("UPDATE chats SET title = title || '+' WHERE id = :id"), {"id": other})
                return one
            return operation

        results: list[str] = []

        async def write(store: SQLStore, one: str, other: str) -> None:
            results.append(await store.writer.write(cross(one, other)))

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, first, x, y)
            tg.start_soon(write, second, y, x)
        assert sorted(results) == sorted([x, y])
        async with first.engine.connect() as conn:
            titles = dict((await conn.execute(text("SELECT id, title FROM chats"))).all())
        assert titles == {x: "x++", y: "y++"}


async def test_the_writer_itself_survives_callers_cancelled_while_queued_or_leading(store: SQLStore) -> None:
    """As above, through `writer.write` directly, without the store methods' own shield: a cancelled caller
    (the leader among them) neither loses its write nor leaves the lead with nobody."""
    returned: list[str] = []
    scopes: dict[int, anyio.CancelScope] = {}

    async def write(index: int) -> None:
        with anyio.CancelScope() as scope:
            scopes[index] = scope
            returned.append(await store.writer.write(add_user(f"u{index}")))

    with slow_commits(store, 0.02):
        async with anyio.create_task_group() as tg:
            for index in range(30):
                tg.start_soon(write, index)
            await anyio.sleep(0.01)
            for index in range(0, 30, 2):
                scopes[index].cancel()
    with anyio.fail_after(30):  # a writer left without a leader would hang here
        assert await store.writer.write(add_user("after")) == "after"
    async with store.engine.connect() as conn:
        names = set((await conn.execute(text("SELECT name FROM users"))).scalars())
    assert names == {f"u{index}" for index in range(30)} | {"after"}
    assert set(returned) >= {f"u{index}" for index in range(1, 30, 2)}


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # SQLite's writer has a worker thread already
async def test_postgres_batches_run_on_the_writers_own_loop_and_close_stops_it(db_url: str) -> None:
    # On the server's event loop every statement of a batch waited for a turn of that loop; under 1,000 chats
    # the writer fell behind for good (bench/side_by_side). The writer's connection lives on a loop of its own.
    seen: list[tuple[str, bool]] = []

    def on_statement(*_args: Any) -> None:
        try:
            asyncio.get_running_loop()
            running = True
        except RuntimeError:
            running = False
        seen.append((threading.current_thread().name, running))

    async with SQLStore(db_url) as store:
        event.listen(write_engine(store), "before_cursor_execute", on_statement)
        owner = await store.ensure_user("alice")
        chats = await asyncio.gather(*(store.create_chat(owner.id, f"chat {n}") for n in range(20)))
        assert len({chat.id for chat in chats}) == 20
        assert seen and all(name == "toolwire-postgres-writer" and running for name, running in seen), seen
        assert threading.current_thread().name != "toolwire-postgres-writer"
    assert "toolwire-postgres-writer" not in {thread.name for thread in threading.enumerate()}


async def test_a_postgres_store_that_cannot_open_leaves_no_writer_thread_behind() -> None:
    # The writer's loop thread is made before the database is first reached (by the migration): a database that
    # cannot be reached left the thread running for the rest of the process, once per attempt to open.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    store = SQLStore(f"postgresql://toolwire@127.0.0.1:{port}/toolwire")
    with pytest.raises(Exception):  # noqa: B017, PT011 - whichever error the driver gives for a refused connection
        await store.open()
    assert not {"toolwire-postgres-writer", "toolwire-postgres-reader"} & {thread.name for thread in threading.enumerate()}
    with pytest.raises(RuntimeError, match="not open"):
        store.engine  # noqa: B018 - closed again: it says so


async def test_closing_the_store_commits_the_writes_queued_first(db_url: str) -> None:
    store = SQLStore(db_url, write_batch=4)
    await store.open()
    user = await store.ensure_user("alice")
    returned: list[str] = []

    async def create(index: int) -> None:
        returned.append((await store.create_chat(user.id, chat_id=f"chat-{index}")).id)

    event.listen(write_engine(store), "commit", lambda _conn: time.sleep(0.02))  # the engine goes with the store
    async with anyio.create_task_group() as tg:
        for index in range(20):
            tg.start_soon(create, index)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        await store.close()  # while most of the 20 are still queued (five batches of four)
    assert sorted(returned) == sorted(f"chat-{index}" for index in range(20))
    with pytest.raises(RuntimeError, match="not open"):
        await store.create_chat(user.id, chat_id="late")
    async with SQLStore(db_url, migrate=False) as again:
        assert len(await again.list_chats(user.id)) == 20


async def test_the_writer_keeps_one_connection_and_replaces_it_after_a_failed_batch(db_url: str) -> None:
    # Checking a connection out and back in for every batch was a seventh of the writer's Python time on SQLite,
    # and on PostgreSQL about 2 ms of CPU per chat (the pool's reset and bookkeeping both ways).
    async with SQLStore(db_url) as store:
        user = await store.ensure_user("alice")
        checkouts = counting_checkouts(store)
        for index in range(10):  # one at a time: ten batches
            await store.create_chat(user.id, chat_id=f"before-{index}")
        assert checkouts[0] == 0  # the connection the first write checked out

        def outage(_conn: Any) -> None:
            raise sqlite3.OperationalError("disk I/O error")

        event.listen(write_engine(store), "commit", outage)
        with pytest.raises(StoreUnavailable):
            await store.create_chat(user.id, chat_id="lost")
        event.remove(write_engine(store), "commit", outage)
        for index in range(10):
            await store.create_chat(user.id, chat_id=f"after-{index}")
        assert checkouts[0] == 1  # a new connection once, after the failed batch invalidated the old one
        ids = {chat.id for chat in await store.list_chats(user.id)}
        assert "lost" not in ids and {f"after-{index}" for index in range(10)} <= ids


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)  # a SQLite file is not dropped while idle
async def test_the_postgres_writer_gives_an_idle_connection_back_to_the_pool(db_url: str, monkeypatch: Any) -> None:
    # The pool's own options (pool_recycle, pool_pre_ping) apply at checkout: a connection kept for hours without a
    # batch would never meet them.
    from toolwire.store import sql

    monkeypatch.setattr(sql, "_KEEP_IDLE_SECONDS", 1.0)
    async with SQLStore(db_url) as store:
        user = await store.ensure_user("alice")
        checkouts = counting_checkouts(store)
        await store.create_chat(user.id, chat_id="busy-1")
        await store.create_chat(user.id, chat_id="busy-2")
        assert checkouts[0] == 0
        await asyncio.sleep(1.5)
        await store.create_chat(user.id, chat_id="after-a-pause")
        assert checkouts[0] == 1
