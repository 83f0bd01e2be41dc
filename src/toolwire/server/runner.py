"""One run: the agent's events and commits, published from memory at once, and stored behind them.

    agent.stream(...) ──items──────┐   (one queue, filled by the agent's task)
                                   ├──▶ consumer ──▶ event log (at once, one append per batch)
    RunMemory.append ──rows saved──┘        └──▶ journal ──▶ store (in order, off the streaming path)

The agent gets a `RunMemory`: a `ChatMemory` bound to this run. The agent appends each completed
round to it before it makes its next request; the append writes the rows (tagged with the run) in one
transaction and reports them on the same channel that carries the agent's events. The consumer
publishes events in the agent's order and publishes a round's `message_saved` exactly where the
agent committed that round (after its last tool result, before the next step's first event), and
only once its rows are committed. A round the agent does not keep (cut off by a stream error) is
never stored, as with any chat memory.

Nothing that streams waits for a commit it does not need (the decisions, and why):

- **Events go out from memory at once.** Everything the consumer finds waiting (deltas, `tool_started`,
  `tool_result`, a round's `message_saved` rows and `step_finished`, the next `step_started`) is published
  in one append, so followers wake once per batch, not once per event.
- **A tool result's event is published before its journal write commits.** The journal (each started
  call, each finished result, each step's assembled message) exists only for crash recovery; it is
  written in order by the run's journal task, behind the events. If the process dies in between, a
  follower has seen a `tool_result` that the store never got: recovery answers that call `interrupted`
  and publishes the rows it stored (`message_saved`), then `run_finished{interrupted}`, so the history is
  valid and the rows say what is kept. Waiting would not make the tool's side effect any less real (it
  happened before the event either way), and it put every event of the run behind a commit.
- **The next model request waits for the round's commit** (the agent awaits `RunMemory.append`). Recovery
  rebuilds only the round a run was in, from the journal; were a round's rows not committed when the next
  round's calls start (and are journaled), a crash would leave two rounds in the journal and store the
  later one without the earlier. The wait is one commit per round (one batch of the store's group
  commit), and it holds up no event: the round's events are already out, and the next ones do not exist
  before the request is sent.
- **The answer is stored with the run's end.** The agent's last round (a message without calls) is held by the
  memory (`RunMemory.answer`) and written in the transaction that records the run's end: nothing waits for it in
  between, and it is one commit a run less. An output retry stores it before asking the model again.
- **`message_saved` waits for its commit** (it is published when the append returns), and
  **`run_finished` waits for everything of the run**: the journal task is drained, then the run's row is
  written, then `run_finished` is published (last).

When the database is away (a restart, an outage, a full disk), the run's writes are retried with backoff
for up to `retry_seconds`, each on a connection the store checks first: a run whose database comes back
in that time goes on as if nothing happened (its journal only behind). Past that bound the run fails
with `store_unavailable`, and what it finished is kept in memory: the round the agent could not store,
or else the tool results of the round it was in, every one followers saw (completed as recovery would,
unfinished calls answered `interrupted`). They are written with the run's end; if the database is still
away, `run_finished{failed, store_unavailable}` is published at once (followers end) and the end is
written when it is back, while the run keeps its lease.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeAlias, TypeVar

import anyio
from anyio.lowlevel import checkpoint

from .._queue import ItemQueue
from ..agent import Agent, AgentRun, Approval as AgentApproval, RunResult, RunState
from ..agent._approval import Restarted
from ..agent._round import Committed, Item
from ..events import Event, MessageEndEvent, TextDelta, ToolResultEvent, ToolStartedEvent, Usage
from ..exceptions import MaxStepsExceeded, OutputValidationError, ProviderError, ToolwireError, UserError
from ..memory import ChatMemory
from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from ..store import Continued, MessageRow, RunStatus, Store, StoreUnavailable, User
from ..store._recovery import INTERRUPTED, ContinuedRound, interrupted_round, rows_for
from ..store.blobs import Files
from .approvals import part_dicts, record_pause
from .eventlog import LogEntry
from .events import RunPublisher, usage_dict
from .file_parts import without_data
from .journal import Journal
from .limits import RateLimiter, ResultPolicy
from .run_memory import RETRY_FIRST, STORE_RETRY_SECONDS, Answer, RunMemory, Saved, durably
from .signals import CancelReason, RunWatch

__all__ = ["AgentFactory", "ChatContext", "RunMemory", "Runner"]

logger = logging.getLogger("toolwire.server")
_T = TypeVar("_T")


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
    model: str | None = None
    """The id of the model the chat chose (else the server's default) among `ServerConfig.models`, which the
    run records as the one it used: build the agent on it. `None` when the server offers no choice."""


AgentFactory: TypeAlias = Callable[[ChatContext], "Agent[Any] | Awaitable[Agent[Any]]"]



TEXT_CHECKPOINT_SECONDS = 1.0
TEXT_CHECKPOINT_BYTES = 8192
"""The text a step streams is checkpointed (`SQLStore.checkpoint_step_text`, with the writer's next batch; else
`Store.record_step_text` through the journal task) once it has grown by `TEXT_CHECKPOINT_BYTES` characters or
`TEXT_CHECKPOINT_SECONDS` have passed since the last checkpoint, whichever comes first: a crash loses at most about
a second (or 8 KiB) of an answer, and a streaming run adds about one small write a second to the store's group
commit (a model writes a few hundred characters a second), not one per delta. The text is stored, marked
incomplete, only when the run cannot be continued (docs/guides/durable-runs.md)."""

CHECKPOINT_BACKLOG = 256
"""A text checkpoint that is due by time only waits while the store's writer has more writes than this queued
(`SQLStore.write_backlog`): under more chats than the writer keeps up with, the checkpoints (a third of the
writes queued at 1,000 chats on PostgreSQL, bench/side_by_side) were delaying the rounds that the next model
requests wait for. A checkpoint due by size is written all the same; a crash meanwhile loses more of the step's
text, which is all a checkpoint keeps."""

JOURNAL_LINGER_SECONDS = 0.5
"""How long the run's journal waits before it writes a round's entries (server/journal.py): a round whose tools all
answer within it is stored whole before then, and they are never written. Some are written at once (see there)."""

_BATCH = 8
"""The most events published in one append while more are waiting: followers run at least this often during
a burst, so they keep up with it even when the log keeps only a few dozen events per chat."""


_ChannelItem: TypeAlias = "Item | Saved"
"""What the run's channel carries: the agent's items (its events and commits, put by the agent's own task) and the
rows its memory committed (`Saved`, put by the same task right after the commit)."""



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
        retry_seconds: float = STORE_RETRY_SECONDS,
        files: Files | None = None,
        model: str | None = None,
        continued: Continued | None = None,
        history: list[Message] | None = None,
    ) -> None:
        self.user = user
        self.model = model
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
        # The agent's queue too (`AgentRun.deliver_to`): the agent's task puts its events and commits here, and the
        # consumer takes them with the saved rows, with no task between them. Unbounded, like the agent's own
        # queue: its size is bounded by what the run produces.
        self._channel: ItemQueue[_ChannelItem] = ItemQueue()
        self._pending: deque[Saved] = deque()
        self._out: list[LogEntry] = []
        """Entries numbered and not yet appended to the log (appended in order, every one, by `_flush`)."""
        self._journal = Journal(self._write_journal, linger=JOURNAL_LINGER_SECONDS)
        self._stored_calls: set[str] = set()
        """Ids of the calls whose round is committed or on its way to the store: their journal entries are no longer
        written (recovery leaves a committed round's calls alone), so a round the agent stores before the journal task
        gets to it is written once, not twice. The ids are noted when the round is handed to the store, not when it
        commits: the agent goes on to store a round before the consumer takes its results' events, so with quick
        tools the results would otherwise be a write of their own, committed a batch before or after the round
        that holds them. If the round's write fails, the run keeps it (`RunMemory.unsaved`) and writes it at its
        end."""
        self._awaiting: list[Message] | None = None
        self._step: int | None = None
        self._steps = 0
        self.retry_seconds = retry_seconds
        # The round in progress, as the journal holds it: what the run writes itself if the store was away.
        self._step_message: Message | None = None
        self._calls: list[ToolCallPart] = []
        self._recorded: set[str] = set()
        """Calls committed to the journal before their tool started (`_record_call`), not to be added again."""
        self._results: list[ToolResultPart] = []
        self._committed: list[Message] = []
        self._later: tuple[list[Message] | None, RunStatus, dict[str, str] | None, dict[str, Any] | None] | None = None
        # The answer and the run's end in one transaction, where the store offers it (else two writes in turn).
        self._finish_storing = getattr(store, "finish_run_storing", None)
        self.memory = RunMemory(store, chat_id=chat_id, run_id=run_id, policy=policy, notify=self._saved,
                                retry_seconds=retry_seconds, files=files, user_id=user.id, history=history,
                                storing=self._storing)
        self._text: list[str] = []
        """The text the open step streamed so far, and when and how far it was last checkpointed."""
        self._text_size = 0
        self._text_saved_size = 0
        self._text_saved_at = 0.0
        self._cut_off: Message | None = None
        """Text a failure cut off in a step without calls, which the agent did not store (`_left_over`)."""
        self.handed_over = False
        """Set once the run stopped for a handover (`_hand_over`): it has not ended, and its lease is to be released."""
        self.continued = continued
        """Set when this process continues a run whose process stopped (docs/guides/durable-runs.md)."""
        self._usage_before = Usage(**usage_dict(continued.usage if continued is not None else None))
        """The usage of the steps stored before a takeover: the run's usage goes on from it."""
        if continued is not None:
            self._steps = continued.steps
            if continued.round is not None:
                # The round goes on under its step's index: its events follow those the stopped process published.
                self._step, self._steps = continued.steps, continued.steps + 1
                self._step_message = continued.round.message
                self._results = list(continued.round.results)

    def _storing(self, messages: list[Message]) -> None:
        """A round goes to the store (called by the memory, in the agent's task, before the write is queued)."""
        for message in messages:
            for part in message.parts:
                if isinstance(part, (ToolCallPart, InvalidToolCallPart)):
                    self._stored_calls.add(part.id)
        self._journal.round_stored()

    def _saved(self, saved: Saved) -> None:
        """A round's rows are committed (called by the memory, in the agent's task, right after the commit)."""
        self._storing(saved.messages)
        self._channel.put(saved)

    async def _write_journal(self, calls: list[ToolCallPart], results: list[ToolResultPart],
                             step: Message | None) -> None:
        """The journal entries taken together, less those of rounds already committed, in one store operation."""
        stored = self._stored_calls
        if stored:
            calls = [call for call in calls if call.id not in stored]
            results = [result for result in results if result.call_id not in stored]
            if step is not None and any(
                    isinstance(part, (ToolCallPart, InvalidToolCallPart)) and part.id in stored for part in step.parts):
                step = None
        if not (calls or results or step is not None):
            return
        what = ("journaling a tool result" if results else "journaling a tool call" if calls
                else "journaling a step's message")
        await self._durably(what, partial(self.store.record_journal, self.run_id, calls=calls, results=results,
                                          step_message=step))

    # -- the run -----------------------------------------------------------------------------

    async def run(self) -> None:
        started = time.monotonic()
        outcome = _Outcome()
        try:
            with anyio.CancelScope() as scope:
                # Asked to stop: the scope is cancelled by the watch itself (a task waiting for it cost every run a
                # task of its own, and its cancellation at the end).
                self.watch.on_fire = partial(self._stop, scope)
                if self.watch.cancelled.is_set():
                    self._stop(scope)
                try:
                    await self._agent_phase(outcome)
                finally:
                    self.watch.on_fire = None
            if scope.cancelled_caught:
                outcome.cancelled = self.watch.reason
            if outcome.cancelled == "handover" and not self.memory.answered:
                with anyio.CancelScope(shield=True):
                    await self._hand_over()
                return
            if outcome.cancelled == "handover":  # stopped between storing its answer and its end: it ends here
                outcome.cancelled = None
        except anyio.get_cancelled_exc_class():
            outcome.cancelled = "shutdown"
            with anyio.CancelScope(shield=True):
                await self._end(outcome, started)
            raise
        except Exception as exc:  # a bug of the server's own: the run fails, the server goes on
            outcome.error = _store_outage(exc) or exc
            if outcome.error is exc:
                logger.exception("Run %s of chat %s failed inside the server", self.run_id, self.chat_id,
                                 extra=self._ids())
        with anyio.CancelScope(shield=True):
            await self._end(outcome, started)
        if self._later is not None:
            await self._write_later(*self._later)

    @property
    def tools_running(self) -> bool:
        """Whether a tool call of the run has started and not finished: as far as its events say, or committed by
        `_record_call` (its tool starts right after that commit, before the runner reads its `ToolStartedEvent`;
        a handover in that gap cut a non-idempotent tool off, and its call was answered `interrupted`)."""
        done = {result.call_id for result in self._results}
        return (any(call.id not in done for call in self._calls)
                or any(call_id not in done for call_id in self._recorded))

    async def _hand_over(self) -> None:
        """Stop without ending (no `run_finished`): publish what was committed, and write the journal and the step's
        text as they stand, so that the server that continues the run starts from all of it. The manager then
        releases the lease (`Store.release_lease`)."""
        self.handed_over = True
        try:
            await self._flush_saved()
            self._channel.close()
            if self._step is not None and self._text_size > self._text_saved_size:
                self._checkpoint_text(self._step, in_journal=True)
            self._journal.end()
            await self._journal.run()  # what the cancelled journal task had not written yet
        except Exception:  # the journal as it stands is a checkpoint too: the run goes on from there
            logger.exception("Run %s of chat %s: writing its journal before the handover failed", self.run_id,
                             self.chat_id, extra=self._ids())
        logger.warning("Run %s of chat %s handed over: another server continues it", self.run_id, self.chat_id,
                       extra=self._ids())

    def _ids(self) -> dict[str, str]:
        """The log record's fields naming this run (for `--log-format json`)."""
        return {"run_id": self.run_id, "chat_id": self.chat_id}

    async def _end(self, outcome: _Outcome, started: float) -> None:
        """`_finish`, which never raises: a run that cannot even record its end is logged, and the server goes on
        (its lease then expires, and recovery ends it from its journal)."""
        try:
            await self._finish(outcome, started)
        except StoreUnavailable as exc:
            logger.warning("Run %s of chat %s: its end could not be recorded (%s); once its lease expires, recovery "
                           "ends it from its journal", self.run_id, self.chat_id, exc, extra=self._ids())
        except Exception:
            logger.exception("Run %s of chat %s: recording or publishing its end failed", self.run_id, self.chat_id,
                             extra=self._ids())

    async def _durably(self, what: str, write: Callable[[], Awaitable[_T]], seconds: float | None = None) -> _T:
        return await durably(write, seconds=self.retry_seconds if seconds is None else seconds, what=what,
                             run_id=self.run_id, chat_id=self.chat_id)

    async def _write_later(self, left: list[Message] | None, status: RunStatus, error: dict[str, str] | None,
                           usage: dict[str, Any] | None) -> None:
        """The end of a run whose database stayed away past the retries (`run_finished` is already out): written
        once the database is back, the run holding its lease meanwhile. Stops with the server."""
        delay = RETRY_FIRST
        while True:
            try:
                if left:
                    await self.store.append_messages(self.chat_id, left, run_id=self.run_id)
                    left = None
                await self.store.finish_run(self.run_id, status=status, usage=usage, error=error, steps=self._steps,
                                            event_count=self.publisher.published)
            except StoreUnavailable:
                await anyio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            except Exception:
                logger.exception("Run %s of chat %s: recording its end failed", self.run_id, self.chat_id,
                                 extra=self._ids())
                return
            logger.warning("Run %s of chat %s: its end (%s) was recorded once the database was back", self.run_id,
                           self.chat_id, status, extra=self._ids())
            return

    def _stop(self, scope: anyio.CancelScope) -> None:
        if self.watch.reason == "handover":
            self.memory.frozen = True  # before the agent sees the cancellation (see `RunMemory.frozen`)
        scope.cancel()

    async def _make_agent(self) -> Agent[Any]:
        context = ChatContext(user=self.user, chat_id=self.chat_id, run_id=self.run_id, memory=self.memory,
                              max_parallel_tools=self.max_parallel_tools, model=self.model)
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
            round_ = self.continued.round if self.continued is not None else None
            if round_ is not None and round_.pending:
                state, decisions = await self._continued_state(agent, round_)
                stream = agent.stream(resume=state, approvals=decisions, conversation_id=self.chat_id,
                                      trace_context=self.trace_context)
            elif self.resume is not None:
                state, decisions = self.resume
                stream = agent.stream(resume=state, approvals=decisions, conversation_id=self.chat_id,
                                      trace_context=self.trace_context)
            else:
                if round_ is not None:  # every call of the round has its result: it only needed storing
                    await self._store_continued(round_)
                stream = agent.stream(None, conversation_id=self.chat_id, trace_context=self.trace_context)
                stream.first_step = self._steps  # the steps stored before a takeover count against max_steps
            stream.deliver_to(self._channel)
            stream.before_tool = self._record_call
            async with stream as run:
                self.memory.usage = lambda: self._usage_before + run.usage
                try:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._journal.run)
                        outcome.error = await self._consume(run)
                        # `run_finished` follows every journal write (a cancelled run leaves the rest: its end and
                        # its last round, stored by the agent, supersede them).
                        self._journal.end()
                        await self._journal.drained()
                finally:
                    outcome.usage = self._usage_before + run.usage
                    self._cut_off = _cut_off_text(run.messages, self._committed)
                if outcome.error is None:
                    outcome.result = run.result
                    outcome.usage = self._usage_before + run.result.usage
        except Exception as exc:  # the agent refused to start (a broken history, say), or the store is away
            outcome.error = _store_outage(exc) or exc
        finally:
            with anyio.CancelScope(shield=True):
                await agent.aclose()

    async def _continued_state(self, agent: Agent[Any],
                               round_: ContinuedRound) -> tuple[RunState, dict[str, AgentApproval]]:
        """The round a stopped process left, as a state the agent resumes: the calls that finished keep their
        results, a call that had started runs again only if its tool is idempotent (else it is answered
        `interrupted`), and a call that had not started is admitted as usual (`Restarted`)."""
        history = await self.memory.load()
        from_memory = not agent.own_history
        state = RunState(message=round_.message, results=list(round_.results),
                         conversation=[] if from_memory else history, conversation_length=len(history),
                         step=min(self._steps - 1, agent.max_steps - 1), conversation_id=self.chat_id,
                         from_memory=from_memory)
        decisions: dict[str, AgentApproval] = {
            call.id: Restarted(INTERRUPTED, started=call.id in round_.started) for call in state.pending}
        return state, decisions

    async def _store_continued(self, round_: ContinuedRound) -> None:
        """Store a round whose calls all finished before its process stopped, and publish its rows."""
        messages = [round_.message, Message.tool_results(list(round_.results))]
        rows = await self._durably("storing the continued round", partial(
            self.store.append_messages, self.chat_id, messages, run_id=self.run_id))
        self._stored_calls.update(call.id for call in round_.message.parts if isinstance(call, ToolCallPart))
        self._publish_saved(Saved(messages=messages, rows=rows))
        await self._flush()

    async def _record_call(self, call: ToolCallPart) -> None:
        """Commit a call to the journal before its tool starts, when the tool is not idempotent (the agent awaits
        this): without it, a process that died while the model still streamed left no trace of a call whose tool
        had run, and the process continuing the run asked the model again, which ran the tool a second time under
        a new call (bench/load's `rolling` scenario counted 9 of 227 such repeats across SIGKILLs). The cost is
        one group commit before such a tool starts; idempotent tools start at once, as before."""
        self._recorded.add(call.id)
        await self._journal.record_call(call)

    async def _consume(self, run: AgentRun[Any]) -> Exception | None:
        """Publish the agent's items and the saved rows in order, until the run ends; returns its error.

        Whatever is waiting in the channel is taken without a pause and published in one append (at most
        `_BATCH` entries while more wait); the consumer waits only once it has published everything, and is
        woken by the agent's task itself (the channel is the agent's queue): one wake-up per batch of events.
        """
        channel = self._channel
        out = self._out
        item: _ChannelItem | None
        while True:
            if not channel.buffered:
                if out:
                    await self._flush()
                try:
                    item = await run.next_item()  # the channel's next item; the run's end once it is over
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    await self._flush()
                    return exc
            else:
                if len(out) >= _BATCH:
                    await self._flush()
                    # Followers run between two batches, as they do between two reads of the provider.
                    # Before taking the next item: cancelled here, it stays for `_flush_saved`.
                    await checkpoint()
                item = channel.get_nowait()  # (buffered: not None)
            kind = type(item)
            if kind is Committed:
                assert isinstance(item, Committed)
                messages = list(item.messages)
                if self._pending and self._pending[0].messages == messages:
                    # The agent committed a round here; its rows follow from the memory if the agent keeps it.
                    self._publish_saved(self._pending.popleft())
                else:
                    self._awaiting = messages
            elif kind is Saved:
                assert isinstance(item, Saved)
                if self._awaiting is not None and self._awaiting == item.messages:
                    self._awaiting = None
                    self._publish_saved(item)
                else:
                    self._pending.append(item)
            else:
                self._awaiting = None  # an event after a commit not followed by its rows: the round is not kept
                self._publish_event(item)  # type: ignore[arg-type]
        await self._flush()
        return None

    # -- publishing --------------------------------------------------------------------------

    def _open_step(self) -> int:
        if self._step is None:
            self._step = self._steps
            self._steps += 1
            if self._text:
                self._text, self._text_size, self._text_saved_size = [], 0, 0
            self._text_saved_at = time.monotonic()  # a step answering within a second writes no checkpoint
            self._out.append(self.publisher.run_entry("step_started", self._step))
        return self._step

    async def _flush(self) -> None:
        """Append the entries numbered so far, in one append. An entry leaves `_out` only once the log has it:
        cancelled before that, it is still there for `_finish`, and the numbering stays gap-free."""
        out = self._out
        while out:
            count = len(out)
            await self.publisher.log.append(self.chat_id, out[:count])
            del out[:count]

    def _publish_event(self, event: Event) -> None:
        step = self._open_step()
        # Journal writes go to the journal task, in order, behind the event (see the module docstring).
        kind = type(event)
        if kind is TextDelta:
            assert isinstance(event, TextDelta)
            text = self._text
            text.append(event.text)
            self._text_size += len(event.text)
            # The clock is read every 8th delta only: this is the busiest path of a run.
            if self._text_size - self._text_saved_size >= TEXT_CHECKPOINT_BYTES or (
                    not len(text) & 7 and time.monotonic() - self._text_saved_at >= TEXT_CHECKPOINT_SECONDS
                    and getattr(self.store, "write_backlog", 0) <= CHECKPOINT_BACKLOG):
                self._checkpoint_text(step)
        elif kind is ToolStartedEvent:
            assert isinstance(event, ToolStartedEvent)
            call = event.call
            self._calls.append(call)
            if call.id not in self._recorded:
                self._journal.add_call(call)
            self._journal.add(partial(self.limiter.spend, self.user.id, "tool_calls"))
        elif kind is ToolResultEvent:
            assert isinstance(event, ToolResultEvent)
            safe = without_data(self.policy.result(event.result))  # bytes go to the blob store, not to followers
            self._results.append(safe)
            # A call committed before its tool started must not lose its result: it would not run again.
            self._journal.add_result(safe, urgent=safe.call_id in self._recorded)
            if safe is not event.result:
                event = ToolResultEvent(result=safe, duration=event.duration, metadata=event.metadata)
        elif kind is MessageEndEvent:
            assert isinstance(event, MessageEndEvent)
            message = event.message
            if message.tool_calls or message.invalid_tool_calls:
                self._step_message = message  # only a round with calls is recovered
                self._journal.add_step(message)
        self._out.append(self.publisher.event_entry(event, step))

    def _checkpoint_text(self, step: int, *, in_journal: bool = False) -> None:
        """Write the step's text so far behind the events (see `TEXT_CHECKPOINT_SECONDS`): with the store's next
        write batch where the store offers that (`SQLStore.checkpoint_step_text`: nothing waits for a checkpoint,
        and one a second per streaming run was a third of a chat's transactions), else (or `in_journal`: a
        hand-over, after which the continuing server must find it) through the journal task, in order."""
        text = "".join(self._text)
        self._text = [text]
        self._text_saved_size = self._text_size
        self._text_saved_at = time.monotonic()
        ride = None if in_journal else getattr(self.store, "checkpoint_step_text", None)
        if ride is not None:
            ride(self.run_id, step, text)
            return
        self._journal.add(partial(self._durably, "checkpointing a step's text",
                                  partial(self.store.record_step_text, self.run_id, step, text)))

    def _publish_saved(self, saved: Saved) -> None:
        """Number a stored round's `message_saved` rows (and `step_finished`): they go out with the next append,
        which nothing else of the run can come between."""
        if saved.published:
            return
        saved.published = True
        self._committed.extend(saved.messages)
        ends_step = any(row.role == "assistant" for row in saved.rows)
        step = self._step if ends_step else None
        out = self._out
        for row in saved.rows:
            out.append(self.publisher.run_entry("message_saved", step, row=row.to_dict()))
        if ends_step and self._step is not None:
            out.append(self.publisher.run_entry("step_finished", self._step))
            self._step = None

    async def _flush_saved(self) -> None:
        """Rows stored while the consumer was stopped (a cancelled run's last round) are published now."""
        while (item := self._channel.get_nowait()) is not None:
            if type(item) is Saved:
                self._pending.append(item)
        while self._pending:
            self._publish_saved(self._pending.popleft())
        await self._flush()

    async def _finish(self, outcome: _Outcome, started: float) -> None:
        outcome.error = _store_outage(outcome.error) or outcome.error
        await self._flush_saved()  # with whatever entries a cancellation left numbered and not yet appended
        self._channel.close()
        usage = usage_dict(outcome.usage)
        duration = round(time.monotonic() - started, 3)
        # A server stopping tries each write once: its lease expires, and recovery ends the run from its journal.
        seconds = 0.0 if outcome.cancelled == "shutdown" else None
        result = outcome.result
        if outcome.cancelled is None and outcome.error is None and result is not None and result.paused:
            assert result.state is not None
            record = record_pause(result.state, self.policy)
            event_count = self.publisher.published + len(record.approvals) + 1
            try:
                paused = await self._durably("recording the run's pause", partial(
                    self.store.pause_run, self.run_id, state_json=record.state_json, pending=record.approvals,
                    usage=usage, steps=self._steps, event_count=event_count), seconds)
            except StoreUnavailable as exc:
                paused, outcome.error = False, exc
            if paused:
                events: list[tuple[str, int | None, dict[str, Any]]] = [
                    ("approval_required", self._step, {"approval_id": approval_id, "call": part_dicts([call])[0]})
                    for approval_id, call in record.approvals
                ]
                events.append(("run_finished", None, {"status": "paused", "usage": usage, "error": None,
                                                      "steps": self._steps, "duration": duration}))
                await self.publisher.run_events(events)
                return
            outcome.error = outcome.error or _LeaseLost()
        status, error = _ending(outcome)
        if outcome.error is not None and outcome.cancelled is None:
            # The client sees a sentence; the log keeps the whole story (with the traceback when it is ours).
            unexpected = not isinstance(outcome.error, (ToolwireError, StoreUnavailable))
            logger.log(logging.ERROR if unexpected else logging.WARNING, "Run %s of chat %s failed: %s", self.run_id,
                       self.chat_id, outcome.error, exc_info=outcome.error if unexpected else None, extra=self._ids())
        left = self._left_over(outcome)
        answer = self.memory.answer  # when set, it is `left` (the run's last round)
        try:
            if answer is not None and self._finish_storing is not None:
                # The answer and the run's end in one transaction. Its events come after it (the rows, the step's
                # end, `run_finished`), so the count it records is that of the events about to be numbered.
                count = self.publisher.published + len(rows_for(answer.safe)) + (self._step is not None) + 1
                rows, finished = await self._durably("recording the run's answer and its end", partial(
                    self._finish_storing, self.run_id, chat_id=self.chat_id, messages=answer.safe, status=status,
                    usage=usage, error=error, steps=self._steps, event_count=count), seconds)
                left = None
                await self._publish_answer(answer, rows)
            else:
                if left:
                    rows = await self._durably("storing the run's last round", partial(
                        self.store.append_messages, self.chat_id, left, run_id=self.run_id), seconds)
                    left = None
                    if answer is not None:
                        await self._publish_answer(answer, rows)
                    else:
                        for row in rows:
                            await self.publisher.run_event("message_saved", None, row=row.to_dict())
                finished = await self._durably("recording the run's end", partial(
                    self.store.finish_run, self.run_id, status=status, usage=usage, error=error, steps=self._steps,
                    event_count=self.publisher.published + 1), seconds)
        except StoreUnavailable:
            if outcome.cancelled == "shutdown":
                raise
            # Followers are told now; the end (and what the run finished) is written when the database is back.
            if status == "completed":
                status, error = "failed", _describe(StoreUnavailable(
                    "The run finished but the database stayed unreachable, so its end could not be recorded; it is "
                    "written when the database is back. Reload the chat in a moment."))
            self._later = (left, status, error, usage)
            finished = True
        if not finished:
            status, error = "interrupted", _describe(_LeaseLost())
        await self.publisher.run_event("run_finished", None, status=status, usage=usage, error=error,
                                       steps=self._steps, duration=duration)

    async def _publish_answer(self, answer: Answer, rows: list[MessageRow]) -> None:
        """The held answer's rows, stored at the run's end, and its step's end, as a stored round's are."""
        self._publish_saved(Saved(messages=answer.messages, rows=rows))
        await self._flush()

    def _left_over(self, outcome: _Outcome) -> list[Message] | None:
        """What the run finished but the store did not take while it was away: the round the agent handed over,
        or else the round the run was in, its finished results kept and the others answered `interrupted`. Or,
        for a run a failure ended mid-answer (a provider error), the text it had streamed in a step without
        calls: the agent keeps such a message in the run but not in its memory, and it is stored here, marked
        incomplete, so that a reload shows what the person saw."""
        if self.memory.answer is not None:  # held for the end (see `RunMemory.answer`), the run's last round
            return self.memory.answer.safe
        if self.memory.unsaved is not None:
            return self.memory.unsaved
        if _store_outage(outcome.error) is None:
            if outcome.error is not None and outcome.cancelled is None and self._cut_off is not None:
                return [self.policy.message(self._cut_off)]
            return None
        round_ = interrupted_round(step_message=self._step_message, calls=self._calls, results=self._results,
                                   committed=self._committed)
        return [self.policy.message(m) for m in round_] if round_ else None


def _cut_off_text(messages: Sequence[Message], committed: Sequence[Message]) -> Message | None:
    """The run's last message when it is text the response was cut off in (marked incomplete, no calls) that
    was not stored (`committed`); else `None`."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or last.metadata.get("incomplete") is not True or not last.text:
        return None
    if any(isinstance(p, (ToolCallPart, InvalidToolCallPart)) for p in last.parts):
        return None
    return None if any(m is last or m == last for m in committed) else last


def _store_outage(error: BaseException | None) -> StoreUnavailable | None:
    """The store outage behind `error`, if there is one (raised through a task group or the agent's own error)."""
    seen: set[int] = set()
    stack: list[BaseException] = [error] if error is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, StoreUnavailable):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


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
