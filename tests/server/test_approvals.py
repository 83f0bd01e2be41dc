"""Approvals: the paused state stays on the server; only approval ids and yes/no come from the client."""

from __future__ import annotations

import anyio
import pytest

from tests.server.support import Api, Event, GateServer, ServerProcess, calls, read_events, text, types

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


async def pause(api: Api, gate: GateServer, tag: str, who: str) -> tuple[str, list[Event]]:
    gate.script(tag, calls(("transfer", {"to": who, "amount": 50}), ("transfer", {"to": "mallory", "amount": 70}),
                           ("sleepy", {"seconds": 0.01, "label": "side"}), preamble="Paying."),
                text("Paid what was approved."))
    chat = await api.new_chat()
    return chat, await api.run(chat, f"[[{tag}]] pay them")


async def test_a_paused_run_resumes_with_exactly_the_decided_calls(server: ServerProcess, gate: GateServer) -> None:
    async with server.api("alice") as alice:
        chat, events = await pause(alice, gate, "approve", "alice")
        flow = types(events)
        assert flow[-3:] == ["approval_required", "approval_required", "run_finished"]
        assert events[-1].data["status"] == "paused"
        assert "step_finished" not in flow  # the paused step finishes in the resumed run
        required = [e.data for e in events if e.type == "approval_required"]
        assert [r["call"]["arguments"] for r in required] == [{"to": "alice", "amount": 50},
                                                              {"to": "mallory", "amount": 70}]
        assert all(r["approval_id"].startswith("apv_") for r in required)
        assert [e.data["result"]["name"] for e in events if e.type == "tool_result"] == ["sleepy"]
        assert gate.events.count("start:side") == 1 and not [e for e in gate.events if e.startswith("transfer")]

        detail = await alice.chat(chat)
        assert detail["active_run"] is None
        assert [a["approval_id"] for a in detail["paused"]["approvals"]] == [r["approval_id"] for r in required]
        assert [p["type"] for p in detail["paused"]["message"]["parts"]] == ["text", "tool_call", "tool_call",
                                                                             "tool_call"]
        assert [r["name"] for r in detail["paused"]["results"]] == ["sleepy"]
        assert [r["kind"] for r in await alice.rows(chat)] == ["user"]  # the paused round is not stored yet

        blocked = await alice.client.post(f"/api/chats/{chat}/messages",
                                          json={"client_message_id": "x", "text": "hello?"})
        assert blocked.status_code == 409 and blocked.json()["error"]["code"] == "run_paused"

        decisions = [{"approval_id": required[0]["approval_id"], "approved": True},
                     {"approval_id": required[1]["approval_id"], "approved": False, "reason": "Not to mallory."}]
        async with alice.decide(chat, decisions) as response:
            assert response.status_code == 200
            resumed = [e async for e in read_events(response)]
        assert resumed[0].type == "run_started" and resumed[0].data["resumed"] is True
        assert resumed[0].data["run_number"] == 2 and resumed[0].id == "2-1"
        assert resumed[-1].data["status"] == "completed"
        results = [e.data["result"] for e in resumed if e.type == "tool_result"]
        assert sorted((r["call_id"], r["is_error"]) for r in results) == [("call_0_transfer", False),
                                                                          ("call_1_transfer", True)]
        assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:50"]

        rows = await alice.rows(chat)
        assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"]
        stored = rows[1]["messages"][1]["parts"]
        assert [p["result"] for p in stored] == [{"sent": 50, "to": "alice"}, {"error": "Not to mallory."},
                                                 {"label": "side", "slept": 0.01}]
        assert rows[1]["run_id"] == resumed[0].data["run_id"]

        again = await alice.client.post(f"/api/chats/{chat}/approvals", json={"decisions": decisions})
        assert again.status_code == 409 and again.json()["error"]["code"] == "approval_decided"
        assert [e for e in gate.events if e.startswith("transfer")] == ["transfer:alice:50"]
        assert (await alice.chat(chat))["paused"] is None


async def test_unknown_foreign_incomplete_and_decided_approvals_run_nothing(server: ServerProcess,
                                                                           gate: GateServer) -> None:
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat, events = await pause(alice, gate, "alice-pay", "alice")
        mine = [e.data["approval_id"] for e in events if e.type == "approval_required"]
        other_chat, other_events = await pause(alice, gate, "alice-other", "carol")
        other = [e.data["approval_id"] for e in other_events if e.type == "approval_required"]
        bobs_chat, bob_events = await pause(bob, gate, "bob-pay", "bob")
        bobs = [e.data["approval_id"] for e in bob_events if e.type == "approval_required"]

        async def attempt(api: Api, chat_id: str, ids: list[str]) -> tuple[int, str]:
            response = await api.client.post(f"/api/chats/{chat_id}/approvals",
                                             json={"decisions": [{"approval_id": i, "approved": True} for i in ids]})
            return response.status_code, response.json()["error"]["code"]

        assert await attempt(alice, chat, [mine[0], "apv_made_up"]) == (404, "approval_not_found")
        assert await attempt(alice, chat, [mine[0], other[0]]) == (404, "approval_not_found")  # another chat's
        assert await attempt(alice, chat, [mine[0], bobs[0]]) == (404, "approval_not_found")  # another user's
        assert await attempt(bob, chat, mine) == (404, "chat_not_found")  # bob cannot see alice's chat at all
        assert await attempt(alice, chat, mine[:1]) == (400, "approvals_incomplete")
        assert await attempt(alice, chat, [mine[0], mine[0], mine[1]]) == (400, "approvals_incomplete")
        bad = await alice.client.post(f"/api/chats/{chat}/approvals",
                                      json={"decisions": [{"approval_id": mine[0], "approved": "yes"}]})
        assert bad.status_code == 422
        assert not [e for e in gate.events if e.startswith("transfer")]  # nothing ran

        # Two requests deciding the same approvals at once: exactly one resumes the run.
        outcomes: list[int] = []

        async def decide() -> None:
            response = await alice.client.post(f"/api/chats/{other_chat}/approvals", json={
                "decisions": [{"approval_id": i, "approved": True} for i in other]})
            if response.status_code == 200:
                await response.aread()
            outcomes.append(response.status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(decide)
        assert sorted(outcomes) == [200, 409, 409]
        assert sorted(e for e in gate.events if e.startswith("transfer")) == ["transfer:carol:50",
                                                                              "transfer:mallory:70"]
        assert await attempt(alice, other_chat, other) == (409, "approval_decided")
        assert (await bob.chat(bobs_chat))["paused"] is not None  # bob's run was never touched


async def test_stored_rows_say_how_their_runs_ended_and_which_calls_were_denied(server: ServerProcess,
                                                                              gate: GateServer) -> None:
    async with server.api("alice") as alice:
        chat, events = await pause(alice, gate, "summaries", "alice")
        paused_run = events[0].data["run_id"]
        required = [e.data for e in events if e.type == "approval_required"]
        listed = (await alice.client.get(f"/api/chats/{chat}/messages")).json()
        [summary] = listed["runs"]
        assert summary["run_id"] == paused_run and summary["status"] == "paused"
        assert summary["usage"] == events[-1].data["usage"] and summary["usage"]["input_tokens"] > 0
        assert summary["decisions"] == []

        decisions = [{"approval_id": required[0]["approval_id"], "approved": True},
                     {"approval_id": required[1]["approval_id"], "approved": False, "reason": "Not to mallory."}]
        async with alice.decide(chat, decisions) as response:
            resumed = [e async for e in read_events(response)]
        finished = resumed[-1].data
        listed = (await alice.client.get(f"/api/chats/{chat}/messages")).json()
        assert [r["run_id"] for r in listed["messages"]] == [paused_run, *[resumed[0].data["run_id"]] * 2]
        first, second = listed["runs"]
        assert first["status"] == "resumed" and first["decisions"] == []
        assert second["run_id"] == resumed[0].data["run_id"] and second["status"] == "completed"
        assert (second["usage"], second["steps"], second["error"]) == (finished["usage"], finished["steps"], None)
        assert 0 < second["duration"] <= finished["duration"] + 1
        assert second["decisions"] == [{"call_id": "call_0_transfer", "approved": True, "reason": None},
                                       {"call_id": "call_1_transfer", "approved": False, "reason": "Not to mallory."}]
        # Only the runs of the rows returned: after the first row, the paused run is not listed.
        later = (await alice.client.get(f"/api/chats/{chat}/messages", params={"after": 1})).json()
        assert [r["run_id"] for r in later["runs"]] == [second["run_id"]]
        nothing = (await alice.client.get(f"/api/chats/{chat}/messages", params={"after": 3})).json()
        assert (nothing["messages"], nothing["runs"]) == ([], [])
