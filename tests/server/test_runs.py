"""Runs outlive requests: disconnects, cancellation, one active run per chat, idempotent retries, crashes."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from tests.server.support import Event, GateServer, ServerProcess, calls, read_events, text, types, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


def assert_valid_history(rows: list[dict]) -> None:
    """Every call in the stored history has exactly one result right after it."""
    for row in rows:
        if row["kind"] == "tools_aggregate":
            call_message, result_message = row["messages"]
            call_ids = [p["id"] for p in call_message["parts"] if p["type"] in ("tool_call", "invalid_tool_call")]
            result_ids = [p["call_id"] for p in result_message["parts"] if p["type"] == "tool_result"]
            assert call_ids and call_ids == result_ids
        else:
            assert all(p["type"] not in ("tool_call", "tool_result") for m in row["messages"] for p in m["parts"])


async def test_a_disconnected_client_does_not_stop_the_run(server: ServerProcess, gate: GateServer) -> None:
    gate.script("leave", calls(("gated", {"label": "leave-tool"})), text("Finished without you."))
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "[[leave]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    break  # the client goes away mid-tool
        gate.release_tool("leave-tool")
        await until(lambda: gate.scripts["leave"].finished == 2)
        detail = await api.chat(chat)
        while detail["active_run"] is not None:
            await anyio.sleep(0.02)
            detail = await api.chat(chat)
        rows = await api.rows(chat)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
    assert rows[1]["messages"][1]["parts"][0]["result"] == {"label": "leave-tool", "released": True}
    assert rows[2]["messages"][0]["parts"][0]["text"] == "Finished without you."


async def test_on_disconnect_cancel_cancels_the_run(server: ServerProcess, gate: GateServer) -> None:
    gate.script("cancel-on-leave", calls(("gated", {"label": "never"})))
    async with server.api() as api, server.api() as watcher:
        chat = await api.new_chat()
        async with api.send(chat, "[[cancel-on-leave]] go", on_disconnect="cancel") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    last = event.id
                    break
        async with watcher.follow(chat, after=last) as response:
            rest = [e async for e in read_events(response)]
        rows = await api.rows(chat)
    assert rest[-1].type == "run_finished" and rest[-1].data["status"] == "cancelled"
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate"]
    assert rows[1]["messages"][1]["parts"][0]["result"] == {"error": "cancelled"}
    assert_valid_history(rows)


async def test_cancel_mid_tool_ends_within_a_second_and_the_chat_goes_on(server: ServerProcess,
                                                                         gate: GateServer) -> None:
    gate.script("cancel", calls(("sleepy", {"seconds": 0.05, "label": "quick"}), ("gated", {"label": "stuck"})))
    gate.script("after-cancel", text("Still here."))
    async with server.api() as api:
        chat = await api.new_chat()
        events: list[Event] = []
        async with api.send(chat, "[[cancel]] go") as response:
            run_id = response.headers["x-run-id"]
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_result":  # the quick one finished; the other is stuck at its gate
                    await until(lambda: gate.waiting.get("stuck", 0) == 1)
                    asked = time.monotonic()
                    reply = await api.client.post(f"/api/chats/{chat}/runs/{run_id}/cancel")
                    assert reply.status_code == 202
                    assert reply.json() == {"run_id": run_id, "status": "cancelling"}
            ended = time.monotonic()
        assert events[-1].type == "run_finished" and events[-1].data["status"] == "cancelled"
        assert events[-1].data["error"]["code"] == "cancelled"
        assert ended - asked < 1.0, f"cancel took {ended - asked:.2f} s"
        assert types(events)[-3:] == ["message_saved", "step_finished", "run_finished"]  # the cancelled round
        rows = await api.rows(chat)
        assert_valid_history(rows)
        results = {p["name"]: p["result"] for p in rows[1]["messages"][1]["parts"]}
        assert results == {"sleepy": {"label": "quick", "slept": 0.05}, "gated": {"error": "cancelled"}}
        again = await api.client.post(f"/api/chats/{chat}/runs/{run_id}/cancel")
        assert again.status_code == 409 and again.json()["error"]["code"] == "run_finished"
        missing = await api.client.post(f"/api/chats/{chat}/runs/run_nope/cancel")
        assert missing.status_code == 404
        follow_up = await api.run(chat, "[[after-cancel]] and now?")
        assert follow_up[-1].data["status"] == "completed"
        assert [r["kind"] for r in await api.rows(chat)] == ["user", "tools_aggregate", "user", "assistant"]


async def test_one_active_run_per_chat_and_idempotent_client_message_ids(server: ServerProcess,
                                                                        gate: GateServer) -> None:
    gate.script("busy", calls(("gated", {"label": "busy-tool"})), text("Done once."))
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "[[busy]] go", client_id="msg-1") as first:
            run_id = first.headers["x-run-id"]
            original: list[Event] = []
            async for event in read_events(first):
                original.append(event)
                if event.type == "tool_started":
                    break
        second = await api.client.post(f"/api/chats/{chat}/messages",
                                       json={"client_message_id": "msg-2", "text": "another"})
        assert second.status_code == 409 and second.json()["error"]["code"] == "run_active"
        reused = await api.client.post(f"/api/chats/{chat}/messages",
                                       json={"client_message_id": "msg-1", "text": "different text"})
        assert reused.status_code == 409 and reused.json()["error"]["code"] == "client_message_id_reused"
        async with api.send(chat, "[[busy]] go", client_id="msg-1") as retry:  # the same request again
            assert retry.status_code == 200 and retry.headers["x-run-id"] == run_id
            replayed: list[Event] = []
            async for event in read_events(retry):
                replayed.append(event)
                if event.type == "tool_started":
                    gate.release_tool("busy-tool")
        assert [e.id for e in replayed[:len(original)]] == [e.id for e in original]  # from the run's first event
        assert replayed[-1].type == "run_finished" and replayed[-1].data["status"] == "completed"
        rows = await api.rows(chat)
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]  # the message was stored once
    assert gate.scripts["busy"].requests == 2  # and answered once


async def until_journaled(db_url: str, tool_name: str) -> None:
    """Wait (up to 15 s) until the run journal holds a result of `tool_name`."""
    from sqlalchemy import text as sql
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(db_url.replace("sqlite://", "sqlite+aiosqlite://", 1)
                                 .replace("postgresql://", "postgresql+asyncpg://", 1))
    try:
        with anyio.fail_after(15):
            while True:
                async with engine.connect() as connection:
                    found = (await connection.execute(sql(
                        "SELECT count(*) FROM run_tool_calls WHERE result_json IS NOT NULL AND call_json LIKE :name"),
                        {"name": f'%"{tool_name}"%'})).scalar()
                if found:
                    return
                await anyio.sleep(0.05)
    finally:
        await engine.dispose()


async def test_a_server_killed_mid_tool_leaves_a_usable_chat(serve: Callable[..., ServerProcess],
                                                            gate: GateServer) -> None:
    server = serve("--max-continuations", "0", lease_seconds=1.0)  # ended, not continued (durable-runs.md)
    gate.script("crash", calls(("sleepy", {"seconds": 0.01, "label": "finished"}), ("gated", {"label": "crash-tool"}),
                               preamble="Two tools."))
    gate.script("after-crash", text("Back again."))
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "[[crash]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_result":
                    await until(lambda: gate.waiting.get("crash-tool", 0) == 1)
                    # A result's event goes out before its journal write commits (see server/runner.py): the
                    # result survives a crash once that write is in.
                    await until_journaled(server.db_url, "sleepy")
                    server.kill()  # SIGKILL: no shutdown, no cleanup
                    break
    server.start()  # the same database, a new process
    async with server.api() as api:
        with anyio.fail_after(15):
            while (await api.chat(chat))["active_run"] is not None:  # noqa: ASYNC110 - polling another process
                await anyio.sleep(0.1)
        rows = await api.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate"]
        assert_valid_history(rows)
        calls_message, results_message = rows[1]["messages"]
        assert calls_message["parts"][0]["text"] == "Two tools."
        assert [(p["name"], p["result"], p["is_error"]) for p in results_message["parts"]] == [
            ("sleepy", {"label": "finished", "slept": 0.01}, False),  # the real result was kept
            ("gated", {"error": "interrupted"}, True),
        ]
        async with api.follow(chat, after="1-3") as response:
            assert response.status_code == 410  # the old process's events are gone with it
        follow_up = await api.run(chat, "[[after-crash]] still there?")
        assert follow_up[0].data["run_number"] == 2
        assert follow_up[-1].data["status"] == "completed"
    gate.release_tool("crash-tool")  # let the orphaned request at the gate go


async def test_deleting_a_chat_cancels_its_run_first(server: ServerProcess, gate: GateServer) -> None:
    gate.script("delete", calls(("gated", {"label": "delete-tool"})))
    async with server.api() as api, server.api() as watcher:
        chat = await api.new_chat()
        async with api.send(chat, "[[delete]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    break
        async with anyio.create_task_group() as tg:
            finished: list[Event] = []

            async def watch() -> None:
                async with watcher.follow(chat) as stream:
                    finished.extend([e async for e in read_events(stream)])

            tg.start_soon(watch)
            await anyio.sleep(0.2)
            deleted = await api.client.delete(f"/api/chats/{chat}")
            assert deleted.status_code == 204
        assert finished[-1].type == "run_finished" and finished[-1].data["status"] == "cancelled"
        assert (await api.client.get(f"/api/chats/{chat}")).status_code == 404
        assert chat not in [c["id"] for c in (await api.client.get("/api/chats")).json()["chats"]]


async def test_stopping_the_server_interrupts_runs_and_closes_their_streams(serve: Callable[..., ServerProcess],
                                                                           gate: GateServer) -> None:
    server = serve("--tool-timeout", "30")
    gate.script("stop", calls(("sleepy", {"seconds": 0.01, "label": "done-before"}), ("gated", {"label": "stop-tool"})))
    gate.script("after-stop", text("Up again."))
    async with server.api() as api:
        chat = await api.new_chat()
        events: list[Event] = []
        async with api.send(chat, "[[stop]] go") as response:
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_result":
                    await until(lambda: gate.waiting.get("stop-tool", 0) == 1)
                    stopping = time.monotonic()
                    assert server.process is not None
                    server.process.send_signal(15)  # SIGTERM, as a process manager stops it
        closed = time.monotonic() - stopping
    assert events[-1].type == "run_finished" and events[-1].data["status"] == "interrupted"
    assert closed < 5, f"the stream stayed open {closed:.1f} s after SIGTERM"
    # uvicorn re-raises the signal once it has shut down, so the process ends the conventional way.
    assert server.process is not None and server.process.wait(timeout=10) == -15
    assert "Traceback" not in server.stderr()
    server.start()
    async with server.api() as api:
        assert (await api.chat(chat))["active_run"] is None
        rows = await api.rows(chat)
        assert_valid_history(rows)
        # "cancelled", not "interrupted": the run recorded its own end; nothing was left for recovery.
        assert [p["result"] for p in rows[1]["messages"][1]["parts"]] == [{"label": "done-before", "slept": 0.01},
                                                                          {"error": "cancelled"}]
        assert (await api.run(chat, "[[after-stop]] hi"))[-1].data["status"] == "completed"
