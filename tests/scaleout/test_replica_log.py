"""The shared event log across replicas: deleted chats, duplicate sends, and Redis restarting or freezing.

Every test starts real `toolwire serve` replicas on a fresh PostgreSQL database. The tests that stop,
restart or freeze Redis give their replicas a redis-server of their own (`RestartableRedis`), on a fixed
port, so that the session's Redis stays untouched.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import orjson
import pytest

from tests.redis_server import missing_redis
from tests.server.support import Api, Event, GateServer, ServerProcess, calls, read_events, text, until
from tests.services import free_port

pytestmark = pytest.mark.anyio

Replica = Callable[..., ServerProcess]


class RestartableRedis:
    """A redis-server on a fixed loopback port (no persistence) that a test stops, starts empty, or freezes."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.folder / "log").open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.folder), "--daemonize", "no"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start:\n{(self.folder / 'log').read_text()}")
            time.sleep(0.02)

    def _answers(self) -> bool:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                return b"PONG" in sock.recv(64)
        except OSError:
            return False

    def stop(self) -> None:
        """Kill it: whatever it held is gone (it keeps nothing on disk)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@pytest.fixture
def own_redis() -> Iterator[RestartableRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        missing_redis("redis-server was not found (Debian package: redis-server)")
    assert binary is not None
    folder = Path(tempfile.mkdtemp(prefix="toolwire-redis-restart-"))
    server = RestartableRedis(binary, folder)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.thaw()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _vercel_body(chat_id: str, message_id: str, text_: str) -> dict[str, object]:
    return {"id": chat_id, "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text",
                                                                                        "text": text_}]}]}


async def _vercel_frames(api: Api, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    async with api.client.stream(method, path, json=body) as response:
        return response.status_code, await response.aread()


# -- A. a deleted chat's events are never served again ------------------------------------------------

async def test_a_deleted_chats_events_never_reach_the_next_owner_of_its_id_on_any_replica(
        replica: Replica, gate: GateServer) -> None:
    a, b = replica(), replica()
    secret = "alice-secret-7f3a"
    gate.script("alice-run", calls(("sleepy", {"seconds": 0.01, "label": secret}), preamble="Looking."),
                text(f"Alice's answer {secret}."))
    gate.script("bob-run", calls(("gated", {"label": "bob-tool"})), text("Bob's answer."))
    chat = "shared-client-id-1"
    async with a.api("alice") as alice_a, b.api("alice") as alice_b, b.api("bob") as bob_b:
        # Alice's run on A, followed from B while it runs: B keeps a copy of the chat's log.
        followed: list[bytes] = []
        alice_body = _vercel_body(chat, "u1", "[[alice-run]] go")
        async with anyio.create_task_group() as tg, alice_a.client.stream("POST", "/api/chat",
                                                                          json=alice_body) as response:
            assert response.status_code == 200
            alice_run = response.headers["x-run-id"]

            async def follow_on_b() -> None:
                followed.append((await _vercel_frames(alice_b, "GET", f"/api/chat/{chat}/stream"))[1])

            tg.start_soon(follow_on_b)
            alice_frames = await response.aread()
        assert secret.encode() in alice_frames
        replay = [e async for e in _native_events(alice_b, chat, "1-1")]
        assert replay and replay[-1].type == "run_finished"  # B answers Alice's replay (from its copy)
        deleted = await alice_a.client.delete(f"/api/chats/{chat}")
        assert deleted.status_code == 204

        # Bob uses the same id, on B, at once: his streams hold his run and nothing of Alice's.
        seen: list[bytes] = []
        bob_body = _vercel_body(chat, "b1", "[[bob-run]] hi")
        async with anyio.create_task_group() as tg, bob_b.client.stream("POST", "/api/chat", json=bob_body) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            bob_run = response.headers["x-run-id"]
            await until(lambda: gate.waiting.get("bob-tool", 0) == 1)
            bob_native: list[Event] = []

            async def native() -> None:
                bob_native.extend([e async for e in _native_events(bob_b, chat, None)])

            async def vercel_resume() -> None:
                seen.append((await _vercel_frames(bob_b, "GET", f"/api/chat/{chat}/stream"))[1])

            tg.start_soon(native)
            tg.start_soon(vercel_resume)
            await anyio.sleep(0.5)
            gate.release_tool("bob-tool")
            seen.append(await response.aread())
        replayed = [e async for e in _native_events(bob_b, chat, "1-1")]
        seen.append(orjson.dumps([e.data for e in replayed]))
        seen.append(orjson.dumps([e.data for e in bob_native]))
        for body in seen:
            assert alice_run.encode() not in body and secret.encode() not in body, body[:400]
        assert bob_native and bob_native[0].data["run_id"] == bob_run and bob_native[-1].type == "run_finished"
        assert replayed and {e.data["run_id"] for e in replayed} == {bob_run}
        assert len(seen) == 4 and b"bob-tool" in seen[0]  # the Vercel resume saw Bob's turn


async def _native_events(api: Api, chat: str, after: str | None) -> AsyncIterator[Event]:
    async with api.follow(chat, after) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        async for event in read_events(response):
            yield event


# -- B. duplicate sends to several replicas at once -------------------------------------------------

async def test_the_same_message_sent_to_two_replicas_at_once_attaches_every_copy_to_the_live_run(
        replica: Replica, gate: GateServer) -> None:
    a, b = (replica("--runs-per-minute", "100000", "--writes-per-minute", "100000", "--max-user-requests", "1000")
            for _ in range(2))
    chats_count, per_chat = 30, 6
    gate.script("twice", text("Answered once.", chunks=3))
    statuses: dict[int, int] = {}
    runs: dict[str, set[str]] = {}
    async with a.api() as on_a, b.api() as on_b:
        chats = [await on_a.new_chat() for _ in range(chats_count)]
        async with anyio.create_task_group() as tg:
            for chat in chats:  # a first run each: the second waits for its end to be in the log before starting
                tg.start_soon(on_a.run, chat, "[[twice]] first")

        async def send(api: Api, chat: str) -> None:
            body = {"client_message_id": "same-message", "text": "[[twice]] once please"}
            async with api.client.stream("POST", f"/api/chats/{chat}/messages", json=body) as response:
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                if response.status_code == 200:
                    runs.setdefault(chat, set()).add(response.headers["x-run-id"])
                    events = [e async for e in read_events(response)]
                    assert events[0].id == "2-1" and events[-1].type == "run_finished", [e.id for e in events]
                else:
                    await response.aread()

        async with anyio.create_task_group() as tg:
            for chat in chats:
                for number in range(per_chat):
                    tg.start_soon(send, on_a if number % 2 else on_b, chat)
    print(f"duplicate sends: {chats_count * per_chat}, answers by status: {statuses}")
    assert statuses == {200: chats_count * per_chat}
    assert all(len(ids) == 1 for ids in runs.values())


# -- C. Redis restarting empty, or frozen, mid-run ---------------------------------------------------

async def _events_after(api: Api, chat: str, after: str, until_type: str = "run_finished",
                        deadline: float = 60.0) -> tuple[int, list[Event]]:
    """Resume after `after`; the status and the events up to `until_type` (or the stream's end)."""
    events: list[Event] = []
    with anyio.fail_after(deadline):
        async with api.follow(chat, after) as response:
            if response.status_code != 200:
                await response.aread()
                return response.status_code, events
            async for event in read_events(response):
                events.append(event)
                if event.type == until_type:
                    break
    return 200, events


def _numbers(events: list[Event]) -> list[int]:
    return [int(str(e.id).split("-")[1]) for e in events]


@pytest.mark.parametrize("fault", ["restart", "freeze"])
async def test_a_follower_on_another_replica_resumes_without_a_gap_after_redis_restarts_empty_or_freezes(
        replica: Replica, gate: GateServer, own_redis: RestartableRedis, fault: str) -> None:
    a, b = (replica("--redis", own_redis.url, redis=False) for _ in range(2))
    label = f"outage-{fault}"
    gate.script(label, calls(("gated", {"label": label}), preamble="Waiting for the gate."),
                text("Finished after the outage.", chunks=5))
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_a.new_chat()
        live: list[Event] = []
        async with anyio.create_task_group() as tg, on_a.send(chat, f"[[{label}]] go") as response:
            async def live_follower_on_b() -> None:  # stays connected through the outage
                live.extend((await _events_after(on_b, chat, "1-1"))[1])

            stream = read_events(response)
            async for event in stream:
                if event.type == "tool_started":
                    break
            before = event.id
            assert before is not None
            await until(lambda: gate.waiting.get(label, 0) == 1)
            tg.start_soon(live_follower_on_b)
            # A follower on B that saw the run up to here, then lost its connection.
            status, seen = await _events_after(on_b, chat, "1-1", until_type="tool_started")
            assert status == 200 and seen[-1].id == before
            await anyio.sleep(0.5)
            if fault == "restart":
                own_redis.stop()
                await anyio.sleep(3)
                own_redis.start()  # empty
            else:
                own_redis.freeze()
                await anyio.sleep(3)
                own_redis.thaw()
            back = time.monotonic()
            # The follower on B resumes with its last cursor.
            with anyio.fail_after(30):
                async with on_b.follow(chat, before) as resumed:
                    recovered = time.monotonic() - back
                    assert resumed.status_code == 200, (await resumed.aread()).decode()
                    gate.release_tool(label)
                    after_outage = [e async for e in read_events(resumed)]
            rest = [e async for e in stream]
        assert rest[-1].type == "run_finished" and rest[-1].data["status"] == "completed"
        ids = _numbers(after_outage)
        first = int(before.split("-")[1])
        assert ids == list(range(first + 1, first + 1 + len(ids))), ids  # no gap, no duplicate
        assert after_outage[-1].type == "run_finished" and after_outage[-1].id == rest[-1].id
        assert _numbers(live) == list(range(2, 2 + len(live))) and live[-1].id == rest[-1].id, _numbers(live)
        replay = await _events_after(on_b, chat, "1-1")
        assert replay[0] == 200 and _numbers(replay[1]) == list(range(2, 2 + len(replay[1])))
        print(f"Redis {fault}: a follower on B resumed {recovered:.2f} s after Redis was back; "
              f"{len(after_outage)} events after its cursor, no gap, no duplicate")


async def test_a_replica_stopped_while_redis_is_away_exits_after_its_grace(
        replica: Replica, gate: GateServer, own_redis: RestartableRedis) -> None:
    """SIGTERM with a run going and Redis unreachable: the run is interrupted and its end stored, and the process
    exits. Its end's wait for Redis to take its events (inside the run's shielded end) used to hold the shutdown
    for good: the process was still there 40 s later."""
    a = replica("--redis", own_redis.url, redis=False)
    gate.script("away", calls(("gated", {"label": "away"}), preamble="Waiting."), text("Never streamed."))
    async with a.api() as on_a:
        chat = await on_a.new_chat()
        async with on_a.send(chat, "[[away]] go") as response:
            async for event in read_events(response):
                if event.type == "tool_started":
                    break
            await until(lambda: gate.waiting.get("away", 0) == 1)
            own_redis.stop()
            process = a.process
            assert process is not None
            process.send_signal(signal.SIGTERM)
            started = time.monotonic()
            code = await anyio.to_thread.run_sync(lambda: process.wait(timeout=40))
            stopped_in = time.monotonic() - started
    print(f"stopped {stopped_in:.1f} s after SIGTERM with Redis away")
    assert code == -signal.SIGTERM
    assert stopped_in < 15  # the grace (5 s), then the log's last try (5 s); never a hang
    own_redis.start()
    b = replica("--redis", own_redis.url, redis=False)
    async with b.api() as on_b:
        stored = (await on_b.client.get(f"/api/chats/{chat}/messages")).json()
        assert [run["status"] for run in stored["runs"]] == ["interrupted"], stored["runs"]


# -- D. a tool call starting while Redis is down ------------------------------------------------------

async def test_a_tool_call_starting_while_redis_is_down_keeps_its_run_and_streams_its_result(
        replica: Replica, gate: GateServer, own_redis: RestartableRedis) -> None:
    a, b = (replica("--redis", own_redis.url, redis=False) for _ in range(2))
    gate.script("down", calls(("gated", {"label": "before-outage"})),
                calls(("sleepy", {"seconds": 0.01, "label": "during-outage"})), text("All stored and streamed."))
    async with a.api() as on_a, b.api() as on_b:
        chat, other = await on_a.new_chat(), await on_a.new_chat()
        async with on_a.send(chat, "[[down]] go") as response:
            events: list[Event] = []
            async for event in read_events(response):
                events.append(event)
                if event.type == "tool_started" and event.data["call"]["name"] == "gated":
                    await until(lambda: gate.waiting.get("before-outage", 0) == 1)
                    own_redis.stop()
                    gate.release_tool("before-outage")
                    await until(lambda: "start:during-outage" in gate.events)
                    # Meanwhile, requests that need Redis answer 503 with a code and Retry-After.
                    started = time.monotonic()
                    refused = await on_b.client.post(f"/api/chats/{other}/messages",
                                                     json={"client_message_id": "m", "text": "hello"})
                    assert refused.status_code == 503, refused.text
                    assert refused.json()["error"]["code"] == "unavailable" and refused.headers["retry-after"]
                    resume = await on_b.client.get(f"/api/chats/{chat}/stream", headers={"Last-Event-ID": "1-1"})
                    assert resume.status_code == 503 and resume.headers["retry-after"], resume.text
                    answered = time.monotonic() - started
                    await anyio.sleep(2)
                    own_redis.start()
                    back = time.monotonic()
        ended = time.monotonic() - back
        assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed", events[-1].data
        ids = _numbers(events)
        assert ids == list(range(1, len(ids) + 1))
        results = [e.data for e in events if e.type == "tool_result"]
        streamed = orjson.dumps(results)
        assert b"during-outage" in streamed
        rows = await on_b.rows(chat)
        stored = [p["result"] for row in rows if row["kind"] == "tools_aggregate" for p in row["messages"][1]["parts"]]
        assert {"label": "during-outage", "slept": 0.01} in stored
        assert (await on_b.run(other, "after the outage"))[-1].data["status"] == "completed"
        print(f"Redis down during a tool call: run completed, {len(ids)} events streamed without a gap, the last "
              f"{ended:.2f} s after Redis was back; 503 answers took {answered:.2f} s")
