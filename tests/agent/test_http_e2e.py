"""The agent loop end to end over real HTTP: a local server speaking OpenAI chat and Anthropic SSE."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.agent.loopback import (
    Call,
    LoopbackServer,
    anthropic_text,
    anthropic_tool_calls,
    openai_text,
    openai_tool_calls,
)
from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, ToolStartedEvent, get_model, tool
from toolwire.events import MessageEndEvent, TextDelta, ToolCallStart, ToolResultEvent, Usage

CITIES = {"Boston": 3, "Paris": 12}


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    s = LoopbackServer()
    s.start()
    try:
        yield s
    finally:
        s.stop()


def weather_tool(log: list[str]) -> Any:
    @tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Current temperature in a city.

        Args:
            city: The city name.
        """
        log.append(city)
        await anyio.sleep(0.05 if city == "Boston" else 0.0)  # Boston finishes last
        return {"city": city, "celsius": CITIES[city]}

    return get_weather


BOSTON = Call("call_8Sp49rZGndlZALo0uq1XvA7A", "get_weather", ['{"city"', ': "Bos', 'ton"}'])
PARIS = Call("call_u5dbdPz1mAis8zZVk4ZBqXgL", "get_weather", ['{"ci', 'ty": "Paris"}'])


@pytest.mark.anyio
async def test_openai_chat_two_steps_with_parallel_tools(server: LoopbackServer) -> None:
    server.script("openai", openai_tool_calls([BOSTON, PARIS]),
                  openai_text(["Boston is 3°C", " and Paris is 12°C."]))
    log: list[str] = []
    model = get_model("openai:gpt-4o", base_url=server.url + "/v1", api_key="sk-loopback")
    try:
        events: list[Any] = []
        async with Agent(model, tools=[weather_tool(log)], system="Be brief.").stream("Boston and Paris?") as run:
            async for event in run:
                events.append(event)
        result = run.result
    finally:
        await model.aclose()

    assert result.output == "Boston is 3°C and Paris is 12°C."
    assert sorted(log) == ["Boston", "Paris"]
    assert [e.result.call_id for e in events if isinstance(e, ToolResultEvent)] == [PARIS.id, BOSTON.id]
    assert [r.call_id for r in results_of(result.messages)] == [BOSTON.id, PARIS.id]
    assert_valid_history(result.messages)
    assert result.usage == Usage(input_tokens=222, output_tokens=62, cache_read_tokens=0, reasoning_tokens=0)

    first, second = server.received
    assert first.headers["authorization"] == "Bearer sk-loopback"
    assert first.body["messages"] == [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "Boston and Paris?"}]
    assert first.body["tools"][0]["function"]["name"] == "get_weather"
    assert first.body["tools"][0]["function"]["parameters"]["properties"]["city"]["description"] == "The city name."
    sent = second.body["messages"]
    assert sent[2]["tool_calls"] == [
        {"id": BOSTON.id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Boston"}'}},
        {"id": PARIS.id, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    ]
    assert sent[3:] == [
        {"role": "tool", "tool_call_id": BOSTON.id, "content": '{"city":"Boston","celsius":3}'},
        {"role": "tool", "tool_call_id": PARIS.id, "content": '{"city":"Paris","celsius":12}'},
    ]
    server.wait_until_done()
    assert all(r.completed for r in server.received)


@pytest.mark.anyio
async def test_anthropic_two_steps_with_eager_parallel_tools(server: LoopbackServer) -> None:
    # The server pauses after each complete tool_use block: the first tool must start during that pause.
    server.script("anthropic",
                  anthropic_tool_calls(["I'll check both cities."], [BOSTON, PARIS], pause_after_call=0.2),
                  anthropic_text(["Boston: 3°C.", " Paris: 12°C."]))
    log: list[str] = []
    agent = Agent("anthropic:claude-3-opus-20240229", base_url=server.url, api_key="sk-ant-loopback",
                  tools=[weather_tool(log)])
    try:
        events: list[Any] = []
        async with agent.stream("Boston and Paris?") as run:
            async for event in run:
                events.append(event)
    finally:
        await agent.aclose()

    starts = [i for i, e in enumerate(events) if isinstance(e, ToolStartedEvent)]
    second_call = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStart) and e.id == PARIS.id)
    first_message_end = next(i for i, e in enumerate(events) if isinstance(e, MessageEndEvent))
    assert starts[0] < second_call < first_message_end  # Boston ran while the model was still streaming
    result = run.result
    assert result.output == "Boston: 3°C. Paris: 12°C."
    assert [r.result for r in results_of(result.messages)] == [{"city": "Boston", "celsius": 3},
                                                                 {"city": "Paris", "celsius": 12}]
    assert_valid_history(result.messages)

    first, second = server.received
    assert first.headers["x-api-key"] == "sk-ant-loopback"
    user_turn = second.body["messages"][-1]
    assert user_turn["role"] == "user"
    assert [(b["type"], b["tool_use_id"]) for b in user_turn["content"]] == [("tool_result", BOSTON.id),
                                                                             ("tool_result", PARIS.id)]
    assert second.body["messages"][1]["content"][0] == {"type": "text", "text": "I'll check both cities."}


@pytest.mark.anyio
async def test_run_stream_over_http_prefixes_the_answer_and_keeps_history_valid(server: LoopbackServer) -> None:
    server.script("anthropic", anthropic_tool_calls(["Checking."], [PARIS]), anthropic_text(["It is ", "12°C."]))
    agent = Agent("anthropic:claude-3-opus-20240229", base_url=server.url, api_key="k", tools=[weather_tool([])])
    try:
        shown: list[str] = []
        history: list[Any] = []
        async for chunk in agent.run_stream("Paris?"):
            shown.append(chunk.output)
            history.extend(chunk.messages)
            assert_valid_history(history)
    finally:
        await agent.aclose()
    assert "".join(shown) == "Checking.\nIt is 12°C."
    assert history[-1].text == "It is 12°C."


@pytest.mark.anyio
async def test_cancelling_mid_stream_closes_the_http_response(server: LoopbackServer) -> None:
    server.script("openai", openai_text(["Once", " upon", " a", " time"], pause=1.0))
    model = get_model("openai:gpt-4o", base_url=server.url + "/v1", api_key="k")
    try:
        async with Agent(model).stream("Tell me a story.") as run:
            async for event in run:
                if isinstance(event, TextDelta):
                    break
    finally:
        await model.aclose()
    await anyio.to_thread.run_sync(server.wait_until_done)
    assert server.received[0].client_left
    assert [m.role for m in run.messages] == ["user", "assistant"]
    assert run.messages[1].text == "Once"
    assert run.messages[1].metadata == {"incomplete": True}


def test_run_sync_over_http(server: LoopbackServer) -> None:
    server.script("openai", openai_tool_calls([PARIS]), openai_text(["12°C."]),
                  openai_tool_calls([BOSTON]), openai_text(["3°C."]))
    agent = Agent("openai:gpt-4o", base_url=server.url + "/v1", api_key="k", tools=[weather_tool([])])
    first = agent.run_sync("Paris?")
    second = agent.run_sync("Boston?", history=first.messages)  # a new event loop, a new HTTP client
    assert (first.output, second.output) == ("12°C.", "3°C.")
    assert [m["role"] for m in server.received[3].body["messages"]] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool"]
