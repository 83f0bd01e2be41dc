"""The offline model of `toolwire serve`: it calls the demo tools a message asks for."""

from __future__ import annotations

import pytest

from toolwire import Agent, get_model
from toolwire.cli._offline import DemoResponder, cities_in
from toolwire.demo_tools import DEMO_PROMPT, DEMO_TOOLS
from toolwire.testing import FakeProviderServer

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
    assert answer.count("get_weather returned") == 3 and '"city":"Lima"' in answer


async def test_the_demo_prompt_asks_for_every_demo_tool_and_other_messages_get_them_all() -> None:
    for text in (DEMO_PROMPT, "Hello there"):
        calls, _, _ = await calls_for(text)
        assert [name for name, _ in calls] == ["get_weather", "find_restaurants", "convert_currency", "book_table"]
    calls, _, _ = await calls_for("Where can I eat in Porto tonight?")
    assert calls == [("find_restaurants", {"city": "Porto", "cuisine": "seafood"})]
