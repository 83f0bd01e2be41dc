"""Tools: a function plus the JSON schema a model sees, and the definition the wire layer sends.

    @tool
    async def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
        \"\"\"Current weather for a city.

        Args:
            city: The city name, e.g. "Paris".
            unit: Celsius or Fahrenheit.
        \"\"\"

`@tool` reads the parameters' type hints and the docstring (its summary becomes the description, the
Google-style `Args:` section the parameter descriptions) and builds the schema with pydantic. Arguments
are validated before the function runs; invalid ones raise `ToolError` listing every problem, which the
agent sends back to the model so it can correct the call. Sync functions run in a worker thread.

A parameter annotated `RunContext` (or `RunContext[MyDeps]`) is filled in by the agent and left out of the
schema; `ctx.deps` is what the run was given as `deps=`.

The wire adapters only ever see `ToolDefinition`s; `Tool.definition` produces one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, cast, get_origin, get_type_hints, overload

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypeVar

from ._threads import run_in_thread
from .events import Usage
from .exceptions import ToolError, UserError
from .messages import FilePart, Message, ToolCallPart

if TYPE_CHECKING:
    from .models import Model

__all__ = [
    "ApprovalPredicate", "DepsT", "RunContext", "Tool", "ToolDefinition", "ToolReturn", "approval_needed", "tool",
]


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """What a tool returns when its result includes files: `value` is the JSON result the model reads,
    `files` the images or documents that go with it (a chart, a screenshot, a PDF)."""

    value: Any
    files: Sequence[FilePart] = ()


P = ParamSpec("P")
R = TypeVar("R")

DepsT = TypeVar("DepsT", default=None)
"""The type of a run's dependencies (`RunContext.deps`); `None` for agents that take none."""

ApprovalPredicate = Callable[["ToolCallPart"], "bool | Awaitable[bool]"] | Callable[
    ["RunContext[Any]", "ToolCallPart"], "bool | Awaitable[bool]"]
"""Decides per call whether a person must approve it (see `Tool.requires_approval`): a function of the
call, or of the run context and the call (`(ctx, call)`, to consult `ctx.deps`); sync or async."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a provider is told about a tool."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


class RunContext(Generic[DepsT]):
    """What the code an agent calls can learn about the run: tools, approval rules, dynamic instructions,
    output validators and toolset filters all receive one.

    A tool declares a parameter annotated `RunContext` (or `RunContext[MyDeps]`, which types `deps`); the
    agent fills it in and leaves it out of the schema.

    Attributes:
        deps: What the caller passed as `agent.run(..., deps=...)`: a database handle, the user, settings.
            Typed by the parameter's annotation: `RunContext[MyDeps]` makes `ctx.deps` a `MyDeps`.
        step: The 0-based index of the model request (the one that produced the call, for a tool).
        messages: The conversation sent with that request (history and the run's earlier messages).
        usage: Tokens used by the run's requests before this step (the step's own response is still
            streaming while its tools run).
        requests: Model requests the run has made so far (inside a tool: including the one that called it).
        tool_calls: Tool calls the run has started so far (inside a tool: including this one).
        conversation_id: The chat memory conversation of the run (`None` without a memory).
        tool_call: The call being answered inside a tool (and an approval rule); `None` elsewhere.
        metadata: Free-form data a tool may fill in; it is copied into the call's `ToolResultEvent`.
        model: The model the run uses (after `Agent.override`, the overriding one); `None` outside a run.
        run_id: The run's id (`AgentRun.id`, also in logs and traces).
        retry: Inside a tool: how many times in a row this tool has asked the model to try again
            (`ModelRetry`) in this run; in an output validator: how many answers were sent back so far.
        partial_output: `True` when an output validator is checking a partial answer while it streams
            (only validators registered with `partial=True` are ever called so).
    """

    __slots__ = ("conversation_id", "deps", "messages", "metadata", "model", "partial_output", "requests", "retry",
                 "run_id", "step", "tool_call", "tool_calls", "usage")

    def __init__(
        self,
        *,
        deps: DepsT = None,  # type: ignore[assignment]  # None is the deps of an agent that takes none
        call: ToolCallPart | None = None,
        step: int = 0,
        messages: Sequence[Message] = (),
        usage: Usage | None = None,
        requests: int = 0,
        tool_calls: int = 0,
        conversation_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        model: Model | None = None,
        run_id: str | None = None,
        retry: int = 0,
        partial_output: bool = False,
    ) -> None:
        self.deps = deps
        self.tool_call = call
        self.step = step
        self.messages = messages
        self.usage = usage if usage is not None else Usage()
        self.requests = requests
        self.tool_calls = tool_calls
        self.conversation_id = conversation_id
        self.metadata: dict[str, Any] = metadata if metadata is not None else {}
        self.model = model
        self.run_id = run_id
        self.retry = retry
        self.partial_output = partial_output

    @property
    def call(self) -> ToolCallPart:
        """The tool call being answered; only inside a tool or an approval rule (see `tool_call`)."""
        if self.tool_call is None:
            raise UserError("RunContext.call is the tool call being answered, so it exists only inside a tool "
                            "(or an approval rule); elsewhere read ctx.tool_call, which is None there.")
        return self.tool_call

    def for_call(self, call: ToolCallPart) -> RunContext[DepsT]:
        """A copy of this context for answering `call`, with metadata of its own."""
        return RunContext(deps=self.deps, call=call, step=self.step, messages=self.messages, usage=self.usage,
                          requests=self.requests, tool_calls=self.tool_calls, conversation_id=self.conversation_id,
                          model=self.model, run_id=self.run_id, retry=self.retry)

    def __repr__(self) -> str:
        call = f", call={self.tool_call.name!r}" if self.tool_call is not None else ""
        return f"RunContext(step={self.step}, deps={self.deps!r}{call})"


_Validator = Callable[[Mapping[str, Any]], tuple[list[Any], dict[str, Any]]]


class Tool(Generic[P, R]):
    """A function the model may call, with its name, description and JSON schema.

    Build one with `@tool`, `Tool(function, ...)` or `Tool.from_schema(...)`. Calling the tool object
    calls the function unchanged, so decorated functions stay usable (and testable) as plain functions.

    Attributes:
        name: The name the model calls the tool by.
        description: What the tool does, for the model.
        parameters: The JSON schema of the arguments.
        timeout: Seconds the tool may run before it is stopped (overrides the agent's `tool_timeout`).
        requires_approval: The call must be approved by a person before it runs: `True`, or a function
            of the `ToolCallPart` (sync or async) saying whether this call must be.
        strict: Ask the provider to follow the schema exactly (OpenAI `strict`), when not `None`.
        retries: How many times in a row the tool may raise `ModelRetry` in one run before the run stops
            with `ToolRetriesExceeded`; `None` takes the agent's `retries`.
        idempotent: Running the same call twice has the effect of running it once, so a server continuing a
            run whose process stopped while the call ran runs it again (docs/guides/durable-runs.md); other
            calls that were cut off that way are answered `interrupted` instead.
        function: The function itself.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    timeout: float | None
    requires_approval: bool | ApprovalPredicate
    strict: bool | None
    retries: int | None
    idempotent: bool
    function: Callable[P, R]
    tool_type: str = "function"
    """The kind of tool, for telemetry (`gen_ai.tool.type`): `"function"`, or `"extension"` for one an MCP
    server runs."""

    def __init__(
        self,
        function: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        requires_approval: bool | ApprovalPredicate = False,
        strict: bool | None = None,
        retries: int | None = None,
        idempotent: bool = False,
    ) -> None:
        if not callable(function):
            raise UserError(f"A tool needs a function; got {function!r}.")
        self.retries = check_retries(retries, "retries")
        self.idempotent = idempotent
        self.function = function
        self.name = name or getattr(function, "__name__", "") or type(function).__name__
        doc = _parse_docstring(inspect.getdoc(function) or "")
        self.description = doc.description if description is None else description
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.strict = strict
        self.parameters, self._validate, self._context_param = _signature_schema(function, self.name, doc.params)
        self._is_async = _is_async_callable(function)

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        function: Callable[..., Any],
        *,
        timeout: float | None = None,
        requires_approval: bool | ApprovalPredicate = False,
        strict: bool | None = None,
        retries: int | None = None,
        idempotent: bool = False,
    ) -> Tool[..., Any]:
        """A tool from a hand-written JSON schema; `function` is called with the arguments as keywords.

        Only the schema's `required` keys and, when `additionalProperties` is false, unknown keys are
        checked before the call; the function validates the rest. A parameter annotated `RunContext` is
        filled in as with `@tool`.
        """
        self: Tool[..., Any] = cls.__new__(cls)
        self.retries = check_retries(retries, "retries")
        self.idempotent = idempotent
        self.function = function
        self.name = name
        self.description = description
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.strict = strict
        self.parameters = dict(parameters)
        self._validate = functools.partial(_check_against_schema, name, self.parameters)
        self._context_param = _find_context_param(function)
        self._is_async = _is_async_callable(function)
        return self

    @property
    def definition(self) -> ToolDefinition:
        """The definition sent to providers."""
        return ToolDefinition(name=self.name, description=self.description, parameters=self.parameters,
                              strict=self.strict)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Check `arguments` against the schema; the validated keyword arguments, or `ToolError`."""
        args, kwargs = self._validate(arguments)
        if args:
            # Positional-only parameters are passed positionally; report them by name all the same.
            names = list(inspect.signature(self.function).parameters)
            kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        return kwargs

    async def run(self, arguments: Mapping[str, Any], context: RunContext | None = None) -> Any:
        """Validate `arguments` and call the function (sync functions in a worker thread).

        Returns what the function returns; raises `ToolError` for invalid arguments and lets the
        function's own exceptions through. Cancelling a sync tool stops waiting for it at once; its
        thread finishes in the background, since Python cannot stop a thread.
        """
        args, kwargs = self._prepare(arguments, context)
        return await self._invoke(args, kwargs)

    def _prepare(self, arguments: Mapping[str, Any], context: RunContext | None) -> tuple[list[Any], dict[str, Any]]:
        """The validated call arguments, the context added (`ToolError` if invalid)."""
        args, kwargs = self._validate(arguments)
        if self._context_param is not None:
            if context is None:
                raise UserError(f"The tool {self.name!r} takes a RunContext; pass `context=` to run it.")
            kwargs[self._context_param] = context
        return args, kwargs

    async def _invoke(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if self._is_async:
            return await cast(Callable[..., Awaitable[Any]], self.function)(*args, **kwargs)
        call = functools.partial(self.function, *args, **kwargs)
        result = await run_in_thread(call)
        if inspect.isawaitable(result):
            return await result
        return result


@overload
def tool(function: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    requires_approval: bool | ApprovalPredicate = False,
    strict: bool | None = None,
    retries: int | None = None,
    idempotent: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    requires_approval: bool | ApprovalPredicate = False,
    strict: bool | None = None,
    retries: int | None = None,
    idempotent: bool = False,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a `Tool`: use bare (`@tool`) or with options (`@tool(timeout=5)`).

    Args:
        function: The function (when used bare).
        name: The tool's name; defaults to the function's name.
        description: Overrides the description taken from the docstring.
        timeout: Seconds the tool may run before it is stopped and an error result is sent instead.
        requires_approval: The call must be approved by a person before it runs: `True`, or a function
            of the `ToolCallPart` (sync or async) saying whether this call must be.
        strict: Ask the provider to follow the schema exactly (OpenAI `strict`).
        retries: How many times in a row the tool may raise `ModelRetry` in one run (default: the agent's
            `retries`); one more stops the run with `ToolRetriesExceeded`.
        idempotent: Running a call twice does what running it once does (a read, an upsert by key): a server
            continuing a run after its process stopped runs such a call again if it had not finished.
    """

    def wrap(fn: Callable[P, R]) -> Tool[P, R]:
        return Tool(fn, name=name, description=description, timeout=timeout,
                    requires_approval=requires_approval, strict=strict, retries=retries, idempotent=idempotent)

    if function is not None:
        return wrap(function)
    return wrap


async def approval_needed(rule: bool | ApprovalPredicate | None, context: RunContext[Any]) -> bool:
    """Whether `rule` says a person must approve `context.call`.

    A rule of one parameter is asked with the call (`lambda call: call.arguments["amount"] > 100`); a rule of
    two with the run context and the call (`(ctx, call)`), so it can consult `ctx.deps`.
    """
    if rule is None or rule is False:
        return False
    if rule is True:
        return True
    call = context.call
    verdict = rule(context, call) if positional_arity(rule) >= 2 else rule(call)  # type: ignore[call-arg,arg-type]
    if inspect.isawaitable(verdict):
        verdict = await verdict
    return bool(verdict)


def check_retries(value: int | None, name: str) -> int | None:
    """`value` when it is a retry limit (a whole number of 0 or more, or `None`); else `UserError`."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise UserError(f"{name} must be a whole number of 0 or more (or None); got {value!r}.")
    return value


def positional_arity(function: Callable[..., Any]) -> int:
    """How many positional parameters `function` takes (a `*args` counts as many); 1 when unreadable.

    The agent calls the functions it is given (approval rules, instructions, output validators) with or
    without the run context depending on this.
    """
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 1
    count = 0
    for p in parameters:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return 99
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


# -- schema from a signature -------------------------------------------------------------------


def _is_async_callable(function: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(function):
        return True
    call = getattr(function, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _is_context_type(annotation: Any) -> bool:
    return annotation is RunContext or get_origin(annotation) is RunContext


def _type_hints(function: Callable[..., Any], name: str) -> dict[str, Any]:
    """The parameters' resolved type hints (the return annotation is not needed, so not resolved)."""
    target: Any = function
    if not (inspect.isfunction(function) or inspect.ismethod(function)):
        target = getattr(function, "__call__", function)  # noqa: B004
    target = inspect.unwrap(getattr(target, "__func__", target))
    annotations = {k: v for k, v in getattr(target, "__annotations__", {}).items() if k != "return"}
    shim = types.SimpleNamespace(__annotations__=annotations, __globals__=getattr(target, "__globals__", {}))
    try:
        return get_type_hints(shim, include_extras=True)
    except Exception as exc:
        raise UserError(
            f"The type hints of tool {name!r} could not be resolved ({type(exc).__name__}: {exc}). "
            "Define the types its parameters use at module level, so they can be looked up by name."
        ) from exc


def _find_context_param(function: Callable[..., Any]) -> str | None:
    try:
        signature = inspect.signature(function)
        hints = _type_hints(function, "")
    except (TypeError, ValueError, UserError):  # hand-made tools may have no readable hints: no context
        return None
    for parameter in signature.parameters.values():
        if _is_context_type(hints.get(parameter.name)):
            return parameter.name
    return None


def _signature_schema(
    function: Callable[..., Any], name: str, param_docs: dict[str, str]
) -> tuple[dict[str, Any], _Validator, str | None]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise UserError(f"The signature of tool {name!r} cannot be read ({exc}).") from exc
    hints = _type_hints(function, name)
    fields: list[tuple[str, Any, Any]] = []
    positional: list[str] = []
    context_param: str | None = None
    for parameter in signature.parameters.values():
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise UserError(
                f"The tool {name!r} takes *{parameter.name}; tools need named parameters so the model "
                "knows what to send. Replace it with explicit parameters."
            )
        annotation = hints.get(parameter.name, Any)
        if _is_context_type(annotation):
            context_param = parameter.name
            continue
        description = param_docs.get(parameter.name)
        if parameter.default is inspect.Parameter.empty:
            info = Field(description=description)
        else:
            info = Field(default=parameter.default, description=description)
        fields.append((parameter.name, annotation, info))
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
    model = dataclasses.make_dataclass(_class_name(name), fields, kw_only=True)
    model.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(model)
        schema = adapter.json_schema()
    except Exception as exc:
        raise UserError(
            f"toolwire could not build a JSON schema for tool {name!r} ({type(exc).__name__}: {exc}). "
            "Use types pydantic understands for its parameters, or build it with Tool.from_schema."
        ) from exc
    names = [f[0] for f in fields]

    def validate(arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        try:
            value = adapter.validate_python(dict(arguments))
        except ValidationError as exc:
            raise ToolError(_describe_validation_error(name, exc)) from None
        kwargs = {n: getattr(value, n) for n in names}
        return [kwargs.pop(n) for n in positional], kwargs

    return _clean_schema(schema), validate, context_param


def _class_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name) or "tool"
    return cleaned if cleaned.isidentifier() else f"tool_{cleaned}"


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic derives from Python names: they repeat the keys and cost tokens."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def _describe_validation_error(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"{where}: this argument is required")
        elif error["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
            problems.append(f"{where}: there is no such parameter")
        else:
            problems.append(f"{where}: {error['msg']} (got {error['input']!r})")
    return (f"The arguments for tool {name!r} are invalid: " + "; ".join(problems)
            + ". Call the tool again with arguments that match its schema.")


def _check_against_schema(
    name: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    problems = [f"{key}: this argument is required" for key in schema.get("required", ())
                if key not in arguments]
    if schema.get("additionalProperties") is False:
        known = schema.get("properties", {})
        problems += [f"{key}: there is no such parameter" for key in arguments if key not in known]
    if problems:
        raise ToolError(f"The arguments for tool {name!r} are invalid: " + "; ".join(problems)
                        + ". Call the tool again with arguments that match its schema.")
    return [], dict(arguments)


# -- docstrings --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Docstring:
    description: str
    params: dict[str, str]


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Yields?|Raises|"
    r"Examples?|Notes?|Attributes|See Also|Todo|Warnings?|References)\s*:\s*$",
    re.IGNORECASE,
)
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"})
_ARG_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> _Docstring:
    """Summary text and Google-style `Args:` (or Sphinx `:param x:`) descriptions of a docstring."""
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped) if indent == 0 else None
        if header:
            section, entry_indent, current = header.group(1).lower(), None, None
            continue
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        if section is None:
            description.append(line)
            continue
        if section == "sphinx":
            if stripped and current is not None and indent > 0:
                params[current] = f"{params[current]} {stripped}".strip()
            elif stripped:
                section, current = None, None
                description.append(line)
            continue
        if section not in _ARG_SECTIONS or not stripped:
            continue
        if indent == 0:  # text after the section, not indented: back to the description
            section, current = None, None
            description.append(line)
            continue
        if entry_indent is None:
            entry_indent = indent
        entry = _ARG_ENTRY.match(stripped) if indent <= entry_indent else None
        if entry:
            current = entry.group(1)
            params[current] = entry.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return _Docstring(description="\n".join(description).strip(), params=params)
