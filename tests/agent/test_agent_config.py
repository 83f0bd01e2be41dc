"""Agent state item 9: every attribute of an agent is live: read when a run starts, never mid-run."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tests.agent.support import results_of
from toolwire import Agent, UserError, tool
from toolwire.testing import ScriptedModel, ToolCall


class Answer(BaseModel):
    value: int


@tool
async def slow() -> str:
    """Takes a second."""
    import anyio

    await anyio.sleep(1)
    return "done"


@tool
def fast() -> str:
    """Instant."""
    return "fast"


@pytest.mark.anyio
async def test_item9_tools_timeout_and_output_type_changes_apply_to_the_next_run() -> None:
    """Agent state item 9: `agent.tools`, `agent.tool_timeout` and `agent.output_type` behave like `agent.system`."""
    model = ScriptedModel([ToolCall("fast", {})], ["ok"], [ToolCall("slow", {})], ["ok"],
                          [ToolCall("final_result", {"value": 4})])
    agent = Agent(model, system="One.")
    agent.tools.append(fast)
    agent.system = "Two."
    first = await agent.run("go")
    assert results_of(first.messages)[0].result == "fast"
    assert model.requests[0].messages[0].text == "Two."
    assert [t.name for t in model.requests[0].tools] == ["fast"]

    agent.tools = [slow]
    agent.tool_timeout = 0.05
    second = await agent.run("go")
    assert "did not finish within 0.05 seconds" in results_of(second.messages)[0].result["error"]

    agent.output_type = Answer  # type: ignore[assignment]
    third = await agent.run("go")
    assert third.output == Answer(value=4)


def test_item9_a_bad_value_set_later_is_refused_when_the_run_starts() -> None:
    """Agent state item 9: attributes set after construction get the same checks as the constructor's."""
    agent = Agent(ScriptedModel(["hi"]))
    agent.max_steps = 0
    with pytest.raises(UserError, match="max_steps must be at least 1"):
        agent.stream("hi")
    agent.max_steps = 3
    agent.tool_timeout = -1
    with pytest.raises(UserError, match="tool_timeout must be a positive number"):
        agent.stream("hi")
