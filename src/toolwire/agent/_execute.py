"""Running one tool call and turning whatever happens into a `ToolResultPart`.

Nothing a tool does ends the run: exceptions, invalid arguments, unknown names, truncated calls and
timeouts all become error results (`{"error": "..."}`, `is_error=True`) that the model reads and can
recover from. The exception itself is kept for the caller (`ToolResultEvent.exception`) and logged on the
`toolwire` logger with its traceback; the model reads only its type and (shortened) message.

Only cancellation propagates as it is. A tool raising `SystemExit` or `KeyboardInterrupt` (directly, or
from its worker thread) is answered with an error result like any failure, and `ToolInterrupt` carries
the exception to the run, which commits the round and then re-raises it: the program still stops, with
a valid history, and the event loop never sees it escape a task.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ..exceptions import ModelRetry, ToolError, UserError
from ..messages import InvalidToolCallPart, ToolCallPart, ToolResultPart, to_jsonable
from ..tools import RunContext, Tool, ToolDefinition, ToolReturn

__all__ = [
    "CANCELLED",
    "Executed",
    "Prepared",
    "ToolInterrupt",
    "Toolbox",
    "error_result",
    "invalid_call_result",
    "results_in_order",
]

logger = logging.getLogger("toolwire")

CANCELLED = "cancelled"
"""The error text of a call whose tool was stopped because the run was cancelled."""

_DETAIL_LIMIT = 1000
"""The most characters of an exception's message the model reads (tracebacks stay in the log)."""


def error_result(call: ToolCallPart | InvalidToolCallPart, message: str) -> ToolResultPart:
    return ToolResultPart(call_id=call.id, name=call.name, result={"error": message}, is_error=True)


def invalid_call_result(call: InvalidToolCallPart) -> ToolResultPart:
    return error_result(
        call,
        f"The call to tool {call.name!r} could not be run: {call.reason} "
        "Call the tool again with complete, valid JSON arguments.",
    )


def describe_exception(name: str, exc: BaseException) -> str:
    """What the model reads about a tool's exception: its type and message, shortened; never raises."""
    try:
        detail = str(exc).strip()
    except Exception as str_error:  # an exception whose __str__ itself fails must not end the run
        detail = f"(its message could not be read: {type(str_error).__name__})"
    if len(detail) > _DETAIL_LIMIT:
        detail = detail[:_DETAIL_LIMIT] + "…"
    if not detail:
        return f"The tool {name!r} failed with {type(exc).__name__} (no message)."
    return f"The tool {name!r} failed with {type(exc).__name__}: {detail.rstrip('.')}."


class ToolInterrupt(Exception):
    """A tool raised `SystemExit` or `KeyboardInterrupt`: the run commits `outcome`, then re-raises `exception`."""

    def __init__(self, outcome: Executed, exception: BaseException) -> None:
        super().__init__(f"The tool {outcome.result.name!r} raised {type(exception).__name__}.")
        self.outcome = outcome
        self.exception = exception


@dataclass(slots=True, kw_only=True)
class Executed:
    """What running a call produced: its result, how long it took, and the exception it raised, if any."""

    result: ToolResultPart
    duration: float
    exception: BaseException | None = None
    timed_out: bool = False
    retry: bool = False
    """The tool raised `ModelRetry`: its message is the error result and the run counts the retry."""


class Toolbox:
    """The agent's tools by name, and how to run a call against them."""

    def __init__(self, tools: Iterable[Tool[..., Any]], *, default_timeout: float | None = None) -> None:
        self.tools: dict[str, Tool[..., Any]] = {}
        for t in tools:
            if t.name in self.tools:
                raise UserError(f"Two tools are named {t.name!r}; give one of them another name.")
            self.tools[t.name] = t
        self.default_timeout = default_timeout

    @property
    def definitions(self) -> list[ToolDefinition]:
        return [t.definition for t in self.tools.values()]

    def get(self, name: str) -> Tool[..., Any] | None:
        return self.tools.get(name)

    def unknown_tool_result(self, call: ToolCallPart) -> ToolResultPart:
        known = ", ".join(repr(n) for n in self.tools) or "none"
        return error_result(call, f"There is no tool named {call.name!r}. The available tools are: {known}.")

    def prepare(self, call: ToolCallPart, context: RunContext[Any]) -> Prepared | ToolResultPart:
        """The checked call, ready to run; or the error result for a call that cannot run."""
        tool = self.tools.get(call.name)
        if tool is None:
            return self.unknown_tool_result(call)
        try:
            args, kwargs = tool._prepare(call.arguments, context)
        except ToolError as exc:
            return error_result(call, str(exc))
        return Prepared(tool=tool, call=call, args=args, kwargs=kwargs)

    async def execute(self, prepared: Prepared) -> Executed:
        """Run a prepared call; raises only on cancellation, and `ToolInterrupt` (see the module docstring)."""
        started = time.perf_counter()
        call = prepared.call
        timeout = prepared.tool.timeout if prepared.tool.timeout is not None else self.default_timeout
        exception: BaseException | None = None
        timed_out = False
        retry = False
        try:
            with anyio.move_on_after(timeout) as scope:
                value = await prepared.tool._invoke(prepared.args, prepared.kwargs)
            if scope.cancelled_caught:
                timed_out = True
                result = error_result(call, f"The tool {call.name!r} did not finish within {timeout:g} "
                                            "seconds and was stopped.")
                logger.warning("Tool %r (call %s) did not finish within %g seconds and was stopped.", call.name,
                               call.id, timeout)
            else:
                result = _result_part(call, value)
        except ModelRetry as exc:
            result, exception, retry = error_result(call, _safe_str(exc)), exc, True
            logger.info("Tool %r (call %s) asked the model to try again: %s", call.name, call.id,
                        result.result["error"])
        except ToolError as exc:
            result, exception = error_result(call, _safe_str(exc)), exc
            logger.info("Tool %r (call %s) reported an error: %s", call.name, call.id, result.result["error"])
        except Exception as exc:
            result, exception = error_result(call, describe_exception(call.name, exc)), exc
            logger.warning("Tool %r (call %s) raised %s; the model is told it failed.", call.name, call.id,
                           type(exc).__name__, exc_info=exc)
        except anyio.get_cancelled_exc_class():
            raise
        except (SystemExit, KeyboardInterrupt) as exc:
            result = error_result(call, f"The tool {call.name!r} stopped the program ({type(exc).__name__}).")
            logger.warning("Tool %r (call %s) raised %s; the run stops after storing its round.", call.name,
                           call.id, type(exc).__name__)
            raise ToolInterrupt(Executed(result=result, duration=time.perf_counter() - started, exception=exc),
                                exc) from None
        return Executed(result=result, duration=time.perf_counter() - started, exception=exception, timed_out=timed_out,
                        retry=retry)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return f"{type(exc).__name__} (its message could not be read)"


@dataclass(slots=True, kw_only=True)
class Prepared:
    """A call whose tool exists and whose arguments passed validation."""

    tool: Tool[..., Any]
    call: ToolCallPart
    args: list[Any]
    kwargs: dict[str, Any]


def results_in_order(
    calls: Iterable[ToolCallPart | InvalidToolCallPart],
    results: Mapping[str, ToolResultPart],
    missing: str,
) -> list[ToolResultPart]:
    """One result per call, in the calls' order; calls without one get an error result saying `missing`
    (an invalid call always gets the reason it could not run)."""
    ordered = []
    for call in calls:
        result = results.get(call.id)
        if result is None:
            result = invalid_call_result(call) if isinstance(call, InvalidToolCallPart) else error_result(call, missing)
        ordered.append(result)
    return ordered


def _result_part(call: ToolCallPart, value: Any) -> ToolResultPart:
    if isinstance(value, ToolReturn):
        return ToolResultPart(call_id=call.id, name=call.name, result=to_jsonable(value.value), files=list(value.files))
    return ToolResultPart(call_id=call.id, name=call.name, result=to_jsonable(value))
