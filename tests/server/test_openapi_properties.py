"""Property-based requests generated from the served `/openapi.json` (schemathesis): never a 5xx.

Requests are drawn from every operation of the document, valid and deliberately invalid ones, with a
mix of callers (the chats' owner, another user, no token, a wrong token); about half of the chat ids
are replaced by real chats, so the generated requests reach past the 404s into the handlers. Every
response must be below 500 and conform to the document (status codes, content types, headers, bodies,
invalid data rejected, authentication enforced).
"""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import schemathesis
from hypothesis import HealthCheck, given, seed, settings, strategies as st
from schemathesis import checks
from starlette.routing import Route

from tests.server.support import TOKENS, GateServer, ServerProcess
from toolwire.server import ServerConfig, create_app


def test_no_generated_request_gets_a_server_error(server: ServerProcess, gate: GateServer) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    owner = {"Authorization": f"Bearer {TOKENS['alice']}"}
    with httpx.Client(base_url=server.url, headers=owner, trust_env=False, timeout=30) as client:
        chats = [client.post("/api/chats", json={"title": f"chat {i}"}).json()["id"] for i in range(3)]
        with client.stream("POST", f"/api/chats/{chats[0]}/messages",
                           json={"client_message_id": "seed", "text": "hello"}) as response:
            response.read()
    # Mostly the owner, so that most requests get past authentication.
    callers = [owner, owner, owner, {"Authorization": f"Bearer {TOKENS['bob']}"}, {}, {"Authorization": "Bearer x"}]
    outcomes: dict[int, int] = {}
    operations: dict[str, int] = {}
    # Drawn operation by operation, so that every one is exercised whatever else the run did before (one strategy
    # over the whole document left an operation out now and then, depending on the worker's earlier tests).
    every_operation = [result.ok() for result in schema.get_all_operations()]
    per_operation = max(12, 400 // len(every_operation))
    for operation in every_operation:
        cases = operation.as_strategy() | operation.as_strategy(
            generation_mode=schemathesis.GenerationMode.NEGATIVE)

        @seed(20250101)
        @settings(max_examples=per_operation, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                         HealthCheck.data_too_large])
        @given(case=cases, data=st.data())
        def check(case: schemathesis.Case, data: st.DataObject) -> None:
            if case.path_parameters and "chat_id" in case.path_parameters and data.draw(st.integers(0, 3)):
                case.path_parameters["chat_id"] = data.draw(st.sampled_from(chats))
            headers = dict(data.draw(st.sampled_from(callers)))
            response = case.call(base_url=server.url, headers=headers, timeout=30)
            operations[f"{case.method} {case.path}"] = operations.get(f"{case.method} {case.path}", 0) + 1
            outcomes[response.status_code] = outcomes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (case.method, case.formatted_path, response.status_code,
                                                response.text)
            # Every check but one: "valid data is accepted" cannot know that a schema-valid request can still be
            # refused for what it means (deciding some approvals but not all is a documented 400).
            case.validate_response(response, headers=headers, excluded_checks=[checks.positive_data_acceptance])

        check()
    assert not [status for status in outcomes if status >= 500]
    # The generated requests reached real handlers, not only the authentication and 404 checks.
    assert outcomes.get(200, 0) + outcomes.get(201, 0) > 10, outcomes
    assert "Traceback" not in server.stderr()
    # Every operation of the document was exercised, the protocol routes included.
    documented = {f"{method.upper()} {path}" for path, item in schema.raw_schema["paths"].items() for method in item}
    assert documented - set(operations) == set(), operations


def test_every_route_of_the_app_is_in_the_document(tmp_path: Path) -> None:
    app = create_app(lambda ctx: None, store=f"sqlite:///{tmp_path / 'app.db'}", config=ServerConfig(web_dir=None))
    document = orjson.loads(app.state.toolwire.openapi)
    routes = {(method, route.path) for route in app.routes if isinstance(route, Route)
              for method in route.methods or () if method != "HEAD" and route.path not in ("/", "/openapi.json")}
    assert len(routes) >= 17
    assert {"/api/chat", "/api/agui", "/api/chat/{chat_id}/stream"} <= {path for _, path in routes}
    missing = sorted(f"{method} {path}" for method, path in routes
                     if method.lower() not in document["paths"].get(path, {}))
    assert missing == [], f"routes /openapi.json leaves out: {missing}"
