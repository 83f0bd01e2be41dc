"""OpenTelemetry GenAI spans, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import context as otel_context, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.cli.support import clean_env
from toolwire import Agent, ProviderHTTPError, telemetry as tw_telemetry, tool
from toolwire.telemetry import Instrumentation
from toolwire.testing import FakeHTTPError, FakeProviderServer, FakeText, FakeToolCall, FakeTurn, FakeUsage

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.clear()
    tw_telemetry.uninstrument()


def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


@tool
def get_weather(city: str) -> str:
    """The weather."""
    return f"sunny in {city}"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


TURNS = [
    FakeTurn(parts=[FakeText(text="Checking."), FakeToolCall(name="get_weather", arguments={"city": "Oslo"}),
                    FakeToolCall(name="explode", arguments={"reason": "test"})],
             usage=FakeUsage(input_tokens=120, output_tokens=30)),
    FakeTurn(parts=[FakeText(text="Sunny in Oslo; the other tool failed.")],
             usage=FakeUsage(input_tokens=200, output_tokens=12)),
]


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


PORT: list[int] = []


async def run_two_tools(
    exporter: InMemorySpanExporter, *, include_content: bool
) -> tuple[dict[str, list[ReadableSpan]], str]:
    with FakeProviderServer("anthropic", TURNS, api_key="sk-ant") as server:
        PORT[:] = [int(server.base_url.rsplit(":", 1)[1].split("/")[0])]
        instrumentation = Instrumentation(tracer_provider=provider(exporter), include_content=include_content)
        agent = Agent("anthropic:claude-test", tools=[get_weather, explode], base_url=server.base_url,
                      api_key="sk-ant", system="Be brief.", name="weather-bot", instrument=instrumentation,
                      settings={"max_tokens": 500, "temperature": 0.2})
        async with agent:
            result = await agent.run("Weather in Oslo?")
        return by_name(exporter.get_finished_spans()), result.output


async def test_a_two_tool_run_yields_the_span_tree_and_attributes(exporter: InMemorySpanExporter) -> None:
    spans, output = await run_two_tools(exporter, include_content=False)
    assert output == "Sunny in Oslo; the other tool failed."
    (agent_span,) = spans["invoke_agent weather-bot"]
    chats = spans["chat claude-test"]
    (weather,) = spans["execute_tool get_weather"]
    (exploded,) = spans["execute_tool explode"]
    assert len(chats) == 2
    root = agent_span.context
    assert agent_span.parent is None and agent_span.kind is SpanKind.INTERNAL
    for child in [*chats, weather, exploded]:
        assert child.parent is not None and child.parent.span_id == root.span_id  # tools are never under a chat
        assert child.context.trace_id == root.trace_id
    assert attrs(agent_span) == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-test", "gen_ai.agent.name": "weather-bot",
        "gen_ai.usage.input_tokens": 320, "gen_ai.usage.output_tokens": 42, "toolwire.run.status": "completed",
        # Anthropic reports cache use; zero here.
        "gen_ai.usage.cache_read.input_tokens": 0, "gen_ai.usage.cache_creation.input_tokens": 0,
    }
    first = attrs(chats[0])
    assert chats[0].kind is SpanKind.CLIENT
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == "claude-test" and first["gen_ai.response.model"] == "claude-test"
    assert str(first["gen_ai.response.id"]).startswith("msg_")
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (120, 30)
    assert (first["server.address"], first["server.port"]) == ("127.0.0.1", PORT[0])
    assert (first["gen_ai.request.max_tokens"], first["gen_ai.request.temperature"]) == (500, 0.2)
    assert attrs(chats[1])["gen_ai.response.finish_reasons"] == ("stop",)
    tool_attrs = attrs(weather)
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "get_weather" and tool_attrs["gen_ai.tool.type"] == "function"
    assert tool_attrs["gen_ai.tool.call.id"].startswith("toolu_")
    assert tool_attrs["gen_ai.tool.description"] == "The weather."
    assert weather.status.status_code is StatusCode.UNSET


async def test_a_failing_tool_sets_the_error_on_its_span(exporter: InMemorySpanExporter) -> None:
    spans, _ = await run_two_tools(exporter, include_content=False)
    (exploded,) = spans["execute_tool explode"]
    assert exploded.status.status_code is StatusCode.ERROR
    assert attrs(exploded)["error.type"] == "RuntimeError"
    (event,) = [e for e in exploded.events if e.name == "exception"]
    assert "boom: test" in str((event.attributes or {})["exception.message"])
    (agent_span,) = spans["invoke_agent weather-bot"]
    assert agent_span.status.status_code is StatusCode.UNSET  # the run went on


CONTENT_KEYS = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
                "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


async def test_no_content_without_the_opt_in(exporter: InMemorySpanExporter) -> None:
    spans, _ = await run_two_tools(exporter, include_content=False)
    recorded = {key for group in spans.values() for span in group for key in attrs(span)}
    assert not recorded & CONTENT_KEYS
    everything = json.dumps([attrs(s) for group in spans.values() for s in group])
    assert "Oslo" not in everything and "Be brief" not in everything


async def test_content_with_the_opt_in(exporter: InMemorySpanExporter) -> None:
    spans, _ = await run_two_tools(exporter, include_content=True)
    first = attrs(spans["chat claude-test"][0])
    assert json.loads(first["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be brief."}]
    assert json.loads(first["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]}]
    output = json.loads(first["gen_ai.output.messages"])
    assert output[0]["role"] == "assistant" and output[0]["finish_reason"] == "tool_calls"
    assert output[0]["parts"][1] == {"type": "tool_call", "id": output[0]["parts"][1]["id"], "name": "get_weather",
                                     "arguments": {"city": "Oslo"}}
    second = json.loads(attrs(spans["chat claude-test"][1])["gen_ai.input.messages"])
    assert second[-1]["role"] == "tool" and second[-1]["parts"][0]["type"] == "tool_call_response"
    weather = attrs(spans["execute_tool get_weather"][0])
    assert json.loads(weather["gen_ai.tool.call.arguments"]) == {"city": "Oslo"}
    assert weather["gen_ai.tool.call.result"] == "sunny in Oslo"


async def test_a_provider_error_is_recorded_on_the_chat_and_the_run(exporter: InMemorySpanExporter) -> None:
    with FakeProviderServer("openai-chat", [FakeHTTPError(status=429, message="Slow down.")], api_key="sk") as server:
        tw_telemetry.instrument(tracer_provider=provider(exporter))
        agent = Agent("openai:gpt-test", base_url=server.base_url, api_key="sk")
        agent.model.retry.max_retries = 0  # type: ignore[attr-defined]
        with pytest.raises(ProviderHTTPError):
            await agent.run("Hi.")
        await agent.aclose()
    spans = by_name(exporter.get_finished_spans())
    (chat,) = spans["chat gpt-test"]
    (run,) = spans["invoke_agent"]
    for span in (chat, run):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "429"
    assert attrs(run)["gen_ai.provider.name"] == "openai"


async def test_runs_join_the_callers_trace_or_the_one_given(exporter: InMemorySpanExporter) -> None:
    from toolwire.testing import ScriptedModel

    tracer_provider = provider(exporter)
    tw_telemetry.instrument(tracer_provider=tracer_provider)
    tracer = tracer_provider.get_tracer("app")
    agent = Agent(ScriptedModel(["A."], ["B."]))
    with tracer.start_as_current_span("request") as request:
        await agent.run("One.")
        captured = tw_telemetry.capture_context()
    await agent.run("Two.", trace_context=captured)
    spans = by_name(exporter.get_finished_spans())
    first, second = spans["invoke_agent"]
    assert first.parent is not None and first.parent.span_id == request.get_span_context().span_id
    assert second.parent is not None and second.parent.span_id == request.get_span_context().span_id
    assert attrs(first)["gen_ai.provider.name"] == "scripted"


def test_request_span_continues_a_w3c_traceparent(exporter: InMemorySpanExporter) -> None:
    tw_telemetry.instrument(tracer_provider=provider(exporter))
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tw_telemetry.request_span("POST", "/api/chats/{id}/runs", {"traceparent": parent}) as span:
        assert trace.get_current_span() is span
    (server_span,) = exporter.get_finished_spans()
    assert server_span.kind is SpanKind.SERVER and server_span.name == "POST /api/chats/{id}/runs"
    assert format(server_span.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert attrs(server_span) == {"http.request.method": "POST", "http.route": "/api/chats/{id}/runs"}
    tw_telemetry.uninstrument()
    with tw_telemetry.request_span("GET", "/", {}) as nothing:
        assert nothing is None
    assert otel_context.get_current() is not None


async def test_instrument_false_makes_no_spans_even_when_instrumented_globally(
        exporter: InMemorySpanExporter) -> None:
    from toolwire.testing import ScriptedModel

    tw_telemetry.instrument(tracer_provider=provider(exporter))
    await Agent(ScriptedModel(["A."]), instrument=False).run("Hi.")
    assert exporter.get_finished_spans() == ()


def test_off_by_default_nothing_of_opentelemetry_is_imported() -> None:
    code = ("import sys, toolwire\n"
            "from toolwire import Agent, tool\n"
            "from toolwire.testing import ScriptedModel, ToolCall\n"
            "@tool\n"
            "def f() -> str:\n"
            "    '''F.'''\n"
            "    return 'x'\n"
            "r = Agent(ScriptedModel([ToolCall('f', {})], ['ok']), tools=[f]).run_sync('go')\n"
            "assert r.output == 'ok'\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
