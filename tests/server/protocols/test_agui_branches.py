"""AG-UI: a run whose history ends at an earlier turn of the stored branch forks there; the model still sees
only the stored history."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tests.server.support import TOKENS, GateServer, ServerProcess, text


def run(server: ServerProcess, thread: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"threadId": thread, "runId": f"run-{len(messages)}-{messages[-1]['id']}", "state": {}, "tools": [],
            "context": [], "forwardedProps": {}, "messages": messages}
    with httpx.stream("POST", f"{server.url}/api/agui", json=body, timeout=60, trust_env=False,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as response:
        assert response.status_code == 200, response.read()
        return [orjson.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]


def shown(gate: GateServer) -> list[str]:
    return [str(m.get("content") or "") for m in gate.bodies[-1]["messages"] if m["role"] != "system"]


def user(message_id: str, content: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": content}


def test_a_history_that_ends_at_an_earlier_turn_forks_there(server: ServerProcess, gate: GateServer) -> None:
    gate.script("one", text("First."))
    gate.script("two", text("Second."))
    gate.script("three", text("Third."))
    gate.script("again", text("Again."))
    one = user("u1", "[[one]] one")
    answer = {"id": "a1", "role": "assistant", "content": "First."}
    assert run(server, "t-fork", [one])[-1]["type"] == "RUN_FINISHED"
    assert run(server, "t-fork", [one, answer, user("u2", "[[two]] two")])[-1]["type"] == "RUN_FINISHED"
    # Going on at the end of the stored branch: no fork.
    events = run(server, "t-fork", [one, answer, user("u2", "[[two]] two"), {"id": "a2", "role": "assistant",
                                                                           "content": "Second."},
                                    user("u3", "[[three]] three")])
    assert events[-1]["type"] == "RUN_FINISHED"
    assert shown(gate) == ["[[one]] one", "First.", "[[two]] two", "Second.", "[[three]] three"]
    # A client that went back to the first turn: its new message forks after that turn. The assistant text the
    # client sends is not trusted (the stored answer is what the model sees).
    events = run(server, "t-fork", [one, {**answer, "content": "Not what was said."}, user("u2b", "[[again]] again")])
    assert events[-1]["type"] == "RUN_FINISHED"
    assert shown(gate) == ["[[one]] one", "First.", "[[again]] again"]
    # Only the new message's own text is read; a history whose user messages the server never stored changes
    # nothing (the message goes after the active leaf).
    gate.script("later", text("Later."))
    run(server, "t-fork", [user("x1", "unknown"), {"id": "x2", "role": "assistant", "content": "?"},
                           user("u4", "[[later]] later")])
    assert shown(gate) == ["[[one]] one", "First.", "[[again]] again", "Again.", "[[later]] later"]
