"""What a chat costs the store, over HTTP on both databases (issue 22).

A whole chat (a text, a tool call, its result, the final answer) on the in-process server of
`test_streaming_path` (uvicorn on loopback, the fake provider behind `httpx.MockTransport`), with the store's
statements noted:
- each appended round takes its sequence numbers and moves the chat's active leaf in one `UPDATE chats` (two
  before), and the active leaf still follows the run (the messages route shows the whole answer);
- a chat's first run takes its history (the one row its start wrote) without reading it back; a later run
  reads its branch, and the model sees the same messages either way;
- on SQLite nothing of the run goes through aiosqlite: the queue checks at its start and end run on the loop,
  a history read is one hop to a reader thread (through aiosqlite each statement, fetch, `BEGIN` and rollback was a
  hop).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.server.support import read_events
from tests.server.test_streaming_path import serving
from toolwire.messages import Message
from toolwire.store import SQLStore

pytestmark = pytest.mark.anyio


class CountingStore(SQLStore):
    """The real store; it notes the statements of its writer, of its reader threads and of its aiosqlite pool."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.writes: list[str] = []
        self.pooled: list[str] = []
        self.history_reads = 0

    async def run_history(self, chat_id: str, run_id: str) -> list[Message]:
        self.history_reads += 1
        return await super().run_history(chat_id, run_id)

    async def open(self) -> None:
        await super().open()
        event.listen(self.write_engine, "before_cursor_execute",
                     lambda conn, cursor, statement, *rest: self.writes.append(statement))
        if self.write_engine is not self.engine.sync_engine:  # SQLite: the aiosqlite pool is apart from the writer
            event.listen(self.engine.sync_engine, "before_cursor_execute",
                         lambda conn, cursor, statement, *rest: self.pooled.append(statement))


async def test_a_chat_moves_the_active_leaf_with_its_numbers_and_reads_in_one_hop(db_url: str,
                                                                                 tmp_path: Path) -> None:
    store = CountingStore(db_url)
    async with serving(store, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        store.writes.clear()
        store.pooled.clear()
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
        assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
        [started] = [e.data for e in events if e.type == "run_started"]
        saved = [e.data["row"] for e in events if e.type == "message_saved"]
        pooled_during_the_chat = list(store.pooled)
        rows = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]

    # The chat shows the run's whole branch: the leaf followed every round, each round under the one before.
    assert [row["id"] for row in rows] == [started["user_message"]["id"], *[row["id"] for row in saved]]
    assert [row["parent_id"] for row in rows[1:]] == [row["id"] for row in rows[:-1]]
    inserts = [s for s in store.writes if s.startswith("INSERT INTO messages")]
    chat_updates = [s for s in store.writes if "UPDATE chats" in s]  # on PostgreSQL the start's is in a CTE
    # The run's start: its numbers and its leaf in one UPDATE; then one per round (two before: the numbers, then
    # the leaf).
    assert len(saved) == 2 and len(inserts) == 1 + len(saved)
    assert len(chat_updates) == 1 + len(saved), chat_updates
    if db_url.startswith("sqlite"):
        assert pooled_during_the_chat == [], pooled_during_the_chat


async def test_a_chats_first_run_takes_its_history_from_its_start_and_later_runs_read_theirs(
        db_url: str, tmp_path: Path) -> None:
    store = CountingStore(db_url)
    model_requests: list[dict[str, Any]] = []
    async with serving(store, tmp_path, model_requests=model_requests) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        statuses = []
        for number, text in enumerate(["first question", "second question"]):
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": str(number), "text": text}) as response:
                events = [e async for e in read_events(response)]
            statuses.append(events[-1].data["status"])
            if number == 0:
                reads_after_the_first_run = store.history_reads
        stored = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]

    assert statuses == ["completed", "completed"]
    assert (reads_after_the_first_run, store.history_reads) == (0, 1)
    first, *_, last = model_requests
    assert [(m["role"], m["content"]) for m in first["messages"]] == [("user", "first question")]
    # The second run's model request holds the whole first branch, read back from the store, then the new message.
    roles = [m["role"] for m in last["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user"], roles
    assert last["messages"][-1]["content"] == "second question"
    assert [row["messages"][0]["role"] for row in stored][:2] == ["user", "assistant"]


async def test_reads_of_several_statements_do_not_wait_for_the_aiosqlite_pool(tmp_path: Path) -> None:
    # The pool of one connection with a short timeout stands for a pool that every request is using at once: a
    # read through it would time out (and fail the run with `store_unavailable`).
    store = SQLStore(f"sqlite:///{tmp_path / 'app.db'}",
                     engine_options={"pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2})
    async with store:
        from toolwire.messages import Message

        user = await store.ensure_user("alice")
        chat = await store.create_chat(user.id, "a chat")
        start = await store.start_run(chat.id, user_message=Message.user("hello"), client_message_id="c-1",
                                      owner="proc", lease_seconds=30)
        await store.append_messages(chat.id, [Message.assistant("hi")], run_id=start.run.id)
        found: dict[str, Any] = {}
        async with store.engine.connect():  # the pool's one connection, held throughout
            found["history"] = [m.text for m in await store.run_history(chat.id, start.run.id)]
            found["path"] = [row.id for row in (await store.chat_path(chat.id)).rows]
            found["paused"] = await store.paused_run(chat.id)
            found["interrupt"] = await store.interrupt_waiting(chat.id)
            found["promoted"] = await store.promote_queued(chat.id, owner="proc", lease_seconds=30)
    assert found["history"] == ["hello", "hi"]
    assert len(found["path"]) == 2
    assert found["paused"] is None and found["interrupt"] is False and found["promoted"] is None


async def test_a_failed_read_leaves_no_transaction_open_on_a_reader_connection(tmp_path: Path) -> None:
    # Reader connections go back to their pool without the pool's rollback: a read that fails half-way must still end
    # its transaction, or the connection would serve the snapshot of that moment to every later read.
    from sqlalchemy import text

    from toolwire.messages import Message

    store = SQLStore(f"sqlite:///{tmp_path / 'app.db'}")
    async with store:
        user = await store.ensure_user("alice")
        chat = await store.create_chat(user.id, "a chat")
        await store.append_messages(chat.id, [Message.user("one")])

        def failing(conn: Any) -> None:
            conn.execute(text("SELECT count(*) FROM messages")).scalar()
            raise LookupError("the read failed half-way")

        for _ in range(8):  # more reads than reader connections: each of them fails once
            with pytest.raises(LookupError):
                await store._read_many(failing)
        await store.append_messages(chat.id, [Message.assistant("two")])
        for _ in range(8):  # every reader connection sees the write committed after its failed read
            assert [row.messages[0].text for row in (await store.chat_path(chat.id)).rows] == ["one", "two"]
            assert len(await store.list_messages(chat.id)) == 2


class QueueReadingStore(CountingStore):
    """Notes the queue's reads: the interrupt waiting (a run's start) and the head to start (a run's end)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.queue_reads: list[str] = []

    async def interrupt_waiting(self, chat_id: str) -> bool:
        self.queue_reads.append(f"interrupt {chat_id}")
        return await super().interrupt_waiting(chat_id)

    async def promote_queued(self, chat_id: str, *, owner: str, lease_seconds: float) -> Any:
        self.queue_reads.append(f"head {chat_id}")
        return await super().promote_queued(chat_id, owner=owner, lease_seconds=lease_seconds)


async def test_a_server_alone_reads_no_queue_of_the_chats_it_made_until_a_run_is_queued_on_one(
        db_url: str, tmp_path: Path) -> None:
    store = QueueReadingStore(db_url)

    async def send(chat: str, client_id: str, **extra: Any) -> str:
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": client_id, "text": "go", **extra}) as response:
            events = [e async for e in read_events(response)]
        return str(events[-1].data["status"])

    async with serving(store, tmp_path) as client:
        # Made with its first message, and made empty: the server (alone on its database) knows no run waits.
        async with client.stream("POST", "/api/chats", json={"message": {"client_message_id": "1", "text": "go"}}
                                 ) as response:
            made_with_message = response.headers["x-chat-id"]
            assert [e async for e in read_events(response)][-1].data["status"] == "completed"
        made_empty = (await client.post("/api/chats", json={})).json()["id"]
        assert await send(made_empty, "1") == "completed"
        assert await send(made_with_message, "2") == "completed"
        assert store.queue_reads == []
        # A chat this server did not make (one of a server before it) is read at each run's start and end.
        user = await store.ensure_user("dev")
        older = (await store.create_chat(user.id, "older")).id
        assert await send(older, "1") == "completed"
        assert store.queue_reads == [f"interrupt {older}", f"head {older}"]
        # Once a run is queued on a chat, its queue is read from then on (here the chat was free: it starts at once).
        store.queue_reads.clear()
        assert await send(made_empty, "2", multitask_strategy="enqueue") == "completed"
        assert await send(made_empty, "3") == "completed"
        assert store.queue_reads == [f"interrupt {made_empty}", f"head {made_empty}"] * 2
