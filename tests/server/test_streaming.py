"""The event stream: delivered as it happens, results out of order, resumable at every event, saved first."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.server.support import Event, GateServer, ServerProcess, calls, read_events, text, types, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


def without_siblings(row: dict[str, Any]) -> dict[str, Any]:
    """A row as stored: `sibling_ids` belongs to the branch it was read on (GET messages), not to the row."""
    return {k: v for k, v in row.items() if k != "sibling_ids"}


async def test_each_text_delta_reaches_the_client_before_the_provider_has_finished(
        server: ServerProcess, gate: GateServer) -> None:
    pieces = ["One", " two", " three", " four."]
    script = gate.script("incremental", text("".join(pieces), chunks=pieces), gated=True)
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "[[incremental]] count") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            assert response.headers["x-accel-buffering"] == "no"
            run_id = response.headers["x-run-id"]
            assert response.headers["location"] == f"/api/chats/{chat}/stream"
            received: list[str] = []
            events: list[Event] = []
            script.release()
            async for event in read_events(response):
                events.append(event)
                if event.type == "text_delta":
                    received.append(event.data["text"])
                    # The provider has handed over exactly the frames up to this delta and nothing after it
                    # (`handed`, not `sent`: the count after a frame's write may lag the client's read of it).
                    assert script.handed == len(received) + 1
                    assert script.finished == 0
                    if len(received) < len(pieces):
                        script.release()
                    else:
                        script.open()
    assert received == pieces
    assert types(events, skip=()) == ["run_started", "step_started", *["text_delta"] * 4, "usage", "finish",
                                      "message_end", "message_saved", "step_finished", "run_finished"]
    assert {e.data["run_id"] for e in events} == {run_id}
    assert [e.id for e in events] == [f"1-{i}" for i in range(1, len(events) + 1)]
    assert events[-1].data["status"] == "completed" and events[-1].data["error"] is None


async def test_tool_results_arrive_in_completion_order_and_are_stored_in_call_order(
        server: ServerProcess, gate: GateServer) -> None:
    gate.script("order", calls(("sleepy", {"seconds": 0.6, "label": "a"}), ("sleepy", {"seconds": 0.2, "label": "b"}),
                               ("sleepy", {"seconds": 0.4, "label": "c"}), preamble="Three at once."),
                text("All three are done."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[order]] go")
        rows = [without_siblings(r) for r in await api.rows(chat)]
    results = [e for e in events if e.type == "tool_result"]
    assert [r.data["result"]["result"]["label"] for r in results] == ["b", "c", "a"]
    assert all(r.data["step"] == 0 for r in results)
    flow = types(events)
    first_step_end = flow.index("step_finished")
    assert flow.index("message_saved") < first_step_end
    assert max(i for i, kind in enumerate(flow) if kind == "tool_result") < flow.index("message_saved")
    assert flow[-1] == "run_finished" and events[-1].data["steps"] == 2
    assert [(r["sequence_number"], r["kind"]) for r in rows] == [(1, "user"), (2, "tools_aggregate"),
                                                                 (3, "assistant")]
    call_message, result_message = rows[1]["messages"]
    assert [p["arguments"]["label"] for p in call_message["parts"] if p["type"] == "tool_call"] == ["a", "b", "c"]
    assert [p["result"]["label"] for p in result_message["parts"]] == ["a", "b", "c"]
    assert rows[2]["messages"][0]["parts"][0]["text"] == "All three are done."
    saved = [e.data["row"] for e in events if e.type == "message_saved"]
    assert saved == rows[1:]  # what the stream said was saved is exactly what is stored


async def test_every_message_saved_is_already_readable(server: ServerProcess, gate: GateServer) -> None:
    gate.script("saved", calls(("sleepy", {"seconds": 0.05, "label": "x"})), calls(("sleepy", {"seconds": 0.05,
                                                                                               "label": "y"})),
                text("Done twice."))
    async with server.api() as api, server.api() as reader:
        chat = await api.new_chat()
        checked = 0
        async with api.send(chat, "[[saved]] go") as response:
            async for event in read_events(response):
                if event.type == "message_saved":
                    number = event.data["row"]["sequence_number"]
                    stored = {r["sequence_number"]: r for r in await reader.rows(chat)}
                    assert number in stored, f"message_saved {number} published before it was readable"
                    assert without_siblings(stored[number]) == event.data["row"]
                    checked += 1
    assert checked == 3


async def record_run(server: ServerProcess, gate: GateServer, tag: str) -> tuple[str, list[Event]]:
    gate.script(tag, calls(("sleepy", {"seconds": 0.05, "label": "p"}), ("sleepy", {"seconds": 0.1, "label": "q"}),
                           preamble="Looking."), text("Both answered."))
    async with server.api() as api:
        chat = await api.new_chat()
        return chat, await api.run(chat, f"[[{tag}]] go")


async def test_reconnecting_after_any_event_of_a_finished_run_gives_exactly_the_rest(
        server: ServerProcess, gate: GateServer) -> None:
    chat, events = await record_run(server, gate, "every-cut")
    assert len(events) > 20
    async with server.api() as api:
        for k, event in enumerate(events):
            async with api.follow(chat, after=event.id) as response:
                if k == len(events) - 1:
                    assert response.status_code == 204  # after run_finished there is nothing to follow
                    continue
                assert response.status_code == 200
                rest = [e async for e in read_events(response)]
            assert [(e.id, e.data) for e in rest] == [(e.id, e.data) for e in events[k + 1:]], f"cut after {k}"
        async with api.follow(chat) as response:
            assert response.status_code == 204  # no cursor and nothing running


async def test_disconnecting_and_resuming_a_live_run_loses_and_repeats_nothing(
        server: ServerProcess, gate: GateServer) -> None:
    words = [f" w{i}" for i in range(12)]
    script = gate.script("live", calls(("gated", {"label": "live-tool"}), preamble="Wait."),
                         text("".join(words), chunks=words), gated=True)
    async with server.api() as api, server.api() as watcher:
        chat = await api.new_chat()
        complete: list[Event] = []

        async def watch() -> None:
            await until(lambda: script.requests > 0)
            async with watcher.follow(chat) as response:  # no cursor: the whole current run
                assert response.status_code == 200
                complete.extend([e async for e in read_events(response)])

        pieces: list[list[Event]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            async with api.send(chat, "[[live]] go") as response:
                first: list[Event] = []
                async for event in read_events(response):
                    first.append(event)
                    if event.type == "run_started":
                        break  # disconnect before the model said anything (its frames wait for releases)
            pieces.append(first)
            last = first[-1].id
            released = 0
            while not (pieces[-1] and pieces[-1][-1].type == "run_finished"):
                script.release(2)
                released += 2
                if released == 6:
                    gate.release_tool("live-tool")
                piece: list[Event] = []
                async with api.follow(chat, after=last) as response:
                    assert response.status_code == 200
                    with anyio.move_on_after(0.5):  # the run may be waiting for the next release
                        async for event in read_events(response):
                            piece.append(event)
                            if len(piece) == 3:
                                break  # disconnect after a few events, wherever that is
                pieces.append(piece)
                if piece:
                    last = piece[-1].id
                if released > 40:
                    script.open()
        stitched = [e for piece in pieces for e in piece]
    assert [e.id for e in stitched] == [e.id for e in complete]
    assert [e.data for e in stitched] == [e.data for e in complete]
    assert complete[-1].type == "run_finished" and complete[-1].data["status"] == "completed"
    assert len(pieces) > 5


async def test_cursor_errors_are_clear(serve: object, gate: GateServer) -> None:
    server = serve("--max-events-per-chat", "12")  # type: ignore[operator]
    gate.script("short", calls(("sleepy", {"seconds": 0.01, "label": "s"})), text("a b c d e f g h"))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[short]] go")
        assert len(events) > 12
        for bad, code in (("nonsense", 400), ("1-x", 400), ("9-1", 400), ("1-9999", 400)):
            async with api.follow(chat, after=bad) as response:
                body = await response.aread()
                assert response.status_code == code, (bad, body)
                assert b'"invalid_cursor"' in body
        async with api.follow(chat, after=events[1].id) as response:  # dropped from the log by now
            assert response.status_code == 410
            assert b'"cursor_expired"' in await response.aread()
        async with api.follow(chat, after=events[-3].id) as response:  # still kept
            assert response.status_code == 200
            assert [e.id for e in [e async for e in read_events(response)]] == [e.id for e in events[-2:]]
        response = await api.client.get(f"/api/chats/{chat}/stream", params={"after": events[-5].id})
        assert response.status_code == 200  # ?after= works like Last-Event-ID
