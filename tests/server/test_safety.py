"""Who may see what, and the limits: 404 for other users' chats, 401, 413, 422, 429, tool caps, redaction."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import anyio
import httpx
import pytest

from tests.server.conftest import SQLITE_ONLY
from tests.server.support import TOKENS, Api, GateServer, ServerProcess, calls, read_events, text, until
from toolwire.store import SQLStore
from toolwire.store._lookups import LOOKUP_CACHE_SECONDS

pytestmark = pytest.mark.anyio


async def test_another_users_chat_is_404_on_every_route(server: ServerProcess, gate: GateServer) -> None:
    gate.script("private", calls(("gated", {"label": "private-tool"})))
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat("alice's")
        async with alice.send(chat, "[[private]] secret plans") as response:
            run_id = response.headers["x-run-id"]
            async for event in read_events(response):
                if event.type == "tool_started":
                    break
        requests = [
            ("GET", f"/api/chats/{chat}", None),
            ("PATCH", f"/api/chats/{chat}", {"title": "mine"}),
            ("GET", f"/api/chats/{chat}/messages", None),
            ("POST", f"/api/chats/{chat}/messages", {"client_message_id": "b1", "text": "hi"}),
            ("GET", f"/api/chats/{chat}/stream", None),
            ("POST", f"/api/chats/{chat}/runs/{run_id}/cancel", None),
            ("POST", f"/api/chats/{chat}/approvals", {"decisions": [{"approval_id": "apv_x", "approved": True}]}),
            ("DELETE", f"/api/chats/{chat}", None),
        ]
        for method, path, body in requests:
            response = await bob.client.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["error"]["code"] == "chat_not_found"
        assert (await bob.client.get("/api/chats")).json() == {"chats": []}
        async with Api(server.url, None) as anonymous:
            for method, path, body in [*requests, ("GET", "/api/chats", None), ("POST", "/api/chats", {})]:
                response = await anonymous.client.request(method, path, json=body)
                assert response.status_code == 401, (method, path)
                assert response.json()["error"]["code"] == "unauthorized"
                assert response.headers["www-authenticate"].startswith("Bearer")
        # Nothing bob did touched alice's chat: her run is still going and her title is hers.
        detail = await alice.chat(chat)
        assert detail["title"] == "alice's" and detail["active_run"]["run_id"] == run_id
        gate.release_tool("private-tool")


async def test_a_token_revoked_by_another_process_is_refused_within_the_lookup_bound(server: ServerProcess) -> None:
    """The server caches token lookups for at most `LOOKUP_CACHE_SECONDS` (1 s): a revocation written by another
    process (here a second store on the same database) is refused once that bound has passed."""
    async with server.api("carol") as carol:
        assert (await carol.client.get("/api/chats")).status_code == 200
        async with SQLStore(server.db_url, migrate=False) as store:
            assert await store.revoke_token(TOKENS["carol"])
        revoked_at = time.monotonic()
        while (refused := await carol.client.get("/api/chats")).status_code == 200:
            assert time.monotonic() - revoked_at < LOOKUP_CACHE_SECONDS + 10, "the revoked token is still accepted"
            await anyio.sleep(0.1)
        assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
        wrong = Api(server.url, "not-a-token")
        async with wrong:
            assert (await wrong.client.get("/api/chats")).status_code == 401


# Bodies are refused before the store is asked, a NUL character (which PostgreSQL would refuse) included: on
# SQLite, which takes NULs, a missing refusal fails this test just the same.
@SQLITE_ONLY
async def test_bad_bodies_get_clear_4xx_answers(serve: Callable[..., ServerProcess]) -> None:
    server = serve("--max-body-bytes", "2000", "--max-message-chars", "100")
    async with server.api() as api:
        chat = await api.new_chat()
        url = f"/api/chats/{chat}/messages"
        big = await api.client.post(url, json={"client_message_id": "a", "text": "x" * 5000})
        assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"

        async def chunks() -> object:
            yield b'{"client_message_id": "a", "text": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        streamed = await api.client.post(url, content=chunks())  # no Content-Length: counted while reading
        assert streamed.status_code == 413
        long = await api.client.post(url, json={"client_message_id": "a", "text": "z" * 101})
        assert long.status_code == 422 and long.json()["error"]["code"] == "message_too_long"
        for body, status in ((b"{not json", 400), (b"", 400), (b"[1, 2]", 422), (b'{"text": "hi"}', 422),
                             (b'{"client_message_id": "a", "text": ""}', 422),
                             (b'{"client_message_id": "a", "text": "   "}', 422),
                             (b'{"client_message_id": "a\\u0000", "text": "hi"}', 422),
                             (b'{"client_message_id": "a", "text": "hi", "on_disconnect": "explode"}', 422),
                             (b'{"client_message_id": "a", "text": "\\ud800"}', 400)):
            response = await api.client.post(url, content=body, headers={"content-type": "application/json"})
            assert response.status_code == status, (body, response.text)
            error = response.json()["error"]
            assert error["message"].endswith((".", ".)")) and error["message"][0].isupper()
        bad_after = await api.client.get(url, params={"after": "-1"})
        assert bad_after.status_code == 400
        misspelt = await api.client.get(url, params={"afterr": "3"})
        assert misspelt.status_code == 400 and misspelt.json()["error"] == {
            "code": "unknown_parameter", "message": "Unknown query parameter 'afterr': this endpoint takes only after, leaf."}
        listed = await api.client.get("/api/chats", params={"limit": "5"})
        assert listed.status_code == 400 and "takes no query parameters" in listed.json()["error"]["message"]
        assert (await api.rows(chat)) == []  # nothing of it was stored


# The limiter counts in memory, above the store (runs on PostgreSQL: test_runs [postgres]).
@SQLITE_ONLY
async def test_rate_limits_answer_429_with_retry_after(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--runs-per-minute", "2", "--tool-calls-per-minute", "2")
    gate.script("rate", calls(*[("sleepy", {"seconds": 0.01, "label": f"r{i}"}) for i in range(3)]), text("ok"))
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat()
        first = await alice.run(chat, "[[rate]] one")  # three tool calls: more than the tool-call budget
        assert first[-1].data["status"] == "completed"  # a run that started is never cut by a rate limit
        limited = await alice.client.post(f"/api/chats/{chat}/messages",
                                          json={"client_message_id": "2", "text": "two"})
        assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        other = await bob.new_chat()
        assert (await bob.run(other, "hello"))[-1].data["status"] == "completed"  # per user
        assert (await bob.run(other, "again"))[-1].data["status"] == "completed"
        third = await bob.client.post(f"/api/chats/{other}/messages", json={"client_message_id": "3", "text": "3"})
        assert third.status_code == 429 and "runs" in third.json()["error"]["message"]


# The agent's cap, above the store (tool rounds on PostgreSQL: test_streaming [postgres]).
@SQLITE_ONLY
async def test_tool_concurrency_is_capped_per_chat(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--max-tool-concurrency", "2")
    gate.script("cap", calls(*[("gated", {"label": "cap"}) for _ in range(10)]), text("All ten done."))
    async with server.api() as api:
        chat = await api.new_chat()
        gate.reset_peak()
        async with anyio.create_task_group() as tg:
            events: list = []

            async def run() -> None:
                events.extend(await api.run(chat, "[[cap]] ten at once"))

            tg.start_soon(run)
            for released in range(10):
                await until(lambda: gate.passed.get("cap", 0) == released  # noqa: B023
                            and gate.waiting.get("cap", 0) == min(2, 10 - released))  # noqa: B023
                await anyio.sleep(0.05)  # time for a third call to arrive, if the cap let it
                assert gate.waiting.get("cap", 0) == min(2, 10 - released)
                gate.release_tool("cap")
        assert gate.peak == 2
        assert [e.type for e in events].count("tool_result") == 10
        assert events[-1].data["status"] == "completed"


# Capped and redacted before the store; PostgreSQL stores tool results in test_streaming's
# test_tool_results_arrive_in_completion_order_and_are_stored_in_call_order[postgres].
@SQLITE_ONLY
async def test_tool_results_are_capped_and_secrets_redacted(serve: Callable[..., ServerProcess],
                                                           gate: GateServer) -> None:
    server = serve("--max-tool-result-bytes", "1000", "--redact", "s3cr3t-value")
    gate.script("data", calls(("big", {"size": 5000, "text": "head"}), ("big", {"size": 10, "text": "key s3cr3t-value"}),
                              ("big", {"size": 10, "text": "provider key gate-key"})), text("Seen."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "[[data]] show me")
        rows = await api.rows(chat)
    streamed = {e.data["result"]["call_id"]: e.data["result"]["result"] for e in events if e.type == "tool_result"}
    stored = {p["call_id"]: p["result"] for p in rows[1]["messages"][1]["parts"]}
    assert streamed == stored
    capped = stored["call_0_big"]
    assert capped["truncated"] is True and capped["original_bytes"] > 5000
    assert len(capped["preview"]) <= 1000 and "only its first 1,000" in capped["note"]
    assert stored["call_1_big"] == {"text": "key [REDACTED]", "filler": "x" * 10}
    assert stored["call_2_big"] == {"text": "provider key [REDACTED]", "filler": "x" * 10}  # the API key, always
    results_text = str([e.data for e in events if e.type == "tool_result"]) + str(rows[1]["messages"][1])
    assert "s3cr3t-value" not in results_text and "gate-key" not in results_text


# Heartbeats are the event stream's, above the store (follows on PostgreSQL: test_streaming [postgres]).
@SQLITE_ONLY
async def test_idle_followers_get_heartbeats(serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--heartbeat-seconds", "0.2")
    gate.script("idle", calls(("gated", {"label": "idle-tool"})), text("Awake."))
    async with server.api() as api:
        chat = await api.new_chat()
        beats: list[float] = []

        async def wake_after_three_beats() -> None:
            await until(lambda: len(beats) >= 3, timeout=5)
            gate.release_tool("idle-tool")

        async with anyio.create_task_group() as tg, api.send(chat, "[[idle]] wait") as response:
            tg.start_soon(wake_after_three_beats)
            events = [e async for e in read_events(response, heartbeats=beats)]
        assert len(beats) >= 3 and events[-1].data["status"] == "completed"
        gaps = [later - earlier for earlier, later in itertools.pairwise(beats)]
        assert all(0.1 < gap < 1.0 for gap in gaps), gaps


async def test_service_endpoints(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, trust_env=False) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        spec = (await client.get("/openapi.json")).json()
        assert spec["openapi"].startswith("3.1") and "/api/chats/{chat_id}/stream" in spec["paths"]
        page = await client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        missing = await client.get("/static/no-such-file.js")
        assert missing.status_code == 404
        nowhere = await client.get("/api/nothing-here")
        assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "not_found"
        wrong_method = await client.put("/api/chats")
        assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == "method_not_allowed"
