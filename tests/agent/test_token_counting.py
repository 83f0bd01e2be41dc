"""Counting input tokens before a request (`Model.count_tokens`) and the per-request input limit it enforces.

Every test talks to a fake provider server over real loopback HTTP; the fakes answer Anthropic's
`/v1/messages/count_tokens` and Gemini's `:countTokens` in the providers' own format, with
`estimate_tokens` of the counted body.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from toolwire import (
    Agent,
    ProviderHTTPError,
    UsageBudget,
    UsageBudgetExceeded,
    UsageLimitExceeded,
    UsageLimits,
    tool,
)
from toolwire.messages import Message
from toolwire.testing import (
    FakeProviderServer,
    FakeRequest,
    FakeText,
    FakeToolCall,
    FakeTurn,
    FakeUsage,
    estimate_tokens,
)

from .support import assert_valid_history

pytestmark = pytest.mark.anyio

COUNTING = ["anthropic", "gemini"]
COUNT_PATHS = {"anthropic": "/v1/messages/count_tokens", "gemini": "/v1beta/models/m:countTokens"}


@tool
def fetch(page: int) -> str:
    """Fetch one page of a long document."""
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 200


def counts(server: FakeProviderServer) -> list[FakeRequest]:
    return [r for r in server.requests if r.path == COUNT_PATHS.get(server.protocol)]


def sent(server: FakeProviderServer) -> list[FakeRequest]:
    return [r for r in server.requests if r.stream]


def counted_body(protocol: str, body: dict[str, Any]) -> Any:
    """What the fake counts: the whole counted request (Gemini's `generateContentRequest`)."""
    return body["generateContentRequest"] if protocol == "gemini" else body


@pytest.mark.parametrize("protocol", COUNTING)
async def test_the_counted_body_is_the_request_body_without_its_streaming_fields(protocol: str) -> None:
    messages = [Message.system("Answer briefly."), Message.user("What is on page 3?")]
    async with FakeProviderServer(protocol, [FakeTurn(parts=[FakeText(text="Nothing.")])]) as server:
        model = server.model("m")
        try:
            tokens = await model.count_tokens(messages, tools=[fetch.definition], settings={"temperature": 0.2})
            await model.request(messages, tools=[fetch.definition], settings={"temperature": 0.2})
        finally:
            await model.aclose()
    [count], [request] = counts(server), sent(server)
    assert tokens == estimate_tokens(counted_body(protocol, count.body)) > 1
    assert count.headers["accept"] == "application/json"
    assert [m.text for m in count.messages] == ["Answer briefly.", "What is on page 3?"]
    assert [t.name for t in count.tools] == ["fetch"]
    if protocol == "anthropic":
        # Only what shapes the output is left out: the endpoint refuses those fields.
        dropped = {"max_tokens", "stream", "temperature"}
        assert dropped <= request.body.keys()
        assert count.body == {k: v for k, v in request.body.items() if k not in dropped}
        assert count.body["system"] and count.body["tools"]
    else:
        assert count.body == {"generateContentRequest": {"model": "models/m", **request.body}}
        assert request.body["systemInstruction"] and request.body["tools"]


@pytest.mark.parametrize("protocol", COUNTING)
async def test_a_request_over_the_limit_is_refused_without_being_sent(protocol: str) -> None:
    async with FakeProviderServer(protocol, [FakeTurn(parts=[FakeText(text="Too long for me.")])]) as server:
        model = server.model("m")
        try:
            agent = Agent(model, system="Answer briefly.", usage_limits=UsageLimits(request_input_tokens=20))
            with pytest.raises(UsageLimitExceeded) as caught:
                await agent.run("Summarise this: " + "a long text " * 100)
        finally:
            await model.aclose()
    assert sent(server) == []  # the request itself never reached the provider
    [count] = counts(server)
    tokens = estimate_tokens(counted_body(protocol, count.body))
    error = caught.value
    assert (error.limit, error.value) == ("request_input_tokens", 20)
    assert f"would send {tokens} input tokens" in str(error) and "so it was not sent" in str(error)
    assert error.messages == [Message.user("Summarise this: " + "a long text " * 100)]


@pytest.mark.parametrize("protocol", COUNTING)
async def test_the_first_request_to_go_over_is_the_one_refused(protocol: str) -> None:
    # The first request is small; the tool result makes the second one large. Without counting, the
    # second request would be sent (the first one's reported input was under the limit).
    turns = [FakeTurn(parts=[FakeToolCall(name="fetch", arguments={"page": 3})]),
             FakeTurn(parts=[FakeText(text="Page 3 is about lorem ipsum.")])]
    async with FakeProviderServer(protocol, turns) as server:
        model = server.model("m")
        try:
            agent = Agent(model, tools=[fetch], usage_limits=UsageLimits(request_input_tokens=600))
            with pytest.raises(UsageLimitExceeded) as caught:
                await agent.run("What is on page 3?")
        finally:
            await model.aclose()
    assert len(sent(server)) == 1 and len(counts(server)) == 2
    first, second = (estimate_tokens(counted_body(protocol, c.body)) for c in counts(server))
    assert first <= 600 < second
    assert f"would send {second} input tokens" in str(caught.value)
    history = caught.value.messages
    assert_valid_history(history)
    assert len(history) == 3 and history[-1].tool_results_parts  # the call was answered before the stop


@pytest.mark.parametrize("protocol", COUNTING)
async def test_a_request_under_the_limit_is_counted_then_sent(protocol: str) -> None:
    turns = [FakeTurn(parts=[FakeToolCall(name="fetch", arguments={"page": 1})]),
             FakeTurn(parts=[FakeText(text="Page 1 is about lorem ipsum.")])]
    async with FakeProviderServer(protocol, turns) as server:
        model = server.model("m")
        try:
            agent = Agent(model, tools=[fetch], usage_limits=UsageLimits(request_input_tokens=100_000))
            result = await agent.run("What is on page 1?")
        finally:
            await model.aclose()
    assert result.output == "Page 1 is about lorem ipsum."
    # Each model request is preceded by its count, and the count covers what that request sent.
    order = ["count" if r in counts(server) else "send" for r in server.requests]
    assert order == ["count", "send", "count", "send"]
    for count, request in zip(counts(server), sent(server), strict=True):
        assert count.messages == request.messages and count.tools == request.tools


@pytest.mark.parametrize("protocol", COUNTING)
async def test_a_shared_budget_refuses_a_counted_request_too(protocol: str) -> None:
    async with FakeProviderServer(protocol, [FakeTurn(parts=[FakeText(text="Hi.")])]) as server:
        model = server.model("m")
        budget = UsageBudget(request_input_tokens=10, name="team-a")
        try:
            with pytest.raises(UsageBudgetExceeded, match=r"'team-a'.*so it was not sent"):
                await Agent(model).run("Hello " * 50, budget=budget)
        finally:
            await model.aclose()
    assert sent(server) == [] and len(counts(server)) == 1
    assert budget.requests_used == 0  # a refused request is not reserved


@pytest.mark.parametrize("protocol", COUNTING)
async def test_without_the_limit_nothing_is_counted(protocol: str) -> None:
    turns = [FakeTurn(parts=[FakeToolCall(name="fetch", arguments={"page": 2})]),
             FakeTurn(parts=[FakeText(text="Done.")])]
    async with FakeProviderServer(protocol, turns) as server:
        model = server.model("m")
        try:
            limits = UsageLimits(requests=5, input_tokens=1_000_000, total_tokens=1_000_000)
            result = await Agent(model, tools=[fetch], usage_limits=limits).run("Page 2?")
        finally:
            await model.aclose()
    assert result.output == "Done."
    assert counts(server) == [] and len(server.requests) == 2


async def test_openai_cannot_count_and_keeps_the_previous_request_rule() -> None:
    turns = [FakeTurn(parts=[FakeToolCall(name="fetch", arguments={"page": 3})], usage=FakeUsage(input_tokens=900)),
             FakeTurn(parts=[FakeText(text="Never sent.")])]
    async with FakeProviderServer("openai-chat", turns) as server:
        model = server.model("gpt-4.1-mini")
        try:
            assert await model.count_tokens([Message.user("Hi")]) is None
            agent = Agent(model, tools=[fetch], usage_limits=UsageLimits(request_input_tokens=600))
            with pytest.raises(UsageLimitExceeded, match="Its last request sent 900 input tokens"):
                await agent.run("What is on page 3?")
        finally:
            await model.aclose()
    # No counting request was made: the first request went out, and its reported input stopped the second.
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]


async def test_a_failed_count_raises_the_provider_error() -> None:
    async with FakeProviderServer("anthropic", [FakeTurn(parts=[FakeText(text="Hi.")])], api_key="right") as server:
        model = server.model("m", api_key="wrong", max_retries=0)
        try:
            agent = Agent(model, usage_limits=UsageLimits(request_input_tokens=1_000))
            with pytest.raises(ProviderHTTPError) as caught:
                await agent.run("Hello")
        finally:
            await model.aclose()
    assert caught.value.status_code == 401 and "wrong" not in str(caught.value)
    assert caught.value.messages == [Message.user("Hello")]
    assert sent(server) == [] and len(counts(server)) == 1


async def test_the_fake_counting_endpoints_speak_the_providers_formats() -> None:
    contents = [{"role": "user", "parts": [{"text": "Hello there"}]}]
    async with FakeProviderServer("gemini") as gemini, FakeProviderServer("anthropic") as anthropic, \
            httpx.AsyncClient() as client:
        bare = await client.post(gemini.url + "/v1beta/models/m:countTokens", json={"contents": contents})
        both = await client.post(gemini.url + "/v1beta/models/m:countTokens", json={
            "contents": contents, "generateContentRequest": {"model": "models/m", "contents": contents}})
        refused = await client.post(anthropic.url + "/v1/messages/count_tokens", json={
            "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]})
    tokens = estimate_tokens({"contents": contents})
    assert bare.status_code == 200
    assert bare.json() == {"totalTokens": tokens, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}
    assert both.status_code == 400 and both.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert refused.status_code == 400
    assert refused.json()["error"] == {"type": "invalid_request_error",
                                       "message": "max_tokens: Extra inputs are not permitted"}
