"""Resume and stop on the Vercel route, with the real `ai` client: a page reload mid-run is the stored
history (`GET /api/chat/{id}/messages`) as the chat's initial messages, then `resumeStream()`."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.protocols.clients import NodeClients
from tests.server.protocols.test_vercel import clean, kinds, new_chat
from tests.server.support import TOKENS, GateServer, ServerProcess, calls, text


def reload_page(node: NodeClients, server: ServerProcess, chat: str) -> str:
    """A second client of the same chat, as a reloaded page makes it: the stored history, then resume."""
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert history["status"] == 200 and history["invalid"] is None
    return new_chat(node, server, chatId=f"ui-{chat}", messages=history["messages"])


def tool_ids(message: dict[str, Any]) -> list[str]:
    return [p["toolCallId"] for p in message["parts"] if p["type"].startswith("tool-")]


def test_resume_mid_run_rebuilds_the_same_message(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("long", calls(("sleepy", {"seconds": 0.01, "label": "warmup"}), preamble="Warming up."),
                calls(("gated", {"label": "slow"}), ("sleepy", {"seconds": 0.01, "label": "quick"}), preamble="Now."),
                text("All done now."))
    first = new_chat(node, server)
    sending = node.start("send", name=first, text="[[long]] go")
    node.wait(lambda: gate.waiting.get("slow") == 1, 15, "the slow tool")
    node.wait_chunk(first, lambda c: c["type"] == "tool-output-available" and c["toolCallId"] == "call_1_sleepy")

    second = reload_page(node, server, first)
    stored = node.call("state", name=second)["messages"]
    assert kinds(stored[-1]["parts"]) == ["step-start", "text", "tool-sleepy"]  # the first step is stored already
    resuming = node.start("resume", name=second)
    node.wait_chunk(second, lambda c: c["type"] == "tool-output-available" and c["toolCallId"] == "call_1_sleepy")
    assert not resuming.done()  # it caught up and now follows live
    gate.release_tool("slow")

    live, resumed = sending.result(), resuming.result()
    clean(live)
    clean(resumed)
    assert resumed["chunks"][0]["type"] == "start" and resumed["chunks"][0]["messageId"] == live["messages"][-1]["id"]
    assert resumed["messages"] == live["messages"]  # the same message rebuilt, in place of the stored one
    message = resumed["messages"][-1]
    assert tool_ids(message) == ["call_0_sleepy", "call_0_gated", "call_1_sleepy"]  # no duplicate parts
    assert kinds(message["parts"]).count("step-start") == 3 and message["parts"][-1]["text"] == "All done now."
    assert [r["method"] for r in resumed["responses"]] == ["GET"]

    # Nothing runs any more: a resume is 204 and leaves the messages as they are.
    after = node.call("resume", name=second)
    clean(after)
    assert after["messages"] == live["messages"] and after["responses"][-1]["status"] == 204


def test_a_conversation_with_an_approval_and_a_reload_mid_run(node: NodeClients, server: ServerProcess,
                                                              gate: GateServer) -> None:
    """What a `useChat` page does: a multi-tool turn, then a turn that needs an approval, reloaded while the
    approved turn still runs; the reloaded page ends with exactly the conversation the first page has."""
    gate.script("plan", calls(("sleepy", {"seconds": 0.02, "label": "weather"}),
                              ("sleepy", {"seconds": 0.01, "label": "tables"}), preamble="Looking."),
                text("Sunny, and a table is free."))
    gate.script("chain", calls(("sleepy", {"seconds": 0.01, "label": "balance"}), preamble="Checking."),
                calls(("transfer", {"to": "alice", "amount": 5}), preamble="Paying."),
                calls(("gated", {"label": "after"})), text("Paid and checked."))
    first = new_chat(node, server)
    planned = node.call("send", name=first, text="[[plan]] plan my evening")
    clean(planned)
    assert [p["state"] for p in planned["messages"][-1]["parts"] if p["type"] == "tool-sleepy"] == [
        "output-available", "output-available"]
    clean(node.call("send", name=first, text="[[chain]] pay"))
    approving = node.start("approve", name=first, decisions=[{"approved": True}])
    node.wait(lambda: gate.waiting.get("after") == 1, 15, "the tool after the approval")

    second = reload_page(node, server, first)
    resuming = node.start("resume", name=second)
    node.wait_chunk(second, lambda c: c["type"] == "tool-input-available" and c["toolCallId"] == "call_0_gated")
    gate.release_tool("after")
    live, resumed = approving.result(), resuming.result()
    clean(live)
    clean(resumed)
    # The resumed run's own events start at the approved call's result: the round before it came from the
    # server's record of the pause. The one difference: a rebuilt approval does not say it was approved
    # (its output does); `ai` 6 has no chunk to say it.
    expected = live["messages"]
    for part in expected[-1]["parts"]:
        if "approval" in part:
            part["approval"] = {"id": part["approval"]["id"]}
    expected[1].pop("metadata")  # the stored history has no stream metadata (usage and the like) for old turns
    assert [m["role"] for m in resumed["messages"]] == ["user", "assistant", "user", "assistant"]
    assert resumed["messages"] == expected
    # The paused run's finished step (stored), the round it paused in, then the resumed run's own steps.
    assert kinds(resumed["messages"][-1]["parts"]) == ["step-start", "text", "tool-sleepy", "step-start", "text",
                                                       "tool-transfer", "step-start", "tool-gated", "step-start",
                                                       "text"]


def test_stop_cancels_the_run_and_every_follower_sees_it_end(node: NodeClients, server: ServerProcess,
                                                             gate: GateServer) -> None:
    gate.script("halt", calls(("gated", {"label": "halt"}), preamble="Starting."), text("Never said."))
    first = new_chat(node, server)
    sending = node.start("send", name=first, text="[[halt]] go")
    node.wait(lambda: gate.waiting.get("halt") == 1, 15, "the tool")
    second = reload_page(node, server, first)
    following = node.start("resume", name=second)
    node.wait_chunk(second, lambda c: c["type"] == "tool-input-available")

    stopped = node.call("stop", name=first)  # useChat's stop(): this client stops reading...
    with httpx.Client(base_url=server.url, trust_env=False,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client:
        cancel = client.post(f"/api/chat/ui-{first}/stop")  # ...and the app tells the server
        assert cancel.status_code == 202 and cancel.json()["status"] == "cancelling"
        followed = following.result()
        assert client.get(f"/api/chat/ui-{first}/stream").status_code == 204
        assert client.post(f"/api/chat/ui-{first}/stop").status_code == 204  # nothing left to stop
        rows = client.get(f"/api/chats/ui-{first}/messages").json()["messages"]
    sending.result()
    assert stopped["finishes"][-1]["isAbort"] is True and stopped["errors"] == []
    clean(followed)
    assert followed["chunks"][-1]["type"] == "abort"
    tool = followed["messages"][-1]["parts"][2]
    assert tool["state"] == "output-error" and tool["errorText"] == "cancelled"
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate"]
    assert rows[1]["messages"][1]["parts"][0]["result"] == {"error": "cancelled"}
