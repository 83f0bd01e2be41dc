"""GenAI client metrics (`gen_ai.client.token.usage`, `gen_ai.client.operation.duration`), read back from the
SDK's in-memory metric reader."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from toolwire import Agent, ProviderHTTPError, telemetry as tw_telemetry
from toolwire.telemetry import DURATION_BUCKETS, TOKEN_BUCKETS, Instrumentation
from toolwire.testing import FakeHTTPError, FakeProviderServer, FakeText, FakeTurn, FakeUsage

pytestmark = pytest.mark.anyio

TURNS = [FakeTurn(parts=[FakeText(text="Sunny.")], usage=FakeUsage(input_tokens=120, output_tokens=30))]


def points(reader: InMemoryMetricReader) -> dict[str, list[HistogramDataPoint]]:
    """Every histogram point the reader holds, by metric name."""
    found: dict[str, list[HistogramDataPoint]] = {}
    data = reader.get_metrics_data()
    if data is None:  # nothing recorded at all
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "toolwire"
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)  # type: ignore[arg-type]
    return found


def metric_units(reader: InMemoryMetricReader) -> dict[str, str]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name: m.unit or "" for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}


async def test_each_model_request_records_its_tokens_and_duration_with_the_conventions_attributes() -> None:
    reader = InMemoryMetricReader()
    with FakeProviderServer("anthropic", TURNS * 2, api_key="sk-ant") as server:
        port = int(server.base_url.rsplit(":", 1)[1].split("/")[0])
        instrumentation = Instrumentation(tracer_provider=TracerProvider(),
                                          meter_provider=MeterProvider(metric_readers=[reader]))
        agent = Agent("anthropic:claude-test", base_url=server.base_url, api_key="sk-ant", instrument=instrumentation)
        async with agent:
            await agent.run("Weather in Oslo?")
            await agent.run("And in Lima?")
    found = points(reader)
    assert metric_units(reader) == {"gen_ai.client.token.usage": "{token}", "gen_ai.client.operation.duration": "s"}
    base = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-test",
            "gen_ai.response.model": "claude-test", "server.address": "127.0.0.1", "server.port": port}
    usage = {point.attributes["gen_ai.token.type"]: point for point in found["gen_ai.client.token.usage"]}
    assert set(usage) == {"input", "output"}
    for token_type, each in (("input", 120), ("output", 30)):
        point = usage[token_type]
        assert dict(point.attributes or {}) == {**base, "gen_ai.token.type": token_type}
        assert (point.count, point.sum) == (2, 2 * each)  # two requests, one record each
        assert tuple(point.explicit_bounds) == TOKEN_BUCKETS
    (duration,) = found["gen_ai.client.operation.duration"]
    assert dict(duration.attributes or {}) == base
    assert duration.count == 2 and 0 < duration.sum < 30
    assert tuple(duration.explicit_bounds) == DURATION_BUCKETS


async def test_a_failed_request_records_its_duration_with_the_error_type_and_no_tokens() -> None:
    reader = InMemoryMetricReader()
    with FakeProviderServer("openai-chat", [FakeHTTPError(status=429, message="Slow down.")], api_key="sk") as server:
        tw_telemetry.instrument(tracer_provider=TracerProvider(), meter_provider=MeterProvider(metric_readers=[reader]))
        try:
            agent = Agent("openai:gpt-test", base_url=server.base_url, api_key="sk")
            agent.model.retry.max_retries = 0  # type: ignore[attr-defined]
            with pytest.raises(ProviderHTTPError):
                await agent.run("Hi.")
            await agent.aclose()
        finally:
            tw_telemetry.uninstrument()
    found = points(reader)
    assert "gen_ai.client.token.usage" not in found
    (duration,) = found["gen_ai.client.operation.duration"]
    attributes: dict[str, Any] = dict(duration.attributes or {})
    assert attributes["error.type"] == "429" and attributes["gen_ai.provider.name"] == "openai"
    assert duration.count == 1


async def test_an_agent_not_instrumented_records_nothing() -> None:
    reader = InMemoryMetricReader()
    tw_telemetry.instrument(tracer_provider=TracerProvider(), meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        with FakeProviderServer("anthropic", TURNS, api_key="sk-ant") as server:
            async with Agent("anthropic:claude-test", base_url=server.base_url, api_key="sk-ant",
                             instrument=False) as agent:
                await agent.run("Hi.")
    finally:
        tw_telemetry.uninstrument()
    assert points(reader) == {}
