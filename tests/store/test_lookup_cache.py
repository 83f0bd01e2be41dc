"""Cached token and chat lookups: served without a statement, exact inside one process (revocation, rename and
deletion are seen at once), and stale across processes for at most the cache's bound."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from toolwire.messages import Message
from toolwire.store import SQLStore
from toolwire.store._lookups import LOOKUP_CACHE_SECONDS, Lookups

pytestmark = pytest.mark.anyio

@contextmanager
def counting_reads(store: SQLStore) -> Iterator[list[int]]:
    statements = [0]

    def on_statement(*_args: Any) -> None:
        statements[0] += 1

    for engine in store.read_engines:
        event.listen(engine, "before_cursor_execute", on_statement)
    try:
        yield statements
    finally:
        for engine in store.read_engines:
            event.remove(engine, "before_cursor_execute", on_statement)


async def test_repeated_lookups_are_served_from_the_cache(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    await store.add_token(user.id, "token-a")
    chat = await store.create_chat(user.id, "a chat")
    assert await store.user_for_token("token-a") == user
    with counting_reads(store) as statements:
        for _ in range(5):
            assert await store.user_for_token("token-a") == user
            assert await store.get_chat(user.id, chat.id) == chat
    assert statements[0] == 0
    # Another user asking for the chat by its id gets nothing, cached or not.
    bob = await store.ensure_user("bob")
    assert await store.get_chat(bob.id, chat.id) is None
    # What does not exist is not cached: asked every time.
    with counting_reads(store) as statements:
        assert await store.user_for_token("nobody's") is None
        assert await store.user_for_token("nobody's") is None
    assert statements[0] >= 2


async def test_revocation_and_deletion_are_seen_at_once_in_process(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    await store.add_token(user.id, "token-a")
    await store.add_token(user.id, "token-b")
    assert await store.user_for_token("token-a") == user
    assert await store.user_for_token("token-b") == user
    assert await store.revoke_token("token-a")
    assert await store.user_for_token("token-a") is None
    await store.replace_tokens({"alice": ["token-c"]}, source="api")  # revokes token-b, its source's other token
    assert await store.user_for_token("token-b") is None
    assert await store.user_for_token("token-c") == user
    chat = await store.create_chat(user.id, "a chat")
    assert await store.get_chat(user.id, chat.id) == chat
    renamed = await store.rename_chat(user.id, chat.id, "renamed")
    assert (await store.get_chat(user.id, chat.id)) == renamed
    assert await store.delete_chat(user.id, chat.id)
    assert await store.get_chat(user.id, chat.id) is None


async def test_writes_keep_the_cached_chat_current(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id)
    assert await store.get_chat(user.id, chat.id) == chat
    start = await store.start_run(chat.id, user_message=Message.user("Hello there"), client_message_id="m1",
                                  owner="p", lease_seconds=30, title="Hello there")
    await store.append_messages(chat.id, [Message.assistant("Hi")], run_id=start.run.id)
    with counting_reads(store) as statements:
        cached = await store.get_chat(user.id, chat.id)
    assert statements[0] == 0
    async with store.engine.connect() as conn:
        from toolwire.store._schema import chats
        from toolwire.store._writes import chat_from

        stored = chat_from((await conn.execute(chats.select().where(chats.c.id == chat.id))).one())
    assert cached == stored
    assert (stored.title, stored.run_count, stored.last_sequence) == ("Hello there", 1, 2)


async def test_another_process_s_revocation_is_seen_within_the_bound(db_url: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("toolwire.store._lookups._now", lambda: clock[0])
    async with SQLStore(db_url) as here, SQLStore(db_url, migrate=False) as there:
        user = await here.ensure_user("alice")
        await here.add_token(user.id, "token-a")
        chat = await here.create_chat(user.id, "a chat")
        assert await here.user_for_token("token-a") == user
        assert await here.get_chat(user.id, chat.id) == chat
        assert await there.revoke_token("token-a")
        assert await there.delete_chat(user.id, chat.id)
        # Cached here: still answered just before the bound (the staleness it allows) ...
        clock[0] += LOOKUP_CACHE_SECONDS * 0.9
        assert await here.user_for_token("token-a") == user
        assert await here.get_chat(user.id, chat.id) == chat
        # ... and no longer once it has passed.
        clock[0] += LOOKUP_CACHE_SECONDS * 0.2
        assert await here.user_for_token("token-a") is None
        assert await here.get_chat(user.id, chat.id) is None


def test_a_lookup_older_than_a_write_does_not_replace_it() -> None:
    cache: Lookups[str, str] = Lookups(seconds=60)
    ticket = cache.ticket()  # a reader starts reading the database ...
    cache.put("chat", "renamed")  # ... a write commits meanwhile ...
    cache.fill("chat", "old title", ticket)  # ... and the reader's older answer arrives
    assert cache.get("chat") == "renamed"
    ticket = cache.ticket()
    cache.forget("chat")  # a deletion
    cache.fill("chat", "old title", ticket)
    assert cache.get("chat") is None
    ticket = cache.ticket()
    cache.clear()
    cache.fill("chat", "old title", ticket)
    assert cache.get("chat") is None
    cache.fill("chat", "fresh", cache.ticket())
    assert cache.get("chat") == "fresh"


def test_the_cache_is_bounded_and_evictions_refuse_older_fills() -> None:
    cache: Lookups[int, int] = Lookups(seconds=60, entries=3)
    ticket = cache.ticket()
    for key in range(5):
        cache.put(key, key)
    assert [cache.get(key) for key in range(5)] == [None, None, 2, 3, 4]
    cache.fill(0, -1, ticket)  # evicted since the ticket: what it knew of key 0 is gone, so the fill is refused
    assert cache.get(0) is None
    assert LOOKUP_CACHE_SECONDS <= 2
