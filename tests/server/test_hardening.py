"""Production hardening of `toolwire serve`: bad cursors, short secrets, quotas on writes, hostile bodies.

Each test runs the real command (`python -m toolwire serve`) and talks to it over loopback, on SQLite and
PostgreSQL where the database takes part.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from tests.server.conftest import SQLITE_ONLY
from tests.server.support import GateServer, ServerProcess, calls, read_events, text

pytestmark = pytest.mark.anyio


async def test_cursors_beyond_32_bits_are_invalid_not_server_errors(serve: Callable[..., ServerProcess],
                                                                    gate: GateServer) -> None:
    server = serve()
    gate.script("c", text("Stored."))
    async with server.api() as api:
        chat = await api.new_chat()
        assert (await api.run(chat, "[[c]] hi"))[-1].data["status"] == "completed"
        for cursor in ("2147483648-1", "1-2147483648", "999999999999999-0", "4294967296-0"):
            for how in ("header", "query"):
                if how == "header":
                    response = await api.client.get(f"/api/chats/{chat}/stream", headers={"Last-Event-ID": cursor})
                else:
                    response = await api.client.get(f"/api/chats/{chat}/stream", params={"after": cursor})
                assert response.status_code == 400, (cursor, how, response.text)
                assert response.json()["error"]["code"] == "invalid_cursor"
            # The Vercel stream resumes from the active run's start; a cursor it is sent changes nothing.
            resumed = await api.client.get(f"/api/chat/{chat}/stream", headers={"Last-Event-ID": cursor})
            assert resumed.status_code == 204, resumed.text
        rows = await api.client.get(f"/api/chats/{chat}/messages", params={"after": "2147483648"})
        assert rows.status_code == 200 and rows.json()["messages"] == []  # a sequence number beyond every row
        # The largest cursor that fits is still an ordinary one: this chat has no such event.
        largest = await api.client.get(f"/api/chats/{chat}/stream", headers={"Last-Event-ID": "2147483647-0"})
        assert largest.status_code == 400 and largest.json()["error"]["code"] == "invalid_cursor"


# Redaction happens before the store; PostgreSQL stores tool results in test_streaming's
# test_tool_results_arrive_in_completion_order_and_are_stored_in_call_order[postgres].
@SQLITE_ONLY
async def test_a_short_api_key_is_not_redacted_from_results(serve: Callable[..., ServerProcess],
                                                           gate: GateServer) -> None:
    server = serve("--api-key", "x", "--redact", "ab", "--redact", "long-enough-secret")
    gate.script("r", calls(("big", {"size": 12, "text": "ab x long-enough-secret"})), text("Seen."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[r]] show")
        rows = await api.rows(chat)
    [streamed] = [e.data["result"]["result"] for e in events if e.type == "tool_result"]
    stored = rows[1]["messages"][1]["parts"][0]["result"]
    assert streamed == stored == {"text": "ab x [REDACTED]", "filler": "x" * 12}


def _peak_rss(pid: int) -> int:
    """The most memory (resident) the process ever had, in bytes (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no VmHWM")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _history_body(route: str, size: int) -> bytes:
    """A protocol request as its clients send it, with `size` bytes of earlier messages."""
    filler = "The weather in Paris is mild today, and tomorrow it will rain a little. " * 2
    if route == "/api/chat":
        earlier: dict[str, Any] = {"id": "m", "role": "assistant", "parts": [{"type": "text", "text": filler}]}
        last: dict[str, Any] = {"id": "last", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        count = size // len(orjson.dumps(earlier))
        return orjson.dumps({"id": "attack", "messages": [*[earlier] * count, last], "trigger": "submit-message"})
    earlier = {"id": "m", "role": "assistant", "content": filler}
    count = size // len(orjson.dumps(earlier))
    return orjson.dumps({"threadId": "attack", "runId": "r", "messages": [
        *[earlier] * count, {"id": "last", "role": "user", "content": "hi"}]})


_HEALTH_POLLER = """
import http.client, json, os, socket, sys, time
host, port, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
connection = http.client.HTTPConnection(host, port, timeout=30)
connection.connect()
connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed-ACK stalls of our own
latencies = []
while not os.path.exists(stop):
    started = time.perf_counter()
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    assert response.status == 200, response.status
    latencies.append(time.perf_counter() - started)
    time.sleep(0.01)
print(json.dumps(latencies[1:]))  # the first one connects
"""

_STALL_SECONDS = 0.1
"""The longest a health check may wait on an idle machine. What it guards against is the event loop being held
by the attack's bodies: read there, a 3.9 MB body holds it tens of milliseconds (msgspec, history_bodies.py),
four of them sent at once about 0.1 s or more, and parsing any of them into objects takes seconds."""


def _health_bound() -> float:
    """`_STALL_SECONDS`, times the runnable processes per core (the load average over the last minute) when
    there are more than one: a process then gets that fraction of a core, and what the server does on its
    event loop for each request (for the native routes, reading their 1 MB bodies) takes that many times as
    long. CI's two cores have been seen at load 15 (0.75 s); an idle machine keeps 0.1 s."""
    return _STALL_SECONDS * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


async def _attack(server: ServerProcess, bodies: list[tuple[str, bytes]],
                  folder: Path) -> tuple[list[int], list[float], int, float]:
    """Send the bodies at once (as `carol`) while another process asks /healthz every 10 ms; the attack's
    answers, the health checks' latencies, the growth of the server's peak memory and the bound the
    latencies must stay under on this machine now (`_health_bound`)."""
    assert server.process is not None
    pid = server.process.pid
    before = _peak_rss(pid)
    statuses: list[int] = []
    stop = folder / "stop-polling"
    stop.unlink(missing_ok=True)
    host, port = server.url.removeprefix("http://").split(":")
    # Another process: the test's own event loop is busy writing the bodies, and must not be what is timed.
    poller = await anyio.open_process([sys.executable, "-c", _HEALTH_POLLER, host, port, str(stop)])
    async with poller:
        try:
            await anyio.sleep(0.5)
            async with server.api("carol") as carol:
                async def send(route: str, body: bytes) -> None:
                    try:
                        response = await carol.client.post(route, content=body, timeout=120,
                                                           headers={"content-type": "application/json"})
                        statuses.append(response.status_code)
                    except httpx.TransportError:  # refused before the whole body was sent
                        statuses.append(0)

                async with anyio.create_task_group() as attackers:
                    for route, body in bodies:
                        attackers.start_soon(send, route, body)
            await anyio.sleep(0.2)
        finally:
            stop.touch()
        assert poller.stdout is not None
        output = b"".join([chunk async for chunk in poller.stdout])
    return statuses, orjson.loads(output), _peak_rss(pid) - before, _health_bound()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_history_bodies_are_bounded_in_memory_and_never_stall_other_clients(
        serve: Callable[..., ServerProcess], gate: GateServer, tmp_path: Path) -> None:
    server = serve()
    async with server.api("alice") as alice:  # the server is warm: every module the attack reaches is loaded
        assert (await alice.client.get("/healthz")).status_code == 200
    huge = [(route, _history_body(route, 15_500_000)) for route in ("/api/chat", "/api/agui") for _ in range(2)]
    statuses, latencies, growth, bound = await _attack(server, huge, tmp_path)
    print(f"16 MB x4: answers {statuses}, peak memory growth {growth / 1e6:.0f} MB, /healthz median "
          f"{sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms, max "
          f"{max(latencies) * 1000:.0f} ms over {len(latencies)} checks (bound {bound * 1000:.0f} ms)")
    assert all(status in (0, 413) for status in statuses), statuses
    assert growth < 50_000_000
    assert max(latencies) < bound

    # Bodies just under the cap are read, in worker processes: the server holds little more than the bodies.
    full = [(route, _history_body(route, 3_900_000)) for route in ("/api/chat", "/api/agui") for _ in range(2)]
    await _attack(server, full[1:3], tmp_path)  # the workers start (a second each, once): not what is measured
    statuses, latencies, growth, bound = await _attack(server, full, tmp_path)
    workers = [_peak_rss(child) for child in _children(server.process.pid)]  # type: ignore[union-attr]
    print(f"3.9 MB x4: answers {statuses}, server peak memory growth {growth / 1e6:.0f} MB, workers' peak "
          f"{[round(w / 1e6) for w in workers]} MB, /healthz median {sorted(latencies)[len(latencies) // 2] * 1000:.1f} "
          f"ms, max {max(latencies) * 1000:.0f} ms over "
          f"{len(latencies)} checks (bound {bound * 1000:.0f} ms)")
    assert all(status in (200, 409) for status in statuses), statuses  # 409: the chat's run is already going
    assert growth < 6 * sum(len(body) for _, body in full)
    assert max(latencies) < bound

    # The native routes' bodies (up to --max-body-bytes) are validated without building what they do not use.
    junk = b'{"title": "t", "unused": [' + b",".join([b"[]"] * 330_000) + b"]}"
    statuses, latencies, growth, bound = await _attack(server, [("/api/chats", junk)] * 4, tmp_path)
    print(f"1 MB x4 (native): answers {statuses}, server peak memory growth {growth / 1e6:.0f} MB, /healthz median "
          f"{sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms, max {max(latencies) * 1000:.0f} ms "
          f"(bound {bound * 1000:.0f} ms)")
    assert statuses == [201] * 4
    assert max(latencies) < bound


# The limiter counts in memory, before the store; PostgreSQL's chat writes: test_branches, test_runs [postgres].
@SQLITE_ONLY
async def test_every_write_is_rate_limited_per_user_before_its_body_is_read(serve: Callable[..., ServerProcess]) -> None:
    server = serve("--writes-per-minute", "6")
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat()
        other = await alice.new_chat()
        assert (await alice.client.patch(f"/api/chats/{chat}", json={"title": "a"})).status_code == 200
        assert (await alice.client.patch(f"/api/chats/{chat}", json={"title": "b"})).status_code == 200
        assert (await alice.client.delete(f"/api/chats/{other}")).status_code == 204
        assert (await alice.client.post("/api/chats", json={})).status_code == 201  # the sixth write
        refused = [
            await alice.client.post("/api/chats", json={}),
            await alice.client.patch(f"/api/chats/{chat}", json={"title": "c"}),
            await alice.client.delete(f"/api/chats/{chat}"),
            await alice.client.post(f"/api/chats/{chat}/messages", json={"client_message_id": "1", "text": "hi"}),
            await alice.client.post(f"/api/chats/{chat}/approvals", json={"decisions": []}),
            await alice.client.post(f"/api/chats/{chat}/runs/run_x/cancel"),
            # Refused before the body is read: not even that it is not JSON is looked at.
            await alice.client.post("/api/chat", content=b"not json", headers={"content-type": "application/json"}),
            await alice.client.post("/api/agui", content=b"not json", headers={"content-type": "application/json"}),
            await alice.client.post("/api/chat/some-id/stop"),
        ]
        for response in refused:
            assert response.status_code == 429, (response.request.method, response.request.url, response.text)
            assert response.json()["error"]["code"] == "rate_limited"
            assert "writes" in response.json()["error"]["message"]
            assert int(response.headers["retry-after"]) >= 1
        assert (await alice.client.get(f"/api/chats/{chat}")).json()["title"] == "b"  # nothing was written
        assert len((await alice.client.get("/api/chats")).json()["chats"]) == 2  # reads are not writes
        assert (await bob.client.post("/api/chats", json={})).status_code == 201  # per user


# Counted in memory per user, above the store (follows on PostgreSQL: test_streaming [postgres]).
@SQLITE_ONLY
async def test_requests_at_once_are_capped_per_user(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--max-user-requests", "2")
    gate.script("hold", calls(("gated", {"label": "hold"})), text("Done."))
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat()
        async with alice.send(chat, "[[hold]] go") as sending:
            assert sending.status_code == 200
            async for event in read_events(sending):  # (leaving the loop closes this response)
                if event.type == "tool_started":
                    break
        async with alice.follow(chat) as first, alice.follow(chat) as second:  # two requests: streams
            assert first.status_code == second.status_code == 200
            for response in (await alice.client.get("/api/chats"), await alice.client.post("/api/chats", json={})):
                assert response.status_code == 429, response.text
                assert response.json()["error"]["code"] == "too_many_requests"
                assert response.headers["retry-after"] == "1"
            assert (await bob.client.get("/api/chats")).status_code == 200  # per user
            gate.release_tool("hold")
            for stream in (first, second):
                assert [e.type async for e in read_events(stream)][-1] == "run_finished"
        # The streams are over: their places are free again.
        assert (await alice.client.get("/api/chats")).status_code == 200
        assert (await alice.client.post("/api/chats", json={})).status_code == 201
