"""Double texting across replicas: the run going is on one replica, the second message arrives at another.

Two or three real `toolwire serve --db postgresql://... --redis redis://...` processes sharing a fresh database
and one Redis, with the gate server as their model and tools.
"""

from __future__ import annotations

import time

import anyio
import httpx
import pytest

from tests.scaleout.test_replicas import Replica
from tests.server.support import Api, Event, GateServer, calls, read_events, text, until
from tests.server.test_multitask import assert_valid_history, send_events, start_tool_run, user_texts

pytestmark = pytest.mark.anyio


async def test_enqueue_on_b_behind_a_run_on_a(replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("on-b", text("B's queued answer."))
    async with a.api() as on_a, b.api() as on_b, anyio.create_task_group() as tg:
        chat, first_events, first_ended = await start_tool_run(on_a, gate, tg, "on-a", "far-enq", "A's answer.")
        async with on_b.send(chat, "[[on-b]] queued", multitask_strategy="enqueue") as response:
            assert response.status_code == 200 and response.headers["x-run-state"] == "queued"
            queued_id = response.headers["x-run-id"]
            gate.release_tool("far-enq")
            events = [e async for e in read_events(response)]
        await first_ended.wait()
        assert first_events()[-1].data["status"] == "completed"
        assert events[0].type == "run_queued"
        assert events[1].type == "run_started" and events[1].data["run_id"] == queued_id
        assert events[1].data["run_number"] == 2 and events[-1].data["status"] == "completed"
        rows = await on_b.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant", "user", "assistant"]
        assert_valid_history(rows)


async def test_interrupt_on_b_cancels_the_run_on_a_inside_its_tool(replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("stuck-a", calls(("sleepy", {"seconds": 0.01, "label": "done-a"}), ("gated", {"label": "never-a"})))
    gate.script("now-b", text("B interrupts."))
    async with a.api() as on_a, b.api() as on_b, anyio.create_task_group() as tg:
        chat = await on_a.new_chat()
        first: list[Event] = []

        async def run_on_a() -> None:
            first.extend(await on_a.run(chat, "[[stuck-a]] go"))

        tg.start_soon(run_on_a)
        await until(lambda: "wait:never-a" in gate.events and "start:done-a" in gate.events)
        await anyio.sleep(0.2)  # the finished tool's result is journaled
        asked = time.monotonic()
        async with on_b.send(chat, "[[now-b]] stop", multitask_strategy="interrupt") as response:
            assert response.headers["x-run-state"] == "queued"
            events: list[Event] = []
            async for event in read_events(response):
                events.append(event)
                if event.type == "run_started":
                    started = time.monotonic()
        await until(lambda: bool(first) and first[-1].type == "run_finished")
        assert first[-1].data["status"] == "cancelled"
        assert events[-1].data["status"] == "completed"
        # Generous: the cancel crosses Redis, the cancelled run records its end, then the queue starts.
        assert started - asked < 10, f"the interrupt took {started - asked:.2f} s"
        print(f"interrupt across replicas: {started - asked:.3f} s from the request to the new run's start")
        rows = await on_a.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "user", "assistant"]
        assert [p["result"] for p in rows[1]["messages"][1]["parts"]] == [{"label": "done-a", "slept": 0.01},
                                                                          {"error": "cancelled"}]
        assert_valid_history(rows)


async def test_two_messages_at_once_on_two_replicas_get_one_order(replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("ra", text("Answer A."))
    gate.script("rb", text("Answer B."))
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_a.new_chat()
        results: dict[str, tuple[httpx.Headers, list[Event]]] = {}

        async def one(tag: str, api: Api) -> None:
            results[tag] = await send_events(api, chat, f"[[{tag}]] at once", multitask_strategy="enqueue")

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "ra", on_a)
            tg.start_soon(one, "rb", on_b)
        queued = [tag for tag, (headers, _) in results.items() if headers.get("x-run-state") == "queued"]
        assert len(queued) == 1
        started = "ra" if queued == ["rb"] else "rb"
        rows = await on_a.rows(chat)
        assert user_texts(rows) == [f"[[{started}]] at once", f"[[{queued[0]}]] at once"]
        assert [r["kind"] for r in rows] == ["user", "assistant", "user", "assistant"]
        assert_valid_history(rows)


async def test_a_queue_behind_a_dead_replica_is_started_by_another(replica: Replica, gate: GateServer) -> None:
    a, b = replica("--max-continuations", "0"), replica("--max-continuations", "0")  # the dead run ends
    gate.script("goes-on", text("Answered by the replica that lived."))
    async with a.api() as on_a, b.api() as on_b, anyio.create_task_group() as tg:
        chat, _, _ = await start_tool_run(on_a, gate, tg, "dies", "dies-never")  # its replica is killed
        async with on_b.send(chat, "[[goes-on]] next", multitask_strategy="enqueue") as response:
            assert response.headers["x-run-state"] == "queued"
            a.kill()
            events = [e async for e in read_events(response)]
        assert events[1].type == "run_started" and events[-1].data["status"] == "completed"
        rows = await on_b.rows(chat)
        assert user_texts(rows) == ["[[dies]] start", "[[goes-on]] next"]
        assert rows[1]["messages"][1]["parts"][0]["result"] == {"error": "interrupted"}
        assert_valid_history(rows)


async def test_rollback_on_b_cancels_the_run_on_a_and_branches_from_before_its_turn(replica: Replica,
                                                                                     gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("first-a", text("The first answer."))
    gate.script("stuck-a", calls(("gated", {"label": "never-rb"})))
    gate.script("redo-b", text("B answers instead."))
    async with a.api() as on_a, b.api() as on_b, anyio.create_task_group() as tg:
        chat = await on_a.new_chat()
        await on_a.run(chat, "[[first-a]] hello")
        answer = (await on_a.rows(chat))[-1]["id"]
        second: list[Event] = []

        async def run_on_a() -> None:
            second.extend(await on_a.run(chat, "[[stuck-a]] go"))

        tg.start_soon(run_on_a)
        await until(lambda: "wait:never-rb" in gate.events)
        _, events = await send_events(on_b, chat, "[[redo-b]] never mind", multitask_strategy="rollback")
        await until(lambda: bool(second) and second[-1].type == "run_finished")
        assert second[-1].data["status"] == "cancelled"
        assert events[0].type == "run_started" and events[-1].data["status"] == "completed"
        shown = await on_a.rows(chat)
        # The new turn answers the first answer (the cancelled turn's parent); the cancelled turn is beside it.
        assert user_texts(shown) == ["[[first-a]] hello", "[[redo-b]] never mind"]
        assert shown[2]["parent_id"] == answer and len(shown[2]["sibling_ids"]) == 2
        kept = (await on_b.client.get(f"/api/chats/{chat}/messages",
                                      params={"leaf": shown[2]["sibling_ids"][0]})).json()["messages"]
        assert user_texts(kept) == ["[[first-a]] hello", "[[stuck-a]] go"]
        assert_valid_history(kept)
        # Sequence numbers are the chat's (they order writes across branches): the shown branch skips the others'.
        assert [r["sequence_number"] for r in shown] == [1, 2, 5, 6]
