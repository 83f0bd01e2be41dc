"""Full-text search over a user's chats, on SQLite (FTS5) and PostgreSQL (GIN indexes): the same tests."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.store import SQLStore
from toolwire.store._search import MAX_QUERY_WORDS, query_words, snippet

from ._migrations import downgrade_to

pytestmark = pytest.mark.anyio


async def chat_with(store: SQLStore, owner: str, title: str, *texts: str) -> str:
    user = await store.ensure_user(owner)
    chat = await store.create_chat(user.id, title)
    await store.append_messages(chat.id, [Message.user(t) if i % 2 == 0 else Message.assistant(t)
                                          for i, t in enumerate(texts)])
    return chat.id


async def hits(store: SQLStore, owner: str, query: str, **page: int) -> list[str]:
    user = await store.ensure_user(owner)
    return [hit.chat.id for hit in await store.search_chats(user.id, query, **page)]


async def test_words_match_as_prefixes_in_any_case_and_all_are_required(store: SQLStore) -> None:
    trip = await chat_with(store, "alice", "Holidays", "Plan a trip to Lisbon in May", "Lisbon is lovely in May.")
    soup = await chat_with(store, "alice", "Cooking", "A recipe for tomato soup")
    assert await hits(store, "alice", "lisbon") == [trip]
    assert await hits(store, "alice", "LISB") == [trip]  # a prefix, case ignored
    assert await hits(store, "alice", "lisbon may") == [trip]
    assert await hits(store, "alice", "lisbon soup") == []  # every word, in the same message
    assert await hits(store, "alice", "tomato") == [soup]
    assert await hits(store, "alice", "paris") == []


async def test_a_hit_names_the_newest_matching_message_with_a_snippet_around_the_word(store: SQLStore) -> None:
    long_text = "word " * 80 + "the needle is here " + "word " * 80
    chat_id = await chat_with(store, "alice", "", "first needle", "nothing", long_text)
    user = await store.ensure_user("alice")
    [hit] = await store.search_chats(user.id, "needle")
    rows = await store.list_messages(chat_id)
    assert hit.message_id == rows[2].id and hit.sequence_number == 3
    assert "the needle is here" in hit.snippet
    assert hit.snippet.startswith("…") and hit.snippet.endswith("…") and len(hit.snippet) <= 170


async def test_titles_match_and_renames_and_deletes_are_followed(store: SQLStore) -> None:
    chat_id = await chat_with(store, "alice", "Quarterly budget", "hello")
    user = await store.ensure_user("alice")
    [hit] = await store.search_chats(user.id, "quarterly")
    assert hit.chat.id == chat_id and hit.message_id is None and hit.snippet == "Quarterly budget"
    await store.rename_chat(user.id, chat_id, "Annual plan")
    assert await hits(store, "alice", "quarterly") == []
    assert await hits(store, "alice", "annual") == [chat_id]
    assert await hits(store, "alice", "hello") == [chat_id]
    assert await store.delete_chat(user.id, chat_id)
    assert await hits(store, "alice", "annual") == []
    assert await hits(store, "alice", "hello") == []


async def test_another_users_chats_are_never_found(store: SQLStore) -> None:
    await chat_with(store, "alice", "Secret plans", "the launch code is swordfish")
    bob_chat = await chat_with(store, "bob", "Mine", "my own swordfish")
    assert await hits(store, "bob", "swordfish") == [bob_chat]
    assert await hits(store, "bob", "secret") == []
    assert await hits(store, "mallory", "swordfish") == []


async def test_only_text_is_indexed_not_tool_arguments_or_results(store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id, "")
    call = ToolCallPart(id="c1", name="lookup", arguments={"city": "zanzibar"}, arguments_raw='{"city": "zanzibar"}')
    await store.append_messages(chat.id, [
        Message.user("weather please"), Message(role="assistant", parts=[call]),
        Message.tool_results([ToolResultPart(call_id="c1", name="lookup", result={"forecast": "monsoon"})]),
        Message.assistant("Sunny.")])
    assert await hits(store, "alice", "zanzibar") == []
    assert await hits(store, "alice", "monsoon") == []
    assert await hits(store, "alice", "sunny") == [chat.id]


async def test_results_are_newest_first_and_paged(store: SQLStore) -> None:
    ids = [await chat_with(store, "alice", f"chat {i}", f"common words number {i}") for i in range(5)]
    newest_first = list(reversed(ids))
    assert await hits(store, "alice", "common") == newest_first
    assert await hits(store, "alice", "common", limit=2) == newest_first[:2]
    assert await hits(store, "alice", "common", limit=2, offset=2) == newest_first[2:4]
    assert await hits(store, "alice", "common", limit=2, offset=4) == newest_first[4:]


async def test_query_syntax_of_the_databases_is_never_interpreted(store: SQLStore) -> None:
    chat_id = await chat_with(store, "alice", "", 'say "hello" OR NOT near(x) & | ! :* -- \'; DROP TABLE chats')
    for query in ['"hello"', "hello OR", "NOT hello", "near(x", "& | !", ":*", "'; drop", "hello*", "owner:alice"]:
        found = await hits(store, "alice", query)
        assert found in ([chat_id], []), query
    assert await hits(store, "alice", '"hello" OR') == [chat_id]  # OR is a word here, and the message has it
    assert await hits(store, "alice", "!!! ***") == []  # no words: nothing, not everything


async def test_rows_written_before_the_index_existed_are_found(db_url: str) -> None:
    """The migration indexes what a database already holds (a database upgraded from the first schema)."""
    async with SQLStore(db_url) as store:
        chat_id = await chat_with(store, "alice", "Old title", "an old message about pelicans")
        await downgrade_to(store, "0002_search")  # the later migrations first, by their own downgrades
        async with store.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                await conn.execute(text("DELETE FROM search_messages"))
                await conn.execute(text("DELETE FROM search_titles"))
            await conn.execute(text("UPDATE alembic_version SET version_num = '0001_initial'"))
            if conn.dialect.name == "sqlite":
                for name in ("search_messages_insert", "search_chats_delete", "search_chats_insert",
                             "search_chats_rename"):
                    await conn.execute(text(f"DROP TRIGGER {name}"))
                await conn.execute(text("DROP TABLE search_messages"))
                await conn.execute(text("DROP TABLE search_titles"))
            else:
                await conn.execute(text("DROP INDEX ix_search_messages_text"))
                await conn.execute(text("DROP INDEX ix_search_chats_title"))
    async with SQLStore(db_url) as store:  # opening migrates to 0002 again
        assert await hits(store, "alice", "pelicans") == [chat_id]
        assert await hits(store, "alice", "old title") == [chat_id]


def test_query_words_are_letters_and_digits_at_most_eight() -> None:
    assert query_words("Hello, WORLD! snake_case x2") == ["hello", "world", "snake", "case", "x2"]
    assert query_words("a " * 20) == ["a"]
    assert len(query_words(" ".join(f"w{i}" for i in range(20)))) == MAX_QUERY_WORDS
    assert query_words("Straße café") == ["straße", "café"]


def test_snippet_is_one_line_around_the_first_word() -> None:
    assert snippet("short\ntext", ["text"]) == "short text"
    long = "x " * 200 + "target " + "y " * 200
    cut = snippet(long, ["target"])
    assert "target" in cut and cut.startswith("…") and cut.endswith("…")
