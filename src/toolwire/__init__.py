"""toolwire: stream LLM responses with tool calls across providers, and run the tool loop for you."""

import logging as _logging

from .agent import (
    Agent as Agent,
    AgentRun as AgentRun,
    Denial as Denial,
    OutputValidationError as OutputValidationError,
    RunChunk as RunChunk,
    RunResult as RunResult,
    RunState as RunState,
    RunStream as RunStream,
    StepResult as StepResult,
)
from .events import (
    ErrorEvent as ErrorEvent,
    Event as Event,
    FinishEvent as FinishEvent,
    MessageEndEvent as MessageEndEvent,
    ProviderToolEvent as ProviderToolEvent,
    TextDelta as TextDelta,
    ThinkingDelta as ThinkingDelta,
    ToolCallDelta as ToolCallDelta,
    ToolCallEnd as ToolCallEnd,
    ToolCallStart as ToolCallStart,
    ToolResultEvent as ToolResultEvent,
    ToolStartedEvent as ToolStartedEvent,
    Usage as Usage,
    UsageEvent as UsageEvent,
)
from .exceptions import (
    MaxStepsExceeded as MaxStepsExceeded,
    ProviderConnectionError as ProviderConnectionError,
    ProviderError as ProviderError,
    ProviderHTTPError as ProviderHTTPError,
    ProviderStreamError as ProviderStreamError,
    ProviderTimeoutError as ProviderTimeoutError,
    StreamError as StreamError,
    StreamInterruptedError as StreamInterruptedError,
    ToolError as ToolError,
    ToolwireError as ToolwireError,
    UserError as UserError,
)
from .memory import ChatMemory as ChatMemory, InMemoryChatMemory as InMemoryChatMemory
from .messages import (
    FilePart as FilePart,
    InvalidToolCallPart as InvalidToolCallPart,
    Message as Message,
    Part as Part,
    ProviderToolPart as ProviderToolPart,
    TextPart as TextPart,
    ThinkingPart as ThinkingPart,
    ToolCallPart as ToolCallPart,
    ToolResultPart as ToolResultPart,
    dump_messages as dump_messages,
    load_messages as load_messages,
)
from .models import HTTPModel as HTTPModel, Model as Model, ModelResponse as ModelResponse, get_model as get_model
from .settings import ModelSettings as ModelSettings
from .tools import RunContext as RunContext, Tool as Tool, ToolDefinition as ToolDefinition, tool as tool

__version__ = "0.1.0"

# A library prints nothing unless the application configures logging: the `toolwire` logger (tool
# exceptions with their tracebacks, memory timeouts) only reaches handlers the application adds.
_logging.getLogger("toolwire").addHandler(_logging.NullHandler())

__all__ = [
    "Agent",
    "AgentRun",
    "ChatMemory",
    "Denial",
    "ErrorEvent",
    "Event",
    "FilePart",
    "FinishEvent",
    "HTTPModel",
    "InMemoryChatMemory",
    "InvalidToolCallPart",
    "MaxStepsExceeded",
    "Message",
    "MessageEndEvent",
    "Model",
    "ModelResponse",
    "ModelSettings",
    "OutputValidationError",
    "Part",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "ProviderToolEvent",
    "ProviderToolPart",
    "RunChunk",
    "RunContext",
    "RunResult",
    "RunState",
    "RunStream",
    "StepResult",
    "StreamError",
    "StreamInterruptedError",
    "TextDelta",
    "TextPart",
    "ThinkingDelta",
    "ThinkingPart",
    "Tool",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallPart",
    "ToolCallStart",
    "ToolDefinition",
    "ToolError",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolStartedEvent",
    "ToolwireError",
    "Usage",
    "UsageEvent",
    "UserError",
    "dump_messages",
    "get_model",
    "load_messages",
    "tool",
]
