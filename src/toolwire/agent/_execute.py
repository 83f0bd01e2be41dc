"""Running one tool call and turning whatever happens into a `ToolResultPart`.

Nothing a tool does ends the run: exceptions, invalid arguments, unknown names, truncated calls and
timeouts all become error results (`{"error": "..."}`, `is_error=True`) that the model reads and can
recover from. Only cancellation propagates.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from ..exceptions import ToolError, UserError
from ..messages import InvalidToolCallPart, ToolCallPart, ToolResultPart, to_jsonable
from ..tools import RunContext, Tool

__all__ = ["CANCELLED", "Prepared", "Toolbox", "error_result", "invalid_call_result", "results_in_order"]

CANCELLED = "cancelled"
"""The error text of a call whose tool was stopped because the run was cancelled."""


def error_result(call: ToolCallPart | InvalidToolCallPart, message: str) -> ToolResultPart:
    return ToolResultPart(call_id=call.id, name=call.name, result={"error": message}, is_error=True)


def invalid_call_result(call: InvalidToolCallPart) -> ToolResultPart:
    return error_result(
        call,
        f"The call to tool {call.name!r} could not be run: {call.reason} "
        "Call the tool again with complete, valid JSON arguments.",
    )


def describe_exception(name: str, exc: BaseException) -> str:
    detail = str(exc).strip()
    if not detail:
        return f"The tool {name!r} failed with {type(exc).__name__} (no message)."
    return f"The tool {name!r} failed with {type(exc).__name__}: {detail.rstrip('.')}."


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
    def definitions(self) -> list[Any]:
        return [t.definition for t in self.tools.values()]

    def get(self, name: str) -> Tool[..., Any] | None:
        return self.tools.get(name)

    def unknown_tool_result(self, call: ToolCallPart) -> ToolResultPart:
        known = ", ".join(repr(n) for n in self.tools) or "none"
        return error_result(call, f"There is no tool named {call.name!r}. The available tools are: {known}.")

    def prepare(self, call: ToolCallPart, context: RunContext) -> Prepared | ToolResultPart:
        """The checked call, ready to run; or the error result for a call that cannot run."""
        tool = self.tools.get(call.name)
        if tool is None:
            return self.unknown_tool_result(call)
        try:
            args, kwargs = tool._prepare(call.arguments, context)
        except ToolError as exc:
            return error_result(call, str(exc))
        return Prepared(tool=tool, call=call, args=args, kwargs=kwargs)

    async def execute(self, prepared: Prepared) -> tuple[ToolResultPart, float]:
        """Run a prepared call; returns the result and the time it took. Raises only on cancellation."""
        started = time.perf_counter()
        call = prepared.call
        timeout = prepared.tool.timeout if prepared.tool.timeout is not None else self.default_timeout
        try:
            with anyio.move_on_after(timeout) as scope:
                value = await prepared.tool._invoke(prepared.args, prepared.kwargs)
            if scope.cancelled_caught:
                result = error_result(call, f"The tool {call.name!r} did not finish within {timeout:g} "
                                            "seconds and was stopped.")
            else:
                result = ToolResultPart(call_id=call.id, name=call.name, result=to_jsonable(value))
        except ToolError as exc:
            result = error_result(call, str(exc))
        except Exception as exc:
            result = error_result(call, describe_exception(call.name, exc))
        return result, time.perf_counter() - started


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
