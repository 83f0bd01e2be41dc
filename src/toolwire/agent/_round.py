"""One round of a run: the model's response streams, the calls it makes run, and the round is committed.

    _play ── task group ── body: _respond (stream, then calls the events did not report) or a resumed
             │              round's decisions
             │             ├─ one task per call (`_answer`): admitted (checked, approved, within limits)
             │             │  then run under a CapacityLimiter, each starting the moment its call is complete
             └─ commit: assistant message + one user message with every result, then the chat memory

`RoundPlayer` is the part of `AgentRun` that plays a round; the step loop around it lives in `_run`.

Invariants:
- A round is committed exactly once, whole (every call answered), however it ends: normally, cut short
  by a stream error, cancelled, interrupted by a tool's `SystemExit`, stopped by a failing callback or
  by a usage limit. Only a round holding calls for approval is left uncommitted (the run pauses).
- The memory receives a committed round when its response completed or one of its tools started.
- Calls are taken from `ToolCallEnd` events (eager) and, after the response, from the assembled message.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import anyio
import anyio.abc
from anyio.lowlevel import checkpoint, checkpoint_if_cancelled

from ..events import (
    Event,
    FinishReason,
    MessageEndEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
    UsageEvent,
)
from ..exceptions import ChatMemoryError, StreamError, ToolRetriesExceeded, UsageLimitExceeded
from ..messages import InvalidToolCallPart, Message, TextPart, ToolCallPart, ToolResultPart
from ..models import ModelResponse
from ..settings import ModelSettings
from ..telemetry import RunTrace
from ..tools import RunContext, ToolDefinition, approval_needed
from ._approval import Denial, Restarted
from ._config import RunConfig
from ._execute import (
    CANCELLED,
    Executed,
    Prepared,
    Toolbox,
    ToolInterrupt,
    error_result,
    invalid_call_result,
    results_in_order,
)
from ._items import BACKLOG, ItemQueue
from ._limits import TOOL_LIMIT_RESULT, UsageBudget, UsageLimits
from ._output import FINAL_RESULT_TOOL, apply_validators
from ._types import StepResult

__all__ = ["STREAM_FAILED", "Committed", "Item", "Round", "RoundPlayer", "calls_of"]

STREAM_FAILED = "The tool was not run because the model's response stream failed before the run could go on."
LIMIT_HELD = "This call was not run: the run stopped at a usage limit before it could be approved."
RETRIES_HELD = "This call was not run: the run stopped (a tool asked for too many retries) before it could be approved."
_CLOSE_TIMEOUT = 10.0
"""Seconds a model response may take to close while the run is being cancelled."""
_APPEND_TIMEOUT = 30.0
"""Seconds a memory append may take; it is shielded from cancellation for that long."""

logger = logging.getLogger("toolwire")


@dataclass(slots=True, frozen=True)
class Committed:
    """Internal stream item: messages that just became part of the run's history."""

    messages: list[Message]


Item: TypeAlias = "Event | Committed"


@dataclass(slots=True, kw_only=True)
class Round:
    """The state of one step while its response streams and its tools run."""

    step: int
    request: list[Message]
    limiter: anyio.CapacityLimiter
    context: RunContext[Any]
    """The run context of this step; each call gets a copy with the call set."""
    toolbox: Toolbox
    definitions: list[ToolDefinition] = field(default_factory=list)
    system: str | None = None
    tg: anyio.abc.TaskGroup | None = None
    calls: dict[str, ToolCallPart | InvalidToolCallPart] = field(default_factory=dict)
    results: dict[str, ToolResultPart] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    """Accepted `final_result` values (validated, output validators applied), by call id."""
    held: dict[str, ToolCallPart] = field(default_factory=dict)
    """Calls waiting for a person's approval."""
    durations: dict[str, float] = field(default_factory=dict)
    """Seconds each call that ran took, by call id: kept in the results message's metadata (`toolwire`)."""
    decisions: dict[str, Denial | None] = field(default_factory=dict)
    """For a resumed round: each pending call's decision (`None` runs it)."""
    streamed: bool = False
    """The response stream completed: the message is whole (the memory may keep it)."""
    started: bool = False
    """A tool of the round started: its side effects may exist, so the memory keeps the round."""
    interrupt: BaseException | None = None
    """`SystemExit` / `KeyboardInterrupt` from a tool: re-raised once the round is stored."""
    limit_error: UsageLimitExceeded | None = None
    """The tool-call limit kept a call from running: raised once the round is stored."""
    retry_error: ToolRetriesExceeded | None = None
    """A tool asked for one retry more than its limit: raised once the round is stored."""
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

    @property
    def keep_in_memory(self) -> bool:
        """The round belongs in the memory: its message is whole, or a tool of it started."""
        return self.streamed or self.started


class RoundPlayer:
    """Plays rounds for a run: the response, the tool calls, the commit. Mixed into `AgentRun`."""

    _config: RunConfig
    _conversation_id: str | None
    _items: ItemQueue[Item] | None
    _settings: ModelSettings
    _trace: RunTrace | None
    _limits: UsageLimits | None
    _budget: UsageBudget | None
    _tool_retries: dict[str, int]
    _retries: int
    _requests: int
    _tool_calls: int
    messages: list[Message]
    steps: list[StepResult]
    before_tool: Callable[[ToolCallPart], Awaitable[None]] | None

    def _emit(self, item: Item) -> int:
        """Hand an item to the reader; returns how many are buffered (0 once the reader is gone)."""
        items = self._items
        if items is not None:
            return items.put(item)  # dropped once the reader is gone (the run is being stopped)
        return 0

    async def _play(self, round_: Round, body: Callable[[Round], Awaitable[None]]) -> None:
        """Run a round's work in its task group, then commit it however it ended.

        A round with calls waiting for approval (and no error) is left uncommitted for `_paused`.
        """
        try:
            async with anyio.create_task_group() as tg:
                round_.tg = tg
                try:
                    await body(round_)
                except Exception as exc:
                    # The request failed to open (nothing to keep), or a model failed mid-stream in a way
                    # of its own: kept like a StreamError, as far as the response had come.
                    round_.error = exc
        except BaseException:
            # Cancelled (or interrupted): keep what completed, answer every call, then let it propagate.
            new = self._commit(round_, missing=CANCELLED)
            if new and round_.keep_in_memory:
                await self._remember(new, stopping=True)
            raise
        if round_.interrupt is not None:
            new = self._commit(round_, missing=CANCELLED)
            if new and round_.keep_in_memory:
                await self._remember(new, stopping=True)
            raise round_.interrupt
        if round_.failure is not None:
            new = self._commit(round_, missing=CANCELLED)
            if new and round_.keep_in_memory:
                await self._remember(new)
            raise round_.failure
        if round_.error is not None:
            # The message is cut short: the run keeps it (valid, calls answered, marked incomplete); the
            # memory keeps it only when a tool of it started.
            new = self._commit(round_, missing=STREAM_FAILED)
            if new and round_.keep_in_memory:
                await self._remember(new)
            raise round_.error
        stop = round_.limit_error or round_.retry_error
        if stop is not None:
            # Calls held for approval cannot be decided any more: the run stops here, so they are answered.
            await self._remember(self._commit(round_, missing=LIMIT_HELD if round_.limit_error else RETRIES_HELD))
            stop.messages = list(self.messages)
            raise stop
        if round_.held:
            return
        await self._remember(self._commit(round_, missing=CANCELLED))

    async def _respond(self, round_: Round) -> None:
        await self._stream_response(round_)
        if round_.error is None:
            await self._dispatch_remaining(round_)

    async def _stream_response(self, round_: Round) -> None:
        config = self._config
        request = round_.request
        if round_.system:
            request = [Message.system(round_.system), *request]
        trace = self._trace
        span = trace.start_chat(round_.request, round_.system, self._settings) if trace is not None else None
        self._requests += 1
        try:
            with trace.use(span) if trace is not None and span is not None else nullcontext():
                response = config.model.stream(request, tools=round_.definitions, settings=self._settings)
                await response.__aenter__()
                try:
                    await self._read_events(round_, response)
                except BaseException as exc:
                    await _close(response, exc)
                    raise
                await _close(response, None)
        except BaseException as exc:
            if self._budget is not None:
                self._budget.add(round_.usage)  # what a response reported before it failed was spent
            if trace is not None and span is not None:
                trace.end_chat(span, message=round_.message or round_.partial_message(), usage=round_.usage,
                               finish_reason=round_.finish_reason, error=exc)
            raise
        if round_.message is None:
            round_.message = response.message
        if response.usage is not None:
            round_.usage = response.usage
        if self._budget is not None:
            self._budget.add(round_.usage)
        round_.finish_reason = response.finish_reason or round_.finish_reason
        round_.streamed = round_.error is None
        if trace is not None and span is not None:
            trace.end_chat(span, message=round_.message, usage=round_.usage, finish_reason=round_.finish_reason,
                           error=round_.error)

    async def _read_events(self, round_: Round, response: ModelResponse) -> None:
        eager = self._config.tool_execution == "eager"
        seen = round_.seen
        emit = self._emit
        try:
            async for event in response:
                if emit(event) >= BACKLOG:
                    await checkpoint()  # let the reader catch up with a response whose reads never wait
                kind = type(event)
                if kind is ToolCallDelta or kind is ThinkingDelta:
                    continue  # the per-token events the round keeps nothing of: no isinstance chain for them
                if isinstance(event, TextDelta):
                    if seen and type(seen[-1]) is list:
                        seen[-1].append(event.text)
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
                round_.message = _incomplete(exc.partial_message)
            elif round_.message is None:
                round_.message = round_.partial_message()
            else:
                round_.message = _incomplete(round_.message)

    def _dispatch(self, round_: Round, call: ToolCallPart | InvalidToolCallPart) -> None:
        if call.id in round_.calls:
            return
        round_.calls[call.id] = call
        assert round_.tg is not None
        round_.tg.start_soon(self._answer, round_, call)

    async def _dispatch_remaining(self, round_: Round) -> None:
        """After the response: every call of the assembled message runs, whether or not an event said so."""
        assert round_.message is not None
        for call in calls_of(round_.message):
            if self._config.tool_execution == "sequential":
                if call.id not in round_.calls:
                    round_.calls[call.id] = call
                    await self._answer(round_, call)
            else:
                self._dispatch(round_, call)

    async def _admit(
        self, round_: Round, call: ToolCallPart, context: RunContext[Any]
    ) -> Prepared | ToolResultPart | None:
        """The call ready to run, the result answering a call that may not run now, or `None` to hold it.

        This is where calls are held back: unknown tools and invalid arguments are answered at once,
        denied calls get their denial, calls that need a person's approval are held (`None`), and a call
        beyond the tool-call limit is answered instead of run. A `final_result` call of typed output is
        checked (and passed through the output validators) here and answered with the verdict.
        """
        config = self._config
        output = config.output
        if output is not None and output.kind == "tool" and call.name == FINAL_RESULT_TOOL:
            context.retry = self._retries  # for output validators: answers sent back so far
            checked = output.check_data(call.arguments)
            if checked.error is None and config.output_validators:
                checked = await apply_validators(config.output_validators, context, checked.value)
            if checked.error is not None:
                return error_result(call, output.tool_error(checked.error, rejected=checked.rejected))
            round_.outputs[call.id] = checked.value
            return ToolResultPart(call_id=call.id, name=call.name, result="The final result was accepted.")
        prepared = round_.toolbox.prepare(call, context)
        if not isinstance(prepared, Prepared):
            return prepared
        decided = call.id in round_.decisions
        denial = round_.decisions.get(call.id)
        if isinstance(denial, Restarted):  # a continued round: see `Restarted`
            if denial.started and not prepared.tool.idempotent:
                return error_result(call, denial.message)
            decided = denial.started
            denial = None
        if denial is not None:
            return error_result(call, denial.message)
        if not decided and await _needs_approval(prepared, context, config.requires_approval):
            return None
        limits = self._limits
        if limits is not None:
            exceeded = limits.check_tool_call(tool_calls=self._tool_calls)
            if exceeded is not None:
                round_.limit_error = round_.limit_error or exceeded
                return error_result(call, TOOL_LIMIT_RESULT.format(limit=limits.tool_calls))
        budget = self._budget
        if budget is not None:
            exceeded = budget.reserve_tool_call()
            if exceeded is not None:
                round_.limit_error = round_.limit_error or exceeded
                return error_result(call, TOOL_LIMIT_RESULT.format(limit=budget.limits.tool_calls))
        self._tool_calls += 1
        return prepared

    async def _answer(self, round_: Round, call: ToolCallPart | InvalidToolCallPart) -> None:
        duration: float | None = None
        metadata: dict[str, Any] = {}
        exception: BaseException | None = None
        if isinstance(call, InvalidToolCallPart):
            result = invalid_call_result(call)
        else:
            context = round_.context.for_call(call)
            context.requests = self._requests
            context.retry = self._tool_retries.get(call.name, 0)
            try:
                admitted = await self._admit(round_, call, context)
            except Exception as exc:
                # An approval rule or an output validator failed: a bug in the caller's code, so the step stops.
                self._fail(round_, exc)
                return
            if admitted is None:
                round_.held[call.id] = call
                return
            if isinstance(admitted, ToolResultPart):
                result = admitted
            else:
                context.tool_calls = self._tool_calls
                async with _slot(round_.limiter):
                    if self.before_tool is not None and not admitted.tool.idempotent:
                        await self.before_tool(call)  # a tool that must not run twice starts once that is recorded
                    round_.started = True
                    self._emit(ToolStartedEvent(call=call))
                    executed = await self._execute(round_, admitted)
                result, duration, exception = executed.result, executed.duration, executed.exception
                round_.durations[call.id] = round(duration, 3)
                metadata = context.metadata
                self._count_retry(round_, admitted, executed)
        round_.results[call.id] = result
        event = ToolResultEvent(result=result, duration=duration, metadata=metadata, exception=exception)
        self._emit(event)
        callback = self._config.on_tool_result
        if callback is not None:
            try:
                outcome = callback(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception as exc:
                # A failing callback is a bug in the caller's code: stop the step and report it.
                self._fail(round_, exc)

    def _count_retry(self, round_: Round, prepared: Prepared, executed: Executed) -> None:
        """Count a tool's `ModelRetry` (a result without one starts its count again); past its limit the run
        stops once the round is stored."""
        name = prepared.call.name
        if not executed.retry:
            self._tool_retries.pop(name, None)
            return
        count = self._tool_retries[name] = self._tool_retries.get(name, 0) + 1
        limit = prepared.tool.retries if prepared.tool.retries is not None else self._config.retries
        if count > limit and round_.retry_error is None:
            round_.retry_error = ToolRetriesExceeded(
                f"The tool {name!r} asked the model to try again {count} time(s) in a row, more than its limit of "
                f"{limit} (retries={limit}); its last message was: {executed.result.result['error']} Raise the "
                "tool's retries (@tool(retries=N)) or the agent's retries=, or fix what the tool needs; go on from "
                "this error's `messages`.",
                tool=name,
                retries=limit,
                messages=[],
            )

    async def _execute(self, round_: Round, prepared: Prepared) -> Executed:
        """Run an admitted call (inside its `execute_tool` span when tracing)."""
        trace = self._trace
        if trace is None:
            return await self._run_tool(round_, prepared)
        with trace.tool(prepared.call, prepared.tool) as span:
            executed = await self._run_tool(round_, prepared)
            span.result(executed.result, executed.exception, executed.timed_out)
        return executed

    @staticmethod
    async def _run_tool(round_: Round, prepared: Prepared) -> Executed:
        try:
            return await round_.toolbox.execute(prepared)
        except ToolInterrupt as interrupt:
            round_.interrupt = interrupt.exception
            assert round_.tg is not None
            round_.tg.cancel_scope.cancel()
            return interrupt.outcome

    @staticmethod
    def _fail(round_: Round, exc: Exception) -> None:
        round_.failure = exc
        assert round_.tg is not None
        round_.tg.cancel_scope.cancel()

    def _commit(self, round_: Round, *, missing: str) -> list[Message]:
        """The one place messages join the run's history: a step's assistant message and its results.

        Runs once per step, after its response ended and every tool finished, or while the step is being
        stopped; calls without a result get an error result saying `missing`. Returns the messages it
        added, which `_remember` hands to the chat memory in one append: a store never sees a
        half-streamed message or a call without its result.
        """
        message = round_.message if round_.message is not None else round_.partial_message()
        if message is None:
            return []
        calls = calls_of(message)
        results = results_in_order(calls, round_.results, missing)
        new = [message, tool_results_message(results, round_.durations)] if calls else [message]
        self.messages.extend(new)
        self.steps.append(StepResult(index=round_.step, message=message, results=results, usage=round_.usage,
                                     finish_reason=round_.finish_reason))
        self._emit(Committed(new))
        return new

    async def _remember(self, messages: list[Message], *, stopping: bool = False) -> None:
        """Append committed messages to the chat memory, before the run goes on.

        The append is shielded from cancellation (for at most `_APPEND_TIMEOUT` seconds): the messages
        are already part of the run's history, and a cancellation arriving while the store awaits I/O
        must not leave the memory without them. A cancellation is delivered once the append is done.
        """
        memory = self._config.memory
        if memory is None or not messages:
            return
        with anyio.move_on_after(_APPEND_TIMEOUT, shield=True) as scope:
            await memory.append(messages, self._conversation_id)
        if scope.cancelled_caught:
            text = (f"The chat memory did not store {len(messages)} message(s) of conversation "
                    f"{self._conversation_id!r} within {_APPEND_TIMEOUT:g} seconds; they may be missing from it.")
            logger.error(text)
            if not stopping:
                raise ChatMemoryError(text + " Check the store, then go on from the run's messages.")


@asynccontextmanager
async def _slot(limiter: anyio.CapacityLimiter) -> AsyncIterator[None]:
    """One of the limiter's slots, taken without a pass through the event loop when one is free: anyio's `acquire`
    yields to the loop even then, a wake-up more for each tool call. A cancelled run still starts no tool: the
    cancellation is delivered here as `acquire` would have."""
    await checkpoint_if_cancelled()
    try:
        limiter.acquire_nowait()
    except anyio.WouldBlock:
        await limiter.acquire()
    try:
        yield
    finally:
        limiter.release()


async def _needs_approval(prepared: Prepared, context: RunContext[Any], agent_rule: Any) -> bool:
    """Whether the tool's own rule or the agent's says a person must approve this call."""
    for rule in (prepared.tool.requires_approval, agent_rule):
        if await approval_needed(rule, context):
            return True
    return False


def _incomplete(message: Message) -> Message:
    """The message marked as cut short (`metadata["incomplete"]`), whoever built it."""
    if message.metadata.get("incomplete") is True:
        return message
    return dataclasses.replace(message, metadata={**message.metadata, "incomplete": True})


def calls_of(message: Message) -> list[ToolCallPart | InvalidToolCallPart]:
    return [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]


async def _close(response: ModelResponse, exc: BaseException | None) -> None:
    # Shielded: a cancelled run must still release the HTTP response, so it closes even mid-cancellation.
    with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        await response.__aexit__(type(exc) if exc is not None else None, exc,
                                 exc.__traceback__ if exc is not None else None)


DURATIONS_KEY = "toolwire"
"""The results message's metadata key for what toolwire itself records: `{"durations": {call_id: seconds}}`."""


def tool_results_message(results: list[ToolResultPart], durations: dict[str, float]) -> Message:
    """A round's results message; the seconds each call that ran took go in its metadata, so a stored round
    shows its timings after a reload (no wire adapter sends metadata it does not own)."""
    ran = {part.call_id: durations[part.call_id] for part in results if part.call_id in durations}
    if not ran:
        return Message.tool_results(results)
    return Message(role="user", parts=list(results), metadata={DURATIONS_KEY: {"durations": ran}})
