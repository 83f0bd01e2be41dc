"""One agent run: the step loop, eager tool execution, and the history kept valid through every exit.

Structure (all structured concurrency, nothing outlives the `async with`):

    AgentRun.__aenter__ ── task group ── _drive: for each step
                                            ├─ model response (closed in `finally`, shielded)
                                            ├─ step task group: one task per tool call, limited by a
                                            │  CapacityLimiter; each starts the moment its call is complete
                                            └─ commit: assistant message + one user message with all results
    consumer ◀── memory object stream ── events (model events, tool_started, tool_result) and commits

Invariants:
- `AgentRun.messages` only ever grows by whole rounds: an assistant message that calls tools is appended
  together with the message answering every one of its calls, so the history is valid at every moment.
- Calls are taken from `ToolCallEnd` events (eager) and, after the response ends, from the assembled
  message: a call the events did not report still runs. Nothing is decided from a single text chunk.
- The drive task never raises anything but cancellation; errors travel to the consumer through the
  stream, so the task group never cancels the consumer behind its back.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeAlias

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events import (
    Event,
    FinishReason,
    MessageEndEvent,
    TextDelta,
    ToolCallEnd,
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
    UsageEvent,
)
from ..exceptions import MaxStepsExceeded, ProviderError, StreamError, UserError
from ..messages import InvalidToolCallPart, Message, TextPart, ToolCallPart, ToolResultPart
from ..models import Model, ModelResponse
from ..settings import ModelSettings
from ..tools import RunContext
from ._execute import CANCELLED, Prepared, Toolbox, error_result, invalid_call_result, results_in_order
from ._history import validate_history
from ._types import RunResult, StepResult, ToolExecution

__all__ = ["AgentRun", "Committed", "RunConfig"]

STREAM_FAILED = "The tool was not run because the model's response stream failed before the run could go on."
_CLOSE_TIMEOUT = 10.0
"""Seconds a model response may take to close while the run is being cancelled."""


@dataclass(slots=True, frozen=True)
class Committed:
    """Internal stream item: messages that just became part of the run's history."""

    messages: list[Message]


Item: TypeAlias = "Event | Committed"


@dataclass(slots=True, kw_only=True)
class RunConfig:
    """Everything a run needs from its agent, fixed when the run starts."""

    model: Model
    toolbox: Toolbox
    system: str | None
    max_steps: int
    max_parallel_tools: int
    tool_execution: ToolExecution
    settings: ModelSettings
    on_tool_result: Callable[[ToolResultEvent], Any] | None


@dataclass(slots=True, kw_only=True)
class _Round:
    """The state of one step while its response streams and its tools run."""

    step: int
    request: list[Message]
    limiter: anyio.CapacityLimiter
    tg: anyio.abc.TaskGroup | None = None
    calls: dict[str, ToolCallPart | InvalidToolCallPart] = field(default_factory=dict)
    results: dict[str, ToolResultPart] = field(default_factory=dict)
    # What arrived so far, for a message cut short by cancellation: text runs and completed calls.
    seen: list[list[str] | ToolCallPart | InvalidToolCallPart] = field(default_factory=list)
    message: Message | None = None
    usage: Usage | None = None
    finish_reason: FinishReason | None = None
    error: Exception | None = None
    failure: Exception | None = None

    def partial_message(self) -> Message | None:
        """The text and complete calls received before the response was cut short, if any."""
        parts: list[Any] = []
        for item in self.seen:
            if isinstance(item, list):
                parts.append(TextPart(text="".join(item)))
            else:
                parts.append(item)
        if not parts:
            return None
        return Message(role="assistant", parts=parts, metadata={"incomplete": True})


class AgentRun:
    """A run in progress: iterate it for events; `messages` is its valid history at every moment.

    Obtained from `Agent.stream(...)`; use it only inside `async with`. Leaving the block early (or the
    task being cancelled) stops the run: the model response is closed, running tools are cancelled, and
    `messages` keeps every completed message with each tool call answered (`{"error": "cancelled"}` for
    calls whose tool did not finish).

    Events are those of `toolwire.events`: the model's (text, thinking, tool call, usage, finish,
    message_end...) for each step, plus `tool_started` when a tool begins and `tool_result` as each
    result becomes available (completion order).

    When the run fails, iteration raises the error after the last event. Provider errors then carry
    `.messages` (like `MaxStepsExceeded`): the same valid history as `run.messages`. A response that
    broke mid-stream is kept as far as it completed, its cut-off calls answered with error results;
    tools already running finish first, calls that had not started are answered as not run.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        history: Sequence[Message],
        prompt: Message | None,
        settings: ModelSettings | None = None,
    ) -> None:
        self._config = config
        self._history = list(history)
        self._prompt = prompt
        self._settings: ModelSettings = {**config.settings, **(settings or {})}
        self.messages: list[Message] = []
        """The run's new messages so far (prompt first): always a valid continuation of the history."""
        self.steps: list[StepResult] = []
        self._result: RunResult | None = None
        self._error: Exception | None = None
        self._send: MemoryObjectSendStream[Item] | None = None
        self._receive: MemoryObjectReceiveStream[Item] | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        conversation = [*self._history, *([prompt] if prompt is not None else [])]
        validate_history(conversation, prompt_index=len(self._history) if prompt is not None else None)

    # -- the consumer's side -----------------------------------------------------------------

    async def __aenter__(self) -> AgentRun:
        if self._entered:
            raise UserError("A run can be started only once; call agent.stream(...) again for a new run.")
        self._entered = True
        # Unbounded: the run never waits for a slow reader, and its size is bounded by the responses.
        self._send, self._receive = anyio.create_memory_object_stream[Item](math.inf)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._drive)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None
        assert self._send is not None
        assert self._receive is not None
        self._tg.cancel_scope.cancel()
        try:
            # The body's own exception is left to propagate as it is, never wrapped in a group: the
            # drive task does not raise, so the group has nothing of its own to report.
            await self._tg.__aexit__(None, None, None)
        finally:
            self._send.close()
            self._receive.close()

    def __aiter__(self) -> AgentRun:
        return self

    async def __anext__(self) -> Event:
        while True:
            item = await self.next_item()
            if not isinstance(item, Committed):
                return item

    async def next_item(self) -> Item:
        """The next event or commit; raises the run's error after the last item."""
        if self._receive is None:
            raise UserError("Use the run inside `async with agent.stream(...) as run:` before iterating it.")
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            pass
        if self._error is not None:
            raise self._error
        raise StopAsyncIteration

    @property
    def done(self) -> bool:
        """The run finished (with a result or an error)."""
        return self._result is not None or self._error is not None

    @property
    def error(self) -> Exception | None:
        """The error that ended the run, if one did."""
        return self._error

    @property
    def result(self) -> RunResult:
        """The run's result; available once iteration has ended without an error."""
        if self._result is None:
            if self._error is not None:
                raise UserError(f"The run ended with an error and has no result: {self._error}") from self._error
            raise UserError("The run has not finished: iterate it to the end (`async for event in run`) "
                            "before reading `run.result`.")
        return self._result

    @property
    def usage(self) -> Usage:
        """Tokens used by the steps committed so far."""
        return functools.reduce(operator.add, (s.usage for s in self.steps if s.usage is not None), Usage())

    # -- the run itself ----------------------------------------------------------------------

    def _emit(self, item: Item) -> None:
        if self._send is None:
            return
        try:
            self._send.send_nowait(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the reader is gone; the run is being stopped

    async def _drive(self) -> None:
        try:
            if self._prompt is not None:
                self.messages.append(self._prompt)
                self._emit(Committed([self._prompt]))
            self._result = await self._loop()
        except Exception as exc:
            if isinstance(exc, ProviderError):
                # Provider errors carry the run's messages like MaxStepsExceeded does, so the caller
                # can keep the valid history of the steps that completed.
                exc.messages = list(self.messages)
            self._error = exc
        finally:
            assert self._send is not None
            self._send.close()

    async def _loop(self) -> RunResult:
        config = self._config
        for step in range(config.max_steps):
            round_ = await self._step(step)
            if round_.message is None:
                raise UserError(f"The model {config.model.name!r} ended a response without an assembled "
                                "message; a Model must set `message` on its response when the stream ends.")
            if not _calls_of(round_.message):
                return RunResult(output=round_.message.text, messages=list(self.messages), usage=self.usage,
                                 steps=list(self.steps))
        raise MaxStepsExceeded(
            f"The agent made {config.max_steps} model requests (max_steps={config.max_steps}) without "
            "reaching a final answer. Raise max_steps, or go on from where it stopped by running again "
            "with the history extended by this error's `messages` and no prompt.",
            messages=list(self.messages),
        )

    async def _step(self, step: int) -> _Round:
        config = self._config
        conversation = [*self._history, *self.messages]
        validate_history(conversation)
        round_ = _Round(step=step, request=conversation, limiter=anyio.CapacityLimiter(config.max_parallel_tools))
        try:
            async with anyio.create_task_group() as tg:
                round_.tg = tg
                try:
                    await self._stream_response(round_)
                    if round_.error is None:
                        await self._dispatch_remaining(round_)
                except Exception as exc:
                    # The request failed to open (nothing to keep), or a model failed mid-stream in a way
                    # of its own: kept like a StreamError, as far as the response had come.
                    round_.error = exc
        except BaseException:
            # Cancelled (or interrupted): keep what completed, answer every call, then let it propagate.
            self._commit(round_, missing=CANCELLED)
            raise
        if round_.failure is not None:
            self._commit(round_, missing=CANCELLED)
            raise round_.failure
        if round_.error is not None:
            self._commit(round_, missing=STREAM_FAILED)
            raise round_.error
        self._commit(round_, missing=CANCELLED)
        return round_

    async def _stream_response(self, round_: _Round) -> None:
        config = self._config
        request = round_.request
        if config.system:
            request = [Message.system(config.system), *request]
        response = config.model.stream(request, tools=config.toolbox.definitions, settings=self._settings)
        await response.__aenter__()
        try:
            await self._read_events(round_, response)
        except BaseException as exc:
            await _close(response, exc)
            raise
        await _close(response, None)
        if round_.message is None:
            round_.message = response.message
        if response.usage is not None:
            round_.usage = response.usage
        round_.finish_reason = response.finish_reason or round_.finish_reason

    async def _read_events(self, round_: _Round, response: ModelResponse) -> None:
        eager = self._config.tool_execution == "eager"
        seen = round_.seen
        try:
            async for event in response:
                self._emit(event)
                if isinstance(event, TextDelta):
                    last = seen[-1] if seen else None
                    if isinstance(last, list):
                        last.append(event.text)
                    else:
                        seen.append([event.text])
                elif isinstance(event, ToolCallEnd):
                    seen.append(event.call)
                    if eager:
                        self._dispatch(round_, event.call)
                elif isinstance(event, UsageEvent):
                    round_.usage = event.usage
                elif isinstance(event, MessageEndEvent):
                    round_.message = event.message
        except StreamError as exc:
            # The partial message keeps what completed; its cut-off calls are invalid and get error
            # results, tools already running finish, and the error is raised once the round is committed.
            round_.error = exc
            round_.finish_reason = "error"
            if exc.partial_message is not None:
                round_.message = exc.partial_message
            elif round_.message is None:
                round_.message = round_.partial_message()

    def _dispatch(self, round_: _Round, call: ToolCallPart | InvalidToolCallPart) -> None:
        if call.id in round_.calls:
            return
        round_.calls[call.id] = call
        assert round_.tg is not None
        round_.tg.start_soon(self._answer, round_, call)

    async def _dispatch_remaining(self, round_: _Round) -> None:
        """After the response: every call of the assembled message runs, whether or not an event said so."""
        assert round_.message is not None
        for call in _calls_of(round_.message):
            if self._config.tool_execution == "sequential":
                if call.id not in round_.calls:
                    round_.calls[call.id] = call
                    await self._answer(round_, call)
            else:
                self._dispatch(round_, call)

    def _admit(self, call: ToolCallPart, context: RunContext) -> Prepared | ToolResultPart:
        """The call ready to run, or the result answering a call that may not run now.

        This is where calls are held back: unknown tools, invalid arguments, and tools that need a
        person's approval.
        """
        prepared = self._config.toolbox.prepare(call, context)
        if isinstance(prepared, Prepared) and prepared.tool.requires_approval:
            return error_result(call, f"The tool {call.name!r} needs a person's approval before it runs, and "
                                      "this agent has no way to ask for it, so the call was not run.")
        return prepared

    async def _answer(self, round_: _Round, call: ToolCallPart | InvalidToolCallPart) -> None:
        duration: float | None = None
        metadata: dict[str, Any] = {}
        if isinstance(call, InvalidToolCallPart):
            result = invalid_call_result(call)
        else:
            context = RunContext(call=call, step=round_.step, messages=round_.request)
            admitted = self._admit(call, context)
            if isinstance(admitted, ToolResultPart):
                result = admitted
            else:
                async with round_.limiter:
                    self._emit(ToolStartedEvent(call=call))
                    result, duration = await self._config.toolbox.execute(admitted)
                metadata = context.metadata
        round_.results[call.id] = result
        event = ToolResultEvent(result=result, duration=duration, metadata=metadata)
        self._emit(event)
        callback = self._config.on_tool_result
        if callback is not None:
            try:
                outcome = callback(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:
                # A failing callback is a bug in the caller's code: stop the step and report it.
                round_.failure = exc
                assert round_.tg is not None
                round_.tg.cancel_scope.cancel()

    def _commit(self, round_: _Round, *, missing: str) -> None:
        """The one place messages join the run's history: a step's assistant message and its results.

        Runs once per step, after its response ended and every tool finished, or while the step is being
        stopped; calls without a result get an error result saying `missing`. Anything that keeps
        messages elsewhere (a chat memory, a store) can follow the run from here and never sees a
        half-streamed message or a call without its result.
        """
        message = round_.message if round_.message is not None else round_.partial_message()
        if message is None:
            return
        calls = _calls_of(message)
        results = results_in_order(calls, round_.results, missing)
        new = [message, Message.tool_results(results)] if calls else [message]
        self.messages.extend(new)
        self.steps.append(StepResult(index=round_.step, message=message, results=results, usage=round_.usage,
                                     finish_reason=round_.finish_reason))
        self._emit(Committed(new))


def _calls_of(message: Message) -> list[ToolCallPart | InvalidToolCallPart]:
    return [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]


async def _close(response: ModelResponse, exc: BaseException | None) -> None:
    # Shielded: a cancelled run must still release the HTTP response, so it closes even mid-cancellation.
    with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        await response.__aexit__(type(exc) if exc is not None else None, exc,
                                 exc.__traceback__ if exc is not None else None)
