"""The agent: a model and tools run as a loop, streaming, with eager parallel tool execution.

    from toolwire import Agent, tool

    agent = Agent("openai:gpt-4.1-mini", tools=[get_weather], system="Be brief.")
    result = await agent.run("Weather in Boston and Paris?")

`Agent.run` returns a `RunResult`; `Agent.run_stream` yields `RunChunk`s (text and completed messages);
`Agent.stream` is an `AgentRun` to iterate for every event. Histories handed back are always valid: every
tool call has its result, also after an error or a cancellation.

Extensions: tools needing a person's approval pause a run (`RunState`, resumed with `approvals=` of
`True` / `Denial`), a `ChatMemory` keeps the conversation between runs, `output_type=` makes the
output a validated object (`OutputValidationError` when the model cannot produce one) and output
validators check it, `deps=` reaches everything the run calls (`RunContext.deps`), `system=` may be
built per request from the run context (or with `@agent.instructions`), toolsets (MCP servers) add tools
per step, `UsageLimits` bound what a run spends and a `UsageBudget` what several runs spend together,
`ModelRetry` from a tool or validator asks the model again, and `Agent.override` swaps the model, deps or
tools inside a block (for tests).
"""

from ._agent import Agent as Agent, AgentOptions as AgentOptions
from ._approval import Approval as Approval, Denial as Denial, RunState as RunState
from ._instructions import Instruction as Instruction, Instructions as Instructions
from ._limits import UsageBudget as UsageBudget, UsageLimits as UsageLimits
from ._output import (
    OutputMode as OutputMode,
    OutputValidationError as OutputValidationError,
    OutputValidator as OutputValidator,
)
from ._override import AgentOverride as AgentOverride
from ._run import AgentRun as AgentRun
from ._stream import RunStream as RunStream
from ._types import (
    RunChunk as RunChunk,
    RunResult as RunResult,
    RunStatus as RunStatus,
    StepResult as StepResult,
    ToolExecution as ToolExecution,
)

__all__ = [
    "Agent",
    "AgentOptions",
    "AgentOverride",
    "AgentRun",
    "Approval",
    "Denial",
    "Instruction",
    "Instructions",
    "OutputMode",
    "OutputValidationError",
    "OutputValidator",
    "RunChunk",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStream",
    "StepResult",
    "ToolExecution",
    "UsageBudget",
    "UsageLimits",
]
