"""The run's journal lingers: a round whose tools answer quickly costs no journal write (server/journal.py).

`Journal` on its own, with a linger far longer than any test waits (so that nothing here depends on the machine's
speed): what is written when, and what hurries it. Then the server in-process (`test_streaming_path.serving`, the
real SQLite store) with a store that notes its journal writes: a quick tool's round is stored whole with no journal
write, and a slow tool's call is journaled while the tool still runs.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.support import read_events
from tests.server.test_streaming_path import serving
from toolwire import Tool
from toolwire.messages import Message, TextPart, ToolCallPart, ToolResultPart
from toolwire.server import runner as runner_module
from toolwire.server.journal import Journal
from toolwire.store import SQLStore

pytestmark = pytest.mark.anyio

LONG = 30.0
"""A linger no test waits out."""


class Writes:
    """What the journal wrote, one entry per write: the ids of its calls, of its results' calls, and whether it had
    a step's message."""

    def __init__(self) -> None:
        self.done: list[tuple[list[str], list[str], bool]] = []
        self.changed = anyio.Event()

    async def __call__(self, calls: list[ToolCallPart], results: list[ToolResultPart],
                       step: Message | None) -> None:
        self.done.append(([c.id for c in calls], [r.call_id for r in results], step is not None))
        self.changed.set()
        self.changed = anyio.Event()

    async def until(self, count: int) -> None:
        with anyio.fail_after(5):
            while len(self.done) < count:
                await self.changed.wait()


def call(call_id: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name="note", arguments={}, arguments_raw="{}")


def result(call_id: str) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, name="note", result="kept")


STEP = Message(role="assistant", parts=[TextPart(text="Let me look."), call("a")])


@asynccontextmanager
async def lingering() -> AsyncIterator[tuple[Journal, Writes]]:
    """A journal with a linger no test waits out, its task running; ended (and its task done) on the way out."""
    writes = Writes()
    journal = Journal(writes, linger=LONG)
    async with anyio.create_task_group() as tg:
        tg.start_soon(journal.run)
        yield journal, writes
        journal.end()


async def test_entries_linger_until_the_round_goes_to_the_store() -> None:
    async with lingering() as (journal, writes):
        journal.add_step(STEP)
        journal.add_call(call("a"))
        journal.add_result(result("a"))
        await anyio.sleep(0.2)
        assert writes.done == []  # lingering
        journal.round_stored()
        await writes.until(1)
        assert writes.done == [(["a"], ["a"], True)]  # all at once (the runner leaves out what the round holds)


async def test_an_urgent_result_and_a_waiting_caller_are_written_at_once() -> None:
    async with lingering() as (journal, writes):
        journal.add_call(call("a"))
        journal.add_result(result("a"), urgent=True)
        await writes.until(1)
        assert writes.done == [(["a"], ["a"], False)]
        journal.add_call(call("b"))
        with anyio.fail_after(5):
            await journal.drained()  # hurries what it waits for
        assert writes.done[-1] == (["b"], [], False)


async def test_a_round_with_a_recorded_call_does_not_linger_until_it_is_stored() -> None:
    async with lingering() as (journal, writes):
        with anyio.fail_after(5):
            await journal.record_call(call("a"))  # a tool that must not run twice: committed before it starts
        journal.add_step(STEP)  # the consumer's entries of the same round come after it
        journal.add_call(call("b"))
        await writes.until(2)
        assert writes.done == [(["a"], [], False), (["b"], [], True)]
        journal.round_stored()
        journal.add_step(STEP)  # the next round lingers again
        await anyio.sleep(0.2)
        assert len(writes.done) == 2
        journal.end()  # and its end writes what is left at once
    assert len(writes.done) == 3


async def test_entries_taken_by_a_task_cancelled_while_it_lingers_are_written_by_the_next_run() -> None:
    writes = Writes()
    journal = Journal(writes, linger=LONG)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(journal.run)
            journal.add_call(call("a"))
            await anyio.sleep(0.1)  # taken, lingering
            scope.cancel()
    assert writes.done == []
    journal.end()  # a hand-over: the runner ends the journal and runs it once more
    with anyio.fail_after(5):
        await journal.run()
    assert writes.done == [(["a"], [], False)]


class NotedJournal(SQLStore):
    """The SQLite store; notes each journal write (the calls it records, and when) and sets `written`."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.journaled: list[tuple[float, list[str], bool]] = []
        self.written = anyio.Event()

    async def record_journal(self, run_id: str, *, calls: Any = (), **entries: Any) -> None:
        await super().record_journal(run_id, calls=calls, **entries)
        self.journaled.append((time.monotonic(), [c.name for c in calls], entries.get("step_message") is not None))
        self.written.set()


async def run_once(client: Any) -> list[Any]:
    chat = (await client.post("/api/chats", json={})).json()["id"]
    async with client.stream("POST", f"/api/chats/{chat}/messages",
                             json={"client_message_id": "1", "text": "go"}) as response:
        events = [e async for e in read_events(response)]
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    rows = (await client.get(f"/api/chats/{chat}/messages")).json()["messages"]
    assert [row["kind"] for row in rows] == ["user", "tools_aggregate", "assistant"]
    return events


async def test_a_quick_tools_round_is_stored_with_no_journal_write(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Longer than the runner's, so that a stalled machine cannot let the linger run out before the round is stored.
    monkeypatch.setattr(runner_module, "JOURNAL_LINGER_SECONDS", 5.0)
    store = NotedJournal(f"sqlite:///{tmp_path / 'app.db'}")
    async with serving(store, tmp_path) as client:
        await run_once(client)
    assert store.journaled == []  # one write per tool round before the linger


async def test_a_slow_tools_call_is_journaled_while_the_tool_runs(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "JOURNAL_LINGER_SECONDS", 0.3)
    store = NotedJournal(f"sqlite:///{tmp_path / 'app.db'}")
    started: list[float] = []

    async def note(text: str) -> str:
        """Keep a note."""
        started.append(time.monotonic())
        with anyio.fail_after(10):
            await store.written.wait()  # it ends only once its call is in the journal
        return "kept"

    async with serving(store, tmp_path, tools=[Tool(note, idempotent=True)]) as client:
        await run_once(client)
    # One write, with the step's message and its call, once the linger ran out; the result went with the round.
    [(at, calls, step)] = store.journaled
    assert calls == ["note"] and step
    assert at - started[0] >= 0.25
