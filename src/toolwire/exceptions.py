"""The exception hierarchy.

    ToolwireError
    ├── UserError                   misuse of the API; the message says what to do instead
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
    ├── OutputValidationError       typed output still invalid after `output_retries`; carries the history
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
    "MalformedStreamError",
    "MaxStepsExceeded",
    "OutputValidationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "StreamError",
    "StreamInterruptedError",
    "ToolError",
    "ToolwireError",
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


class ToolError(ToolwireError):
    """Raise inside a tool to report a failure to the model with exactly this message (no traceback)."""
