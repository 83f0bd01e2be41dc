"""SQLStore on SQLite and PostgreSQL: the same tests, the same schema."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from toolwire import Agent, tool
from toolwire.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from toolwire.store import (
    ApprovalDecided,
    ApprovalNotFound,
    ApprovalsIncomplete,
    ChatIdTaken,
    ChatNotFound,
    Decision,
    IdempotencyConflict,
    NotPaused,
    RunConflict,
    SQLStore,
    Store,
    hash_token,
    new_chat as unstored_chat,
)
from toolwire.store._records import new_id, utc_now
from toolwire.store._schema import api_tokens, described_by_metadata, metadata, runs
from toolwire.testing import ScriptedModel, ToolCall

pytestmark = pytest.mark.anyio


def call(call_id: str, name: str = "lookup", **arguments: object) -> ToolCallPart:
    import orjson

    return ToolCallPart(id=call_id, name=name, arguments=dict(arguments), arguments_raw=orjson.dumps(arguments).decode())


def result(call_id: str, value: object, name: str = "lookup", is_error: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name=name, result=value, is_error=is_error)


async def new_chat(store: SQLStore, user: str = "alice") -> tuple[str, str]:
    owner = await store.ensure_user(user)
    chat = await store.create_chat(owner.id, "a chat")
    return owner.id, chat.id


async def start(store: SQLStore, chat_id: str, text_: str = "hi", client_id: str | None = None,
                lease: float = 30.0, owner: str = "proc-1"):
    return await store.start_run(chat_id, user_message=Message.user(text_), client_message_id=client_id or text_,
                                 owner=owner, lease_seconds=lease)


async def concurrently(db_url: str, count: int, attempt: Callable[[SQLStore, int], Awaitable[None]]) -> None:
    """Run `attempt(store, index)` `count` times at once, each with a store (connection pool) of its own, as
    that many server processes would."""
    stores = [SQLStore(db_url, migrate=False) for _ in range(count)]
    for s in stores:
        await s.open()
    try:
        async with anyio.create_task_group() as tg:
            for index in range(count):
                tg.start_soon(attempt, stores[index], index)
    finally:
        for s in stores:
            await s.close()


async def test_is_a_store_and_a_chat_memory(store: SQLStore) -> None:
    assert isinstance(store, Store)


async def test_migrations_create_exactly_the_declared_schema(store: SQLStore) -> None:
    async with store.engine.connect() as conn:
        diff = await conn.run_sync(lambda sync: compare_metadata(
            MigrationContext.configure(sync, opts={"include_name": described_by_metadata}), metadata))
        version = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
    assert diff == []
    assert version == "0008_handover"


async def test_opening_twice_migrates_once(db_url: str) -> None:
    async with SQLStore(db_url) as first:
        await first.ensure_user("x")
    async with SQLStore(db_url) as second:
        assert (await second.ensure_user("x")).name == "x"


async def test_a_tool_round_is_one_aggregate_row_and_round_trips_losslessly(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    thinking = ThinkingPart(text="hmm", signature="sig-123", provider_data={"anthropic": {"x": [1, 2]}})
    calls = Message(role="assistant", parts=[thinking, TextPart(text="Looking."), call("c1", q="a"),
                                             call("c2", name="other", q="b")],
                    metadata={"openai-responses": {"id": "resp_1"}})
    results = Message.tool_results([result("c1", {"n": 1}), result("c2", {"error": "no"}, "other", True)])
    answer = Message.assistant("Done.")
    rows = await store.append_messages(chat_id, [Message.user("go"), calls, results, answer], run_id="run_x")
    assert [(r.sequence_number, r.kind, r.role) for r in rows] == [
        (1, "user", "user"), (2, "tools_aggregate", "assistant"), (3, "assistant", "assistant")]
    stored = await store.list_messages(chat_id)
    assert stored[1].messages == [calls, results]
    assert stored[1].run_id == "run_x"
    assert await store.load(chat_id) == [Message.user("go"), calls, results, answer]
    assert [r.sequence_number for r in await store.list_messages(chat_id, after=1)] == [2, 3]
    as_json = stored[1].to_dict()
    assert as_json["kind"] == "tools_aggregate" and as_json["messages"][0]["parts"][0]["signature"] == "sig-123"


async def test_eight_concurrent_writers_get_sequence_numbers_1_to_400(db_url: str) -> None:
    async with SQLStore(db_url) as setup:
        _, chat_id = await new_chat(setup)

    async def writer(store: SQLStore, index: int) -> None:
        for n in range(50):
            await store.append_messages(chat_id, [Message.user(f"{index}:{n}")])

    await concurrently(db_url, 8, writer)
    async with SQLStore(db_url) as reader:
        rows = await reader.list_messages(chat_id)
    assert [r.sequence_number for r in rows] == list(range(1, 401))
    for index in range(8):  # each writer's own messages kept their order
        mine = [int(r.messages[0].text.split(":")[1]) for r in rows if r.messages[0].text.startswith(f"{index}:")]
        assert mine == list(range(50))


async def test_appending_to_a_missing_chat_fails_clearly(store: SQLStore) -> None:
    with pytest.raises(ChatNotFound):
        await store.append_messages("chat_nope", [Message.user("x")])


async def test_chats_belong_to_one_user(store: SQLStore) -> None:
    alice, chat_id = await new_chat(store, "alice")
    bob = (await store.ensure_user("bob")).id
    assert await store.get_chat(bob, chat_id) is None
    assert await store.rename_chat(bob, chat_id, "mine now") is None
    assert await store.delete_chat(bob, chat_id) is False
    assert [c.id for c in await store.list_chats(bob)] == []
    assert (await store.get_chat(alice, chat_id)) is not None


async def test_chats_are_listed_most_recently_updated_first(store: SQLStore) -> None:
    alice, first = await new_chat(store)
    second = (await store.create_chat(alice, "second")).id
    assert [c.id for c in await store.list_chats(alice)] == [second, first]
    await store.append_messages(first, [Message.user("bump")])
    assert [c.id for c in await store.list_chats(alice)] == [first, second]
    renamed = await store.rename_chat(alice, second, "renamed")
    assert renamed is not None and renamed.title == "renamed"
    assert [c.id for c in await store.list_chats(alice)] == [second, first]


async def test_deleting_a_chat_deletes_everything_in_it(store: SQLStore) -> None:
    alice, chat_id = await new_chat(store)
    started = await start(store, chat_id)
    await store.record_tool_call(started.run.id, call("c1"))
    await store.pause_run(started.run.id, state_json="{}", pending=[("apv_1", call("c1"))], usage=None, steps=1,
                          event_count=3)
    assert await store.delete_chat(alice, chat_id)
    assert await store.get_chat(alice, chat_id) is None
    assert await store.list_messages(chat_id) == []
    assert await store.get_run(chat_id, started.run.id) is None


async def test_tokens_are_stored_hashed_and_can_be_revoked(store: SQLStore) -> None:
    alice = await store.ensure_user("alice")
    await store.add_token(alice.id, "secret-token-a")
    assert (await store.user_for_token("secret-token-a")) == alice
    assert await store.user_for_token("wrong") is None
    async with store.engine.connect() as conn:
        stored = [row.token_hash for row in await conn.execute(select(api_tokens.c.token_hash))]
    assert stored == [hash_token("secret-token-a")] and "secret-token-a" not in stored
    assert await store.revoke_token("secret-token-a")
    assert await store.user_for_token("secret-token-a") is None
    assert not await store.revoke_token("secret-token-a")


async def test_replacing_configured_tokens_revokes_the_old_ones(store: SQLStore) -> None:
    await store.replace_tokens({"alice": ["a1"], "bob": ["b1"]})
    api_user = await store.ensure_user("carol")
    await store.add_token(api_user.id, "c1", source="api")
    await store.replace_tokens({"alice": ["a2"]})
    assert await store.user_for_token("a1") is None
    assert await store.user_for_token("b1") is None
    assert (await store.user_for_token("a2")) is not None
    assert (await store.user_for_token("c1")) == api_user  # another source is left alone


async def test_one_active_run_per_chat_and_idempotent_starts(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    first = await start(store, chat_id, "hello", "m-1")
    assert first.created and first.run.run_number == 1 and first.user_row.sequence_number == 1
    again = await start(store, chat_id, "hello", "m-1")
    assert not again.created and again.run.id == first.run.id and again.user_row.id == first.user_row.id
    with pytest.raises(IdempotencyConflict):
        await start(store, chat_id, "something else", "m-1")
    with pytest.raises(RunConflict) as conflict:
        await start(store, chat_id, "second", "m-2")
    assert conflict.value.code == "run_active" and conflict.value.run.id == first.run.id
    assert [r.sequence_number for r in await store.list_messages(chat_id)] == [1]
    assert await store.finish_run(first.run.id, status="completed", usage={"input_tokens": 3}, error=None, steps=1,
                                  event_count=9)
    second = await start(store, chat_id, "second", "m-2")
    assert second.run.run_number == 2  # the refused and the repeated starts used no number
    finished = await store.get_run(chat_id, first.run.id)
    assert finished is not None and finished.status == "completed" and finished.event_count == 9
    assert finished.usage == {"input_tokens": 3} and finished.lease_owner is None


async def test_a_new_chat_and_its_first_run_are_one_write(store: SQLStore) -> None:
    owner = await store.ensure_user("alice")
    chat = unstored_chat(owner.id, model="fast")
    operations = store.writer.operations
    start = await store.start_run(chat.id, user_message=Message.user("Plan my evening"), client_message_id="m-1",
                                  owner="proc-1", lease_seconds=30, title="Plan my evening", new_chat=chat)
    assert store.writer.operations == operations + 1
    assert start.created and start.run.run_number == 1 and start.run.status == "running"
    assert start.user_row.sequence_number == 1 and start.user_row.parent_id is None
    stored = await store.get_chat(owner.id, chat.id)
    assert stored is not None
    assert (stored.title, stored.model, stored.run_count, stored.active_leaf_id) == (
        "Plan my evening", "fast", 1, start.user_row.id)
    assert [m.text for m in await store.run_history(chat.id, start.run.id)] == ["Plan my evening"]
    assert [c.id for c in await store.list_chats(owner.id)] == [chat.id]
    # The same message again finds the run it started, as for a chat stored before.
    again = await store.start_run(chat.id, user_message=Message.user("Plan my evening"), client_message_id="m-1",
                                  owner="proc-1", lease_seconds=30)
    assert not again.created and again.run.id == start.run.id
    # A new chat whose id is taken stores nothing: not its message, nor a run on the chat that has the id.
    with pytest.raises(ChatIdTaken):
        await store.start_run(chat.id, user_message=Message.user("other"), client_message_id="m-2", owner="proc-1",
                              lease_seconds=30, new_chat=unstored_chat(owner.id, chat_id=chat.id))
    assert [row.id for row in await store.list_messages(chat.id)] == [start.user_row.id]
    with pytest.raises(ValueError, match="not"):
        await store.start_run(chat.id, user_message=Message.user("x"), client_message_id="m-3", owner="proc-1",
                              lease_seconds=30, new_chat=unstored_chat(owner.id))


async def test_a_run_start_names_an_untitled_chat_only_when_it_stores_the_run(store: SQLStore) -> None:
    owner = await store.ensure_user("alice")
    untitled = await store.create_chat(owner.id)
    first = await store.start_run(untitled.id, user_message=Message.user("Plan my evening"), client_message_id="m-1",
                                  owner="proc-1", lease_seconds=30, title="Plan my evening")
    assert first.created
    named = await store.get_chat(owner.id, untitled.id)
    assert named is not None and named.title == "Plan my evening"
    # A refused start (a run is active) and a repeated message change nothing, the title included.
    with pytest.raises(RunConflict):
        await store.start_run(untitled.id, user_message=Message.user("other"), client_message_id="m-2",
                              owner="proc-1", lease_seconds=30, title="other")
    await store.start_run(untitled.id, user_message=Message.user("Plan my evening"), client_message_id="m-1",
                          owner="proc-1", lease_seconds=30, title="repeated")
    await store.finish_run(first.run.id, status="completed", usage=None, error=None, steps=1, event_count=3)
    # A chat that has a title keeps it.
    await store.start_run(untitled.id, user_message=Message.user("later"), client_message_id="m-3",
                          owner="proc-1", lease_seconds=30, title="later")
    titled = await store.create_chat(owner.id, "mine")
    await store.start_run(titled.id, user_message=Message.user("hello"), client_message_id="m-1", owner="proc-1",
                          lease_seconds=30, title="hello")
    assert [(c.id, c.title) for c in await store.list_chats(owner.id)] == [
        (titled.id, "mine"), (untitled.id, "Plan my evening")]


async def test_concurrent_starts_let_exactly_one_run_in(db_url: str) -> None:
    async with SQLStore(db_url) as setup:
        _, chat_id = await new_chat(setup)
    outcomes: list[str] = []

    async def attempt(store: SQLStore, index: int) -> None:
        try:
            await start(store, chat_id, f"m{index}")
            outcomes.append("started")
        except RunConflict:
            outcomes.append("conflict")

    await concurrently(db_url, 4, attempt)
    assert sorted(outcomes) == ["conflict"] * 3 + ["started"]


async def test_the_database_itself_refuses_a_second_active_run(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    await start(store, chat_id)
    with pytest.raises(IntegrityError):
        async with store.engine.begin() as conn:
            await conn.execute(insert(runs).values(id=new_id("run"), chat_id=chat_id, run_number=99,
                                                   status="paused", created_at=utc_now()))


async def paused_chat(store: SQLStore, user: str = "alice") -> tuple[str, str, list[str]]:
    _, chat_id = await new_chat(store, user)
    started = await start(store, chat_id)
    ids = [new_id("apv"), new_id("apv")]
    assert await store.pause_run(started.run.id, state_json='{"state": 1}',
                                 pending=[(ids[0], call("c1")), (ids[1], call("c2"))], usage=None, steps=1,
                                 event_count=7)
    return chat_id, started.run.id, ids


async def test_a_paused_chat_refuses_new_runs_until_decided(store: SQLStore) -> None:
    chat_id, run_id, ids = await paused_chat(store)
    with pytest.raises(RunConflict) as conflict:
        await start(store, chat_id, "next")
    assert conflict.value.code == "run_paused"
    paused = await store.paused_run(chat_id)
    assert paused is not None and paused.run.id == run_id and paused.state_json == '{"state": 1}'
    assert [(a.id, a.call.id, a.status) for a in paused.approvals] == [(ids[0], "c1", "pending"),
                                                                       (ids[1], "c2", "pending")]
    resumed = await store.resume_run(chat_id, [Decision(approval_id=ids[0], approved=True),
                                               Decision(approval_id=ids[1], approved=False, reason="No.")],
                                     owner="proc-1", lease_seconds=30)
    assert resumed.run.run_number == 2 and resumed.run.resumed_from == run_id and resumed.run.status == "running"
    assert resumed.decisions["c1"].status == "approved"
    assert resumed.decisions["c2"].status == "denied" and resumed.decisions["c2"].reason == "No."
    assert await store.paused_run(chat_id) is None
    old = await store.get_run(chat_id, run_id)
    assert old is not None and old.status == "resumed"


async def test_approval_ids_that_are_unknown_foreign_decided_or_incomplete_start_nothing(store: SQLStore) -> None:
    chat_id, _, ids = await paused_chat(store)
    other_chat, _, other_ids = await paused_chat(store, "bob")
    yes = [Decision(approval_id=i, approved=True) for i in ids]
    with pytest.raises(ApprovalNotFound):
        await store.resume_run(chat_id, [*yes[:1], Decision(approval_id="apv_unknown", approved=True)],
                               owner="p", lease_seconds=30)
    with pytest.raises(ApprovalNotFound):  # another chat's (another user's) approval
        await store.resume_run(chat_id, [*yes, Decision(approval_id=other_ids[0], approved=True)], owner="p",
                               lease_seconds=30)
    with pytest.raises(ApprovalsIncomplete):
        await store.resume_run(chat_id, yes[:1], owner="p", lease_seconds=30)
    with pytest.raises(ApprovalsIncomplete):
        await store.resume_run(chat_id, [yes[0], yes[0], yes[1]], owner="p", lease_seconds=30)
    # Nothing of the refused requests stuck: still paused, every approval pending, no run started.
    paused = await store.paused_run(chat_id)
    assert paused is not None and all(a.status == "pending" for a in paused.approvals)
    await store.resume_run(chat_id, yes, owner="p", lease_seconds=30)
    with pytest.raises(ApprovalDecided):
        await store.resume_run(chat_id, yes, owner="p", lease_seconds=30)
    with pytest.raises(NotPaused):
        await store.resume_run(chat_id, [], owner="p", lease_seconds=30)
    assert (await store.paused_run(other_chat)) is not None


async def test_concurrent_decisions_resume_a_paused_run_once(db_url: str) -> None:
    async with SQLStore(db_url) as setup:
        chat_id, _, ids = await paused_chat(setup)
    outcomes: list[str] = []

    async def decide(store: SQLStore, _index: int) -> None:
        try:
            await store.resume_run(chat_id, [Decision(approval_id=i, approved=True) for i in ids], owner="p",
                                   lease_seconds=30)
            outcomes.append("resumed")
        except (ApprovalDecided, NotPaused):
            outcomes.append("refused")

    await concurrently(db_url, 4, decide)
    assert sorted(outcomes) == ["refused"] * 3 + ["resumed"]


async def test_an_expired_lease_is_recovered_with_the_real_results_kept(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id)
    run_id = started.run.id
    step = Message(role="assistant", parts=[TextPart(text="Working."), call("c1"), call("c2"), call("c3")])
    await store.record_step_message(run_id, step)
    for c in step.tool_calls:
        await store.record_tool_call(run_id, c)
    await store.record_tool_result(run_id, result("c2", {"ok": True}))
    assert await store.expired_runs() == []
    assert await store.recover_run(run_id, owner="proc-2", lease_seconds=30) is None  # not expired yet
    # The lease is then cut short by its owner's last renewal (a lease of 0.2 s from the start expired before
    # the checks above on a busy machine).
    assert await store.renew_leases("proc-1", [run_id], 0.05) == 1
    await anyio.sleep(0.2)
    assert [r.id for r in await store.expired_runs()] == [run_id]
    recovered = await store.recover_run(run_id, owner="proc-2", lease_seconds=30)
    assert recovered is not None and recovered.run.status == "interrupted"
    assert recovered.run.error is not None and recovered.run.error["code"] == "interrupted"
    assert await store.recover_run(run_id, owner="proc-3", lease_seconds=30) is None  # only once
    rows = await store.list_messages(chat_id)
    assert [r.kind for r in rows] == ["user", "tools_aggregate"] and rows[1].run_id == run_id
    message, results = rows[1].messages
    assert message == step
    assert [(r.call_id, r.result, r.is_error) for r in results.tool_results_parts] == [
        ("c1", {"error": "interrupted"}, True), ("c2", {"ok": True}, False), ("c3", {"error": "interrupted"}, True)]
    assert (await store.active_run(chat_id)) is None
    assert (await start(store, chat_id, "next")).created  # the chat is usable again


async def test_recovery_of_a_run_that_was_between_rounds_commits_nothing_twice(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.1)
    run_id = started.run.id
    done = Message(role="assistant", parts=[call("c1")])
    await store.append_messages(chat_id, [done, Message.tool_results([result("c1", 1)])], run_id=run_id)
    # A journal that lags behind the commit (written after it) must not bring the round back.
    await store.record_step_message(run_id, done)
    await store.record_tool_result(run_id, result("c1", 1))
    await anyio.sleep(0.2)
    recovered = await store.recover_run(run_id, owner="p", lease_seconds=30)
    assert recovered is not None and recovered.rows == []
    assert [r.kind for r in await store.list_messages(chat_id)] == ["user", "tools_aggregate"]


async def test_renewed_leases_do_not_expire(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.3, owner="me")
    assert await store.renew_leases("me", [started.run.id], 30) == 1
    assert await store.renew_leases("someone else", [started.run.id], 30) == 0
    await anyio.sleep(0.4)
    assert await store.expired_runs() == []
    run = await store.get_run(chat_id, started.run.id)
    assert run is not None and run.lease_expires_at is not None and run.lease_expires_at > time.time() + 20


async def test_a_resume_can_be_claimed_once(store: SQLStore) -> None:
    assert await store.claim_resume("state-1", "chat-a")
    assert not await store.claim_resume("state-1", "chat-a")
    assert await store.claim_resume("state-2")


async def test_an_agent_uses_the_store_as_its_memory(store: SQLStore) -> None:
    @tool
    def lookup(q: str) -> dict[str, str]:
        """Look something up."""
        return {"found": q}

    model = ScriptedModel([ToolCall("lookup", {"q": "x"})], ["Found x."], ["Still x."])
    agent = Agent(model, tools=[lookup], memory=store)
    await agent.run("find x", conversation_id="conv-1")
    await agent.run("again", conversation_id="conv-1")
    rows = await store.list_messages("conv-1")
    assert [r.kind for r in rows] == ["user", "tools_aggregate", "assistant", "user", "assistant"]
    assert [m.role for m in model.requests[2].messages] == ["user", "assistant", "user", "assistant", "user"]
