"""A run's answer is stored in the transaction that records the run's end (`RunMemory.answer`).

The answer is the agent's last round (a message without calls): nothing of the run waits for its commit but the
run's end, which comes right after it. Storing the two together is one commit a run less. The server in-process
(`test_streaming_path.serving`) on both databases, with a store that counts its writer's operations; then the run's
memory on its own, for an answer the agent asks again about (an output retry), which is stored before the retry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.server.support import read_events
from tests.server.test_streaming_path import serving
from toolwire.messages import Message, TextPart
from toolwire.server.limits import ResultPolicy
from toolwire.server.run_memory import RunMemory, Saved
from toolwire.store import SQLStore, new_chat

pytestmark = pytest.mark.anyio


class CountingWrites(SQLStore):
    """The real store; it counts the operations its writer commits."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.operations = 0

    async def _write(self, operation: Callable[..., Any], **options: Any) -> Any:
        self.operations += 1
        return await super()._write(operation, **options)


async def test_the_answer_and_the_runs_end_are_one_write_and_come_out_in_order(db_url: str, tmp_path: Path) -> None:
    store = CountingWrites(db_url)
    async with serving(store, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        before = store.operations
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
        written = store.operations - before
        # The run's start, its tool round, and its answer with its end: 4 before (the journal lingers: none).
        assert written == 3
        kinds = [e.type for e in events]
        assert kinds[-3:] == ["message_saved", "step_finished", "run_finished"]
        assert events[-1].data["status"] == "completed"
        assert events[-3].data["row"]["kind"] == "assistant"
        assert events[-3].data["row"]["messages"][0]["parts"][0]["text"] == "Done."
        assert [e.id for e in events] == [f"1-{i}" for i in range(1, len(events) + 1)]
        rows = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]
        assert [row["kind"] for row in rows] == ["user", "tools_aggregate", "assistant"]
        assert rows[-1]["id"] == events[-3].data["row"]["id"]
        # The count the run's row records is that of the events published after its commit too.
        run = await store.active_run(chat) or await store.get_run(chat, events[0].data["run_id"])
        assert run is not None and run.status == "completed" and run.event_count == len(events)
        # Resuming after the last event gives nothing more, and after the answer's row gives the rest.
        async with client.stream("GET", f"/api/chats/{chat}/stream",
                                 headers={"Last-Event-ID": str(events[-3].id)}) as response:
            rest = [e async for e in read_events(response)]
        assert [e.type for e in rest] == ["step_finished", "run_finished"]


def answer(text: str) -> Message:
    return Message(role="assistant", parts=[TextPart(text=text)])


async def test_an_answer_asked_about_again_is_stored_before_the_retry(tmp_path: Path) -> None:
    async with SQLStore(f"sqlite:///{tmp_path / 'app.db'}") as store:
        user = await store.ensure_user("alice")
        chat = new_chat(user.id)
        start = await store.start_run(chat.id, user_message=Message(role="user", parts=[TextPart(text="Hi")]),
                                      client_message_id="1", owner="test", lease_seconds=30, title=None,
                                      new_chat=chat)
        saved: list[Saved] = []
        memory = RunMemory(store, chat_id=chat.id, run_id=start.run.id, policy=ResultPolicy(max_bytes=65536),
                           notify=saved.append, user_id=user.id)
        first = answer("Not JSON.")
        await memory.append([first])
        assert memory.answer is not None and memory.answered  # held for the run's end: nothing written
        assert [row.kind for row in await store.list_messages(chat.id)] == ["user"] and saved == []
        retry = Message(role="user", parts=[TextPart(text="Answer in JSON.")])
        await memory.append([retry])  # the model is asked again: the held answer goes first
        assert memory.answer is None and not memory.answered
        assert [s.messages for s in saved] == [[first], [retry]]
        rows = await store.list_messages(chat.id)
        assert [(row.kind, row.messages[0].text) for row in rows] == [
            ("user", "Hi"), ("assistant", "Not JSON."), ("user", "Answer in JSON.")]
        await memory.append([answer('{"ok": true}')])
        assert memory.answer is not None and len(await store.list_messages(chat.id)) == 3
