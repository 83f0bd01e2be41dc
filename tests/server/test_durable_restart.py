"""One server on SQLite, SIGKILLed and started again: its run goes on from its checkpoint (durable-runs.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from tests.server.support import GateServer, ServerProcess, calls, first_text, read_events, text, until
from tests.server.test_runs import assert_valid_history

pytestmark = pytest.mark.anyio


async def test_a_killed_and_restarted_server_continues_its_run(gate: GateServer, tmp_path: Path) -> None:
    server = ServerProcess(db_url=f"sqlite:///{tmp_path / 'one.db'}", gate_url=gate.url, folder=tmp_path,
                           args=["--tools", "tests.server.durable_tools:TOOLS"], lease_seconds=1.0)
    script = gate.script("restart", calls(("lookup", {"label": "first"})), calls(("charge", {"label": "card"})),
                text("Finished after the restart."))
    gate.release_tool("first")
    server.start()
    try:
        async with server.api() as api:
            chat = await api.new_chat()
            async with api.send(chat, "[[restart]] go") as response:
                async for event in read_events(response):
                    if event.type == "tool_started" and event.data["call"]["name"] == "charge":
                        break
            await until(lambda: gate.waiting.get("card", 0) == 1)
            server.kill()  # SIGKILL mid-tool: the charge may have happened, so it must not run again
        script.gated = True  # the continued run's next answer waits for the follower
        server.start()  # the same database, a new process
        async with server.api() as api:
            await until(lambda: script.requests == 3, timeout=30)
            async with api.follow(chat) as response:  # no cursor: the continued run from its `run_resumed`
                assert response.status_code == 200
                script.open()
                events = [event async for event in read_events(response)]
            async with api.follow(chat, after="1-3") as response:
                assert response.status_code == 410  # the old process's events are gone with it: reload the rows
        assert events[0].type == "run_resumed" and events[0].data["checkpoint"]["step"] == 1
        ids = [int(str(e.id).split("-")[1]) for e in events]
        assert ids == list(range(ids[0], ids[0] + len(ids))) and ids[0] > 3  # numbered past the old process's
        assert events[-1].data["status"] == "completed"
        assert gate.events.count("exec:charge:card") == 1 and gate.events.count("exec:lookup:first") == 1
        async with server.api() as api:
            rows = await api.rows(chat)
        assert_valid_history(rows)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "tools_aggregate", "assistant"]
        assert rows[2]["messages"][1]["parts"][0]["result"] == {"error": "interrupted"}
        assert rows[3]["messages"][0]["parts"][0]["text"] == "Finished after the restart."
    finally:
        server.stop()
        gate.release_tool("card")  # let the orphaned request at the gate go


async def test_text_checkpointed_while_streaming_is_kept_when_the_run_cannot_go_on(gate: GateServer,
                                                                                   tmp_path: Path) -> None:
    """With continuing turned off, a run killed mid-answer is ended: the text its step had checkpointed is stored,
    marked incomplete (the page shows "Incomplete: the answer stopped here.")."""
    import sqlite3

    database = tmp_path / "cut.db"
    server = ServerProcess(db_url=f"sqlite:///{database}", gate_url=gate.url, folder=tmp_path,
                           args=["--max-continuations", "0"], lease_seconds=1.0)
    words = [f"word{i} " for i in range(400)]
    script = gate.script("long", text("".join(words), chunks=words), gated=True)

    def checkpointed() -> str | None:
        with sqlite3.connect(database) as db:
            row = db.execute("SELECT step_text FROM runs WHERE status = 'running'").fetchone()
        return row[0] if row else None

    script.release(2)
    server.start()
    try:
        async with server.api() as api:
            chat = await api.new_chat()
            await first_text(api, chat, "[[long]] write at length")
            with anyio.fail_after(30):
                while checkpointed() is None:  # a checkpoint is written a second into the step
                    script.release(1)
                    await anyio.sleep(0.05)
            saved = orjson.loads(checkpointed() or "{}")
            server.kill()
        server.start()
        async with server.api() as api:
            with anyio.fail_after(30):
                while (await api.chat(chat))["active_run"] is not None:  # noqa: ASYNC110 - another process
                    await anyio.sleep(0.1)
            rows = await api.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "assistant"]
        [message] = rows[1]["messages"]
        assert message["metadata"] == {"incomplete": True}
        assert message["parts"][0]["text"] == saved["text"] and saved["step"] == 0
        assert "".join(words).startswith(saved["text"]) and len(saved["text"]) > 0
    finally:
        server.stop()


async def test_followers_that_reach_the_new_server_before_it_continues_the_run_are_answered_once_it_does(
        gate: GateServer, tmp_path: Path) -> None:
    """A page reconnects as soon as the new process listens, before that process has taken the run over (the
    old lease has not run out yet). A cursor of the killed process gets its 410 once the run is continued (not
    when the live-run wait runs out, 30 s later), and a follower without a cursor gets the continued run from its
    `run_resumed` (not an empty stream to retry)."""
    server = ServerProcess(db_url=f"sqlite:///{tmp_path / 'early.db'}", gate_url=gate.url, folder=tmp_path,
                           lease_seconds=4.0)
    words = ["Cut ", "off ", "here ", "and ", "never ", "finished."]
    script = gate.script("early", text("".join(words), chunks=words), text("Again, whole."), gated=True)
    script.release(2)
    server.start()
    try:
        async with server.api() as api:
            chat = await api.new_chat()
            last = str((await first_text(api, chat, "[[early]] go")).id)
            server.kill()
        server.start()  # the killed process's lease (4 s) still holds: the run is continued a few seconds later
        assert script.requests == 1
        async with server.api() as api:

            async def with_old_cursor() -> tuple[int, float]:
                started = anyio.current_time()
                async with api.follow(chat, after=last) as response:
                    return response.status_code, anyio.current_time() - started

            async def without_cursor() -> list[Any]:
                async with api.follow(chat) as response:
                    assert response.status_code == 200
                    found = []
                    async for event in read_events(response):
                        found.append(event)
                        if event.type == "run_resumed":
                            script.open()
                    return found

            results: dict[str, Any] = {}

            async def keep(name: str, call: Callable[[], Awaitable[Any]]) -> None:
                results[name] = await call()

            async with anyio.create_task_group() as tg:
                tg.start_soon(keep, "old", with_old_cursor)
                tg.start_soon(keep, "fresh", without_cursor)
        status, waited = results["old"]
        assert status == 410
        # Answered once the run was continued: the new process asks the model again right after it seeds its log.
        assert waited < 20, f"the expired cursor was answered after {waited:.1f} s"
        events = results["fresh"]
        assert events[0].type == "run_resumed" and events[-1].type == "run_finished"
        assert events[-1].data["status"] == "completed"
    finally:
        script.open()
        server.stop()
