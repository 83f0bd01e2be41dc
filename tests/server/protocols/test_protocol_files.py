"""Files through the other protocols' own clients: the real `ai` client's `sendMessage({ files })` (a data URL and
the URL of an upload) and the history route returning them; AG-UI image content through `HttpAgent`."""

from __future__ import annotations

import base64
import io
import itertools
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.server.protocols.clients import NodeClients
from tests.server.support import TOKENS, GateServer, ServerProcess, text

_names = itertools.count(1)


def _png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (3, 2), color).save(out, "PNG")
    return out.getvalue()


def _new_chat(node: NodeClients, server: ServerProcess) -> tuple[str, str]:
    name = f"fchat{next(_names)}"
    chat_id = f"ui-files-{name}"
    node.call("chat", name=name, url=server.url, token=TOKENS["alice"], chatId=chat_id)
    return name, chat_id


def _stored_files(server: ServerProcess, chat_id: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    rows = httpx.get(f"{server.url}/api/chats/{chat_id}/messages", headers=headers, trust_env=False).json()["messages"]
    return [p for p in rows[0]["messages"][0]["parts"] if p["type"] == "file"]


def test_the_ai_client_sends_a_data_url_and_an_uploaded_file(node: NodeClients, server: ServerProcess,
                                                            gate: GateServer) -> None:
    gate.script("vfiles", text("Two files, thank you."))
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    red, blue = _png("red"), _png("blue")
    name, chat_id = _new_chat(node, server)
    # Upload first: the chat of a client's id is the user's own, created by its first message or, here, by hand.
    created = httpx.post(f"{server.url}/api/chats", headers=headers, json={}, trust_env=False).json()
    uploaded = httpx.post(f"{server.url}/api/chats/{created['id']}/files", params={"name": "blue.png"},
                          content=blue, headers=headers, trust_env=False).json()
    files = [{"type": "file", "mediaType": "image/png", "filename": "red.png",
              "url": "data:image/png;base64," + base64.b64encode(red).decode()},
             {"type": "file", "mediaType": "image/png", "filename": "blue.png",
              "url": server.url + uploaded["url"]}]
    state = node.call("send", name=name, text="[[vfiles]] look at these", files=files)
    assert state["error"] is None and state["errors"] == [], state
    assert state["messages"][-1]["parts"][-1]["text"] == "Two files, thank you."
    stored = _stored_files(server, chat_id)
    assert [(p["name"], p["media_type"], p["data"]) for p in stored] == [("red.png", "image/png", None),
                                                                          ("blue.png", "image/png", None)]
    assert stored[1]["blob_id"] == uploaded["id"]
    request = str(gate.bodies[-1])
    assert base64.b64encode(red).decode() in request and base64.b64encode(blue).decode() in request
    history = node.call("history", url=server.url, token=TOKENS["alice"], chatId=chat_id)
    assert history["invalid"] is None  # ai's own validateUIMessages accepts the file parts
    user_parts = history["messages"][0]["parts"]
    assert user_parts[1:] == [
        {"type": "file", "mediaType": "image/png", "filename": "red.png", "url": f"/api/files/{stored[0]['blob_id']}"},
        {"type": "file", "mediaType": "image/png", "filename": "blue.png", "url": f"/api/files/{uploaded['id']}"}]
    download = httpx.get(server.url + user_parts[1]["url"], headers=headers, trust_env=False)
    assert download.content == red


def test_the_ai_client_cannot_reference_another_users_file_or_a_foreign_url(node: NodeClients,
                                                                            server: ServerProcess) -> None:
    bob = {"Authorization": f"Bearer {TOKENS['bob']}"}
    bobs_chat = httpx.post(f"{server.url}/api/chats", headers=bob, json={}, trust_env=False).json()
    bobs_file = httpx.post(f"{server.url}/api/chats/{bobs_chat['id']}/files", params={"name": "b.png"},
                           content=_png("green"), headers=bob, trust_env=False).json()
    for url in [server.url + bobs_file["url"], "https://example.com/cat.png"]:
        name, _ = _new_chat(node, server)
        state = node.call("send", name=name, text="hi", files=[{"type": "file", "mediaType": "image/png", "url": url}])
        assert state["responses"][-1]["status"] == 422
    name, _ = _new_chat(node, server)
    fake = "data:image/png;base64," + base64.b64encode(b"PK\x03\x04 not an image at all").decode()
    state = node.call("send", name=name, text="hi", files=[{"type": "file", "mediaType": "image/png", "url": fake}])
    assert state["responses"][-1]["status"] == 415


@pytest.mark.parametrize("source", ["data", "upload"])
def test_agui_image_content_reaches_the_model(node: NodeClients, server: ServerProcess, gate: GateServer,
                                              source: str) -> None:
    gate.script(f"agimg{source}", text("A small image."))
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    image = _png("yellow" if source == "data" else "purple")
    if source == "data":
        given = {"type": "data", "value": base64.b64encode(image).decode(), "mimeType": "image/png"}
    else:
        chat = httpx.post(f"{server.url}/api/chats", headers=headers, json={}, trust_env=False).json()
        uploaded = httpx.post(f"{server.url}/api/chats/{chat['id']}/files", params={"name": "p.png"}, content=image,
                              headers=headers, trust_env=False).json()
        given = {"type": "url", "value": uploaded["url"], "mimeType": "image/png"}
    thread = f"ag-files-{source}"
    messages = [{"id": "u1", "role": "user", "content": [{"type": "text", "text": f"[[agimg{source}]] what is it?"},
                                                         {"type": "image", "source": given}]}]
    done = node.call("agui", url=server.url, token=TOKENS["alice"], threadId=thread, messages=messages, runId="r1")
    assert done["failure"] is None, done
    assert done["finished"]["outcome"] == "success"
    assert base64.b64encode(image).decode() in str(gate.bodies[-1])
    stored = _stored_files(server, thread)
    assert len(stored) == 1 and stored[0]["blob_id"] and stored[0]["data"] is None
