"""Replicas: any replica follows, resumes, cancels and approves any run; a dead replica's run is recovered.

Every test starts 2-3 real `toolwire serve --db postgresql://... --redis redis://...` processes on
loopback, sharing a fresh PostgreSQL database and one Redis, with the gate server as their model.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import anyio
import httpx
import orjson
import pytest
from bench.load.sse_client import SSEStream, open_stream

from tests.redis_server import RedisServer
from tests.server.support import TOKENS, Api, Event, GateServer, ServerProcess, calls, read_events, text, until
from tests.server.test_runs import assert_valid_history

pytestmark = pytest.mark.anyio

Replica = Callable[..., ServerProcess]


async def collect(api: Api, chat: str, after: str | None = None) -> list[Event]:
    async with api.follow(chat, after) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        return [event async for event in read_events(response)]


async def test_post_on_a_then_follow_and_resume_on_b_and_c_at_every_cut_point(replica: Replica,
                                                                            gate: GateServer) -> None:
    a, b, c = replica(), replica(), replica("--db-pool-size", "2")  # a small pool serves as well, if slower
    gate.script("cuts", calls(("gated", {"label": "cut-tool"}), preamble="Looking it up."),
                text("All done, and nothing was lost.", chunks=6))
    async with a.api() as on_a, b.api() as on_b, c.api() as on_c:
        chat = await on_a.new_chat()
        reference: list[Event] = []
        live: dict[int, list[Event]] = {}
        async with anyio.create_task_group() as tg, on_a.send(chat, "[[cuts]] go") as response:
            async def resume(cut: int, api: Api) -> None:
                live[cut] = await collect(api, chat, reference[cut].id)

            following = anyio.Event()

            async def from_the_start() -> None:
                async with on_b.follow(chat) as followed:
                    assert followed.status_code == 200, (await followed.aread()).decode()
                    events: list[Event] = []
                    async for event in read_events(followed):
                        events.append(event)
                        following.set()
                    live[-1] = events

            async for event in read_events(response):
                reference.append(event)
                if event.type == "tool_started":
                    await until(lambda: gate.waiting.get("cut-tool", 0) == 1)
                    # Mid-run: a follower from the start, and one resuming after every event so far. The run
                    # goes on only once the follower without a cursor is in (after the run it would get 204).
                    tg.start_soon(from_the_start)
                    for cut in range(len(reference)):
                        tg.start_soon(resume, cut, on_b if cut % 2 else on_c)
                    with anyio.fail_after(60):
                        await following.wait()
                    await anyio.sleep(0.5)
                    gate.release_tool("cut-tool")
        ids = [e.id for e in reference]
        assert reference[-1].type == "run_finished" and reference[-1].data["status"] == "completed"
        assert ids == [f"1-{i}" for i in range(1, len(ids) + 1)]
        assert [e.id for e in live[-1]] == ids
        for cut, events in live.items():
            if cut >= 0:
                assert [e.id for e in events] == ids[cut + 1:], f"live resume after {ids[cut]}"
                assert [e.data for e in events] == [e.data for e in reference[cut + 1:]]
        # After the run: every cut point again, on both other replicas.
        for cut in range(len(reference) - 1):
            api = on_b if cut % 2 else on_c
            assert [e.id for e in await collect(api, chat, ids[cut])] == ids[cut + 1:], f"resume after {ids[cut]}"
        async with on_b.follow(chat, ids[-1]) as response:
            assert response.status_code == 204  # the whole run was seen; nothing runs now


async def test_cancel_through_a_third_replica(replica: Replica, gate: GateServer) -> None:
    a, b, c = replica(), replica(), replica()
    gate.script("far-cancel", calls(("sleepy", {"seconds": 0.01, "label": "quick-one"}),
                                    ("gated", {"label": "far-stuck"})))
    async with a.api() as on_a, b.api() as on_b, c.api() as on_c:
        chat = await on_a.new_chat()
        followed: list[Event] = []
        async with anyio.create_task_group() as tg, on_a.send(chat, "[[far-cancel]] go") as response:
            run_id = response.headers["x-run-id"]
            events: list[Event] = []
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_result":
                    await until(lambda: gate.waiting.get("far-stuck", 0) == 1)

                    async def follow_on_b() -> None:
                        followed.extend(await collect(on_b, chat))

                    tg.start_soon(follow_on_b)
                    await anyio.sleep(0.3)
                    asked = time.monotonic()
                    reply = await on_c.client.post(f"/api/chats/{chat}/runs/{run_id}/cancel")
                    assert reply.status_code == 202, reply.text
            ended = time.monotonic()
        assert events[-1].data["status"] == "cancelled"
        assert ended - asked < 1.5, f"the cancel took {ended - asked:.2f} s to reach the run on another replica"
        assert followed[-1].type == "run_finished" and followed[-1].data["status"] == "cancelled"
        assert [e.id for e in followed] == [e.id for e in events]
        rows = await on_c.rows(chat)
        assert_valid_history(rows)
        assert [p["result"] for p in rows[1]["messages"][1]["parts"]] == [{"label": "quick-one", "slept": 0.01},
                                                                          {"error": "cancelled"}]


async def test_approve_on_b_a_run_paused_on_a(replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("far-approve", calls(("transfer", {"to": "alice", "amount": 5}), preamble="Paying."),
                text("Paid."))
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_a.new_chat()
        paused = await on_a.run(chat, "[[far-approve]] pay")
        assert paused[-1].data["status"] == "paused"
        [required] = [e.data for e in paused if e.type == "approval_required"]
        detail = await on_b.chat(chat)
        assert [x["approval_id"] for x in detail["paused"]["approvals"]] == [required["approval_id"]]
        async with anyio.create_task_group() as tg:
            watched: list[Event] = []

            async def watch_on_a() -> None:  # a client of A that saw the pause reconnects there
                watched.extend(await collect(on_a, chat, paused[-1].id))

            async with on_b.decide(chat, [{"approval_id": required["approval_id"], "approved": True}]) as response:
                assert response.status_code == 200
                tg.start_soon(watch_on_a)
                resumed = [e async for e in read_events(response)]
        assert resumed[0].data["resumed"] is True and resumed[-1].data["status"] == "completed"
        assert [e.id for e in watched] == [e.id for e in resumed]
        assert "transfer:alice:5" in gate.events
        again = await on_a.client.post(f"/api/chats/{chat}/approvals",
                                       json={"decisions": [{"approval_id": required["approval_id"],
                                                            "approved": True}]})
        assert again.status_code == 409  # decided once, whichever replica is asked


async def test_one_active_run_per_chat_across_replicas(replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    gate.script("busy-far", calls(("gated", {"label": "busy-far-tool"})), text("Done."))
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_a.new_chat()
        async with on_a.send(chat, "[[busy-far]] go", client_id="first") as first:
            run_id = first.headers["x-run-id"]
            async for event in read_events(first):
                if event.type == "tool_started":
                    break
        second = await on_b.client.post(f"/api/chats/{chat}/messages",
                                        json={"client_message_id": "second", "text": "me too"})
        assert second.status_code == 409 and second.json()["error"]["code"] == "run_active"
        # The same message again, on B: it attaches to the run A is running and follows it from its start.
        async with on_b.send(chat, "[[busy-far]] go", client_id="first") as retry:
            assert retry.status_code == 200 and retry.headers["x-run-id"] == run_id
            events: list[Event] = []
            async for event in read_events(retry):
                events.append(event)
                if event.type == "tool_started":
                    gate.release_tool("busy-far-tool")
        assert events[0].id == "1-1" and events[-1].data["status"] == "completed"
        assert [r["kind"] for r in await on_b.rows(chat)] == ["user", "tools_aggregate", "assistant"]


async def test_a_replica_killed_mid_tool_is_recovered_by_another_and_every_follower_closes(
        replica: Replica, gate: GateServer) -> None:
    lease = 1.0
    a, b, c = (replica("--max-continuations", "0", lease_seconds=lease) for _ in range(3))  # ended, not continued
    gate.script("die", calls(("sleepy", {"seconds": 0.01, "label": "finished-first"}),
                             ("gated", {"label": "dies-here"}), preamble="Two tools."))
    gate.script("after-death", text("Still here."))
    async with a.api() as on_a, b.api() as on_b, c.api() as on_c:
        chat = await on_a.new_chat()
        closed: dict[str, float] = {}
        ends: dict[str, list[Event]] = {}
        async with anyio.create_task_group() as tg:
            async with on_a.send(chat, "[[die]] go") as response:
                async for event in read_events(response):
                    if event.type == "tool_result":
                        break

            async def follow(name: str, api: Api) -> None:
                ends[name] = await collect(api, chat)
                closed[name] = time.monotonic()

            tg.start_soon(follow, "b", on_b)
            tg.start_soon(follow, "c", on_c)
            await until(lambda: gate.waiting.get("dies-here", 0) == 1)
            await anyio.sleep(0.3)
            a.kill()  # SIGKILL: no shutdown, no last words
            killed = time.monotonic()
        bound = lease + lease / 3 + 1.0  # the lease runs out, the next recovery round claims it, then publishes
        for name in ("b", "c"):
            last = ends[name][-1]
            assert last.type == "run_finished" and last.data["status"] == "interrupted", name
            assert closed[name] - killed < bound, f"{name} closed {closed[name] - killed:.2f} s after the kill"
            ids = [e.id for e in ends[name]]
            assert ids == [f"1-{i}" for i in range(1, len(ids) + 1)]  # no gap, no duplicate
        saved = [e for e in ends["b"] if e.type == "message_saved"]
        assert saved and saved[-1].data["row"]["kind"] == "tools_aggregate"
        rows = await on_b.rows(chat)
        assert_valid_history(rows)
        assert [(p["name"], p["result"]) for p in rows[1]["messages"][1]["parts"]] == [
            ("sleepy", {"label": "finished-first", "slept": 0.01}), ("gated", {"error": "interrupted"})]
        after = await on_b.run(chat, "[[after-death]] hello?")
        assert after[0].id == "2-1" and after[-1].data["status"] == "completed"
        first_end = ends["c"][-1].id
        assert [e.id for e in await collect(on_c, chat, first_end)] == [e.id for e in after]  # the next run
    gate.release_tool("dies-here")


async def test_stream_keys_expire_after_run_finished(replica: Replica, gate: GateServer,
                                                     redis_server: RedisServer) -> None:
    a = replica("--event-retention", "120")
    gate.script("ttl", calls(("gated", {"label": "ttl-tool"})), text("Done."))
    async with a.api() as on_a:
        chat = await on_a.new_chat()
        key = f"toolwire:events:{chat}"
        async with on_a.send(chat, "[[ttl]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    running = int(redis_server.command("TTL", key).strip(":\r\n"))
                    assert running > 3600  # while a run writes: only the one-day safety net
                    gate.release_tool("ttl-tool")
        finished = int(redis_server.command("TTL", key).strip(":\r\n"))
        assert 0 < finished <= 120
        assert "stream" in redis_server.command("TYPE", key)


async def test_redis_connections_stay_bounded_with_a_thousand_followers(replica: Replica,
                                                                        gate: GateServer,
                                                                        redis_server: RedisServer) -> None:
    a, b = replica(), replica("--max-user-requests", "2000")  # one user's thousand followers
    chats_count, per_chat = 20, 50
    async with a.api() as on_a:
        chats = [await on_a.new_chat() for _ in range(chats_count)]
        for number, chat in enumerate(chats):
            gate.script(f"many-{number}", calls(("gated", {"label": f"many-{number}"})), text("Done, all of you."))
            async with on_a.send(chat, f"[[many-{number}]] go") as response:
                async for event in read_events(response):
                    if event.type == "tool_started":
                        break
    host, port = b.url.removeprefix("http://").split(":")
    received: dict[int, list[bytes]] = {number: [] for number in range(chats_count * per_chat)}

    async def follow(number: int) -> SSEStream:
        return await open_stream(host, int(port), "GET", f"/api/chats/{chats[number % chats_count]}/stream",
                                 headers={"Authorization": f"Bearer {TOKENS['alice']}"},
                                 on_event=lambda event_id, _data, _at: received[number].append(event_id))

    streams: list[SSEStream] = []
    for first in range(0, len(received), 100):  # a hundred at a time: the followers connect in parallel
        streams += await asyncio.gather(*(follow(n) for n in range(first, min(first + 100, len(received)))))
    assert all(stream.status == 200 for stream in streams)
    await until(lambda: all(received.values()), timeout=30)
    clients = redis_server.command("CLIENT", "LIST")
    per_process: dict[str, int] = {}
    for line in clients.splitlines():
        name = next((f[5:] for f in line.split(" ") if f.startswith("name=toolwire:")), None)
        if name:
            process = name.split(":")[1]
            per_process[process] = per_process.get(process, 0) + 1
    assert len(per_process) == 2 and all(count <= 6 for count in per_process.values()), per_process
    for number in range(chats_count):
        gate.release_tool(f"many-{number}")
    with anyio.fail_after(60):
        await asyncio.gather(*(stream.closed for stream in streams))
    for number, ids in received.items():
        expected = [f"1-{i}".encode() for i in range(1, len(ids) + 1)]
        assert ids == expected, f"follower {number}"
        assert len(ids) == len(received[number % chats_count])  # the same whole run for every follower


async def test_rate_limits_are_counted_over_all_replicas(replica: Replica, gate: GateServer) -> None:
    a, b = replica("--runs-per-minute", "2"), replica("--runs-per-minute", "2")
    async with a.api() as on_a, b.api() as on_b:
        first, second, third = [await on_a.new_chat() for _ in range(3)]
        assert (await on_a.run(first, "one"))[-1].data["status"] == "completed"
        assert (await on_b.run(second, "two"))[-1].data["status"] == "completed"
        refused = await on_a.client.post(f"/api/chats/{third}/messages", json={"client_message_id": "3", "text": "x"})
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        async with b.api("bob") as bob:  # per user
            assert (await bob.run(await bob.new_chat(), "mine"))[-1].data["status"] == "completed"


async def test_a_draining_replica_refuses_new_runs_and_lets_running_ones_finish(replica: Replica,
                                                                              gate: GateServer) -> None:
    a, b = replica("--drain-seconds", "20"), replica()
    gate.script("drain", calls(("gated", {"label": "drain-tool"})), text("Finished during the drain."))
    async with a.api() as on_a, b.api() as on_b:
        chat, other = await on_a.new_chat(), await on_a.new_chat()
        events: list[Event] = []
        async with on_a.send(chat, "[[drain]] go") as response:
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_started":
                    assert a.process is not None
                    a.process.send_signal(signal.SIGTERM)
                    with anyio.fail_after(5):
                        while (await on_a.client.get("/readyz")).status_code != 503:  # noqa: ASYNC110
                            await anyio.sleep(0.05)
                    refused = await on_a.client.post(f"/api/chats/{other}/messages",
                                                     json={"client_message_id": "late", "text": "hi"})
                    assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
                    assert (await on_b.client.get("/readyz")).status_code == 200
                    assert (await on_b.run(other, "on the other replica"))[-1].data["status"] == "completed"
                    gate.release_tool("drain-tool")
        assert events[-1].data["status"] == "completed"
        assert a.process is not None and a.process.wait(timeout=15) == -signal.SIGTERM
        assert "Traceback" not in a.stderr()


async def test_start_up_says_what_to_configure_when_servers_would_not_share_their_state(
        replica: Replica, gate: GateServer) -> None:
    first = replica()
    with pytest.raises(RuntimeError) as alone:
        replica("--replica-wait", "0", redis=False)
    assert "start every one of them with --redis" in str(alone.value)
    assert "Traceback" not in str(alone.value)
    first.stop()
    solo = replica(redis=False)
    with pytest.raises(RuntimeError) as joined:
        replica("--replica-wait", "0")
    assert "without --redis is already serving" in str(joined.value)
    solo.stop()
    with pytest.raises(RuntimeError) as unreachable:
        replica("--redis", "redis://127.0.0.1:9/0")
    assert "Cannot reach Redis at redis://127.0.0.1:9/0" in str(unreachable.value)
    async with replica().api() as api:  # all gone: a replica starts again
        assert (await api.client.get("/readyz")).status_code == 200
    with pytest.raises(httpx.HTTPError):
        async with Api(solo.url, None) as gone:
            await gone.client.get("/healthz")


async def test_a_replica_at_capacity_sheds_new_runs_to_the_others(replica: Replica, gate: GateServer) -> None:
    a, b = replica("--max-runs", "1"), replica()
    gate.script("full", calls(("gated", {"label": "full-tool"})), text("Done."))
    async with a.api() as on_a, b.api() as on_b:
        busy, other = await on_a.new_chat(), await on_a.new_chat()
        async with on_a.send(busy, "[[full]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    shed = await on_a.client.post(f"/api/chats/{other}/messages",
                                                  json={"client_message_id": "m", "text": "hello"})
                    assert shed.status_code == 503 and shed.json()["error"]["code"] == "server_busy"
                    assert shed.headers["retry-after"] == "1"
                    assert (await on_b.run(other, "hello"))[-1].data["status"] == "completed"
                    gate.release_tool("full-tool")
        assert (await on_a.run(other, "and now here"))[-1].data["status"] == "completed"


async def _frames(response: httpx.Response) -> list[dict[str, object] | str]:
    """The `data:` payloads of a browser-protocol stream: JSON chunks, and `[DONE]` as it is."""
    frames: list[dict[str, object] | str] = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            payload = line[6:]
            frames.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return frames


async def test_the_browser_protocols_cross_replicas_too(replica: Replica, gate: GateServer) -> None:
    """An AG-UI run on A, resumed by a Vercel `useChat` page on B and stopped from C: one run, seen everywhere."""
    a, b, c = replica(), replica(), replica()
    gate.script("far-agui", calls(("gated", {"label": "far-agui-tool"}), preamble="Starting far away."),
                text("Never said."))
    thread = "replicas-thread-1"
    body = {"threadId": thread, "runId": "r1", "messages": [{"id": "u1", "role": "user", "content": "[[far-agui]] go"}]}
    got: dict[str, list[dict[str, object] | str]] = {}
    async with a.api() as on_a, b.api() as on_b, c.api() as on_c, anyio.create_task_group() as tg:
        async def agui() -> None:
            async with on_a.client.stream("POST", "/api/agui", json=body) as response:
                assert response.status_code == 200
                got["agui"] = await _frames(response)

        tg.start_soon(agui)
        await until(lambda: gate.waiting.get("far-agui-tool", 0) == 1)
        async with on_b.client.stream("GET", f"/api/chat/{thread}/stream") as resumed:
            assert resumed.status_code == 200
            stop = await on_c.client.post(f"/api/chat/{thread}/stop")
            assert stop.status_code == 202 and stop.json()["status"] == "cancelling"
            got["vercel"] = await _frames(resumed)
    gate.release_tool("far-agui-tool")
    vercel = [f for f in got["vercel"] if isinstance(f, dict)]
    assert vercel[0]["type"] == "start" and vercel[-1]["type"] == "abort" and got["vercel"][-1] == "[DONE]"
    assert any(f["type"] == "tool-input-available" and f["toolName"] == "gated" for f in vercel)
    agui_types = [f["type"] for f in got["agui"] if isinstance(f, dict)]
    assert agui_types[0] == "RUN_STARTED" and agui_types[-1] in ("RUN_FINISHED", "RUN_ERROR")
    async with c.api() as on_c:
        rows = await on_c.rows(thread)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate"]
        assert rows[1]["messages"][1]["parts"][0]["result"] == {"error": "cancelled"}
        assert (await on_c.client.get(f"/api/chat/{thread}/stream")).status_code == 204
