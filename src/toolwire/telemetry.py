"""OpenTelemetry spans for agent runs, following the GenAI semantic conventions (`otel` extra).

    from toolwire import telemetry
    telemetry.instrument()                        # every agent, the global tracer provider
    telemetry.instrument(include_content=True)    # also messages, tool arguments and results
    Agent(model, instrument=False)                # this agent never

Spans (names and attributes as the GenAI conventions define them):
- `invoke_agent {name}` (INTERNAL) per run: `gen_ai.operation.name`, `gen_ai.agent.name`,
  `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.conversation.id`, summed
  `gen_ai.usage.input_tokens` / `output_tokens`, `error.type` when the run fails.
- `chat {model}` (CLIENT) per model request, a child of the run: provider, request model, `server.address`
  / `server.port`, request settings (`max_tokens`, `temperature`, `top_p`), `gen_ai.response.model`,
  `gen_ai.response.id`, `gen_ai.response.finish_reasons`, token usage (cache reads and reasoning tokens
  too), `error.type`.
- `execute_tool {name}` (INTERNAL) per tool run, a child of the run (never of the `chat` span its call
  streamed in): `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, `gen_ai.tool.description`,
  `error.type` when the tool failed: the exception's class, `tool_error` for a `ToolError` (a failure the
  tool reported, MCP error results included) or `timeout`. The tool's own
  code runs with this span current, so spans it makes nest under it.

Metrics (the GenAI client metrics of the same conventions), recorded per model request beside its `chat`
span, through the meter provider given (default: the global one):
- `gen_ai.client.operation.duration` (histogram, `s`): how long the request took, to the end of its stream.
- `gen_ai.client.token.usage` (histogram, `{token}`): its input and output tokens, one record each, told
  apart by `gen_ai.token.type` (`input` / `output`).
Both carry `gen_ai.operation.name` (`chat`), `gen_ai.provider.name`, `gen_ai.request.model`,
`gen_ai.response.model`, `server.address` / `server.port` where known; the duration also `error.type` when
the request failed. Their bucket boundaries are the conventions' advice (`TOKEN_BUCKETS`,
`DURATION_BUCKETS`); an SDK's views may override them.

Content (`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) is recorded only with `include_content=True`.

No cost when off: nothing here imports `opentelemetry` until instrumentation is enabled, and a run
without it does no telemetry work at all; nothing is done per streamed chunk in any case.

Trace context: a run's span is a child of the span current where the run starts (`agent.run`,
`agent.stream(...).__aenter__`), or of `trace_context=` when given (a context captured elsewhere, e.g.
with `capture_context()` in a request handler before a run manager starts the run). `request_span`
gives a web server a SERVER span per request, continuing the caller's W3C `traceparent`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from .exceptions import ProviderHTTPError, StreamError, ToolError, UserError
from .messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer

    from .events import FinishReason, Usage
    from .models import Model
    from .settings import ModelSettings
    from .tools import Tool

__all__ = [
    "DURATION_BUCKETS",
    "TOKEN_BUCKETS",
    "Instrumentation",
    "RunTrace",
    "capture_context",
    "enabled",
    "instrument",
    "instrumentation_for",
    "request_span",
    "uninstrument",
]

_PROVIDER_NAMES = {
    "openai": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "cohere": "cohere",
    "groq": "groq",
    "deepseek": "deepseek",
    "deepseek-responses": "deepseek",
    "xai": "x_ai",
    "xai-responses": "x_ai",
}
"""toolwire provider → `gen_ai.provider.name` where the conventions name one; other hosts keep their own name."""

TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
"""`gen_ai.client.token.usage` bucket boundaries, as the GenAI conventions advise."""
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
"""`gen_ai.client.operation.duration` bucket boundaries (seconds), as the GenAI conventions advise."""


class Instrumentation:
    """Where spans go and what they hold.

    Args:
        tracer_provider: The OpenTelemetry `TracerProvider` (default: the global one).
        include_content: Record messages, system instructions, tool arguments and results on the spans.
            Off by default: they may hold personal data and can be large.
        meter_provider: The OpenTelemetry `MeterProvider` the GenAI client metrics go to (default: the
            global one, which records nothing until an SDK is set up).
    """

    def __init__(self, *, tracer_provider: Any = None, include_content: bool = False,
                 meter_provider: Any = None) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            from ._install import install_hint

            raise UserError(f"Telemetry needs OpenTelemetry (the API, and an SDK to record the spans): "
                            f"{install_hint('otel')}.") from exc
        from . import __version__

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self.tracer: Tracer = provider.get_tracer("toolwire", __version__)
        self.include_content = include_content
        meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        meter = meters.get_meter("toolwire", __version__)
        self.operation_duration: Histogram = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        self.token_usage: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS))


_default: Instrumentation | None = None


def instrument(*, tracer_provider: Any = None, include_content: bool = False,
               meter_provider: Any = None) -> Instrumentation:
    """Trace (and measure) every agent run of this process (agents given `instrument=False` excepted)."""
    global _default
    _default = Instrumentation(tracer_provider=tracer_provider, include_content=include_content,
                               meter_provider=meter_provider)
    return _default


def uninstrument() -> None:
    """Stop tracing runs (agents given their own `Instrumentation` go on)."""
    global _default
    _default = None


def instrumentation_for(setting: bool | Instrumentation | None) -> Instrumentation | None:
    """What an agent's `instrument=` means now: its own, the global one, a default one, or none."""
    if setting is None:
        return _default
    if setting is False:
        return None
    if setting is True:
        return _default if _default is not None else Instrumentation()
    if isinstance(setting, Instrumentation):
        return setting
    raise UserError(f"instrument= takes True, False, None or an Instrumentation; got {type(setting).__name__}.")


def enabled() -> bool:
    """Whether runs of this process are traced by default (`instrument()` was called)."""
    return _default is not None


def capture_context() -> Context | None:
    """The current OpenTelemetry context, to pass as `trace_context=` to a run started elsewhere.

    `None` when no instrumentation is enabled (and then nothing is imported).
    """
    if _default is None:
        return None
    from opentelemetry import context

    return context.get_current()


def request_span(method: str, route: str, headers: Mapping[str, str] | None = None) -> Any:
    """A SERVER span for one web request, continuing the caller's trace (W3C `traceparent` in `headers`).

    A context manager; the span is current inside it, so runs started there are its children. A
    no-op when no instrumentation is enabled. Usage in a handler:
    `with telemetry.request_span("POST", "/api/chats/{id}/runs", request.headers): ...`.
    """
    if _default is None:
        return nullcontext()
    return _request_span(_default, method, route, headers)


@contextmanager
def _request_span(inst: Instrumentation, method: str, route: str, headers: Mapping[str, str] | None) -> Iterator[Any]:
    from opentelemetry import propagate, trace

    parent = propagate.extract(dict(headers)) if headers else None
    attributes = {"http.request.method": method}
    if route:  # a request no route matched is named by its method alone (low cardinality, as the conventions ask)
        attributes["http.route"] = route
    with inst.tracer.start_as_current_span(f"{method} {route}" if route else method, context=parent,
                                           kind=trace.SpanKind.SERVER, attributes=attributes) as span:
        yield span


class RunTrace:
    """The spans of one run. Made only when instrumentation is on; every method is cheap and never raises
    into the run (a telemetry failure must not change what the run does)."""

    def __init__(
        self,
        inst: Instrumentation,
        *,
        model: Model,
        agent_name: str | None,
        conversation_id: str | None,
        parent: Context | None,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._inst = inst
        self._content = inst.include_content
        self.provider = _PROVIDER_NAMES.get(model.provider_name, model.provider_name)
        self.request_model = _request_model(model)
        self._server = _server_address(model)
        self._chat_started = 0.0
        """When the model request in progress started (a run makes its requests one after another)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.request_model,
        }
        if agent_name:
            attributes["gen_ai.agent.name"] = agent_name
        if conversation_id is not None:
            attributes["gen_ai.conversation.id"] = conversation_id
        name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        self.span: Span = inst.tracer.start_span(name, context=parent, kind=trace.SpanKind.INTERNAL,
                                                 attributes=attributes)
        self._context = trace.set_span_in_context(self.span, parent)

    def current(self) -> Any:
        """Makes the run's span current in the task driving the run."""
        return self._trace.use_span(self.span, end_on_exit=False, record_exception=False,
                                    set_status_on_exception=False)

    def end(self, *, usage: Usage, status: str | None, error: BaseException | None) -> None:
        span = self.span
        _set_usage(span, usage)
        if status is not None:
            span.set_attribute("toolwire.run.status", status)
        if error is not None:
            _set_error(self._trace, span, error)
        span.end()

    # -- model requests --------------------------------------------------------------------------

    def start_chat(self, request: Sequence[Message], system: str | None, settings: ModelSettings) -> Span:
        trace = self._trace
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.request_model,
        }
        if self._server is not None:
            attributes["server.address"], port = self._server
            if port is not None:
                attributes["server.port"] = port
        for key, attribute in (("max_tokens", "gen_ai.request.max_tokens"),
                               ("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p")):
            value = settings.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        if self._content:
            if system:
                attributes["gen_ai.system_instructions"] = _json([{"type": "text", "content": system}])
            attributes["gen_ai.input.messages"] = _json([_message(m) for m in request])
        self._chat_started = time.perf_counter()
        return self._inst.tracer.start_span(f"chat {self.request_model}", context=self._context,
                                            kind=trace.SpanKind.CLIENT, attributes=attributes)

    def use(self, span: Span) -> Any:
        return self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def end_chat(
        self,
        span: Span,
        *,
        message: Message | None,
        usage: Usage | None,
        finish_reason: FinishReason | None,
        error: BaseException | None,
    ) -> None:
        self._measure_chat(message, usage, error)
        if message is not None:
            model = message.metadata.get("model")
            if isinstance(model, str):
                span.set_attribute("gen_ai.response.model", model)
            response_id = message.metadata.get("response_id")
            if isinstance(response_id, str):
                span.set_attribute("gen_ai.response.id", response_id)
            if self._content:
                output = _message(message)
                if finish_reason is not None:
                    output["finish_reason"] = finish_reason
                span.set_attribute("gen_ai.output.messages", _json([output]))
        if finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
        if usage is not None:
            _set_usage(span, usage)
        if error is not None:
            _set_error(self._trace, span, error)
        span.end()

    def _measure_chat(self, message: Message | None, usage: Usage | None, error: BaseException | None) -> None:
        """The request's GenAI client metrics (see the module docstring)."""
        seconds = time.perf_counter() - self._chat_started
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
                                      "gen_ai.request.model": self.request_model}
        model = message.metadata.get("model") if message is not None else None
        if isinstance(model, str):
            attributes["gen_ai.response.model"] = model
        if self._server is not None:
            attributes["server.address"], port = self._server
            if port is not None:
                attributes["server.port"] = port
        if usage is not None:
            for count, token_type in ((usage.input_tokens, "input"), (usage.output_tokens, "output")):
                if count is not None:
                    self._inst.token_usage.record(count, {**attributes, "gen_ai.token.type": token_type})
        if error is not None:
            attributes["error.type"] = error_type(error)
        self._inst.operation_duration.record(seconds, attributes)

    # -- tools -----------------------------------------------------------------------------------

    @contextmanager
    def tool(self, call: ToolCallPart, tool: Tool[..., Any]) -> Iterator[ToolSpan]:
        """The `execute_tool` span of one call, current while the tool runs (in the tool's task)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": getattr(tool, "tool_type", "function"),
        }
        if tool.description:
            attributes["gen_ai.tool.description"] = tool.description[:1000]
        if self._content:
            attributes["gen_ai.tool.call.arguments"] = call.arguments_raw or _json(call.arguments)
        span = self._inst.tracer.start_span(f"execute_tool {call.name}", context=self._context,
                                            kind=self._trace.SpanKind.INTERNAL, attributes=attributes)
        record = ToolSpan(self._trace, span, self._content)
        try:
            with self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield record
        except BaseException as exc:
            record.failed(type(exc).__qualname__)
            raise
        finally:
            span.end()


class ToolSpan:
    """Records a tool's outcome on its span."""

    __slots__ = ("_content", "_span", "_trace")

    def __init__(self, trace: Any, span: Span, content: bool) -> None:
        self._trace = trace
        self._span = span
        self._content = content

    def result(self, result: ToolResultPart, exception: BaseException | None, timed_out: bool) -> None:
        if self._content:
            value = result.result
            self._span.set_attribute("gen_ai.tool.call.result", value if isinstance(value, str) else _json(value))
        if not result.is_error:
            return
        if isinstance(exception, ToolError):
            self.failed("tool_error")  # the tool reported the failure itself: no traceback to keep
        elif exception is not None:
            self._span.record_exception(exception)
            self.failed(_qualified(exception))
        else:
            self.failed("timeout" if timed_out else "tool_error")

    def failed(self, error_type: str) -> None:
        self._span.set_attribute("error.type", error_type)
        self._span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))


def _set_usage(span: Span, usage: Usage) -> None:
    for value, attribute in ((usage.input_tokens, "gen_ai.usage.input_tokens"),
                             (usage.output_tokens, "gen_ai.usage.output_tokens"),
                             (usage.cache_read_tokens, "gen_ai.usage.cache_read.input_tokens"),
                             (usage.cache_write_tokens, "gen_ai.usage.cache_creation.input_tokens"),
                             (usage.reasoning_tokens, "gen_ai.usage.reasoning.output_tokens")):
        if value is not None:
            span.set_attribute(attribute, value)


def _set_error(trace: Any, span: Span, error: BaseException) -> None:
    span.set_attribute("error.type", error_type(error))
    span.set_status(trace.Status(trace.StatusCode.ERROR, _short(error)))
    span.record_exception(error)


def error_type(error: BaseException) -> str:
    """`error.type` for an exception: the provider's HTTP status, a stream's error kind, else the class."""
    if isinstance(error, ProviderHTTPError):
        return str(error.status_code)
    if isinstance(error, StreamError):
        return error.error_type
    return _qualified(error)


def _qualified(error: BaseException) -> str:
    cls = type(error)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def _short(error: BaseException) -> str:
    try:
        text = str(error)
    except Exception:
        text = type(error).__name__
    return text[:500]


def _request_model(model: Model) -> str:
    own = getattr(model, "model", None)
    if isinstance(own, str):
        return own
    return model.name.partition(":")[2] or model.name


def _server_address(model: Model) -> tuple[str, int | None] | None:
    base_url = getattr(model, "base_url", None)
    if not isinstance(base_url, str):
        return None
    parts = urlsplit(base_url)
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:
        return str(value)


def _message(message: Message) -> dict[str, Any]:
    """A message in the conventions' JSON form: role and typed parts (tool results as the `tool` role)."""
    parts: list[dict[str, Any]] = []
    role: str = message.role
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        elif isinstance(part, ThinkingPart):
            parts.append({"type": "reasoning", "content": part.text})
        elif isinstance(part, ToolCallPart):
            parts.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments})
        elif isinstance(part, ToolResultPart):
            role = "tool"
            parts.append({"type": "tool_call_response", "id": part.call_id, "response": part.result})
        else:
            parts.append({"type": part.type})
    return {"role": role, "parts": parts}
