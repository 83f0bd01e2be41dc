"""The seconds each tool call took are kept with the round's results, so a stored round can show them."""

from __future__ import annotations

import anyio
import pytest

from tests.agent.support import collect
from toolwire import Agent, Message, ToolResultEvent, tool
from toolwire.testing import ScriptedModel, ToolCall


@pytest.mark.anyio
async def test_the_results_message_carries_each_calls_duration() -> None:
    @tool
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "done"

    model = ScriptedModel([ToolCall("slow", {"seconds": 0.2}), ToolCall("slow", {"seconds": 0.0})], ["Both done."])
    events, run = await collect(Agent(model, tools=[slow]))
    result = run.result
    results = result.messages[2]
    durations = results.metadata["toolwire"]["durations"]
    assert set(durations) == {"call_1", "call_2"}
    assert durations["call_1"] >= 0.2 > durations["call_2"]
    streamed = {e.result.call_id: e.duration for e in events if isinstance(e, ToolResultEvent)}
    assert durations == {call: round(seconds, 3) for call, seconds in streamed.items()}  # what the live page showed
    # It survives the JSON a store keeps.
    assert Message.from_json(results.to_json()).metadata == results.metadata


@pytest.mark.anyio
async def test_a_round_without_a_run_tool_has_no_durations() -> None:
    model = ScriptedModel([ToolCall("missing", {})], ["No such tool."])
    _, run = await collect(Agent(model, tools=[]))
    result = run.result
    assert result.messages[2].metadata == {}
