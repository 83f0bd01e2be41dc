"""Request spans: one OpenTelemetry SERVER span per HTTP request, when telemetry is on.

A span is named `{method} {route}` with the route's template (`POST /api/chats/{chat_id}/messages`),
never the concrete path, so chat ids do not multiply span names. It continues the caller's W3C
`traceparent` and is current while the endpoint runs, so a run started by the request parents its
`invoke_agent` span to it (the run manager captures the context when it launches the run; the run
itself outlives the request). A streaming response's span lasts as long as the stream.

With telemetry off (`toolwire.telemetry.instrument()` never called) a request costs one function call
more and nothing is imported.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import telemetry

__all__ = ["RequestSpans"]


class RequestSpans:
    """ASGI middleware wrapping each HTTP request in `telemetry.request_span`."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not telemetry.enabled():
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        status: list[int] = []

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        with telemetry.request_span(scope["method"], self.route_of(scope), headers) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                if status:
                    span.set_attribute("http.response.status_code", status[0])
                    if status[0] >= 500:  # a client's 4xx is not the server's error (HTTP conventions)
                        from opentelemetry.trace import Status, StatusCode

                        span.set_attribute("error.type", str(status[0]))
                        span.set_status(Status(StatusCode.ERROR))

    def route_of(self, scope: Scope) -> str:
        """The template of the route that takes this request ("" when none does)."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                if isinstance(route, Mount):
                    return route.path + "/{path}"
                return str(getattr(route, "path", ""))
        return ""
