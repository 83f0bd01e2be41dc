"""The exception hierarchy.

    ToolwireError
    ├── UserError                   misuse of the API; the message says what to do instead
    │   └── RunStateError           a saved run state cannot be resumed: malformed or inconsistent
    │       ├── RunStateSignatureError  unsigned, or altered since it was signed (with a key)
    │       ├── RunStateResumedError    it was already resumed once (a claim was refused)
    │       └── RunStateStaleError      its conversation moved on while the run was paused
    ├── ConversationBusyError       another run of this process is using the same memory conversation
    ├── ChatMemoryError             the chat memory did not take a finished round in time
    ├── MCPServerError              an MCP server could not be started or connected to
    ├── ProviderError               anything the provider side did wrong
    │   ├── ProviderHTTPError       an HTTP error status before streaming began (status, headers, body prefix)
    │   ├── ProviderConnectionError could not connect, or the connection failed before the first byte
    │   ├── ProviderTimeoutError    no answer within the timeout or the request's deadline
    │   └── StreamError             the stream began but did not end well; carries the partial message
    │       ├── ProviderStreamError the provider reported an error inside the stream
    │       │   └── MalformedStreamError the body broke its protocol: not JSON, a field of the wrong
    │       │                       type, no recognisable frame, an event over `max_event_bytes`
    │       └── StreamInterruptedError the connection dropped, timed out, hit the deadline, could not
    │                                   be decompressed, or ended before the response was complete
    ├── MaxStepsExceeded            the agent loop hit `max_steps`; carries the history so far
    ├── UsageLimitExceeded          a run reached one of its `UsageLimits`; carries the history so far
    │   └── UsageBudgetExceeded     a `UsageBudget` shared by several runs is spent
    ├── ToolRetriesExceeded         a tool asked for more retries (`ModelRetry`) than its limit; carries the history
    ├── InstructionError            a dynamic instruction (a function of `system=`) raised; carries the history
    ├── OutputValidationError       typed output still invalid after `output_retries`; carries the history
    ├── OutputRejected              raise in an output validator to send the answer back with a message
    ├── ModelRetry                  raise in a tool or an output validator to ask the model to try again
    └── ToolError                   raise inside a tool to send a clean error message to the model

Provider and transport errors are converted at the wire edge (`raise ... from exc`), so callers only
ever catch toolwire types. Every `StreamError` carries `partial_message`: what completed is kept, a
cut-off answer is marked `metadata["incomplete"] = True`, and calls whose arguments did not complete are
`InvalidToolCallPart`s that never run. Messages never contain the API key or a password from the base
URL: they are replaced by `REDACTED` wherever a provider echoes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .messages import Message

__all__ = [
    "ChatMemoryError",
    "ConversationBusyError",
    "InstructionError",
    "MCPServerError",
    "MalformedStreamError",
    "MaxStepsExceeded",
    "ModelRetry",
    "OutputRejected",
    "OutputValidationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "RunStateError",
    "RunStateResumedError",
    "RunStateSignatureError",
    "RunStateStaleError",
    "StreamError",
    "StreamInterruptedError",
    "ToolError",
    "ToolRetriesExceeded",
    "ToolwireError",
    "UsageBudgetExceeded",
    "UsageLimitExceeded",
    "UserError",
]


class ToolwireError(Exception):
    """Root of every error toolwire raises."""


class UserError(ToolwireError):
    """The library was used in a way it cannot support; the message says how to fix the call."""


class ProviderError(ToolwireError):
    """The provider could not be reached or answered with an error."""

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.messages: list[Message] | None = None
        """Set by the agent when the error ends a run: the run's new messages, a valid history."""


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status before streaming began.

    Attributes:
        status_code: The HTTP status.
        body: The start of the error body (at most 64 KiB are read; secrets redacted).
        headers: The response headers (cookies left out).
        retry_after: Seconds the provider asked to wait before retrying (`Retry-After`), if it said.
    """

    def __init__(self, message: str, *, provider: str | None, status_code: int, body: str,
                 headers: dict[str, str] | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, provider=provider)
        self.status_code = status_code
        self.body = body
        self.headers: dict[str, str] = headers or {}
        self.retry_after = retry_after


class ProviderConnectionError(ProviderError):
    """The provider could not be reached (after the configured retries)."""


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the timeout."""


class StreamError(ProviderError):
    """A response stream began but did not complete normally.

    `partial_message` holds everything assembled before the failure: finished text and calls are kept,
    calls that were cut off are `InvalidToolCallPart`s, so nothing completed is lost and nothing
    incomplete can run.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        error_type: str = "stream_error",
        partial_message: Message | None = None,
    ) -> None:
        super().__init__(message, provider=provider)
        self.error_type = error_type
        self.partial_message = partial_message


class ProviderStreamError(StreamError):
    """The provider sent an error inside the stream (rate limit, overload, invalid tool generation...)."""


class MalformedStreamError(ProviderStreamError):
    """The body broke its wire protocol, so reading stopped there.

    A chunk that is not JSON, a field of the wrong type (text that is a number, an id that is a list),
    a body in which no frame of the protocol was recognised (an HTML error page, a non-streamed answer,
    the wrong `--protocol`), or one event larger than `max_event_bytes`. `error_type` says which
    (`malformed_chunk`, `invalid_field`, `unrecognised_body`, `event_too_large`), the message names the
    field and the protocol.
    """


class StreamInterruptedError(StreamError):
    """The response stopped before it was complete.

    The connection dropped (`connection_lost`), no event came within the idle timeout (`timeout`), the
    request's total deadline passed (`deadline`), the compressed body could not be decoded
    (`decoding_error`), or the body simply ended (`incomplete_stream`).
    """


class MaxStepsExceeded(ToolwireError):
    """The agent ran `max_steps` model requests without reaching a final answer.

    `messages` holds the run's new messages so far; the history they form is valid (every call answered).
    """

    def __init__(self, message: str, *, messages: list[Message]) -> None:
        super().__init__(message)
        self.messages = messages


class OutputValidationError(ToolwireError):
    """The model did not produce a valid typed output within `output_retries` retries.

    Attributes:
        errors: What was wrong with the last answer, as told to the model.
        messages: The run's new messages so far; the history they form is valid (every call answered).
    """

    def __init__(self, message: str, *, errors: str, messages: list[Message]) -> None:
        super().__init__(message)
        self.errors = errors
        self.messages = messages


class UsageLimitExceeded(ToolwireError):
    """A run reached one of its usage limits (`UsageLimits`) and stopped before exceeding it.

    Attributes:
        limit: Which limit: `"requests"`, `"tool_calls"`, `"input_tokens"`, `"output_tokens"` or `"total_tokens"`.
        value: The limit's value.
        messages: The run's new messages so far; the history they form is valid (every call answered).
    """

    def __init__(self, message: str, *, limit: str, value: int, messages: list[Message]) -> None:
        super().__init__(message)
        self.limit = limit
        self.value = value
        self.messages = messages


class UsageBudgetExceeded(UsageLimitExceeded):
    """A `UsageBudget` shared by several runs (or agents) is spent; this run stopped before exceeding it.

    `limit` and `value` name the budget's limit; `messages` is this run's valid history so far.
    """


class ToolRetriesExceeded(ToolwireError):
    """A tool raised `ModelRetry` more often than its `retries` allow; the run stopped after that round.

    Attributes:
        tool: The tool's name.
        retries: Its retry limit (`@tool(retries=N)`, else the agent's `retries`).
        messages: The run's new messages so far; the history they form is valid (every call answered, the
            last retry's message included as the call's error result).
    """

    def __init__(self, message: str, *, tool: str, retries: int, messages: list[Message]) -> None:
        super().__init__(message)
        self.tool = tool
        self.retries = retries
        self.messages = messages


class InstructionError(ToolwireError):
    """A dynamic instruction (a function given as `system=`) raised; the run stopped before its request.

    The original exception is `__cause__`. Attributes:
        instruction: The function's qualified name.
        messages: The run's new messages so far; the history they form is valid (every call answered).
    """

    def __init__(self, message: str, *, instruction: str, messages: list[Message]) -> None:
        super().__init__(message)
        self.instruction = instruction
        self.messages = messages


class OutputRejected(ToolwireError):
    """Raise in an output validator to refuse an answer: `message` goes back to the model, which answers again.

    Rejections count against the agent's `output_retries`, like answers that do not validate.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ModelRetry(ToolwireError):
    """Raise in a tool or an output validator to ask the model to try again, telling it `message`.

    From a tool, `message` becomes the call's error result; each tool may ask `retries` times in a row
    (`@tool(retries=N)`, else the agent's `retries=`) before the run stops with `ToolRetriesExceeded`.
    From an output validator it acts as `OutputRejected`: the answer goes back to the model, counted
    against `output_retries`.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolError(ToolwireError):
    """Raise inside a tool to report a failure to the model with exactly this message (no traceback)."""


class RunStateError(UserError):
    """A saved `RunState` cannot be resumed: it is malformed, inconsistent, or does not fit this agent."""


class RunStateSignatureError(RunStateError):
    """A state read with a key (`RunState.from_json(data, key=...)`) is unsigned or was altered after signing."""


class RunStateResumedError(RunStateError):
    """The state was already resumed once; resuming it again would run its approved tools again.

    Attributes:
        state_id: The id of the state (`RunState.id`).
    """

    def __init__(self, message: str, *, state_id: str) -> None:
        super().__init__(message)
        self.state_id = state_id


class RunStateStaleError(RunStateError):
    """The memory conversation of a paused run has changed since it paused.

    Attributes:
        expected: The number of messages the conversation had when the run paused.
        found: The number it has now.
    """

    def __init__(self, message: str, *, expected: int, found: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.found = found


class ConversationBusyError(ToolwireError):
    """A run was started on a memory conversation that another run of this process is using.

    Attributes:
        conversation_id: The conversation both runs wanted.
    """

    def __init__(self, message: str, *, conversation_id: str | None) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id


class ChatMemoryError(ToolwireError):
    """The chat memory did not finish storing a round in time; the round may be missing from it."""


class MCPServerError(ToolwireError):
    """An MCP server could not be started, connected to, or listed (`toolwire.mcp`).

    Attributes:
        server: The server's name.
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server
