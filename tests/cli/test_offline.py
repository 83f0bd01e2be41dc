"""The offline model of `toolwire serve`: it calls the demo tools a message asks for."""

from __future__ import annotations

import pytest

from toolwire import Agent, Message, get_model
from toolwire.cli._offline import DemoResponder, cities_in
from toolwire.demo_tools import DEMO_PROMPT, DEMO_TOOLS, SERVE_TOOLS, SUGGESTIONS
from toolwire.testing import FakeProviderServer
from toolwire.tools import ToolDefinition

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("text", "cities"), [
    ("What's the weather in Paris, Tokyo and Lima?", ["Paris", "Tokyo", "Lima"]),
    (DEMO_PROMPT, ["Lisbon"]),
    ("Is it raining in New York or São Paulo? And in Paris. Paris!", ["New York", "São Paulo", "Paris"]),
    ("what's the weather like", []),
])
def test_cities_are_the_capitalised_names_inside_sentences(text: str, cities: list[str]) -> None:
    assert cities_in(text) == cities


async def calls_for(text: str) -> tuple[list[tuple[str, dict[str, object]]], list[str], str]:
    """The calls the offline model makes for `text`, the order their results came in, and its answer."""
    async with FakeProviderServer("openai-chat", DemoResponder(), api_key="demo") as server:
        model = get_model(f"{server.provider}:demo", base_url=server.base_url, api_key="demo")
        agent = Agent(model, tools=DEMO_TOOLS)
        calls: list[tuple[str, dict[str, object]]] = []
        finished: list[str] = []
        async with agent.stream(text) as run:
            async for event in run:
                if event.type == "tool_call_end":
                    calls.append((event.call.name, dict(event.call.arguments)))  # type: ignore[union-attr]
                elif event.type == "tool_result":
                    finished.append(event.result.call_id)
        ids = [part.id for part in run.result.messages[1].tool_calls]
        return calls, [str(ids.index(call_id) + 1) for call_id in finished], str(run.result.output)


async def test_the_weather_in_three_cities_is_three_parallel_calls_answered_out_of_order() -> None:
    calls, finished, answer = await calls_for("What's the weather in Paris, Tokyo and Lima?")
    assert calls == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}),
                     ("get_weather", {"city": "Lima"})]
    assert finished == ["1", "3", "2"]  # each city's weather takes its own time
    assert answer.count("- **") == 3 and "- **Lima**: " in answer and "{" not in answer


async def test_the_demo_prompt_asks_for_every_demo_tool_and_a_greeting_for_none() -> None:
    calls, _, answer = await calls_for(DEMO_PROMPT)
    assert [name for name, _ in calls] == ["get_weather", "find_restaurants", "convert_currency", "book_table"]
    # The results in sentences: the failing booking explained, no JSON.
    assert "For seafood in Lisbon, try **" in answer and "250 USD is 230 EUR" in answer
    assert "I could not book the table at Cervejaria do Cais" in answer and "{" not in answer
    calls, _, answer = await calls_for("Hello there")
    assert calls == []
    assert answer.startswith("Hello! I am the offline demo model of toolwire")
    calls, _, _ = await calls_for("Plan my evening in Lisbon")
    assert [name for name, _ in calls] == ["get_weather", "find_restaurants", "convert_currency", "book_table"]
    calls, _, _ = await calls_for("Where can I eat in Porto tonight?")
    assert calls == [("find_restaurants", {"city": "Porto", "cuisine": "seafood"})]


async def test_each_suggested_prompt_shows_what_it_says() -> None:
    async with FakeProviderServer("openai-chat", DemoResponder(), api_key="demo") as server:
        model = get_model(f"{server.provider}:demo", base_url=server.base_url, api_key="demo")
        agent = Agent(model, tools=SERVE_TOOLS)
        weather, hotel, table, note = SUGGESTIONS
        result = await agent.run(hotel)
        assert result.paused and [c.name for c in result.pending] == ["book_hotel"]
        assert result.pending[0].arguments == {"city": "Porto", "nights": 2}
        resumed = await agent.run(resume=result.state, approvals={result.pending[0].id: True})
        assert "Your room at **" in str(resumed.output) and "is booked for 2 nights" in str(resumed.output)
        result = await agent.run(table)
        assert str(result.output).startswith("I could not book the table at Cervejaria do Cais")
        deltas: list[str] = []
        async with agent.stream(note) as run:
            async for event in run:
                if event.type == "tool_call_delta":
                    deltas.append(event.arguments_delta)
        assert len(deltas) > 60, "the long note streams in many small pieces"
        assert str(run.result.output) == "I saved the note **Packing list for Lisbon** (18 lines)."
        assert weather.startswith("What's the weather in")


def test_tool_calls_stream_slower_than_text() -> None:
    from toolwire.testing.fake import FakeRequest

    responder = DemoResponder(delay=0.02)
    tools: list[ToolDefinition] = [t.definition for t in SERVE_TOOLS]
    request = FakeRequest(protocol="openai-chat", method="POST", path="/v1/chat/completions",
                          messages=[Message.user(SUGGESTIONS[0])], tools=tools, body={})
    assert responder.respond(request).delay == pytest.approx(0.06)
    greeting = FakeRequest(protocol="openai-chat", method="POST", path="/v1/chat/completions",
                           messages=[Message.user("hi")], tools=tools, body={})
    assert responder.respond(greeting).delay == pytest.approx(0.02)
