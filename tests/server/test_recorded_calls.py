"""A tool that is not idempotent starts only once its call is committed to the run's journal (durable runs).

Without that, a process killed while the model was still streaming (tools start as soon as their call is
complete) could leave no trace of a call whose tool had already run; the process continuing the run then asked
the model again, and the tool ran a second time under the new call (bench/load's `rolling` scenario, SIGKILL
variant). An idempotent tool starts at once, as before: running it twice is harmless, and it waits for nothing.

The store is the real SQLite store with its journal writes held until the test releases them; the app runs
in-process on loopback with the fake provider of `test_streaming_path` (a text, one `note` call, the answer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.server.support import Event, read_events
from tests.server.test_streaming_path import serving
from toolwire import Tool
from toolwire.store import SQLStore

pytestmark = pytest.mark.anyio


class HeldJournal(SQLStore):
    """The SQLite store; a journal write that records a call waits for `release`. `order` notes the writes and
    the tool's start, in the order they happened."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.release = anyio.Event()
        self.order: list[str] = []

    async def record_journal(self, run_id: str, *, calls: Any = (), **entries: Any) -> None:
        if calls:
            self.order.append("call held")
            await self.release.wait()
        await super().record_journal(run_id, calls=calls, **entries)
        if calls:
            self.order.append("call committed")


@pytest.mark.parametrize("idempotent", [False, True], ids=["not-idempotent", "idempotent"])
async def test_a_tool_that_must_not_run_twice_starts_after_its_call_is_committed(tmp_path: Path,
                                                                                 idempotent: bool) -> None:
    store = HeldJournal(f"sqlite:///{tmp_path / 'app.db'}")

    def note(text: str) -> str:
        """Keep a note."""
        store.order.append("tool started")
        return "kept"

    async with serving(store, tmp_path, tools=[Tool(note, idempotent=idempotent)]) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        seen: list[Event] = []

        async def follow() -> None:
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": "1", "text": "go"}) as response:
                async for event in read_events(response):
                    seen.append(event)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(30):
                # An idempotent tool may start, finish and have its round handed to the store before the journal
                # task gets to the call, which then leaves the call out (the round holds it): no journal write.
                while "call held" not in store.order and not (  # noqa: ASYNC110 - what the store noted
                        idempotent and "tool started" in store.order):
                    await anyio.sleep(0.01)
            await anyio.sleep(0.5)  # time for the tool to start, were it to start without the commit
            if idempotent:
                assert "tool started" in store.order  # it waits for nothing
            else:
                assert "tool started" not in store.order
                assert "tool_started" not in [e.type for e in seen]
            store.release.set()
        assert seen[-1].type == "run_finished" and seen[-1].data["status"] == "completed"
        assert [e.data["result"]["result"] for e in seen if e.type == "tool_result"] == ["kept"]
        if not idempotent:
            assert store.order == ["call held", "call committed", "tool started"]
        # The call is journaled once at most (the server's own record of the tool's start adds no second), and once
        # when the tool waited for it.
        assert store.order.count("call committed") == store.order.count("call held") <= 1
        assert store.order.count("call committed") == 1 or idempotent


async def test_a_handover_waits_for_a_tool_whose_call_is_committed_before_its_start_is_read(tmp_path: Path) -> None:
    # The tool starts right after its call commits, before the runner reads its `ToolStartedEvent`: a handover
    # (`--drain-handover`) that looked only at the events took the run as having no tool running and cut the
    # tool off; the server continuing the run answered the call `interrupted` (bench/load's `rolling` scenario).
    store = HeldJournal(f"sqlite:///{tmp_path / 'app.db'}")

    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    apps: list[Any] = []
    async with serving(store, tmp_path, tools=[Tool(note, idempotent=False)], apps=apps) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        manager = apps[0].state.toolwire.manager

        async def follow() -> None:
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": "1", "text": "go"}) as response:
                async for _event in read_events(response):
                    pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            with anyio.fail_after(30):
                while "call held" not in store.order:  # noqa: ASYNC110 - what the store noted
                    await anyio.sleep(0.01)
            (local,) = manager._local.values()
            assert local.runner is not None and local.runner.tools_running
            store.release.set()


async def test_a_run_waiting_for_its_chats_previous_run_keeps_its_lease(tmp_path: Path) -> None:
    # A new run waits (up to 10 s) for the chat's previous run to publish its end. That wait can outlast a lease
    # (2 s in the replica tests, on a loaded machine): the run was not yet among the process's runs, so its lease
    # was not renewed, and it was taken over as if its process had stopped, then ran twice (the duplicate-send
    # test of tests/scaleout saw ids numbered on from 2-16777217, and copies waiting past their timeout).
    store = SQLStore(f"sqlite:///{tmp_path / 'app.db'}")
    apps: list[Any] = []
    async with serving(store, tmp_path, apps=apps, lease_seconds=0.6) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        manager = apps[0].state.toolwire.manager

        async def send(message_id: str) -> list[Event]:
            async with client.stream("POST", f"/api/chats/{chat}/messages",
                                     json={"client_message_id": message_id, "text": "go"}) as response:
                return [event async for event in read_events(response)]

        first = await send("1")
        assert first[-1].type == "run_finished"
        previous_end = anyio.Event()  # the previous run's end, still on its way to the log
        manager._chat_last[chat] = previous_end
        second: list[Event] = []

        async def send_second() -> None:
            second.extend(await send("2"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_second)
            await anyio.sleep(2.0)  # over three leases: the maintenance loop looked for expired runs meanwhile
            assert await manager.recover_expired() == []
            previous_end.set()
        assert [e.type for e in second].count("run_started") == 1 and "run_resumed" not in [e.type for e in second]
        assert second[0].id == "2-1" and second[-1].type == "run_finished"
        assert second[-1].data["status"] == "completed"
