"""`Store.take_over_run`: an expired run is handed to the process that continues it, at most N times."""

from __future__ import annotations

import anyio
import pytest

from tests.store.test_sql_store import call, new_chat, result, start
from toolwire.messages import Message, TextPart
from toolwire.store import Continued, Recovered, SQLStore

from ._migrations import downgrade_to

pytestmark = pytest.mark.anyio


async def test_an_expired_run_is_continued_with_its_round_then_ended_past_the_limit(store: SQLStore) -> None:
    owner_id, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.1)
    run_id = started.run.id
    first = Message(role="assistant", parts=[call("c0")])
    await store.append_messages(chat_id, [first, Message.tool_results([result("c0", 0)])], run_id=run_id)
    step = Message(role="assistant", parts=[TextPart(text="Three."), call("c1"), call("c2"), call("c3")])
    await store.record_journal(run_id, calls=[step.tool_calls[0], step.tool_calls[1]],
                               results=[result("c1", {"ok": True})], step_message=step)
    await anyio.sleep(0.15)
    # Long enough to be still held at the check below on a loaded machine (0.5 s was not always).
    taken = await store.take_over_run(run_id, owner="proc-2", lease_seconds=2.0, continue_limit=1)
    assert isinstance(taken, Continued)
    assert taken.continuation == 1 and taken.steps == 1 and taken.user.id == owner_id
    assert taken.run.status == "running" and taken.run.lease_owner == "proc-2"
    rows = await store.list_messages(chat_id)
    assert taken.last_row_id == rows[-1].id and [r.kind for r in rows] == ["user", "tools_aggregate"]
    round_ = taken.round
    assert round_ is not None and round_.message == step and round_.pending
    assert [r.call_id for r in round_.results] == ["c1"]
    assert round_.started == {"c2"}  # c1 finished, c3 never started
    assert await store.take_over_run(run_id, owner="proc-3", lease_seconds=30, continue_limit=1) is None  # held
    await anyio.sleep(2.0)
    ended = await store.take_over_run(run_id, owner="proc-3", lease_seconds=30, continue_limit=1)
    assert isinstance(ended, Recovered) and ended.run.status == "interrupted"
    parts = ended.rows[0].messages[1].tool_results_parts
    assert [(p.call_id, p.result) for p in parts] == [
        ("c1", {"ok": True}), ("c2", {"error": "interrupted"}), ("c3", {"error": "interrupted"})]


async def test_a_run_without_a_started_call_is_continued_without_a_round(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.05)
    await anyio.sleep(0.1)
    taken = await store.take_over_run(started.run.id, owner="p", lease_seconds=30, continue_limit=2)
    assert isinstance(taken, Continued) and taken.round is None and taken.steps == 0
    assert taken.last_row_id == started.user_row.id


async def test_a_running_run_of_the_previous_schema_is_continued_after_the_upgrade(db_url: str) -> None:
    """0007 adds `runs.continuations` in place: a run that was running before the upgrade counts from 0."""
    async with SQLStore(db_url) as store:
        _, chat_id = await new_chat(store)
        started = await start(store, chat_id, lease=0.05)
        await downgrade_to(store, "0005_queued_runs")
    async with SQLStore(db_url) as store:  # opening migrates to the head again
        await anyio.sleep(0.1)
        taken = await store.take_over_run(started.run.id, owner="p", lease_seconds=30, continue_limit=1)
        assert isinstance(taken, Continued) and taken.continuation == 1


async def test_a_run_that_cannot_go_on_keeps_its_checkpointed_text_as_an_incomplete_row(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.05)
    run_id = started.run.id
    first = Message(role="assistant", parts=[call("c0")])
    await store.append_messages(chat_id, [first, Message.tool_results([result("c0", 0)])], run_id=run_id)
    await store.record_step_text(run_id, 0, "Stale: the text of the step stored above.")
    await store.record_step_text(run_id, 1, "The answer was half")
    await anyio.sleep(0.1)
    ended = await store.take_over_run(run_id, owner="p", lease_seconds=30, continue_limit=0)
    assert isinstance(ended, Recovered)
    [row] = ended.rows
    assert row.kind == "assistant" and row.messages[0].text == "The answer was half"
    assert row.messages[0].metadata == {"incomplete": True}


async def test_a_checkpoint_of_a_step_stored_since_is_not_stored_again(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=0.05)
    run_id = started.run.id
    await store.record_step_text(run_id, 0, "Whole answ")
    await store.append_messages(chat_id, [Message.assistant("Whole answer.")], run_id=run_id)
    await anyio.sleep(0.1)
    ended = await store.recover_run(run_id, owner="p", lease_seconds=30)
    assert ended is not None and ended.rows == []
