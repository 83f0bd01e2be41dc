"""The agent: a model and tools run as a loop, streaming, with eager parallel tool execution.

    from toolwire import Agent, tool

    agent = Agent("openai:gpt-4.1-mini", tools=[get_weather], system="Be brief.")
    result = await agent.run("Weather in Boston and Paris?")

`Agent.run` returns a `RunResult`; `Agent.run_stream` yields `RunChunk`s (text and completed messages);
`Agent.stream` is an `AgentRun` to iterate for every event. Histories handed back are always valid: every
tool call has its result, also after an error or a cancellation.

Extensions: tools needing a person's approval pause a run (`RunState`, resumed with `approvals=` of
`True` / `Denial`), a `ChatMemory` keeps the conversation between runs, and `output_type=` makes the
output a validated object (`OutputValidationError` when the model cannot produce one).
"""

from ._agent import Agent as Agent, RunStream as RunStream
from ._approval import Approval as Approval, Denial as Denial, RunState as RunState
from ._output import OutputMode as OutputMode, OutputValidationError as OutputValidationError
from ._run import AgentRun as AgentRun
from ._types import (
    RunChunk as RunChunk,
    RunResult as RunResult,
    RunStatus as RunStatus,
    StepResult as StepResult,
    ToolExecution as ToolExecution,
)

__all__ = [
    "Agent",
    "AgentRun",
    "Approval",
    "Denial",
    "OutputMode",
    "OutputValidationError",
    "RunChunk",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStream",
    "StepResult",
    "ToolExecution",
]
