"""Double texting: what a message sent while the chat's run is going does (reject, enqueue, interrupt, rollback).

The real `toolwire serve` in a subprocess, on SQLite and PostgreSQL, its model and tools held by the gate: a run
is stopped exactly inside a tool, or paused for approval, when the second message arrives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import TaskGroup

from tests.server.conftest import SQLITE_ONLY
from tests.server.support import TOKENS, Api, Event, GateServer, ServerProcess, calls, read_events, text, types, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


def assert_valid_history(rows: list[dict[str, Any]]) -> None:
    """Every tool call has exactly one result, and no row is stored twice."""
    assert len({r["id"] for r in rows}) == len(rows)
    assert [r["sequence_number"] for r in rows] == list(range(1, len(rows) + 1))
    for row in rows:
        if row["kind"] != "tools_aggregate":
            continue
        call_ids = [p["id"] for p in row["messages"][0]["parts"] if p["type"] == "tool_call"]
        result_ids = [p["call_id"] for p in row["messages"][1]["parts"] if p["type"] == "tool_result"]
        assert sorted(call_ids) == sorted(result_ids), row


def user_texts(rows: list[dict[str, Any]]) -> list[str]:
    return [r["messages"][0]["parts"][0]["text"] for r in rows if r["kind"] == "user"]


async def start_tool_run(api: Api, gate: GateServer, tg: TaskGroup, tag: str, label: str,
                         answer: str = "First answer.") -> tuple[str, Callable[[], list[Event]], anyio.Event]:
    """A chat whose run is inside the gated tool `label` (its events collected in the background)."""
    gate.script(tag, calls(("gated", {"label": label}), preamble="Working."), text(answer))
    chat = await api.new_chat()
    events: list[Event] = []
    ended = anyio.Event()

    async def first() -> None:
        try:
            events.extend(await api.run(chat, f"[[{tag}]] start"))
        except httpx.HTTPError:
            pass  # its server was killed
        ended.set()

    tg.start_soon(first)
    await until(lambda: f"wait:{label}" in gate.events, what="the tool to start")
    return chat, lambda: events, ended


async def send_events(api: Api, chat: str, text_: str, **extra: Any) -> tuple[httpx.Headers, list[Event]]:
    async with api.send(chat, text_, **extra) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        return response.headers, [e async for e in read_events(response)]


async def test_reject_is_the_default_and_answers_409(server: ServerProcess, gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        async with server.api("alice") as alice:
            chat, _events, ended = await start_tool_run(alice, gate, tg, "rej", "rej")
            for extra in ({}, {"multitask_strategy": "reject"}):
                async with alice.send(chat, "second", **extra) as response:
                    assert response.status_code == 409
                    assert json.loads(await response.aread())["error"]["code"] == "run_active"
            gate.release_tool("rej")
            await ended.wait()
            rows = await alice.rows(chat)
            assert user_texts(rows) == ["[[rej]] start"]  # the refused message stored nothing
            assert_valid_history(rows)
        tg.cancel_scope.cancel()


async def test_enqueue_runs_the_message_after_the_run_with_its_tools(server: ServerProcess, gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        gate.script("second", text("Second answer."))
        async with server.api("alice") as alice:
            chat, first_events, ended = await start_tool_run(alice, gate, tg, "enq", "enq")
            first_id = (await alice.chat(chat))["active_run"]["run_id"]
            async with alice.send(chat, "[[second]] and then", multitask_strategy="enqueue") as response:
                assert response.status_code == 200
                assert response.headers["x-run-state"] == "queued"
                queued_id = response.headers["x-run-id"]
                events = read_events(response)
                announced = await anext(events)
                assert announced.type == "run_queued"
                assert announced.data["run_id"] == queued_id and announced.data["ahead_run_id"] == first_id
                assert announced.data["strategy"] == "enqueue"
                assert (await alice.chat(chat))["active_run"]["run_id"] == first_id  # the first run goes on
                gate.release_tool("enq")
                rest = [e async for e in events]
            await ended.wait()
            assert first_events()[-1].data["status"] == "completed"
            # Only the queued run's own events: from its start to its end.
            assert rest[0].type == "run_started" and rest[0].data["run_id"] == queued_id
            assert rest[0].data["run_number"] == 2 and rest[0].id == "2-1"
            assert {e.data["run_id"] for e in rest} == {queued_id}
            assert rest[-1].type == "run_finished" and rest[-1].data["status"] == "completed"
            rows = await alice.rows(chat)
            assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant", "user", "assistant"]
            assert user_texts(rows) == ["[[enq]] start", "[[second]] and then"]
            assert rows[3]["run_id"] == queued_id and rows[4]["messages"][0]["parts"][0]["text"] == "Second answer."
            assert_valid_history(rows)
        tg.cancel_scope.cancel()


@SQLITE_ONLY  # the flag is read above the store; the enqueue it sets is test_enqueue_runs_...[postgres]'s path
async def test_the_server_default_comes_from_the_flag(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        server = serve("--multitask-strategy", "enqueue")
        gate.script("later", text("Later."))
        async with server.api("alice") as alice:
            chat, _events, ended = await start_tool_run(alice, gate, tg, "flag", "flag")
            async with alice.send(chat, "[[later]] queued by default") as response:
                assert response.status_code == 200 and response.headers["x-run-state"] == "queued"
                gate.release_tool("flag")
                events = [e async for e in read_events(response)]
            assert types(events)[0] == "run_queued" and events[-1].data["status"] == "completed"
            # The request still chooses: reject answers 409 on this server.
            gate.script("busy", calls(("gated", {"label": "flag2"})), text("Done."))
            async with alice.send(chat, "[[busy]] again", multitask_strategy="enqueue") as busy:
                await until(lambda: "wait:flag2" in gate.events)
                async with alice.send(chat, "no", multitask_strategy="reject") as refused:
                    assert refused.status_code == 409
                gate.release_tool("flag2")
                await busy.aread()
            await ended.wait()
        tg.cancel_scope.cancel()


async def test_interrupt_cancels_the_run_inside_its_tool_and_runs_the_message(server: ServerProcess,
                                                                              gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        gate.script("now", text("Answering the new message."))
        async with server.api("alice") as alice:
            chat, first_events, ended = await start_tool_run(alice, gate, tg, "int", "int-never")
            first_id = (await alice.chat(chat))["active_run"]["run_id"]
            headers, events = await send_events(alice, chat, "[[now]] stop that", multitask_strategy="interrupt")
            assert headers["x-run-state"] == "queued"
            await ended.wait()
            assert first_events()[-1].data["status"] == "cancelled"
            assert events[0].type == "run_queued" and events[0].data["ahead_run_id"] == first_id
            assert events[1].type == "run_started" and events[1].data["run_number"] == 2
            assert events[-1].data["status"] == "completed"
            rows = await alice.rows(chat)
            assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "user", "assistant"]
            cancelled = rows[1]["messages"][1]["parts"][0]
            assert cancelled["is_error"] is True and cancelled["result"] == {"error": "cancelled"}
            assert rows[1]["run_id"] == first_id
            assert_valid_history(rows)
        tg.cancel_scope.cancel()


async def test_interrupt_of_a_run_paused_for_approval_cancels_its_calls(server: ServerProcess,
                                                                        gate: GateServer) -> None:
    gate.script("pay", calls(("transfer", {"to": "bob", "amount": 5}), ("sleepy", {"seconds": 0.01, "label": "s"}),
                             preamble="Paying."), text("Paid."))
    gate.script("instead", text("Doing something else."))
    async with server.api("alice") as alice:
        chat = await alice.new_chat()
        paused = await alice.run(chat, "[[pay]] pay bob")
        assert paused[-1].data["status"] == "paused"
        approval = next(e.data["approval_id"] for e in paused if e.type == "approval_required")
        # Enqueue waits for the decision; interrupt does not.
        gate.script("waits", text("After the payment."))
        async with alice.send(chat, "[[waits]] queued", client_id="q1", multitask_strategy="enqueue") as queued:
            assert queued.headers["x-run-state"] == "queued"
            headers, events = await send_events(alice, chat, "[[instead]] never mind", multitask_strategy="interrupt")
            assert "x-run-state" not in headers  # the paused run ended in the same transaction: it starts at once
            assert events[0].type == "run_started" and events[-1].data["status"] == "completed"
            after = [e async for e in read_events(queued)]
        assert after[-1].data["status"] == "completed"
        rows = await alice.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "user", "assistant", "user", "assistant"]
        assert user_texts(rows) == ["[[pay]] pay bob", "[[instead]] never mind", "[[waits]] queued"]
        results = {p["name"]: p for p in rows[1]["messages"][1]["parts"]}
        assert results["transfer"]["result"] == {"error": "cancelled"} and results["transfer"]["is_error"]
        assert results["sleepy"]["result"] == {"label": "s", "slept": 0.01}  # the finished result stays
        assert not [e for e in gate.events if e.startswith("transfer")]
        assert_valid_history(rows)
        detail = await alice.chat(chat)
        assert detail["paused"] is None and detail["active_run"] is None
        late = await alice.client.post(f"/api/chats/{chat}/approvals",
                                       json={"decisions": [{"approval_id": approval, "approved": True}]})
        assert late.status_code == 409 and late.json()["error"]["code"] == "approval_decided"
        assert not [e for e in gate.events if e.startswith("transfer")]


async def test_enqueue_behind_a_paused_run_waits_for_the_decision(server: ServerProcess, gate: GateServer) -> None:
    gate.script("pay2", calls(("transfer", {"to": "carol", "amount": 7})), text("Paid carol."))
    gate.script("next", text("Next answer."))
    async with server.api("alice") as alice:
        chat = await alice.new_chat()
        paused = await alice.run(chat, "[[pay2]] pay carol")
        approval = next(e.data["approval_id"] for e in paused if e.type == "approval_required")
        async with alice.send(chat, "[[next]] after that", multitask_strategy="enqueue") as queued:
            assert queued.headers["x-run-state"] == "queued"
            events = read_events(queued)
            assert (await anext(events)).type == "run_queued"
            async with alice.decide(chat, [{"approval_id": approval, "approved": True}]) as resumed:
                assert resumed.status_code == 200
                assert [e async for e in read_events(resumed)][-1].data["status"] == "completed"
            rest = [e async for e in events]
        assert rest[0].data["run_number"] == 3 and rest[-1].data["status"] == "completed"
        rows = await alice.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant", "user", "assistant"]
        assert gate.events.count("transfer:carol:7") == 1
        assert_valid_history(rows)


async def test_two_messages_at_once_run_in_the_order_the_database_committed_them(server: ServerProcess,
                                                                                gate: GateServer) -> None:
    gate.script("a", text("Answer A."))
    gate.script("b", text("Answer B."))
    async with server.api("alice") as alice:
        chat = await alice.new_chat()
        results: dict[str, tuple[httpx.Headers, list[Event]]] = {}

        async def one(tag: str) -> None:
            results[tag] = await send_events(alice, chat, f"[[{tag}]] at once", client_id=f"race-{tag}",
                                             multitask_strategy="enqueue")

        async with anyio.create_task_group() as group:
            group.start_soon(one, "a")
            group.start_soon(one, "b")
        queued = [tag for tag, (headers, _) in results.items() if headers.get("x-run-state") == "queued"]
        assert len(queued) == 1  # one started on the free chat, the other waited for it
        first = "a" if queued == ["b"] else "b"
        rows = await alice.rows(chat)
        assert user_texts(rows) == [f"[[{first}]] at once", f"[[{queued[0]}]] at once"]
        assert [r["kind"] for r in rows] == ["user", "assistant", "user", "assistant"]
        assert [e.data["run_number"] for e in (results[first][1][0], results[queued[0]][1][1])] == [1, 2]
        assert_valid_history(rows)
        # The same message again attaches to its run: nothing is stored twice.
        again = await send_events(alice, chat, f"[[{queued[0]}]] at once", client_id=f"race-{queued[0]}",
                                  multitask_strategy="enqueue")
        assert again[1][-1].data["run_id"] == results[queued[0]][1][-1].data["run_id"]
        assert len(await alice.rows(chat)) == 4


async def test_queued_messages_keep_their_order_and_can_be_cancelled(server: ServerProcess, gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        for tag in ("q1", "q2", "q3"):
            gate.script(tag, text(f"Answer {tag}."))
        async with server.api("alice") as alice:
            chat, _events, ended = await start_tool_run(alice, gate, tg, "order", "order")
            streams: dict[str, list[Event]] = {}
            ids: dict[str, str] = {}

            async def queue(tag: str, ready: anyio.Event) -> None:
                async with alice.send(chat, f"[[{tag}]] queued", multitask_strategy="enqueue") as response:
                    ids[tag] = response.headers["x-run-id"]
                    ready.set()
                    streams[tag] = [e async for e in read_events(response)]

            for tag in ("q1", "q2", "q3"):  # one after another: each committed before the next is sent
                ready = anyio.Event()
                tg.start_soon(queue, tag, ready)
                await ready.wait()
            cancel = await alice.client.post(f"/api/chats/{chat}/runs/{ids['q2']}/cancel")
            assert cancel.status_code == 202
            gate.release_tool("order")
            await ended.wait()
            await until(lambda: len(streams) == 3, what="the queued runs to end")
            assert streams["q2"][-1].data == {"type": "run_finished", "run_id": ids["q2"], "step": None,
                                              "status": "cancelled", "error": streams["q2"][-1].data["error"]}
            assert [e.type for e in streams["q2"]] == ["run_queued", "run_finished"]
            rows = await alice.rows(chat)
            assert user_texts(rows) == ["[[order]] start", "[[q1]] queued", "[[q3]] queued"]  # q2 was never stored
            assert streams["q1"][1].data["run_number"] == 2 and streams["q3"][1].data["run_number"] == 3
            assert_valid_history(rows)
        tg.cancel_scope.cancel()


async def test_a_queued_message_survives_a_restart(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        server = serve("--max-continuations", "0")  # the dead run ends `interrupted`; the queue goes on
        gate.script("kept", text("Answered after the restart."))
        async with server.api("alice") as alice:
            chat, _events, _ended = await start_tool_run(alice, gate, tg, "crash", "crash-never")
            async with alice.send(chat, "[[kept]] still there?", multitask_strategy="enqueue") as response:
                assert response.headers["x-run-state"] == "queued"
        server.kill()  # the run and the queue's follower die with it; the queued message is in the store
        server.start()
        async with server.api("alice") as alice:
            with anyio.fail_after(30):
                while True:
                    rows = await alice.rows(chat)
                    if rows[-1]["kind"] == "assistant":
                        break
                    await anyio.sleep(0.1)
            assert user_texts(rows) == ["[[crash]] start", "[[kept]] still there?"]
            assert rows[-1]["messages"][0]["parts"][0]["text"] == "Answered after the restart."
            interrupted = rows[1]["messages"][1]["parts"][0]
            assert interrupted["result"] == {"error": "interrupted"}
            assert_valid_history(rows)
        tg.cancel_scope.cancel()


async def test_rollback_cancels_the_turn_and_answers_from_its_parent(server: ServerProcess, gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        gate.script("redo", text("Answering from the start."))
        async with server.api("alice") as alice:
            chat, first_events, ended = await start_tool_run(alice, gate, tg, "rb", "rb-never")
            first_id = (await alice.chat(chat))["active_run"]["run_id"]
            headers, events = await send_events(alice, chat, "[[redo]] start over", client_id="redo-1",
                                                multitask_strategy="rollback")
            await ended.wait()
            assert first_events()[-1].data["status"] == "cancelled"
            assert "x-run-state" not in headers  # not queued: it starts once the cancelled run has ended
            assert events[0].type == "run_started" and events[-1].data["status"] == "completed"
            # The chat shows the new turn only: it answers the cancelled turn's parent (here the chat's root)...
            shown = await alice.rows(chat)
            assert user_texts(shown) == ["[[redo]] start over"]
            assert [r["kind"] for r in shown] == ["user", "assistant"] and shown[0]["parent_id"] is None
            old_turn, new_turn = shown[0]["sibling_ids"]
            assert new_turn == shown[0]["id"]
            # ...and the cancelled turn is kept, on a branch of its own, with a result for every call.
            response = await alice.client.get(f"/api/chats/{chat}/messages", params={"leaf": old_turn})
            kept = response.json()["messages"]
            assert user_texts(kept) == ["[[rb]] start"] and kept[1]["run_id"] == first_id
            assert kept[1]["messages"][1]["parts"][0]["result"] == {"error": "cancelled"}
            assert_valid_history(kept)
            # The same message sent again attaches to its run; it never cancels its own answer.
            _, again = await send_events(alice, chat, "[[redo]] start over", client_id="redo-1",
                                         multitask_strategy="rollback")
            assert again[0].data["run_id"] == events[0].data["run_id"] and again[-1].data["status"] == "completed"
            assert len(await alice.rows(chat)) == 2
        tg.cancel_scope.cancel()


async def test_unknown_strategies_are_refused(server: ServerProcess, gate: GateServer) -> None:
    async with anyio.create_task_group() as tg:
        async with server.api("alice") as alice:
            chat, _events, ended = await start_tool_run(alice, gate, tg, "rb", "rb")
            async with alice.send(chat, "what", multitask_strategy="wait") as response:
                assert response.status_code == 422
                assert json.loads(await response.aread())["error"]["code"] == "invalid_request"
            gate.release_tool("rb")
            await ended.wait()
            assert user_texts(await alice.rows(chat)) == ["[[rb]] start"]
        tg.cancel_scope.cancel()


async def test_the_protocol_routes_pass_the_strategy_on(server: ServerProcess, gate: GateServer) -> None:
    gate.script("ui1", calls(("gated", {"label": "ui"})), text("First."))
    gate.script("ui2", text("Queued answer."))
    gate.script("ag2", text("AG-UI queued answer."))
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}

    def ui(message_id: str, text_: str, **extra: Any) -> dict[str, Any]:
        return {"id": "ui-chat", "messages": [{"id": message_id, "role": "user",
                                               "parts": [{"type": "text", "text": text_}]}], **extra}

    async with httpx.AsyncClient(base_url=server.url, trust_env=False, timeout=30, headers=headers) as client:
        async with client.stream("POST", "/api/chat", json=ui("u1", "[[ui1]] go")) as first:
            assert first.status_code == 200
            await until(lambda: "wait:ui" in gate.events)
            refused = await client.post("/api/chat", json=ui("u2", "[[ui2]] next"))
            assert refused.status_code == 409
            async with client.stream("POST", "/api/chat",
                                     json=ui("u2", "[[ui2]] next", multitask_strategy="enqueue")) as queued:
                assert queued.status_code == 200 and queued.headers["x-run-state"] == "queued"
                gate.release_tool("ui")
                await first.aread()
                body = (await queued.aread()).decode()
        assert '"delta":"Queued"' in body and "First" not in body  # the queued run's own events only
        bad = await client.post("/api/chat", json=ui("u3", "x", multitask_strategy="sideways"))
        assert bad.status_code == 422

        gate.script("ag1", calls(("gated", {"label": "ag"})), text("AG first."))
        run = {"threadId": "ag-thread", "runId": "r1", "state": None, "tools": [], "context": [],
               "messages": [{"id": "a1", "role": "user", "content": "[[ag1]] go"}]}
        async with client.stream("POST", "/api/agui", json=run) as first:
            assert first.status_code == 200
            await until(lambda: "wait:ag" in gate.events)
            second = {**run, "runId": "r2", "messages": [{"id": "a2", "role": "user", "content": "[[ag2]] next"}],
                      "forwardedProps": {"multitask_strategy": "interrupt"}}
            async with client.stream("POST", "/api/agui", json=second) as queued:
                assert queued.status_code == 200 and queued.headers["x-run-state"] == "queued"
                body = (await queued.aread()).decode()
            await first.aread()
        assert '" queued"' in body and "RUN_FINISHED" in body and "AG first" not in body
