"""One agent run: the step loop, and the history kept valid through every exit.

Structure (all structured concurrency, nothing outlives the `async with`):

    AgentRun.__aenter__ ── task group ── _drive: toolsets opened for the run, then for each step
                                            ├─ checks: usage limits, the history, the step's tools and
                                            │  instructions (from the run context: deps, usage so far)
                                            └─ a round (`_round`): the response, eager tool calls, the commit
    consumer ◀── memory object stream ── events (model events, tool_started, tool_result) and commits

Invariants:
- `AgentRun.messages` only ever grows by whole rounds: an assistant message that calls tools is appended
  together with the message answering every one of its calls, so the history is valid at every moment.
- The drive task never raises anything but cancellation; errors travel to the consumer through the
  stream, so the task group never cancels the consumer behind its back. Every error that ends a run
  carries the run's valid history (`.messages`).
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
- Usage limits are checked before the request or tool call that would exceed them (`_limits`).
"""

from __future__ import annotations

import functools
import logging
import operator
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, nullcontext
from types import TracebackType
from typing import Any, Generic

import anyio
import anyio.abc

from ..events import Event, Usage
from ..exceptions import MaxStepsExceeded, OutputValidationError, ProviderError, ToolwireError, UserError
from ..messages import Message, ToolCallPart
from ..settings import ModelSettings
from ..telemetry import RunTrace
from ..tools import RunContext, Tool
from ..toolsets import Toolset, resolve_tools, toolset_instructions
from ._approval import Approval, Denial, RunState, decisions_for
from ._config import RunConfig
from ._execute import Toolbox, results_in_order
from ._guard import ACTIVE, check_position, check_resumable, claim_resume
from ._history import validate_history
from ._instructions import is_static, render_instructions
from ._items import ItemQueue
from ._limits import UsageBudget, UsageLimits
from ._output import FINAL_RESULT_TOOL, apply_validators, rejection_text
from ._round import Committed, Item, Round, RoundPlayer, calls_of
from ._types import OutputT, RunResult, StepResult

__all__ = ["AgentRun", "Committed", "Item", "RunConfig"]

logger = logging.getLogger("toolwire")


class AgentRun(RoundPlayer, Generic[OutputT]):
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
        deps: Any = None,
        tools: Sequence[Tool[..., Any]] = (),
        toolsets: Sequence[Toolset] = (),
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
        trace_context: Any = None,
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
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise UserError(f"usage_limits= takes a UsageLimits; got {type(usage_limits).__name__}.")
        if budget is not None and not isinstance(budget, UsageBudget):
            raise UserError(f"budget= takes a UsageBudget; got {type(budget).__name__}.")
        for toolset in toolsets:
            if not isinstance(toolset, Toolset):
                raise UserError(f"toolsets= takes Toolset objects (FunctionToolset, MCPServer...); got "
                                f"{type(toolset).__name__}.")
        self.id = secrets.token_hex(8)
        """An id for this run (logs, traces)."""
        self._conversation_id = conversation_id
        self._busy: tuple[int, str | None] | None = None
        self._interrupt: BaseException | None = None
        self._history = list(history)
        self._retries = resume.output_retries if resume is not None else 0
        self._deps = deps
        self._run_tools = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self._toolsets = [*config.toolsets, *toolsets]
        self._limits = usage_limits if usage_limits is not None else config.usage_limits
        self._budget = budget if budget is not None else config.budget
        self._tool_retries: dict[str, int] = {}
        self._trace_context = trace_context
        self._trace: RunTrace | None = None
        self._requests = 0
        self._tool_calls = 0
        settings = {**config.settings, **(settings or {})}
        self._settings: ModelSettings = config.output.request_settings(settings) if config.output else settings
        self._static = is_static(config.instructions)
        self._static_system = _join_system(
            "\n\n".join(p for p in config.instructions if isinstance(p, str)) or None, config)
        self.messages: list[Message] = []
        """The run's new messages so far (prompt first): always a valid continuation of the history."""
        self.steps: list[StepResult] = []
        self.first_step = 0
        """The index of the run's first step (`RunContext.step`), set before the run is entered: a run that goes on
        from steps taken elsewhere (a server continuing a run whose process stopped) starts past them, and they
        count against `max_steps`. A resumed state names its own step instead."""
        self.before_tool: Callable[[ToolCallPart], Awaitable[None]] | None = None
        """Awaited before a tool that is not idempotent starts, set before the run is entered: a server records
        the call in the run's journal first, so a process that continues the run after this one died knows the
        call had started and never runs it a second time (docs/guides/durable-runs.md)."""
        self._result: RunResult[OutputT] | None = None
        self._error: Exception | None = None
        self._items: ItemQueue[Item] | None = None
        self._shared_items = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        if config.memory is None and resume is None:
            conversation = [*self._history, *([prompt] if prompt is not None else [])]
            validate_history(conversation, prompt_index=len(self._history) if prompt is not None else None)

    # -- the consumer's side -----------------------------------------------------------------

    def deliver_to(self, items: ItemQueue[Any]) -> None:
        """Before `async with`: hand the run's items (events and commits) to `items`, a queue of the caller's,
        rather than to one of the run's own. A consumer that merges them with items of its own (the server's
        runner: the rows its memory committed) then reads one queue, woken once per batch, with no task relaying
        from one queue to the other.

        `next_item()` reads that queue (the caller's items too) and raises the run's end after the run ends it.
        The run never closes it: what is left in it once the run is over (a cancelled run's last commit, say)
        is its owner's to read, and its owner closes it.
        """
        if self._entered:
            raise UserError("deliver_to() goes before `async with`: the run has already started.")
        self._items = items
        self._shared_items = True

    async def __aenter__(self) -> AgentRun[OutputT]:
        if self._entered:
            raise UserError("A run can be started only once; call agent.stream(...) again for a new run.")
        self._entered = True
        if self._config.memory is not None:
            self._busy = ACTIVE.enter(self._config.memory, self._conversation_id)
        if not self._shared_items:
            self._items = ItemQueue()
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
        assert self._items is not None
        self._tg.cancel_scope.cancel()
        try:
            # The body's own exception is left to propagate as it is, never wrapped in a group: the
            # drive task does not raise, so the group has nothing of its own to report.
            await self._tg.__aexit__(None, None, None)
        finally:
            if self._shared_items:
                self._items.end()  # (the drive has ended it, unless it never started)
            else:
                self._items.close()
            self._release()

    def __aiter__(self) -> AgentRun[OutputT]:
        return self

    async def __anext__(self) -> Event:
        items = self._items
        if items is None:
            raise self._not_entered()
        while True:
            item = await items.get()
            if item is None:
                raise self._ending()
            if not isinstance(item, Committed):
                return item

    async def next_item(self) -> Item:
        """The next event or commit; raises the run's error after the last item."""
        if self._items is None:
            raise self._not_entered()
        item = await self._items.get()
        if item is None:
            raise self._ending()
        return item

    @staticmethod
    def _not_entered() -> UserError:
        return UserError("Use the run inside `async with agent.stream(...) as run:` before iterating it.")

    def _ending(self) -> BaseException:
        """What iteration raises after the last item: the run's interruption or error, else the end."""
        if self._interrupt is not None:
            return self._interrupt
        if self._error is not None:
            return self._error
        return StopAsyncIteration()

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
    def requests(self) -> int:
        """Model requests made so far."""
        return self._requests

    @property
    def tool_calls(self) -> int:
        """Tool calls started so far."""
        return self._tool_calls

    @property
    def conversation_id(self) -> str | None:
        """The chat memory conversation this run reads and writes."""
        return self._conversation_id

    # -- the run itself ----------------------------------------------------------------------

    async def _drive(self) -> None:
        config = self._config
        if config.telemetry is not None:
            self._trace = RunTrace(config.telemetry, model=config.model, agent_name=config.name,
                                   conversation_id=self._conversation_id, parent=self._trace_context)
        logger.debug("Run %s started (model %s, conversation %r).", self.id, config.model.name, self._conversation_id)
        try:
            with self._trace.current() if self._trace is not None else nullcontext():
                async with AsyncExitStack() as stack:
                    for toolset in self._toolsets:
                        await stack.enter_async_context(toolset.run_scope())
                    self._result = await self._run()
        except Exception as exc:
            if isinstance(exc, ProviderError):
                # Provider errors carry the run's messages like MaxStepsExceeded does, so the caller
                # can keep the valid history of the steps that completed.
                exc.messages = list(self.messages)
                logger.warning("Run %s stopped by a provider error: %s", self.id, exc)
            elif isinstance(exc, ToolwireError):
                logger.info("Run %s stopped: %s", self.id, exc)
            else:
                logger.info("Run %s stopped by %s raised in the caller's code.", self.id, type(exc).__name__)
            self._error = exc
            self._end_trace(exc)
        except anyio.get_cancelled_exc_class():
            logger.debug("Run %s was cancelled after %d step(s).", self.id, len(self.steps))
            self._end_trace(None, status="cancelled")
            raise
        except BaseException as exc:
            # SystemExit / KeyboardInterrupt from a tool, raised after its round was stored: re-raised
            # by the consumer's task (`next_item`), never through the task group as an ExceptionGroup.
            self._interrupt = exc
            self._end_trace(exc)
        else:
            result = self._result
            logger.debug("Run %s %s after %d request(s).", self.id, result.status, self._requests)
            self._end_trace(None, status=result.status)
        finally:
            assert self._items is not None
            self._items.end()

    def _end_trace(self, error: BaseException | None, status: str | None = None) -> None:
        trace = self._trace
        if trace is not None:
            trace.end(usage=self.usage, status=status, error=error)

    async def _run(self) -> RunResult[OutputT]:
        await self._start()
        first_step = self.first_step
        if self._resume is not None:
            round_ = await self._resume_round(self._resume)
            if round_.held:  # a continued round's call that had not started needs a person first (`Restarted`)
                return self._paused(round_)
            result = await self._conclude(round_)
            if result is not None:
                return result
            first_step = self._resume.step + 1
        return await self._loop(first_step)

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
                        results_in_order(calls_of(resume.message), {}, "pending"))]
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

    # -- one step ----------------------------------------------------------------------------

    def _context(self, step: int, conversation: list[Message]) -> RunContext[Any]:
        return RunContext(deps=self._deps, step=step, messages=conversation, usage=self.usage,
                          requests=self._requests, tool_calls=self._tool_calls, conversation_id=self._conversation_id,
                          model=self._config.model, run_id=self.id, retry=self._retries)

    def partial_context(self) -> RunContext[Any]:
        """The run context an output validator gets for a partial answer (`partial_output=True`)."""
        step = len(self.steps)
        return RunContext(deps=self._deps, step=step, messages=[*self._history, *self.messages], usage=self.usage,
                          requests=self._requests, tool_calls=self._tool_calls, conversation_id=self._conversation_id,
                          model=self._config.model, run_id=self.id, retry=self._retries, partial_output=True)

    async def _round(self, step: int, conversation: list[Message], **fields: Any) -> Round:
        """A round for `step`: its context, and the tools offered at it (the agent's, the run's, toolsets')."""
        config = self._config
        context = self._context(step, conversation)
        toolbox = config.toolbox
        if self._toolsets or self._run_tools:
            tools = await resolve_tools([("the agent's tools", list(toolbox.tools.values())),
                                         ("this run's tools", self._run_tools)], self._toolsets, context)
            if config.output is not None and config.output.kind == "tool" and any(
                    t.name == FINAL_RESULT_TOOL for t in tools):
                raise UserError(f"A tool is named {FINAL_RESULT_TOOL!r}, the name typed output gives the tool that "
                                "ends the run; rename that tool (or prefix its toolset).")
            toolbox = Toolbox(tools, default_timeout=toolbox.default_timeout)
        definitions = toolbox.definitions
        final = config.output.tool_definition if config.output is not None else None
        if final is not None:
            definitions = [*definitions, final]
        return Round(step=step, request=conversation, limiter=anyio.CapacityLimiter(config.max_parallel_tools),
                     context=context, toolbox=toolbox, definitions=definitions, **fields)

    async def _step(self, step: int) -> Round:
        config = self._config
        conversation = await self._conversation()
        validate_history(conversation)
        limits = self._limits
        last = self.steps[-1].usage if self.steps else None
        last_input = last.input_tokens if last is not None else None
        if limits is not None:
            exceeded = limits.check_request(requests=self._requests, usage=self.usage, last_input=last_input)
            if exceeded is not None:
                exceeded.messages = list(self.messages)
                raise exceeded
        round_ = await self._round(step, conversation)
        extra = await toolset_instructions(self._toolsets, round_.context) if self._toolsets else None
        if self._static and extra is None:
            round_.system = self._static_system
        else:
            text = await render_instructions(config.instructions, round_.context, self.messages)
            round_.system = _join_system("\n\n".join(t for t in (text, extra) if t) or None, config)
        await self._refuse_counted(round_)
        if self._budget is not None:
            # Reserved last, once nothing else can stop the request: a reserved request is one that is sent.
            exceeded = self._budget.reserve_request(last_input=last_input)
            if exceeded is not None:
                exceeded.messages = list(self.messages)
                raise exceeded
        await self._play(round_, self._respond)
        if round_.message is None:
            raise UserError(f"The model {config.model.name!r} ended a response without an assembled "
                            "message; a Model must set `message` on its response when the stream ends.")
        return round_

    async def _refuse_counted(self, round_: Round) -> None:
        """Count the request's input tokens before it is sent, when a `request_input_tokens` limit is set
        and the model can count (otherwise that limit works from the previous request's reported input)."""
        budget = self._budget
        checks: list[tuple[UsageLimits, UsageBudget | None]] = []
        if self._limits is not None and self._limits.request_input_tokens is not None:
            checks.append((self._limits, None))
        if budget is not None and budget.limits.request_input_tokens is not None:
            checks.append((budget.limits, budget))
        if not checks:
            return  # no limit that counting serves: no extra request
        model = self._config.model
        request = [Message.system(round_.system), *round_.request] if round_.system else round_.request
        counted = await model.count_tokens(request, tools=round_.definitions, settings=self._settings)
        if counted is None:
            return
        for limits, owner in checks:
            exceeded = limits.check_counted(counted, provider=model.provider_name, budget=owner)
            if exceeded is not None:
                exceeded.messages = list(self.messages)
                raise exceeded

    async def _resume_round(self, state: RunState) -> Round:
        """Finish the paused round: run the approved calls, answer the denied ones, commit it whole."""
        conversation = await self._conversation()
        round_ = await self._round(state.step, conversation, message=state.message, decisions=self._decisions,
                                   streamed=True)
        calls = {c.id: c for c in calls_of(state.message)}
        for result in state.results:
            round_.calls[result.call_id] = calls[result.call_id]
            round_.results[result.call_id] = result

        async def decide(round_: Round) -> None:
            for call in state.pending:
                if self._config.tool_execution == "sequential":
                    round_.calls[call.id] = call
                    await self._answer(round_, call)
                else:
                    self._dispatch(round_, call)

        await self._play(round_, decide)
        return round_

    async def _conclude(self, round_: Round) -> RunResult[OutputT] | None:
        """After a committed round: the run's result if it ends here, `None` to make another request.

        Without an `output_type` a message without calls is the answer. With one, the answer must
        validate: a native answer is a message without calls whose text is the JSON, a tool answer a
        valid `final_result` call; text next to other calls never ends the run. An invalid answer (or one
        an output validator rejects) is sent back to the model until `output_retries` is used up.
        """
        message = round_.message
        assert message is not None
        calls = calls_of(message)
        output = self._config.output
        if output is None:
            if calls:
                return None
            return await self._accept(round_, message.text, rejection_text)
        if output.kind == "tool":
            finals = [c for c in calls if c.name == FINAL_RESULT_TOOL]
            for call in finals:
                result = round_.results.get(call.id)
                if isinstance(call, ToolCallPart) and result is not None and not result.is_error:
                    if call.id in round_.outputs:
                        return self._completed(round_.outputs[call.id])
                    # Accepted before a pause for approval; it passed the validators then.
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
        if checked.error is not None:
            await self._retry(checked.error, output.retry_text(checked.error))
            return None
        return await self._accept(round_, checked.value, lambda error: output.retry_text(error, rejected=True))

    async def _accept(self, round_: Round, value: Any, ask: Any) -> RunResult[OutputT] | None:
        """The result for an answer the output validators accept; else the answer is sent back (`ask`)."""
        validators = self._config.output_validators
        if validators:
            checked = await apply_validators(validators, round_.context, value)
            if checked.error is not None:
                await self._retry(checked.error, ask(checked.error))
                return None
            value = checked.value
        return self._completed(value)

    def _completed(self, output: Any) -> RunResult[OutputT]:
        return RunResult(_output=output, messages=list(self.messages), usage=self.usage, steps=list(self.steps),
                         requests=self._requests, tool_calls=self._tool_calls)

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

    def _paused(self, round_: Round) -> RunResult[OutputT]:
        """End the run holding the round whose calls wait for approval (nothing of it is committed)."""
        message = round_.message
        assert message is not None
        calls = calls_of(message)
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
                         pending=pending, state=state, requests=self._requests, tool_calls=self._tool_calls)

    async def _add(self, message: Message) -> None:
        """Commit a message of the run's own (the prompt, a request to correct typed output)."""
        self.messages.append(message)
        self._emit(Committed([message]))
        await self._remember([message])


def _error_of(result: Any) -> str:
    if result is not None and isinstance(result.result, dict) and result.result.get("error"):
        return str(result.result["error"])
    return "The final_result call was invalid."


def _join_system(text: str | None, config: RunConfig) -> str | None:
    """The system prompt: the agent's instructions, then what typed output asks of JSON-mode hosts."""
    instructions = config.output.instructions() if config.output is not None else None
    if text and instructions:
        return f"{text}\n\n{instructions}"
    return text or instructions
