"""A tool that returns files with its result: `ToolReturn` fills the result part's `files`."""

from __future__ import annotations

import pytest

from tests.agent.support import assert_valid_history, collect
from toolwire import Agent, FilePart, ToolResultPart, ToolReturn, tool
from toolwire.testing import ScriptedModel, ToolCall


@pytest.mark.anyio
async def test_a_tool_returning_tool_return_puts_its_files_in_the_result_part() -> None:
    chart = FilePart(media_type="image/png", data="iVBORw0KGgo=", name="chart.png")

    @tool
    def plot(title: str) -> ToolReturn:
        return ToolReturn({"title": title, "points": 3}, files=[chart])

    model = ScriptedModel([ToolCall("plot", {"title": "Sales"})], ["Here is the chart."])
    _, run = await collect(Agent(model, tools=[plot]))

    result = run.result.messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.result == {"title": "Sales", "points": 3}
    assert result.files == [chart]
    assert_valid_history(run.result.messages)
    # The model's next request carries the files with the result.
    assert model.requests[1].messages[2].parts[0] == result


@pytest.mark.anyio
async def test_a_plain_return_value_has_no_files() -> None:
    @tool
    def echo(text: str) -> str:
        return text

    model = ScriptedModel([ToolCall("echo", {"text": "hi"})], ["Done."])
    _, run = await collect(Agent(model, tools=[echo]))
    result = run.result.messages[2].parts[0]
    assert isinstance(result, ToolResultPart) and result.result == "hi" and result.files == []
