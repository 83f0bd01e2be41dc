"""One agent run: the step loop, eager tool execution, and the history kept valid through every exit.

Structure (all structured concurrency, nothing outlives the `async with`):

    AgentRun.__aenter__ ── task group ── _drive: for each step
                                            ├─ model response (closed in `finally`, shielded)
                                            ├─ step task group: one task per tool call, limited by a
                                            │  CapacityLimiter; each starts the moment its call is complete
                                            └─ commit: assistant message + one user message with all results,
                                               then the same messages appended to the chat memory
    consumer ◀── memory object stream ── events (model events, tool_started, tool_result) and commits

Invariants:
- `AgentRun.messages` only ever grows by whole rounds: an assistant message that calls tools is appended
  together with the message answering every one of its calls, so the history is valid at every moment.
- Calls are taken from `ToolCallEnd` events (eager) and, after the response ends, from the assembled
  message: a call the events did not report still runs. Nothing is decided from a single text chunk.
- The drive task never raises anything but cancellation; errors travel to the consumer through the
  stream, so the task group never cancels the consumer behind its back.
- A chat memory receives the commits of rounds whose response stream completed, each before the next
  request starts: the prompt, then each assistant message with its results in one append. A round cut
  off mid-stream is appended too once any of its tools started (a side effect the model must learn
  about), its message marked incomplete; one cut off before any tool started is not. Appends are
  shielded from cancellation: a round the run committed is never lost from the memory half-way.
- A round with calls waiting for approval is not committed: the run ends paused, the round held in
  a `RunState`, and it is committed (and remembered) whole when a resumed run has every result.
- A resumed state is checked whole, its conversation's position compared and its id claimed, all
  before any tool of the resumed round runs.
- A tool raising `SystemExit`/`KeyboardInterrupt` ends the run after its round is committed and
  remembered; the exception is re-raised in the task iterating the run, never inside the task group.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import math
import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Generic, TypeAlias

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
from ..exceptions import ChatMemoryError, MaxStepsExceeded, ProviderError, StreamError, UserError
from ..memory import ChatMemory, ResumeClaims
from ..messages import InvalidToolCallPart, Message, TextPart, ToolCallPart, ToolResultPart
from ..models import Model, ModelResponse
from ..settings import ModelSettings
from ..tools import ApprovalPredicate, RunContext, Tool, ToolDefinition
from ._approval import Approval, Denial, RunState, decisions_for
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
from ._guard import ACTIVE, PROCESS_CLAIMS, check_position, check_resumable, claim_resume
from ._history import validate_history
from ._output import FINAL_RESULT_TOOL, OutputSpec, OutputValidationError
from ._types import OutputT, RunResult, StepResult, ToolExecution

__all__ = ["AgentRun", "Committed", "RunConfig"]

STREAM_FAILED = "The tool was not run because the model's response stream failed before the run could go on."
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
    requires_approval: ApprovalPredicate | None = None
    memory: ChatMemory | None = None
    own_history: bool = True
    output: OutputSpec | None = None
    output_retries: int = 1
    resume_claims: ResumeClaims | None = None

    @property
    def claims(self) -> ResumeClaims:
        """Who decides that a state is resumed once: the agent's claims, the memory's, or this process's."""
        if self.resume_claims is not None:
            return self.resume_claims
        if self.memory is not None and isinstance(self.memory, ResumeClaims):
            return self.memory
        return PROCESS_CLAIMS

    @property
    def definitions(self) -> list[ToolDefinition]:
        """The tools offered to the model: the agent's, and `final_result` for tool output."""
        definitions = self.toolbox.definitions
        final = self.output.tool_definition if self.output is not None else None
        return [*definitions, final] if final is not None else definitions

    @property
    def memory_is_source(self) -> bool:
        """Each request is built from the memory alone; the run keeps no conversation of its own."""
        return self.memory is not None and not self.own_history


@dataclass(slots=True, kw_only=True)
class _Round:
    """The state of one step while its response streams and its tools run."""

    step: int
    request: list[Message]
    limiter: anyio.CapacityLimiter
    tg: anyio.abc.TaskGroup | None = None
    calls: dict[str, ToolCallPart | InvalidToolCallPart] = field(default_factory=dict)
    results: dict[str, ToolResultPart] = field(default_factory=dict)
    held: dict[str, ToolCallPart] = field(default_factory=dict)
    """Calls waiting for a person's approval."""
    decisions: dict[str, Denial | None] = field(default_factory=dict)
    """For a resumed round: each pending call's decision (`None` runs it)."""
    streamed: bool = False
    """The response stream completed: the message is whole (the memory may keep it)."""
    started: bool = False
    """A tool of the round started: its side effects may exist, so the memory keeps the round."""
    interrupt: BaseException | None = None
    """`SystemExit` / `KeyboardInterrupt` from a tool: re-raised once the round is stored."""
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


class AgentRun(Generic[OutputT]):
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
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> None:
        self._config = config
        self._prompt = prompt
        self._resume = resume
        self._decisions: dict[str, Denial | None] = {}
        if resume is not None:
            if prompt is not None or history:
                raise UserError("A resumed run goes on from its saved state: pass resume= and approvals= without "
                                "a prompt or a history.")
            check_resumable(resume, config, conversation_id)
            self._decisions = decisions_for(resume, approvals)
            conversation_id = resume.conversation_id
            history = resume.conversation
        elif approvals:
            raise UserError("approvals= decides the pending calls of a paused run; pass it together with "
                            "resume=<the paused result's state>.")
        elif config.memory is not None:
            if history:
                raise UserError("This agent reads the history from its memory; pass conversation_id=... (or add "
                                "the messages to the memory) instead of history=.")
            if conversation_id is None:
                raise UserError("This agent has a memory, so each run needs conversation_id=... to say whose "
                                "conversation it continues (one id per chat or user); without it every caller "
                                "would share one conversation.")
        elif conversation_id is not None:
            raise UserError(f"conversation_id={conversation_id!r} names a conversation of a chat memory, but this "
                            "agent has none: give it memory=InMemoryChatMemory() (or your store), or pass the "
                            "earlier messages as history=.")
        self._conversation_id = conversation_id
        self._busy: tuple[int, str | None] | None = None
        self._interrupt: BaseException | None = None
        self._history = list(history)
        self._retries = resume.output_retries if resume is not None else 0
        settings = {**config.settings, **(settings or {})}
        self._settings: ModelSettings = config.output.request_settings(settings) if config.output else settings
        self._system = _system_prompt(config)
        self.messages: list[Message] = []
        """The run's new messages so far (prompt first): always a valid continuation of the history."""
        self.steps: list[StepResult] = []
        self._result: RunResult[OutputT] | None = None
        self._error: Exception | None = None
        self._send: MemoryObjectSendStream[Item] | None = None
        self._receive: MemoryObjectReceiveStream[Item] | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        if config.memory is None and resume is None:
            conversation = [*self._history, *([prompt] if prompt is not None else [])]
            validate_history(conversation, prompt_index=len(self._history) if prompt is not None else None)

    # -- the consumer's side -----------------------------------------------------------------

    async def __aenter__(self) -> AgentRun[OutputT]:
        if self._entered:
            raise UserError("A run can be started only once; call agent.stream(...) again for a new run.")
        self._entered = True
        if self._config.memory is not None:
            self._busy = ACTIVE.enter(self._config.memory, self._conversation_id)
        # Unbounded: the run never waits for a slow reader, and its size is bounded by the responses.
        self._send, self._receive = anyio.create_memory_object_stream[Item](math.inf)
        self._tg = anyio.create_task_group()
        try:
            await self._tg.__aenter__()
        except BaseException:
            self._release()
            raise
        self._tg.start_soon(self._drive)
        return self

    def _release(self) -> None:
        busy, self._busy = self._busy, None
        if busy is not None:
            ACTIVE.leave(busy)

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
            self._release()

    def __aiter__(self) -> AgentRun[OutputT]:
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
        if self._interrupt is not None:
            raise self._interrupt
        if self._error is not None:
            raise self._error
        raise StopAsyncIteration

    @property
    def config(self) -> RunConfig:
        """The configuration the run started with."""
        return self._config

    @property
    def done(self) -> bool:
        """The run finished (with a result or an error)."""
        return self._result is not None or self._error is not None

    @property
    def error(self) -> Exception | None:
        """The error that ended the run, if one did."""
        return self._error

    @property
    def result(self) -> RunResult[OutputT]:
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

    @property
    def conversation_id(self) -> str | None:
        """The chat memory conversation this run reads and writes."""
        return self._conversation_id

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
            await self._start()
            first_step = 0
            if self._resume is not None:
                round_ = await self._resume_round(self._resume)
                result = await self._conclude(round_)
                if result is not None:
                    self._result = result
                    return
                first_step = self._resume.step + 1
            self._result = await self._loop(first_step)
        except Exception as exc:
            if isinstance(exc, ProviderError):
                # Provider errors carry the run's messages like MaxStepsExceeded does, so the caller
                # can keep the valid history of the steps that completed.
                exc.messages = list(self.messages)
            self._error = exc
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            # SystemExit / KeyboardInterrupt from a tool, raised after its round was stored: re-raised
            # by the consumer's task (`next_item`), never through the task group as an ExceptionGroup.
            self._interrupt = exc
        finally:
            assert self._send is not None
            self._send.close()

    async def _start(self) -> None:
        """Read the history from the memory when it holds it, then commit the prompt.

        A resume is checked here, before any tool of it runs: the state's id is claimed (a state used
        once is refused as such, whatever else changed since), then the memory conversation must be
        where the run paused and form a valid history with the paused round.
        """
        config = self._config
        resume = self._resume
        if resume is not None:
            await claim_resume(config.claims, resume.id, self._conversation_id)
        if config.memory is not None:
            stored = list(await config.memory.load(self._conversation_id))
            if resume is None:
                self._history = stored
                prompt = self._prompt
                conversation = [*self._history, *([prompt] if prompt is not None else [])]
                validate_history(conversation, prompt_index=len(self._history) if prompt is not None else None)
            else:
                check_position(expected=resume.conversation_length, found=len(stored),
                               conversation_id=self._conversation_id)
                if resume.from_memory:
                    self._history = stored
                    round_ = [resume.message, Message.tool_results(
                        results_in_order(_calls_of(resume.message), {}, "pending"))]
                    validate_history([*stored, *round_])
        if self._prompt is not None:
            await self._add(self._prompt)

    async def _conversation(self) -> list[Message]:
        """What the next request continues (without the system prompt)."""
        if self._config.memory_is_source:
            assert self._config.memory is not None
            return list(await self._config.memory.load(self._conversation_id))
        return [*self._history, *self.messages]

    async def _loop(self, first_step: int) -> RunResult[OutputT]:
        config = self._config
        for step in range(first_step, config.max_steps):
            round_ = await self._step(step)
            if round_.held:
                return self._paused(round_)
            result = await self._conclude(round_)
            if result is not None:
                return result
        raise MaxStepsExceeded(
            f"The agent made {config.max_steps} model requests (max_steps={config.max_steps}) without "
            "reaching a final answer. Raise max_steps, or go on from where it stopped by running again "
            "with the history extended by this error's `messages` and no prompt.",
            messages=list(self.messages),
        )

    async def _conclude(self, round_: _Round) -> RunResult[OutputT] | None:
        """After a committed round: the run's result if it ends here, `None` to make another request.

        Without an `output_type` a message without calls is the answer. With one, the answer must
        validate: a native answer is a message without calls whose text is the JSON, a tool answer a
        valid `final_result` call; text next to other calls never ends the run. An invalid answer is
        sent back to the model until `output_retries` is used up.
        """
        message = round_.message
        assert message is not None
        calls = _calls_of(message)
        output = self._config.output
        if output is None:
            if calls:
                return None
            return self._completed(message.text)
        if output.kind == "tool":
            finals = [c for c in calls if c.name == FINAL_RESULT_TOOL]
            for call in finals:
                result = round_.results.get(call.id)
                if isinstance(call, ToolCallPart) and result is not None and not result.is_error:
                    return self._completed(output.check_data(call.arguments).value)
            if finals:
                # Its error result already told the model what to fix; the retry is only counted.
                await self._retry(_error_of(round_.results.get(finals[0].id)), None)
            elif not calls:
                await self._retry("The answer was text, not a final_result call.", output.text_answer_retry())
            return None
        if calls:
            return None
        checked = output.check_text(message.text)
        if checked.error is None:
            return self._completed(checked.value)
        await self._retry(checked.error, output.retry_text(checked.error))
        return None

    def _completed(self, output: Any) -> RunResult[OutputT]:
        return RunResult(_output=output, messages=list(self.messages), usage=self.usage, steps=list(self.steps))

    async def _retry(self, error: str, ask: str | None) -> None:
        """Count an invalid typed answer; ask again (`ask`, a user message), or fail when out of retries."""
        allowed = self._config.output_retries
        if self._retries >= allowed:
            raise OutputValidationError(
                f"The model gave no valid output after {allowed} retr{'y' if allowed == 1 else 'ies'} "
                f"(output_retries={allowed}). The last answer: {error} Raise output_retries, or make the "
                "output type easier to fill in.",
                errors=error,
                messages=list(self.messages),
            )
        self._retries += 1
        if ask is not None:
            await self._add(Message.user(ask))

    def _paused(self, round_: _Round) -> RunResult[OutputT]:
        """End the run holding the round whose calls wait for approval (nothing of it is committed)."""
        message = round_.message
        assert message is not None
        calls = _calls_of(message)
        known = [round_.results[c.id] for c in calls if c.id in round_.results]
        from_memory = self._config.memory_is_source
        state = RunState(
            message=message, results=known, conversation=[] if from_memory else list(round_.request),
            conversation_length=len(round_.request), step=round_.step, conversation_id=self._conversation_id,
            from_memory=from_memory, output_retries=self._retries,
        )
        pending = state.pending
        self.steps.append(StepResult(index=round_.step, message=message, results=known, usage=round_.usage,
                                     finish_reason=round_.finish_reason))
        return RunResult(messages=list(self.messages), usage=self.usage, steps=list(self.steps), status="paused",
                         pending=pending, state=state)

    async def _step(self, step: int) -> _Round:
        config = self._config
        conversation = await self._conversation()
        validate_history(conversation)
        round_ = _Round(step=step, request=conversation, limiter=anyio.CapacityLimiter(config.max_parallel_tools))
        await self._play(round_, self._respond)
        if round_.message is None:
            raise UserError(f"The model {config.model.name!r} ended a response without an assembled "
                            "message; a Model must set `message` on its response when the stream ends.")
        return round_

    async def _respond(self, round_: _Round) -> None:
        await self._stream_response(round_)
        if round_.error is None:
            await self._dispatch_remaining(round_)

    async def _resume_round(self, state: RunState) -> _Round:
        """Finish the paused round: run the approved calls, answer the denied ones, commit it whole."""
        conversation = await self._conversation()
        round_ = _Round(step=state.step, request=conversation,
                        limiter=anyio.CapacityLimiter(self._config.max_parallel_tools),
                        message=state.message, decisions=self._decisions, streamed=True)
        calls = {c.id: c for c in _calls_of(state.message)}
        for result in state.results:
            round_.calls[result.call_id] = calls[result.call_id]
            round_.results[result.call_id] = result

        async def decide(round_: _Round) -> None:
            for call in state.pending:
                if self._config.tool_execution == "sequential":
                    round_.calls[call.id] = call
                    await self._answer(round_, call)
                else:
                    self._dispatch(round_, call)

        await self._play(round_, decide)
        return round_

    async def _play(self, round_: _Round, body: Callable[[_Round], Awaitable[None]]) -> None:
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
        if round_.held:
            return
        await self._remember(self._commit(round_, missing=CANCELLED))

    async def _stream_response(self, round_: _Round) -> None:
        config = self._config
        request = round_.request
        if self._system:
            request = [Message.system(self._system), *request]
        response = config.model.stream(request, tools=config.definitions, settings=self._settings)
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
        round_.streamed = round_.error is None

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
                round_.message = _incomplete(exc.partial_message)
            elif round_.message is None:
                round_.message = round_.partial_message()
            else:
                round_.message = _incomplete(round_.message)

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

    async def _admit(self, round_: _Round, call: ToolCallPart, context: RunContext) -> Prepared | ToolResultPart | None:
        """The call ready to run, the result answering a call that may not run now, or `None` to hold it.

        This is where calls are held back: unknown tools and invalid arguments are answered at once,
        denied calls get their denial, and calls that need a person's approval are held (`None`).
        A `final_result` call of typed output is checked here and answered with the verdict.
        """
        config = self._config
        output = config.output
        if output is not None and output.kind == "tool" and call.name == FINAL_RESULT_TOOL:
            checked = output.check_data(call.arguments)
            if checked.error is not None:
                return error_result(call, output.tool_error(checked.error))
            return ToolResultPart(call_id=call.id, name=call.name, result="The final result was accepted.")
        prepared = config.toolbox.prepare(call, context)
        if not isinstance(prepared, Prepared):
            return prepared
        if call.id in round_.decisions:
            denial = round_.decisions[call.id]
            return prepared if denial is None else error_result(call, denial.message)
        if await _needs_approval(prepared.tool, call, config.requires_approval):
            return None
        return prepared

    async def _answer(self, round_: _Round, call: ToolCallPart | InvalidToolCallPart) -> None:
        duration: float | None = None
        metadata: dict[str, Any] = {}
        exception: BaseException | None = None
        if isinstance(call, InvalidToolCallPart):
            result = invalid_call_result(call)
        else:
            context = RunContext(call=call, step=round_.step, messages=round_.request)
            try:
                admitted = await self._admit(round_, call, context)
            except Exception as exc:
                # An approval predicate failed: a bug in the caller's code, so the step stops.
                self._fail(round_, exc)
                return
            if admitted is None:
                round_.held[call.id] = call
                return
            if isinstance(admitted, ToolResultPart):
                result = admitted
            else:
                async with round_.limiter:
                    round_.started = True
                    self._emit(ToolStartedEvent(call=call))
                    executed: Executed
                    try:
                        executed = await self._config.toolbox.execute(admitted)
                    except ToolInterrupt as interrupt:
                        executed = interrupt.outcome
                        round_.interrupt = interrupt.exception
                        assert round_.tg is not None
                        round_.tg.cancel_scope.cancel()
                result, duration, exception = executed.result, executed.duration, executed.exception
                metadata = context.metadata
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

    @staticmethod
    def _fail(round_: _Round, exc: Exception) -> None:
        round_.failure = exc
        assert round_.tg is not None
        round_.tg.cancel_scope.cancel()

    def _commit(self, round_: _Round, *, missing: str) -> list[Message]:
        """The one place messages join the run's history: a step's assistant message and its results.

        Runs once per step, after its response ended and every tool finished, or while the step is being
        stopped; calls without a result get an error result saying `missing`. Returns the messages it
        added, which `_remember` hands to the chat memory in one append: a store never sees a
        half-streamed message or a call without its result.
        """
        message = round_.message if round_.message is not None else round_.partial_message()
        if message is None:
            return []
        calls = _calls_of(message)
        results = results_in_order(calls, round_.results, missing)
        new = [message, Message.tool_results(results)] if calls else [message]
        self.messages.extend(new)
        self.steps.append(StepResult(index=round_.step, message=message, results=results, usage=round_.usage,
                                     finish_reason=round_.finish_reason))
        self._emit(Committed(new))
        return new

    async def _add(self, message: Message) -> None:
        """Commit a message of the run's own (the prompt, a request to correct typed output)."""
        self.messages.append(message)
        self._emit(Committed([message]))
        await self._remember([message])

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


def _incomplete(message: Message) -> Message:
    """The message marked as cut short (`metadata["incomplete"]`), whoever built it."""
    if message.metadata.get("incomplete") is True:
        return message
    return dataclasses.replace(message, metadata={**message.metadata, "incomplete": True})


def _error_of(result: ToolResultPart | None) -> str:
    if result is not None and isinstance(result.result, dict) and result.result.get("error"):
        return str(result.result["error"])
    return "The final_result call was invalid."


def _system_prompt(config: RunConfig) -> str | None:
    instructions = config.output.instructions() if config.output is not None else None
    if config.system and instructions:
        return f"{config.system}\n\n{instructions}"
    return config.system or instructions


async def _needs_approval(tool: Tool[..., Any], call: ToolCallPart, agent_rule: ApprovalPredicate | None) -> bool:
    """Whether the tool's own rule or the agent's says a person must approve this call."""
    for rule in (tool.requires_approval, agent_rule):
        if rule is None or rule is False:
            continue
        if rule is True:
            return True
        verdict = rule(call)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict:
            return True
    return False


def _calls_of(message: Message) -> list[ToolCallPart | InvalidToolCallPart]:
    return [p for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]


async def _close(response: ModelResponse, exc: BaseException | None) -> None:
    # Shielded: a cancelled run must still release the HTTP response, so it closes even mid-cancellation.
    with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        await response.__aexit__(type(exc) if exc is not None else None, exc,
                                 exc.__traceback__ if exc is not None else None)
