"""One run: the agent's events and commits, persisted and published in order, however the run ends.

    agent.stream(...) ──items──▶ pump ──┐
                                        ├──▶ consumer ──▶ store (journal) ──▶ event log
    RunMemory.append ──rows saved──▶ ───┘                (persist, then publish)

The agent gets a `RunMemory`: a `ChatMemory` bound to this run. The agent appends each completed
round to it before it makes its next request; the append writes the rows (tagged with the run) in one
transaction and reports them on the same channel that carries the agent's events. The consumer
publishes events in the agent's order and publishes a round's `message_saved` exactly where the
agent committed that round (after its last tool result, before the next step's first event), and
only once its rows are committed. A round the agent does not keep (cut off by a stream error) is
never stored, as with any chat memory.

For recovery after a crash, each finished tool result is written to the run's journal before its
`tool_result` is published, and so is each step's assembled message.

`run_finished` is published last, after the run's row says how it ended.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import anyio
from anyio.lowlevel import checkpoint

from ..agent import Agent, AgentRun, Approval as AgentApproval, RunResult, RunState
from ..agent._items import ItemQueue
from ..events import (
    Event,
    FinishEvent,
    MessageEndEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultEvent,
    ToolStartedEvent,
    Usage,
    UsageEvent,
)
from ..exceptions import MaxStepsExceeded, OutputValidationError, ProviderError, ToolwireError, UserError
from ..memory import ChatMemory
from ..messages import Message
from ..store import MessageRow, Store, User
from .approvals import part_dicts, record_pause
from .events import RunPublisher, usage_dict
from .limits import RateLimiter, ResultPolicy
from .signals import CancelReason, RunWatch

__all__ = ["AgentFactory", "ChatContext", "RunMemory", "Runner"]

logger = logging.getLogger("toolwire.server")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatContext:
    """What an agent factory is given for each run.

    Build the agent with `memory=ctx.memory` (the run's view of the chat: its history, and where each
    completed round is stored) and at most `max_parallel_tools` parallel tools (the server's per-chat
    cap); the server refuses to run an agent built otherwise.
    """

    user: User
    chat_id: str
    run_id: str
    memory: ChatMemory
    max_parallel_tools: int


AgentFactory: TypeAlias = Callable[[ChatContext], "Agent[Any] | Awaitable[Agent[Any]]"]


@dataclass(slots=True, kw_only=True)
class _Saved:
    messages: list[Message]
    rows: list[MessageRow]
    published: bool = False


_BATCHED: frozenset[type] = frozenset({TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, ToolCallEnd, UsageEvent,
                                       FinishEvent})
"""The streamed events the runner stores nothing for: those that arrived together (one provider read, or
while the publisher was busy) are published in one append, which the log's followers then read and send
in one write. Every other item is published alone, after what it must be stored behind."""
_BATCH = 8
"""The most events published in one append: followers run at least this often during a burst, so they
keep up with it even when the log keeps only a few dozen events per chat."""

_ChannelItem: TypeAlias = (tuple[Literal["item"], Any] | tuple[Literal["saved"], _Saved]
                           | tuple[Literal["end"], Exception | None])


class RunMemory:
    """The chat as one run's agent sees it: `load` the history, `append` rows tagged with the run.

    Appends are shielded: a round the agent hands over while being cancelled is still written whole.
    """

    def __init__(self, store: Store, *, chat_id: str, run_id: str, policy: ResultPolicy,
                 notify: Callable[[_Saved], object]) -> None:
        self._store = store
        self.chat_id = chat_id
        self.run_id = run_id
        self._policy = policy
        self._notify = notify

    def _check(self, conversation_id: str | None) -> None:
        if conversation_id not in (None, self.chat_id):
            raise UserError(f"This run's memory holds chat {self.chat_id!r}; it cannot read or write conversation "
                            f"{conversation_id!r}.")

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        self._check(conversation_id)
        return await self._store.load(self.chat_id)

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        self._check(conversation_id)
        safe = [self._policy.message(m) for m in messages]
        with anyio.CancelScope(shield=True):
            rows = await self._store.append_messages(self.chat_id, safe, run_id=self.run_id)
        self._notify(_Saved(messages=list(messages), rows=rows))

    async def claim_resume(self, state_id: str, conversation_id: str | None = None) -> bool:
        """The store's once-only claim of a saved state (for agents that resume through their memory)."""
        return await self._store.claim_resume(state_id, conversation_id or self.chat_id)


@dataclass(slots=True, kw_only=True)
class _Outcome:
    result: RunResult[Any] | None = None
    error: Exception | None = None
    cancelled: CancelReason | None = None
    usage: Usage = field(default_factory=Usage)


class Runner:
    """Runs one agent run to its end and publishes it (see the module docstring). `run()` never raises
    anything but the cancellation of the server itself, after the run's end was recorded."""

    def __init__(
        self,
        *,
        user: User,
        chat_id: str,
        run_id: str,
        publisher: RunPublisher,
        store: Store,
        factory: AgentFactory,
        watch: RunWatch,
        policy: ResultPolicy,
        limiter: RateLimiter,
        max_parallel_tools: int,
        resume: tuple[RunState, dict[str, AgentApproval]] | None = None,
        trace_context: Any = None,
    ) -> None:
        self.user = user
        self.chat_id = chat_id
        self.run_id = run_id
        self.publisher = publisher
        self.store = store
        self.factory = factory
        self.watch = watch
        self.policy = policy
        self.limiter = limiter
        self.max_parallel_tools = max_parallel_tools
        self.resume = resume
        self.trace_context = trace_context  # the request's trace: the run outlives it but belongs to it
        # Unbounded, like the agent's own queue: its size is bounded by what the run produces.
        self._channel: ItemQueue[_ChannelItem] = ItemQueue()
        self._pending: deque[_Saved] = deque()
        self._batch: list[Event] = []
        """Streamed events taken from the channel and not yet published."""
        self._awaiting: list[Message] | None = None
        self._step: int | None = None
        self._steps = 0
        self.memory = RunMemory(store, chat_id=chat_id, run_id=run_id, policy=policy,
                                notify=lambda saved: self._channel.put(("saved", saved)))

    # -- the run -----------------------------------------------------------------------------

    async def run(self) -> None:
        started = time.monotonic()
        outcome = _Outcome()
        try:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._cancel_when_asked, scope)
                    try:
                        await self._agent_phase(outcome)
                    finally:
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught:
                outcome.cancelled = self.watch.reason
        except anyio.get_cancelled_exc_class():
            outcome.cancelled = "shutdown"
            with anyio.CancelScope(shield=True):
                await self._finish(outcome, started)
            raise
        except Exception as exc:  # a bug of the server's own: the run fails, the server goes on
            logger.exception("Run %s failed inside the server", self.run_id)
            outcome.error = exc
        with anyio.CancelScope(shield=True):
            await self._finish(outcome, started)

    async def _cancel_when_asked(self, scope: anyio.CancelScope) -> None:
        await self.watch.cancelled.wait()
        scope.cancel()

    async def _make_agent(self) -> Agent[Any]:
        context = ChatContext(user=self.user, chat_id=self.chat_id, run_id=self.run_id, memory=self.memory,
                              max_parallel_tools=self.max_parallel_tools)
        made = self.factory(context)
        agent: Agent[Any] = await made if inspect.isawaitable(made) else made
        if not isinstance(agent, Agent):
            raise _Misconfigured(f"The agent factory returned {type(agent).__name__}, not an Agent.")
        if agent.memory is not self.memory:
            raise _Misconfigured("The agent factory must build the Agent with memory=ctx.memory: that is where the "
                                 "server reads the chat's history and stores each completed round.")
        if agent.max_parallel_tools > self.max_parallel_tools:
            raise _Misconfigured(f"The agent runs up to {agent.max_parallel_tools} tools at once, more than this "
                                 f"server's per-chat limit of {self.max_parallel_tools}; build it with "
                                 "max_parallel_tools=ctx.max_parallel_tools.")
        return agent

    async def _agent_phase(self, outcome: _Outcome) -> None:
        try:
            agent = await self._make_agent()
        except Exception as exc:
            outcome.error = exc
            return
        try:
            if self.resume is not None:
                state, decisions = self.resume
                stream = agent.stream(resume=state, approvals=decisions, conversation_id=self.chat_id,
                                      trace_context=self.trace_context)
            else:
                stream = agent.stream(None, conversation_id=self.chat_id, trace_context=self.trace_context)
            async with stream as run:
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._pump, run)
                        outcome.error = await self._consume()
                finally:
                    outcome.usage = run.usage
                if outcome.error is None:
                    outcome.result = run.result
                    outcome.usage = run.result.usage
        except Exception as exc:  # the agent refused to start (a broken history, say)
            outcome.error = exc
        finally:
            with anyio.CancelScope(shield=True):
                await agent.aclose()

    async def _pump(self, run: AgentRun[Any]) -> None:
        try:
            while True:
                item = await run.next_item()
                self._channel.put(("item", item))
        except StopAsyncIteration:
            self._channel.put(("end", None))
        except Exception as exc:
            self._channel.put(("end", exc))

    async def _consume(self) -> Exception | None:
        """Publish the agent's items and the saved rows in order, until the run ends; returns its error."""
        channel = self._channel
        batch = self._batch
        while True:
            if not channel.buffered:
                if batch:
                    await self._publish_batch()
                received = await channel.get()
            else:
                if len(batch) >= _BATCH:
                    await self._publish_batch()
                    # Followers run between two batches, as they do between two reads of the provider.
                    # Before taking the next item: cancelled here, it stays for `_flush_saved`.
                    await checkpoint()
                received = channel.get_nowait()
            if received is None:
                break
            kind, payload = received
            if kind == "item" and type(payload) in _BATCHED:
                batch.append(payload)  # type: ignore[arg-type]
                continue
            if batch:
                await self._publish_batch()
            if kind == "end":
                assert payload is None or isinstance(payload, Exception)
                return payload
            if kind == "saved":
                assert isinstance(payload, _Saved)
                if self._awaiting is not None and self._awaiting == payload.messages:
                    self._awaiting = None
                    await self._publish_saved(payload)
                else:
                    self._pending.append(payload)
                continue
            messages = _committed(payload)
            if messages is not None:
                # The agent committed a round here; its rows follow from the memory if the agent keeps it.
                if self._pending and self._pending[0].messages == messages:
                    await self._publish_saved(self._pending.popleft())
                else:
                    self._awaiting = messages
                continue
            self._awaiting = None  # a commit not followed by its rows: the agent did not keep that round
            await self._publish_event(payload)  # type: ignore[arg-type]
        if batch:
            await self._publish_batch()
        return None

    # -- publishing --------------------------------------------------------------------------

    async def _open_step(self) -> int:
        if self._step is None:
            self._step = self._steps
            self._steps += 1
            await self.publisher.run_event("step_started", self._step)
        return self._step

    async def _publish_batch(self) -> None:
        """Publish the streamed events taken so far in one append (see `_BATCHED`)."""
        step = await self._open_step()
        events, self._batch[:] = list(self._batch), []
        await self.publisher.events(events, step)

    async def _publish_event(self, event: Event) -> None:
        step = await self._open_step()
        if isinstance(event, ToolStartedEvent):
            await self.store.record_tool_call(self.run_id, event.call)
            await self.limiter.spend(self.user.id, "tool_calls")
        elif isinstance(event, ToolResultEvent):
            safe = self.policy.result(event.result)
            await self.store.record_tool_result(self.run_id, safe)
            if safe is not event.result:
                event = ToolResultEvent(result=safe, duration=event.duration, metadata=event.metadata)
        elif isinstance(event, MessageEndEvent) and (event.message.tool_calls or event.message.invalid_tool_calls):
            await self.store.record_step_message(self.run_id, event.message)  # only a round with calls is recovered
        await self.publisher.event(event, step)

    async def _publish_saved(self, saved: _Saved) -> None:
        if saved.published:
            return
        saved.published = True
        ends_step = any(row.role == "assistant" for row in saved.rows)
        step = self._step if ends_step else None
        with anyio.CancelScope(shield=True):  # a round's rows and its step_finished go out together
            for row in saved.rows:
                await self.publisher.run_event("message_saved", step, row=row.to_dict())
            if ends_step and self._step is not None:
                await self.publisher.run_event("step_finished", self._step)
                self._step = None

    async def _flush_saved(self) -> None:
        """Rows stored while the consumer was stopped (a cancelled run's last round) are published now."""
        while (received := self._channel.get_nowait()) is not None:
            kind, payload = received
            if kind == "saved":
                assert isinstance(payload, _Saved)
                self._pending.append(payload)
        while self._pending:
            await self._publish_saved(self._pending.popleft())

    async def _finish(self, outcome: _Outcome, started: float) -> None:
        await self._flush_saved()
        self._channel.close()
        usage = usage_dict(outcome.usage)
        duration = round(time.monotonic() - started, 3)
        result = outcome.result
        if outcome.cancelled is None and outcome.error is None and result is not None and result.paused:
            assert result.state is not None
            record = record_pause(result.state, self.policy)
            event_count = self.publisher.published + len(record.approvals) + 1
            if await self.store.pause_run(self.run_id, state_json=record.state_json, pending=record.approvals,
                                          usage=usage, steps=self._steps, event_count=event_count):
                events: list[tuple[str, int | None, dict[str, Any]]] = [
                    ("approval_required", self._step, {"approval_id": approval_id, "call": part_dicts([call])[0]})
                    for approval_id, call in record.approvals
                ]
                events.append(("run_finished", None, {"status": "paused", "usage": usage, "error": None,
                                                      "steps": self._steps, "duration": duration}))
                await self.publisher.run_events(events)
                return
            outcome.error = _LeaseLost()
        status, error = _ending(outcome)
        if outcome.error is not None and outcome.cancelled is None:
            # The client sees a sentence; the log keeps the whole story (with the traceback when it is ours).
            unexpected = not isinstance(outcome.error, ToolwireError)
            logger.log(logging.ERROR if unexpected else logging.WARNING, "Run %s of chat %s failed: %s", self.run_id,
                       self.chat_id, outcome.error, exc_info=outcome.error if unexpected else None)
        if not await self.store.finish_run(self.run_id, status=status, usage=usage, error=error, steps=self._steps,
                                           event_count=self.publisher.published + 1):
            status, error = "interrupted", _describe(_LeaseLost())
        await self.publisher.run_event("run_finished", None, status=status, usage=usage, error=error,
                                       steps=self._steps, duration=duration)


def _committed(item: Any) -> list[Message] | None:
    """The messages of a commit item of `AgentRun.next_item()` (events carry a `type` tag; commits do not)."""
    if hasattr(item, "type"):
        return None
    return list(item.messages)


class _Misconfigured(ToolwireError):
    code = "agent_misconfigured"


class _LeaseLost(ToolwireError):
    code = "interrupted"

    def __init__(self) -> None:
        super().__init__("This server lost the run's lease (it did not renew it in time) and the run was recovered "
                         "elsewhere; send a new message to go on.")


def _ending(outcome: _Outcome) -> tuple[Literal["completed", "cancelled", "failed", "interrupted"],
                                        dict[str, str] | None]:
    if outcome.cancelled == "cancel":
        return "cancelled", {"code": "cancelled", "message": "The run was cancelled; the completed messages are kept "
                                                             "and every started tool call has a result."}
    if outcome.cancelled == "shutdown":
        return "interrupted", {"code": "interrupted", "message": "The server stopped during this run; the completed "
                                                                 "messages are kept. Send a new message to go on."}
    if outcome.error is not None:
        return "failed", _describe(outcome.error)
    return "completed", None


def _describe(error: Exception) -> dict[str, str]:
    # Only toolwire's own errors name a code and say something meant for the user; other libraries' `code`
    # (SQLAlchemy's "3o7r" for an exhausted pool, say) and messages stay in the server's log.
    code = getattr(error, "code", None) if isinstance(error, ToolwireError) else None
    if isinstance(code, str):
        return {"code": code, "message": str(error)}
    if isinstance(error, ProviderError):
        return {"code": "provider_error", "message": str(error)}
    if isinstance(error, MaxStepsExceeded):
        return {"code": "max_steps", "message": str(error)}
    if isinstance(error, OutputValidationError):
        return {"code": "output_invalid", "message": str(error)}
    if isinstance(error, UserError):
        return {"code": "agent_error", "message": str(error)}
    return {"code": "internal_error", "message": f"The run failed inside the server ({type(error).__name__}); the "
                                                 "failure was logged. Send a new message to try again."}
