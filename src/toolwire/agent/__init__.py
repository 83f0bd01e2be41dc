"""The agent: a model and tools run as a loop, streaming, with eager parallel tool execution.

    from toolwire import Agent, tool

    agent = Agent("openai:gpt-4.1-mini", tools=[get_weather], system="Be brief.")
    result = await agent.run("Weather in Boston and Paris?")

`Agent.run` returns a `RunResult`; `Agent.run_stream` yields `RunChunk`s (text and completed messages);
`Agent.stream` is an `AgentRun` to iterate for every event. Histories handed back are always valid: every
tool call has its result, also after an error or a cancellation.
"""

from ._agent import Agent as Agent, RunStream as RunStream
from ._run import AgentRun as AgentRun
from ._types import (
    RunChunk as RunChunk,
    RunResult as RunResult,
    StepResult as StepResult,
    ToolExecution as ToolExecution,
)

__all__ = ["Agent", "AgentRun", "RunChunk", "RunResult", "RunStream", "StepResult", "ToolExecution"]
