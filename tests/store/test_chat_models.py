"""The model picker's columns: a chat's chosen model and the model each run used, and the migration that adds
them to an existing database in place (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from toolwire import Message
from toolwire.store import SQLStore
from toolwire.store._records import new_id, utc_now

from ._migrations import downgrade_to

pytestmark = pytest.mark.anyio


async def test_a_chat_keeps_its_model_and_a_run_the_model_it_used(store: SQLStore) -> None:
    owner = await store.ensure_user("alice")
    chosen = await store.create_chat(owner.id, "picked", model="fast")
    plain = await store.create_chat(owner.id, "default")
    assert chosen.model == "fast"
    assert plain.model is None
    assert (await store.get_chat(owner.id, chosen.id)).model == "fast"  # type: ignore[union-attr]

    changed = await store.set_chat_model(owner.id, plain.id, "smart")
    assert changed is not None and changed.model == "smart"
    assert changed.updated_at == plain.updated_at  # a setting: the chat list's order stays
    assert (await store.get_chat(owner.id, plain.id)).model == "smart"  # type: ignore[union-attr]
    assert {c.id: c.model for c in await store.list_chats(owner.id)} == {chosen.id: "fast", plain.id: "smart"}
    back = await store.set_chat_model(owner.id, plain.id, None)
    assert back is not None and back.model is None

    # Another user's chat is not theirs to change.
    bob = await store.ensure_user("bob")
    assert await store.set_chat_model(bob.id, chosen.id, "smart") is None
    assert (await store.get_chat(owner.id, chosen.id)).model == "fast"  # type: ignore[union-attr]

    start = await store.start_run(chosen.id, user_message=Message.user("hi"), client_message_id=new_id("c"),
                                  owner="proc", lease_seconds=30)
    assert start.run.model is None
    await store.record_run_model(start.run.id, "fast")
    assert (await store.active_run(chosen.id)).model == "fast"  # type: ignore[union-attr]
    await store.finish_run(start.run.id, status="completed", usage=None, error=None, steps=1, event_count=None)
    assert (await store.get_run(chosen.id, start.run.id)).model == "fast"  # type: ignore[union-attr]
    [summary] = await store.run_summaries(chosen.id)
    assert summary.run.model == "fast"

    # Given as the run starts, the model is in the run's own insert (the server's usual path).
    start = await store.start_run(plain.id, user_message=Message.user("hi"), client_message_id=new_id("c"),
                                  owner="proc", lease_seconds=30, model="smart")
    assert start.run.model == "smart"
    assert (await store.active_run(plain.id)).model == "smart"  # type: ignore[union-attr]


async def test_the_migration_adds_the_columns_to_an_existing_database_in_place(db_url: str) -> None:
    async with SQLStore(db_url) as store:
        owner = await store.ensure_user("alice")
        chat = await store.create_chat(owner.id, "from before")
        start = await store.start_run(chat.id, user_message=Message.user("hi"), client_message_id="c1",
                                      owner="proc", lease_seconds=30)
        await store.finish_run(start.run.id, status="completed", usage=None, error=None, steps=1, event_count=None)
        await downgrade_to(store, "0005_queued_runs")
        async with store.engine.begin() as conn:  # the 0005 schema: no model columns
            for table in ("chats", "runs"):
                columns = {r[0] for r in await conn.execute(text(
                    f"SELECT name FROM pragma_table_info('{table}')" if conn.dialect.name == "sqlite" else
                    f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}'"))}
                assert "model" not in columns
            # A chat written by the old schema, after the downgrade.
            await conn.execute(text("INSERT INTO chats (id, user_id, title, created_at, updated_at) "
                                    "VALUES ('chat_old', :user, 'old one', :now, :now)"),
                               {"user": owner.id, "now": utc_now().replace(tzinfo=None)})
    async with SQLStore(db_url) as store:  # opening upgrades through 0006 to the head in place
        async with store.engine.connect() as conn:
            version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
        assert version >= "0006_chat_models"
        # Existing chats and runs keep their rows, with NULL: the server's default, a model not recorded.
        kept = await store.get_chat(owner.id, chat.id)
        old = await store.get_chat(owner.id, "chat_old")
        assert kept is not None and kept.title == "from before" and kept.model is None
        assert old is not None and old.title == "old one" and old.model is None
        run = await store.get_run(chat.id, start.run.id)
        assert run is not None and run.status == "completed" and run.model is None
        # And they take a model from now on.
        assert (await store.set_chat_model(owner.id, "chat_old", "fast")).model == "fast"  # type: ignore[union-attr]
        await store.record_run_model(start.run.id, "fast")
        assert (await store.get_run(chat.id, start.run.id)).model == "fast"  # type: ignore[union-attr]
