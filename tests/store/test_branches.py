"""A chat is a tree of rows (store/_tree.py), on SQLite and PostgreSQL: branches, paths, siblings, the active
leaf, regenerations, the migration of linear chats, and writers on two branches at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from sqlalchemy import event, text

from toolwire.messages import Message
from toolwire.store import (
    IdempotencyConflict,
    InvalidParent,
    MessageNotFound,
    RunConflict,
    SQLStore,
)
from toolwire.store._records import new_id, utc_now

from ._migrations import downgrade_to

pytestmark = pytest.mark.anyio


async def new_chat(store: SQLStore, user: str = "alice") -> str:
    owner = await store.ensure_user(user)
    return (await store.create_chat(owner.id, "a chat")).id


async def turn(store: SQLStore, chat_id: str, text_: str, *, parent_id: str | None = None,
               answer: str | None = None) -> tuple[str, str]:
    """A user message (under `parent_id`) answered by one assistant row; returns (user row id, answer row id)."""
    start = await store.start_run(chat_id, user_message=Message.user(text_), client_message_id=new_id("c"),
                                  owner="proc", lease_seconds=30, parent_id=parent_id)
    [row] = await store.append_messages(chat_id, [Message.assistant(answer or f"re: {text_}")], run_id=start.run.id)
    await store.finish_run(start.run.id, status="completed", usage=None, error=None, steps=1, event_count=None)
    return start.user_row.id, row.id


def texts(rows: list) -> list[str]:
    return [m.text for row in rows for m in row.messages]


async def test_an_edit_branches_at_its_parent_and_both_branches_stay(store: SQLStore) -> None:
    chat_id = await new_chat(store)
    u1, a1 = await turn(store, chat_id, "one")
    u2, a2 = await turn(store, chat_id, "two")
    # Edit "two": a new user message under the answer to "one".
    u2b, a2b = await turn(store, chat_id, "two, edited", parent_id=a1)

    active = await store.chat_path(chat_id)
    assert active.leaf_id == a2b
    assert texts(active.rows) == ["one", "re: one", "two, edited", "re: two, edited"]
    assert active.siblings[u2b] == [u2, u2b]
    assert active.siblings[u1] == [u1]
    assert [row.parent_id for row in active.rows] == [None, u1, a1, u2b]

    old = await store.chat_path(chat_id, u2)  # the old branch, whole and readable
    assert old.leaf_id == a2
    assert texts(old.rows) == ["one", "re: one", "two", "re: two"]
    # Sequence numbers count every row of the chat, across branches, without gaps.
    assert [r.sequence_number for r in await store.list_messages(chat_id)] == [1, 2, 3, 4, 5, 6]
    assert await store.load(chat_id) == [row.messages[0] for row in active.rows]


async def test_a_new_first_message_is_a_root_sibling(store: SQLStore) -> None:
    chat_id = await new_chat(store)
    u1, _ = await turn(store, chat_id, "one")
    u1b, _ = await turn(store, chat_id, "one again", parent_id="")
    path = await store.chat_path(chat_id)
    assert texts(path.rows) == ["one again", "re: one again"]
    assert path.siblings[u1b] == [u1, u1b]


async def test_switching_branches_goes_to_the_newest_leaf_and_writes_follow_only_the_shown_branch(
        store: SQLStore) -> None:
    chat_id = await new_chat(store)
    _, a1 = await turn(store, chat_id, "one")
    u2, _ = await turn(store, chat_id, "two")
    _, a3 = await turn(store, chat_id, "three")
    u2b, a2b = await turn(store, chat_id, "two b", parent_id=a1)

    switched = await store.switch_leaf(chat_id, u2)  # a row in the middle: down to its newest leaf
    assert switched.leaf_id == a3
    assert (await store.chat_path(chat_id)).leaf_id == a3
    # A run on the other branch (regenerating "two b") writes there; the chat keeps showing the switched branch.
    start = await store.start_answer(chat_id, a2b, client_message_id=None, owner="proc", lease_seconds=30)
    assert start.user_row.id == u2b
    assert (await store.chat_path(chat_id)).leaf_id == u2b  # regenerating shows the regenerated branch
    await store.switch_leaf(chat_id, u2)
    [row] = await store.append_messages(chat_id, [Message.assistant("re: two b (again)")], run_id=start.run.id)
    assert row.parent_id == u2b
    assert (await store.chat_path(chat_id)).leaf_id == a3
    regenerated = await store.chat_path(chat_id, row.id)
    assert texts(regenerated.rows) == ["one", "re: one", "two b", "re: two b (again)"]
    assert regenerated.siblings[row.id] == [a2b, row.id]


@contextmanager
def written(store: SQLStore) -> Iterator[list[str]]:
    """The statements the writer runs meanwhile (the transaction's BEGIN and COMMIT are the writer's own)."""
    statements: list[str] = []

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        kind = statement.split(None, 1)[0].upper()
        if kind == "WITH":  # PostgreSQL's run start: a locking CTE, then the UPDATE
            kind = "UPDATE" if "\n UPDATE " in statement else kind
        if kind not in ("BEGIN", "COMMIT"):
            statements.append(kind)

    event.listen(store.write_engine, "before_cursor_execute", on_statement)
    try:
        yield statements
    finally:
        event.remove(store.write_engine, "before_cursor_execute", on_statement)


async def test_the_tree_costs_a_run_no_statements_of_its_own(store: SQLStore) -> None:
    """A run's round is the numbers (which find the run's tip and move the active leaf) and the rows; a run start
    is the numbers, the checks, the message and the run (which moves the active leaf)."""
    chat_id = await new_chat(store)
    u1, a1 = await turn(store, chat_id, "one")
    _, a1b = await turn(store, chat_id, "one, edited", parent_id="")
    with written(store) as statements:
        start = await store.start_run(chat_id, user_message=Message.user("two"), client_message_id="c-2",
                                      owner="proc", lease_seconds=30)
    assert sorted(statements) == ["INSERT", "INSERT", "SELECT", "UPDATE"]  # SQLite checks first, PostgreSQL locks
    assert start.user_row.parent_id == a1b
    assert (await store.chat_path(chat_id)).leaf_id == start.user_row.id
    with written(store) as statements:
        [first] = await store.append_messages(chat_id, [Message.assistant("a round")], run_id=start.run.id)
        [second] = await store.append_messages(chat_id, [Message.assistant("two's answer")], run_id=start.run.id)
    assert statements == ["UPDATE", "INSERT"] * 2
    assert (first.parent_id, second.parent_id) == (start.user_row.id, first.id)
    assert (await store.chat_path(chat_id)).leaf_id == second.id
    # Switched away meanwhile: the run's rows still go under its tip, the active leaf stays where it was put.
    await store.switch_leaf(chat_id, u1)
    [third] = await store.append_messages(chat_id, [Message.assistant("more")], run_id=start.run.id)
    assert third.parent_id == second.id
    assert (await store.chat_path(chat_id)).leaf_id == a1


async def test_the_model_sees_exactly_the_path_to_the_row_it_answers(store: SQLStore) -> None:
    chat_id = await new_chat(store)
    _, a1 = await turn(store, chat_id, "one")
    await turn(store, chat_id, "two")
    start = await store.start_run(chat_id, user_message=Message.user("two b"), client_message_id="c-2b",
                                  owner="proc", lease_seconds=30, parent_id=a1)
    assert texts_of(await store.run_history(chat_id, start.run.id)) == ["one", "re: one", "two b"]
    # A tool round belongs to the run's branch, and the next step sees it.
    calls = Message.assistant("looking")
    await store.append_messages(chat_id, [calls], run_id=start.run.id)
    await store.switch_leaf(chat_id, (await store.list_messages(chat_id))[3].id)  # the person looks at "two"
    assert texts_of(await store.run_history(chat_id, start.run.id)) == ["one", "re: one", "two b", "looking"]
    assert "looking" not in texts((await store.chat_path(chat_id)).rows)


def texts_of(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_regenerate_refusals_and_idempotency(store: SQLStore) -> None:
    chat_id = await new_chat(store)
    u1, a1 = await turn(store, chat_id, "one")
    with pytest.raises(MessageNotFound):
        await store.start_answer(chat_id, "msg_nope", client_message_id=None, owner="p", lease_seconds=30)
    first = await store.start_answer(chat_id, a1, client_message_id="regen-1", owner="p", lease_seconds=30)
    assert first.created and first.run.leaf_id == u1
    again = await store.start_answer(chat_id, a1, client_message_id="regen-1", owner="p", lease_seconds=30)
    assert not again.created and again.run.id == first.run.id
    with pytest.raises(RunConflict):
        await store.start_answer(chat_id, a1, client_message_id="regen-2", owner="p", lease_seconds=30)
    await store.finish_run(first.run.id, status="failed", usage=None, error=None, steps=0, event_count=None)
    with pytest.raises(IdempotencyConflict):  # the id of a request that regenerated something else
        await store.start_answer(chat_id, "msg_nope", client_message_id="regen-1", owner="p", lease_seconds=30)
    # Retry after the failed run: the user message is answered again and not stored twice.
    retry = await store.start_answer(chat_id, u1, client_message_id=None, owner="p", lease_seconds=30)
    assert retry.created
    assert len([r for r in await store.list_messages(chat_id) if r.kind == "user"]) == 1


async def test_a_parent_must_be_an_answer_of_this_chat(store: SQLStore) -> None:
    chat_id = await new_chat(store)
    other = await new_chat(store, "bob")
    u1, a1 = await turn(store, chat_id, "one")
    _, b1 = await turn(store, other, "bob's")
    for parent, error in ((b1, MessageNotFound), ("msg_nope", MessageNotFound), (u1, InvalidParent)):
        with pytest.raises(error):
            await store.start_run(chat_id, user_message=Message.user("x"), client_message_id=new_id("c"),
                                  owner="p", lease_seconds=30, parent_id=parent)
    with pytest.raises(MessageNotFound):
        await store.chat_path(chat_id, b1)
    with pytest.raises(MessageNotFound):
        await store.switch_leaf(chat_id, b1)
    assert [r.id for r in await store.list_messages(chat_id)] == [u1, a1]  # nothing stored by the refusals


async def test_writers_on_two_branches_at_once_keep_numbers_and_branches_apart(db_url: str) -> None:
    async with SQLStore(db_url) as store:
        chat_id = await new_chat(store)
        _, a1 = await turn(store, chat_id, "one")
    ends: dict[str, str] = {}

    async def writer(name: str) -> None:
        async with SQLStore(db_url) as own:  # a store (pool, writer) of its own, as another replica has
            parent = a1
            for i in range(15):
                [row] = await own.append_messages(chat_id, [Message.user(f"{name} {i}")], parent_id=parent)
                parent = row.id
            ends[name] = parent

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer, "left")
        tg.start_soon(writer, "right")
    async with SQLStore(db_url) as store:
        rows = await store.list_messages(chat_id)
        assert [r.sequence_number for r in rows] == list(range(1, 33))
        for name in ("left", "right"):
            path = await store.chat_path(chat_id, ends[name])
            assert texts(path.rows) == ["one", "re: one", *[f"{name} {i}" for i in range(15)]]
            assert [r.sequence_number for r in path.rows] == sorted(r.sequence_number for r in path.rows)


async def test_linear_chats_written_by_the_previous_schema_become_one_branch(db_url: str) -> None:
    """A database at 0002 (written without parents) is upgraded in place: each row's parent is the row before."""
    async with SQLStore(db_url) as store:
        owner = await store.ensure_user("alice")
        chat = await store.create_chat(owner.id, "old")
        await downgrade_to(store, "0002_search")
        async with store.engine.begin() as conn:  # rows as the 0002 schema writes them: no parent_id column
            columns = {r[0] for r in await conn.execute(text(
                "SELECT name FROM pragma_table_info('messages')" if conn.dialect.name == "sqlite" else
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'messages'"))}
            assert "parent_id" not in columns
            for seq, (kind, role, body) in enumerate([("user", "user", "hello"), ("assistant", "assistant", "hi"),
                                                      ("user", "user", "more"), ("assistant", "assistant", "sure")],
                                                     start=1):
                await conn.execute(text(
                    "INSERT INTO messages (id, chat_id, sequence_number, role, kind, run_id, client_message_id, "
                    "created_at, message_json) VALUES (:id, :chat, :seq, :role, :kind, NULL, NULL, :now, :json)"),
                    {"id": f"msg_old{seq}", "chat": chat.id, "seq": seq, "role": role, "kind": kind,
                     "now": utc_now().replace(tzinfo=None),
                     "json": f'[{{"role": "{role}", "parts": [{{"type": "text", "text": "{body}"}}]}}]'})
            await conn.execute(text("UPDATE chats SET last_sequence = 4 WHERE id = :chat"), {"chat": chat.id})
    async with SQLStore(db_url) as store:  # opening migrates to 0003
        path = await store.chat_path(chat.id)
        assert path.leaf_id == "msg_old4"
        assert [r.parent_id for r in path.rows] == [None, "msg_old1", "msg_old2", "msg_old3"]
        assert texts(path.rows) == ["hello", "hi", "more", "sure"]
        # The upgraded chat goes on where it was.
        u, _ = await turn(store, chat.id, "and now")
        assert (await store.chat_path(chat.id)).rows[-2].parent_id == "msg_old4"
        assert u
