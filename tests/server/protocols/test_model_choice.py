"""The protocols' own clients choose a chat's model: the Vercel AI SDK's `sendMessage(message, {body: {model}})` and
AG-UI's `HttpAgent.runAgent({forwardedProps: {model}})`, against a `toolwire serve` with two models at the gate
(which records the `model` each request names)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.databases import sqlite_url
from tests.server.protocols.clients import NodeClients
from tests.server.support import TOKENS, GateServer, ServerProcess, text

OTHER = "openai:gate-other"


@pytest.fixture(scope="module")
def two_models(gate: GateServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("protocol-models")
    process = ServerProcess(db_url=sqlite_url(folder), gate_url=gate.url, folder=folder,
                            args=["--model", OTHER, "--writes-per-minute", "100000"])
    process.start()
    yield process
    process.stop()


def models_asked(gate: GateServer, tag: str) -> list[str]:
    return [str(body["model"]) for body in gate.bodies
            if any(f"[[{tag}]]" in str(m.get("content")) for m in body.get("messages", [])[-1:])]


def test_use_chat_sends_a_model_in_its_body(node: NodeClients, two_models: ServerProcess, gate: GateServer) -> None:
    gate.script("uc1", text("Default."))
    gate.script("uc2", text("Other."))
    gate.script("uc3", text("Still other."))
    node.call("chat", name="models-uc", url=two_models.url, token=TOKENS["alice"], chatId="models-uc")
    assert node.call("send", name="models-uc", text="[[uc1]] hi")["errors"] == []
    assert node.call("send", name="models-uc", text="[[uc2]] hi", body={"model": OTHER})["errors"] == []
    assert node.call("send", name="models-uc", text="[[uc3]] hi")["errors"] == []  # the chat keeps its choice
    assert [models_asked(gate, tag) for tag in ("uc1", "uc2", "uc3")] == [["gate-model"], ["gate-other"],
                                                                          ["gate-other"]]


def test_an_agui_agent_sends_a_model_in_its_forwarded_props(node: NodeClients, two_models: ServerProcess,
                                                           gate: GateServer) -> None:
    gate.script("ag1", text("Other."))
    done = node.call("agui", url=two_models.url, token=TOKENS["alice"], threadId="models-ag", text="[[ag1]] hi",
                     messageId="u1", runId="r1", forwardedProps={"model": OTHER})
    assert done["failure"] is None and done["finished"]["outcome"] == "success"
    assert models_asked(gate, "ag1") == ["gate-other"]
