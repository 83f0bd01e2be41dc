"""The server in its ecosystem: `toolwire serve --mcp` (MCP tools in every run) and OpenTelemetry request
spans whose trace the runs they start continue."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.server.support import GateServer, ServerProcess, calls, read_events, serve_in_process, text
from toolwire import Agent, telemetry, tool
from toolwire.server import ChatContext
from toolwire.testing import ScriptedModel, ToolCall

pytestmark = pytest.mark.anyio

MCP_SERVER = f"{sys.executable} -m tests.mcp.server"


async def test_serve_offers_an_mcp_servers_tools_to_every_run(serve: Callable[..., ServerProcess],
                                                               gate: GateServer) -> None:
    server = serve("--mcp", MCP_SERVER)
    gate.script("mcp", calls(("add", {"a": 20, "b": 22}), ("shout", {"text": "hi"})), text("42 and HI!"))
    gate.script("again", calls(("fail", {"reason": "no"})), text("It failed."))
    async with server.api() as api:
        chat = await api.new_chat()
        async with api.send(chat, "[[mcp]] add and shout") as response:
            first = [e async for e in read_events(response)]
        async with api.send(chat, "[[again]] fail") as response:
            second = [e async for e in read_events(response)]
        rows = await api.rows(chat)
    results = {e.data["result"]["name"]: e.data["result"] for e in first if e.type == "tool_result"}
    assert results["add"]["result"] == {"result": 42} and results["shout"]["result"] == {"result": "HI!"}
    assert first[-1].data["status"] == "completed"
    failed = next(e.data["result"] for e in second if e.type == "tool_result")
    assert failed["is_error"] and failed["name"] == "fail"
    assert second[-1].data["status"] == "completed"  # an MCP error is the model's to read, the run goes on
    assert [r["kind"] for r in rows] == ["user", "tools_aggregate", "assistant"] * 2
    out = (server.folder / "server-1.out").read_text()
    assert "tools: gated, sleepy, big, transfer, paint, add, shout, fail, slow, hang, grow, picture\n" in out


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(tracer_provider=provider)
    yield exporter
    telemetry.uninstrument()


@tool
def double(n: int) -> int:
    """Twice n."""
    return 2 * n


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


async def test_a_run_continues_the_trace_of_the_request_that_started_it(tmp_path: Path,
                                                                        spans: InMemorySpanExporter) -> None:
    model = ScriptedModel([ToolCall("double", {"n": 21})], ["It is 42."])

    def factory(ctx: ChatContext) -> Agent:
        return Agent(model, tools=[double], memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    async with serve_in_process(factory, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages", headers={"traceparent": TRACEPARENT},
                                 json={"client_message_id": "1", "text": "double 21"}) as response:
            events = [e async for e in read_events(response)]
        missing = await client.get("/api/nowhere/at/all")
        other = await client.get(f"/api/chats/{chat}", headers={"Authorization": "Bearer not-a-token-of-anyone"})
    assert events[-1].data["status"] == "completed"
    finished = spans.get_finished_spans()
    named: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        named.setdefault(span.name, []).append(span)

    request = named["POST /api/chats/{chat_id}/messages"][0]
    assert request.kind is SpanKind.SERVER
    assert request.context.trace_id == int(TRACE_ID, 16)  # the caller's trace goes on
    assert request.parent is not None and request.parent.span_id == int("00f067aa0ba902b7", 16)
    assert dict(request.attributes or {}) == {"http.request.method": "POST",
                                              "http.route": "/api/chats/{chat_id}/messages",
                                              "http.response.status_code": 200}
    run = named["invoke_agent"][0]
    assert run.parent is not None and run.parent.span_id == request.context.span_id
    assert run.context.trace_id == request.context.trace_id
    assert dict(run.attributes or {})["gen_ai.conversation.id"] == chat
    tool_span = named["execute_tool double"][0]
    assert tool_span.parent is not None and tool_span.parent.span_id == run.context.span_id
    assert [s.parent.span_id for s in finished if s.name.startswith("chat ") and s.parent] == [run.context.span_id] * 2

    created = named["POST /api/chats"][0]
    assert created.context.trace_id != int(TRACE_ID, 16)  # no traceparent: a trace of its own
    assert missing.status_code == 404 and other.status_code == 401
    unmatched = named["GET"][0]  # no route: named by its method alone, never by the path
    assert "http.route" not in dict(unmatched.attributes or {})
    assert dict(unmatched.attributes or {})["http.response.status_code"] == 404
    refused = named["GET /api/chats/{chat_id}"][0]
    assert dict(refused.attributes or {})["http.response.status_code"] == 401
    assert refused.status.status_code is not StatusCode.ERROR  # a client's mistake is not the server's error


async def test_no_request_spans_without_instrumentation(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(["Hello."])

    def factory(ctx: ChatContext) -> Agent:
        # Even an agent that traces itself: the server adds no request span, so the run's span is a root.
        return Agent(model, memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools,
                     instrument=telemetry.Instrumentation(tracer_provider=provider))

    async with serve_in_process(factory, tmp_path) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages", headers={"traceparent": TRACEPARENT},
                                 json={"client_message_id": "1", "text": "hi"}) as response:
            events = [e async for e in read_events(response)]
    assert events[-1].data["status"] == "completed"
    assert [s.name for s in exporter.get_finished_spans() if s.kind is SpanKind.SERVER] == []
    run = next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent")
    assert run.parent is None
