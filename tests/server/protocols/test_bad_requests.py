"""Bad input on the protocol routes: generated bodies never get a server error, and cross-origin pages get
exactly the CORS answers `--cors-origin` allows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, given, seed, settings, strategies as st

from tests.server.protocols.conftest import EXTRA_TOOLS
from tests.server.support import TOKENS, GateServer, ServerProcess

_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=12)
_json: st.SearchStrategy[Any] = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                                             | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_ids = st.sampled_from(["c-1", "c-2", "", ".", "a/b", "x" * 300, "ok:id_1"]) | st.text(max_size=10)
_parts = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "file", "tool-transfer", "data-x"])},
                                        optional={"text": _json, "state": st.sampled_from(
                                            ["approval-responded", "done", "input-available"]),
                                            "approval": st.fixed_dictionaries({}, optional={
                                                "id": _json, "approved": _json, "reason": _json})}),
                  max_size=3)
_ui_message = st.fixed_dictionaries({}, optional={"id": _ids | _json, "role": st.sampled_from(
    ["user", "assistant", "system", "tool"]) | _json, "parts": _parts | _json})
_vercel_body = st.fixed_dictionaries({}, optional={
    "id": _ids | _json, "messages": st.lists(_ui_message, max_size=2) | _json, "message": _ui_message | _json,
    "trigger": st.sampled_from(["submit-message", "regenerate-message"]) | _json})
_agui_body = st.fixed_dictionaries({}, optional={
    "threadId": _ids | _json, "runId": _ids, "messages": st.lists(st.fixed_dictionaries(
        {"id": _ids, "role": st.sampled_from(["user", "assistant", "tool", "developer"])},
        optional={"content": _json, "toolCallId": _ids}), max_size=2) | _json,
    "resume": st.lists(st.fixed_dictionaries({"interruptId": _ids, "status": st.sampled_from(
        ["resolved", "cancelled", "other"])}, optional={"payload": _json}), max_size=2) | _json})


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
_valid_vercel = st.fixed_dictionaries({"id": st.sampled_from(["ok-1", "ok-2"]), "messages": st.lists(
    st.fixed_dictionaries({"id": _text, "role": st.just("user"), "parts": st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": _text}), min_size=1, max_size=2)}),
    min_size=1, max_size=2)})
_valid_agui = st.fixed_dictionaries({"threadId": st.sampled_from(["ok-3", "ok-4"]), "runId": _text,
                                     "messages": st.lists(st.fixed_dictionaries(
                                         {"id": _text, "role": st.just("user"), "content": _text}),
                                         min_size=1, max_size=2)})


def test_generated_bodies_never_get_a_server_error(server: ServerProcess, gate: GateServer) -> None:
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    outcomes: dict[int, int] = {}
    with httpx.Client(base_url=server.url, headers=headers, trust_env=False, timeout=30) as client:

        @seed(20251123)
        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(route=st.sampled_from(["/api/chat", "/api/agui"]), data=st.data())
        def check(route: str, data: st.DataObject) -> None:
            if route == "/api/chat":
                body = data.draw(_valid_vercel | _vercel_body)
            else:
                body = data.draw(_valid_agui | _agui_body)
            with client.stream("POST", route, json=body) as response:
                response.read()
            outcomes[response.status_code] = outcomes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (route, body, response.status_code, response.text)
            if response.status_code >= 400:
                assert response.json()["error"]["message"].endswith((".", ")"))

        check()
    assert not [status for status in outcomes if status >= 500]
    assert outcomes.get(422, 0) > 20 and outcomes.get(200, 0) > 0, outcomes  # refused and accepted ones both
    assert "Traceback" not in server.stderr()


def test_cross_origin_pages_are_allowed_only_from_the_configured_origins(
        serve: Callable[..., ServerProcess], gate: GateServer) -> None:
    server = serve("--cors-origin", "http://localhost:3000", *EXTRA_TOOLS)
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client:
        asked = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}
        preflight = client.options("/api/chat", headers=asked)
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()
        stranger = client.options("/api/chat", headers={**asked, "Origin": "http://evil.example"})
        assert stranger.status_code == 400 and "access-control-allow-origin" not in stranger.headers
        answer = client.get("/api/chat/some-chat/messages", headers={
            "Origin": "http://localhost:3000", "Authorization": f"Bearer {TOKENS['alice']}"})
        assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_nul_characters_are_refused_before_anything_is_stored(server: ServerProcess, gate: GateServer) -> None:
    user = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi\x00there"}]}
    answer = {"id": "a1", "role": "assistant", "parts": [{"type": "tool-transfer", "state": "approval-responded",
                                                          "approval": {"id": "apv\x00", "approved": True}}]}
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30,
                      headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as client:
        for body in ({"id": "nul-1", "messages": [user]},
                     {"id": "nul-2", "messages": [{**user, "id": "m\x00", "parts": [{"type": "text", "text": "x"}]}]},
                     {"id": "nul-3", "messages": [answer]}):
            refused = client.post("/api/chat", json=body)
            assert refused.status_code == 422, refused.text
        agui = client.post("/api/agui", json={"threadId": "nul-4", "runId": "r", "messages": [
            {"id": "m1", "role": "user", "content": "a\x00b"}]})
        assert agui.status_code == 422
        for chat_id in ("nul-1", "nul-2", "nul-3", "nul-4"):  # no chat was made for a refused message
            assert client.get(f"/api/chats/{chat_id}").status_code == 404
