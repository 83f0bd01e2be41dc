"""Regenerating and editing with the real `ai` client (`Chat.regenerate`, `Chat.sendMessage({messageId})`):
each makes a new branch on the server, the model sees exactly that branch, and the history route answers it."""

from __future__ import annotations

from typing import Any

from tests.server.protocols.clients import NodeClients
from tests.server.protocols.test_vercel import clean, new_chat
from tests.server.support import TOKENS, GateServer, ServerProcess, text


def said(state: dict[str, Any]) -> list[str]:
    return ["".join(p.get("text", "") for p in m["parts"] if p["type"] == "text") for m in state["messages"]]


def shown(gate: GateServer) -> list[str]:
    return [str(m.get("content") or "") for m in gate.bodies[-1]["messages"] if m["role"] != "system"]


def test_regenerate_the_last_answer_and_an_earlier_one(node: NodeClients, server: ServerProcess,
                                                       gate: GateServer) -> None:
    gate.script("one", text("First."), text("First, again."))
    gate.script("two", text("Second."), text("Second, again."))
    chat = new_chat(node, server)
    node.call("send", name=chat, text="[[one]] one")
    node.call("send", name=chat, text="[[two]] two")
    state = node.call("regenerate", name=chat)  # the last answer
    clean(state)
    assert said(state) == ["[[one]] one", "First.", "[[two]] two", "Second, again."]
    assert shown(gate) == ["[[one]] one", "First.", "[[two]] two"]
    first_answer = state["messages"][1]["id"]
    state = node.call("regenerate", name=chat, messageId=first_answer)  # an earlier one: what followed goes
    clean(state)
    assert said(state) == ["[[one]] one", "First, again."]
    assert shown(gate) == ["[[one]] one"]
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert history["invalid"] is None
    assert said(history) == ["[[one]] one", "First, again."]


def test_editing_an_earlier_message_branches_there(node: NodeClients, server: ServerProcess, gate: GateServer) -> None:
    gate.script("one", text("First."))
    gate.script("two", text("Second."))
    gate.script("edit", text("Edited."))
    chat = new_chat(node, server)
    node.call("send", name=chat, text="[[one]] one")
    state = node.call("send", name=chat, text="[[two]] two")
    second_user = state["messages"][2]["id"]
    state = node.call("edit", name=chat, text="[[edit]] two, edited", messageId=second_user)
    clean(state)
    assert said(state) == ["[[one]] one", "First.", "[[edit]] two, edited", "Edited."]
    assert shown(gate) == ["[[one]] one", "First.", "[[edit]] two, edited"]
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert history["invalid"] is None
    assert said(history) == ["[[one]] one", "First.", "[[edit]] two, edited", "Edited."]
    # The first message edited too: a new first message (no parent).
    first_user = state["messages"][0]["id"]
    gate.script("fresh", text("Fresh."))
    state = node.call("edit", name=chat, text="[[fresh]] one, edited", messageId=first_user)
    clean(state)
    assert said(state) == ["[[fresh]] one, edited", "Fresh."]
    assert shown(gate) == ["[[fresh]] one, edited"]


def test_history_names_a_regenerated_answer_as_its_stream_did(node: NodeClients, server: ServerProcess,
                                                             gate: GateServer) -> None:
    gate.script("one", text("First."), text("First, again."), text("First, a third time."))
    chat = new_chat(node, server)
    node.call("send", name=chat, text="[[one]] one")
    state = node.call("regenerate", name=chat)
    clean(state)
    streamed = [m["id"] for m in state["messages"]]
    assert said(state) == ["[[one]] one", "First, again."]
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert history["invalid"] is None
    assert said(history) == ["[[one]] one", "First, again."]
    assert [m["id"] for m in history["messages"]] == streamed  # the new answer by the new run's id
    # A page reloaded from that history regenerates the same answer again, by its id.
    reloaded = new_chat(node, server, chatId=f"ui-{chat}", messages=history["messages"])
    state = node.call("regenerate", name=reloaded, messageId=streamed[1])
    clean(state)
    assert said(state) == ["[[one]] one", "First, a third time."]
    assert shown(gate) == ["[[one]] one"]
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=f"ui-{chat}")
    assert [m["id"] for m in history["messages"]] == [m["id"] for m in state["messages"]]
    assert history["messages"][1]["id"] not in streamed
