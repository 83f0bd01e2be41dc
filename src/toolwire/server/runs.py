"""The run manager: runs belong to the server, not to the request that started them.

Each run is a task in the manager's task group (the app's lifespan); requests only follow a chat's
event log. The manager also

- keeps the leases of its runs alive, and takes over runs whose lease expired (their process died):
  on start-up and then every few seconds. Such a run is continued here from its last checkpoint
  (`Store.take_over_run`, docs/guides/durable-runs.md): its followers get `run_resumed`, then the rest of
  the run, numbered after the last event its log holds. Past `max_continuations`, or while this server is
  stopping, it is ended `interrupted` instead (`Store.recover_run`) or left to another server;
- orders each chat's runs in the log: a run's `run_started` is published only after the previous
  run's `run_finished` (a resumed run can be started the moment its approvals are decided; with
  several replicas the previous run may have ended on another one, or been recovered there: then
  the log itself is watched for its `run_finished`);
- applies the per-user rate limits before a run is stored;
- answers a message sent while the chat's run is going with the chat's multitask strategy (double
  texting, docs/guides/double-texting.md): `reject` (409), `enqueue` (the message waits in the store's
  queue, `store/_queue.py`), `interrupt` (queued ahead of the rest, and the run going is cancelled) or
  `rollback` (the run going is cancelled, and the message is stored beside that run's turn: a branch).
  Whichever replica sees a chat free starts its queue's head: the one whose run ended, the one that
  recovered it, and every replica's maintenance round (a queue whose replica died mid-way). A run that
  starts while an interrupt is queued stops at once (the interrupt was sent after it was asked for);
- on shutdown stops accepting runs and interrupts the running ones (each still records its end and
  publishes `run_finished`), so followers close; `drain` first lets them finish for a while, or (with
  `drain_handover`) stops them without ending them and releases their leases, for another server to continue.

What another process would have to share (several replicas) is behind interfaces: the `Store`
(leases, one active run per chat, approvals), the `EventLog`, the `RunSignals` (cancel) and the
`RateLimiter`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeVar

import anyio
import anyio.abc

from .. import telemetry
from ..messages import FilePart, Message, TextPart
from ..store import (
    Chat,
    Continued,
    Decision,
    MessageRow,
    Recovered,
    Run,
    RunStart,
    Store,
    StoreError,
    StoreUnavailable,
    User,
    new_id,
)
from ..store._queue import QueuedRun, RunQueue
from ..store.blobs import Files
from .approvals import resume_arguments, resumed_view
from .errors import ApiError, store_error
from .eventlog import Cursor, CursorExpired, EventLog, Position
from .events import RunPublisher, usage_dict
from .limits import Limits, RateKind, RateLimiter, ResultPolicy
from .model_choice import ServerModels
from .run_memory import STORE_RETRY_SECONDS
from .runner import AgentFactory, Runner
from .signals import RunSignals
from .sse import StreamCloser

__all__ = ["MULTITASK_STRATEGIES", "MultitaskStrategy", "RunHandle", "RunManager", "renumbered_start"]

MultitaskStrategy: TypeAlias = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a message sent while the chat's run is going does (LangGraph's names; docs/guides/double-texting.md)."""

MULTITASK_STRATEGIES: tuple[MultitaskStrategy, ...] = ("reject", "enqueue", "interrupt", "rollback")

Stored = TypeVar("Stored")

_UNQUEUED_KEPT = 100_000
"""The most chats `RunManager._unqueued` lists (a few MB): older ones are read as any other chat."""

logger = logging.getLogger("toolwire.server")

_READY_TIMEOUT = 3.0
"""Seconds each dependency gets to answer `/readyz`."""

_CHAIN_WAIT = 10.0
"""Seconds a new run waits for the chat's previous run to publish its end."""

_RESTART_STRIDE = 1 << 24
"""Where a continued run's events are numbered from when the log no longer holds the run (one process, whose
log was in its memory): continuation C starts at C·2^24, past any index the stopped process could have given
(a log keeps 10,000 events per chat by default), so a cursor of before the stop is expired (410: the client
reloads the stored rows) and never waits for an index that was already used."""
_RESTART_SEARCH = 64
"""The most continuations `renumbered_start` looks for (each is one look-up in the log's memory)."""


async def renumbered_start(log: EventLog, chat_id: str, run_number: int) -> Cursor | None:
    """Where a follower without a cursor starts a run continued after a restart whose log lost it (numbered on
    from continuation·2^24, see `_RESTART_STRIDE`), or `None` when the log holds the run from its start."""
    if await log.position(chat_id, Cursor(run_number, 0)) is not Position.EXPIRED:
        return None
    for continuation in range(1, _RESTART_SEARCH + 1):
        start = Cursor(run_number, continuation * _RESTART_STRIDE)
        if await log.position(chat_id, start) is Position.KNOWN:
            return start
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHandle:
    """A run a request started (or attached to): where to follow it."""

    run: Run
    created: bool
    queued: QueuedRun | None = None
    """Set when the message waits for its turn (`run` is then the chat's run it waits for, if any)."""


@dataclass(slots=True)
class _Local:
    chat_id: str
    run_number: int
    done: anyio.Event
    runner: Runner | None = None


class RunManager:
    """Starts, resumes, cancels and recovers runs (see the module docstring)."""

    def __init__(
        self,
        *,
        store: Store,
        log: EventLog,
        signals: RunSignals,
        factory: AgentFactory,
        limits: Limits,
        limiter: RateLimiter,
        policy: ResultPolicy,
        lease_seconds: float = 15.0,
        owner: str | None = None,
        drain_seconds: float = 0.0,
        max_runs: int | None = None,
        store_retry_seconds: float = STORE_RETRY_SECONDS,
        multitask_strategy: MultitaskStrategy = "reject",
        models: ServerModels | None = None,
        max_continuations: int = 2,
        drain_handover: bool = False,
    ) -> None:
        self.store = store
        self.log = log
        self.signals = signals
        self.factory = factory
        self.limits = limits
        self.limiter = limiter
        self.policy = policy
        self.lease_seconds = lease_seconds
        self.owner = owner or new_id("proc")
        self.drain_seconds = drain_seconds
        self.max_runs = max_runs
        self.store_retry_seconds = store_retry_seconds
        self.files: Files | None = None
        """Where runs keep the files tools return and find those their history references (`files.py`)."""
        self.multitask_strategy = multitask_strategy
        self.models = models or ServerModels()
        self.max_continuations = max_continuations
        self.drain_handover = drain_handover
        self._stopping = False
        self.handed_over = StreamCloser()
        """Closed once a stop handed this process's runs over (`drain_handover`): the streams it serves end then
        (`sse.EventStreamResponse`), and their clients follow on from another server at once, instead of
        holding the stop until the server's shutdown timeout cuts them off."""
        self.queue: RunQueue | None = store if isinstance(store, RunQueue) else None
        self.alone = False
        """This server holds its database's lock alone (`replicas.py`, set by the app): no other server queues runs
        on the chats it serves, so those it made know their queue without reading it (`_unqueued`)."""
        self._unqueued: dict[str, None] = {}
        """Chats this server stored while `alone` on which no run was ever queued (the newest `_UNQUEUED_KEPT`, in
        the order they were made): their runs' starts and ends skip the queue's two reads (one for an interrupt
        waiting, one for the head to start), two reads of every run. A chat not listed is read as before."""
        self.accepting = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._local: dict[str, _Local] = {}
        self._chat_last: dict[str, anyio.Event] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Recover what a dead process left, then accept runs and keep leases and recovery going."""
        self._tg = tg
        tg.start_soon(self._renew)  # before the first recovery: the runs it takes over are renewed meanwhile
        await self.recover_expired()
        self.accepting = True
        await self.start_waiting()
        tg.start_soon(self._maintain)

    async def drain(self) -> None:
        """Refuse new runs (`/readyz` says 503), let running ones finish for up to `drain_seconds`, then
        interrupt what is left. A load balancer meanwhile sends new requests to the other replicas."""
        self.accepting = False
        self._stopping = True
        if self.drain_handover:
            if self._local:
                await self.hand_over()
            self.handed_over.close()
        elif self.drain_seconds > 0 and self._local:
            logger.warning("Stopping: %d run(s) get up to %.0f s to finish", len(self._local), self.drain_seconds)
            await self.wait_idle(self.drain_seconds)
        await self.begin_shutdown()

    async def hand_over(self) -> None:
        """Stop every run of this process without ending it, for another server to continue (`--drain-handover`,
        docs/guides/durable-runs.md): each as soon as none of its tool calls is running (up to `drain_seconds`,
        then at once), its journal written; its lease is then released (`_drive`)."""
        logger.warning("Stopping: handing %d run(s) over to the other servers (their tools get up to %.0f s to "
                       "finish)", len(self._local), self.drain_seconds)
        deadline = anyio.current_time() + self.drain_seconds
        while self._local and anyio.current_time() < deadline:
            for run_id, local in list(self._local.items()):
                if local.runner is None or not local.runner.tools_running:
                    self.signals.watch(run_id).fire("handover")
            await anyio.sleep(0.05)
        for run_id in list(self._local):
            self.signals.watch(run_id).fire("handover")  # its tools, still running, are stopped
        await self.wait_idle(_CHAIN_WAIT)  # each writes its journal (what is left is shut down as before)

    async def begin_shutdown(self) -> None:
        """Refuse new runs and interrupt the running ones (they record their end and publish it)."""
        self.accepting = False
        self._stopping = True
        for run_id in list(self._local):
            await self.signals.cancel(run_id, "shutdown")

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until every run of this process has ended; `False` if some are still going after `timeout`."""
        with anyio.move_on_after(timeout):
            while self._local:
                await next(iter(self._local.values())).done.wait()
            return True
        return False

    def _full(self) -> bool:
        return self.max_runs is not None and len(self._local) >= self.max_runs

    @property
    def running(self) -> int:
        return len(self._local)

    async def problems(self) -> dict[str, str]:
        """What this replica needs and does not have right now, by name (`database`, `writes`, `redis`...):
        empty when it is ready. Each check gives up after a few seconds; nothing here waits for longer."""
        found: dict[str, str] = {}
        try:
            with anyio.fail_after(_READY_TIMEOUT):
                await self.store.ping()
        except Exception as exc:
            found["database"] = f"The database cannot be reached ({type(exc).__name__})."
        health = getattr(self.store, "health", None)
        if health is not None and health.write_error is not None:
            found["writes"] = ("The last write to the database failed and none has succeeded since "
                               f"({health.write_error}).")
        # The log, signals and limiter may share one connection (a Redis hub): each is asked once.
        checked: set[int] = set()
        for component in (self.log, self.signals, self.limiter):
            target = getattr(component, "hub", component)
            ready = getattr(target, "ready", None)
            if ready is None or id(target) in checked:
                continue
            checked.add(id(target))
            try:
                with anyio.fail_after(_READY_TIMEOUT):
                    await ready()
            except Exception as exc:
                found[str(getattr(target, "dependency", "redis"))] = (
                    f"{type(target).__name__} does not answer ({type(exc).__name__}).")
        return found

    async def _renew(self) -> None:
        """Renew the leases of this process's runs every third of the lease, in a task of its own: a recovery round
        that takes over many runs (a replica of a rolling deploy that stopped) lasts longer than a lease on a busy
        machine, and the runs it took over first, or this process's own, must not expire meanwhile (another server
        would take them over while they still run here: bench/load's `rolling` scenario showed it)."""
        interval = max(0.2, self.lease_seconds / 3)
        while True:
            await anyio.sleep(interval)
            if not self._local:
                continue
            try:
                await self.store.renew_leases(self.owner, list(self._local), self.lease_seconds)
            except StoreUnavailable as exc:  # the next round tries again; `_maintain` says when the store is away
                logger.debug("Lease renewal failed (%d run(s) here); retrying in %.1f s: %s", len(self._local),
                             interval, exc)
            except Exception as exc:  # a deadlock with another replica's writes, say: the next round tries again
                logger.warning("Lease renewal failed (%d run(s) here); retrying in %.1f s: %s", len(self._local),
                               interval, exc)

    async def _maintain(self) -> None:
        interval = max(0.2, self.lease_seconds / 3)
        failing_since: float | None = None
        while True:
            await anyio.sleep(interval)
            try:
                await self.recover_expired()
                await self.start_waiting()
                self.log.sweep()
            except StoreUnavailable as exc:  # the database is away for a moment; the next round tries again
                if failing_since is None:
                    failing_since = anyio.current_time()
                    logger.warning("Recovery failed (%d run(s) here); retrying every %.1f s: %s",
                                   len(self._local), interval, exc)
            except Exception:
                logger.exception("Recovery failed; retrying in %.1f s", interval)
            else:
                if failing_since is not None:
                    logger.warning("Recovery works again, after %.1f s",
                                   anyio.current_time() - failing_since)
                    failing_since = None

    async def recover_expired(self) -> list[Recovered | Continued]:
        """Continue every run whose lease expired here, or finish it as `interrupted` (see the module docstring)."""
        recovered: list[Recovered | Continued] = []
        for run in await self.store.expired_runs():
            if run.id in self._local:
                continue  # ours, renewed late: it is still running here
            done: Recovered | Continued | None
            if self.max_continuations <= 0 and run.lease_owner is not None:  # (no owner: handed over, continued)
                done = await self.store.recover_run(run.id, owner=self.owner, lease_seconds=self.lease_seconds)
            elif self._stopping or self._tg is None or self._full():
                continue  # a stopping (or full) server starts nothing: the run is another server's, or its next start's
            else:
                done = await self.store.take_over_run(run.id, owner=self.owner, lease_seconds=self.lease_seconds,
                                                      continue_limit=self.max_continuations)
            if done is None:
                continue
            if isinstance(done, Continued):
                logger.warning("Continuing run %s of chat %s here (continuation %d): its process stopped before it "
                               "finished", run.id, run.chat_id, done.continuation,
                               extra={"run_id": run.id, "chat_id": run.chat_id})
                recovered.append(done)
                with anyio.CancelScope(shield=True):  # the lease is ours now: the run must be launched
                    await self._continue(done)
                continue
            logger.warning("Recovered run %s of chat %s: its process stopped before it finished", run.id, run.chat_id,
                           extra={"run_id": run.id, "chat_id": run.chat_id})
            recovered.append(done)
            await self._publish_recovery(done)
            await self._start_queued(run.chat_id)
        return recovered

    async def _publish_recovery(self, recovered: Recovered) -> None:
        """Tell the run's followers, where this log holds the run (a shared log always does)."""
        run = recovered.run
        last = await self.log.last_cursor(run.chat_id, run.run_number)
        if last is None:
            return
        publisher = RunPublisher(self.log, chat_id=run.chat_id, run_id=run.id, run_number=run.run_number,
                                 last_index=last.index)
        for row in recovered.rows:
            await publisher.run_event("message_saved", None, row=row.to_dict())
        await publisher.run_event("run_finished", None, status="interrupted", usage=usage_dict(run.usage),
                                  error=run.error, steps=run.steps, duration=0.0)

    # -- starting runs -----------------------------------------------------------------------

    async def _admit(self, user: User) -> None:
        if not self.accepting:
            raise ApiError(503, "shutting_down", "The server is shutting down and starts no new runs; try again in "
                                                 "a moment (another server may take the request).")
        if self.max_runs is not None and len(self._local) >= self.max_runs:
            # A replica at capacity sheds the run; the load balancer (or the client) tries another.
            raise ApiError(503, "server_busy", f"This server is running as many runs as it takes ({self.max_runs}); "
                                               "try again in a moment.", headers={"Retry-After": "1"})
        kinds: tuple[RateKind, ...] = ("tool_calls", "runs")
        for kind in kinds:
            wait = await self.limiter.acquire(user.id, kind)
            if wait is not None:
                seconds = max(1, int(wait + 0.999))
                what = "runs" if kind == "runs" else "tool calls"
                raise ApiError(429, "rate_limited", f"Too many {what} for this user right now; try again in "
                                                    f"{seconds} s.", headers={"Retry-After": str(seconds)})

    async def _stored(self, user: User, write: Callable[[], Awaitable[Stored]]) -> Stored:
        """`write` (the store call that starts or queues a run) once the user is admitted; its refusals as API
        errors."""
        await self._admit(user)
        try:
            return await write()
        except StoreError as exc:
            raise store_error(exc) from None

    async def _launched(self, user: User, start: RunStart, *, new_row: bool = True) -> RunHandle:
        """The handle of a run the store started, launched here if this request started it (`new_row`: its user
        message was stored with it, and is published)."""
        if start.created:
            with anyio.CancelScope(shield=True):  # stored as running: it must be launched, whatever the request does
                await self._launch(user, start.run, user_row=start.user_row if new_row else None)
        return RunHandle(run=start.run, created=start.created)

    async def send_message(self, user: User, chat: Chat, text: str, client_message_id: str, *,
                           title: str | None = None, files: Sequence[FilePart] = (),
                           parent_id: str | None = None, strategy: MultitaskStrategy | None = None,
                           new: bool = False) -> RunHandle:
        """Store the user's message and start a run answering it (or find the run it already started); `title`
        names a chat that has none, in the same transaction. The message goes under `parent_id` (see
        `branch_from`), by default under the chat's active leaf. While the chat's run is going, `strategy` (else
        the server's default) says what happens (see the module docstring); an edit (`parent_id` given) is never
        queued: it names a place in the tree that the queued turn would no longer answer, so it is refused (409)
        like `reject`.

        `new`: `chat` is not stored yet (`store.new_chat()`); the run's start stores it, in its transaction. A chat
        that nobody has seen has no run going, so `strategy` does not apply, and a refused start leaves no chat."""
        strategy = strategy or self.multitask_strategy
        if new:
            strategy = "reject"
        if strategy == "rollback" and parent_id is None:
            return await self._send_rollback(user, chat, text, client_message_id, title=title, files=files)
        message = Message(role="user", parts=[TextPart(text=text), *files]) if files else Message.user(text)
        if strategy in ("enqueue", "interrupt") and parent_id is None:
            return await self._send_queued(user, chat, message, client_message_id, title=title, strategy=strategy)
        # The run's model comes from the chat the request just read: recorded in the run's own insert, it spares
        # a read of the chat and a commit that `run_started` waited for (`_run_model`).
        model = self.models.resolve(chat.model) if self.models.default is not None else None
        with self.making_chat(chat.id) if new else nullcontext():
            start = await self._stored(user, lambda: self.store.start_run(
                chat.id, user_message=message, client_message_id=client_message_id, owner=self.owner,
                lease_seconds=self.lease_seconds, title=title, parent_id=parent_id, model=model,
                **({"new_chat": chat} if new else {})))
        return await self._launched(user, start)

    @contextmanager
    def making_chat(self, chat_id: str) -> Iterator[None]:
        """Around the write that stores a new chat. The chat is listed before the write (from the commit on, another
        request may find it and queue a run on it, which unlists it), and unlisted if the write fails. While this
        server is alone, nobody else can queue there."""
        if self.alone and self.queue is not None:
            self._unqueued[chat_id] = None
            if len(self._unqueued) > _UNQUEUED_KEPT:
                del self._unqueued[next(iter(self._unqueued))]
        try:
            yield
        except BaseException:
            self._unqueued.pop(chat_id, None)  # read as any other chat
            raise

    async def _send_rollback(self, user: User, chat: Chat, text: str, client_message_id: str, *, title: str | None,
                             files: Sequence[FilePart]) -> RunHandle:
        """`rollback`: cancel the running turn and answer the new message from that turn's parent, so the cancelled
        turn stays on a branch of its own (nothing is deleted) and the new message starts a branch beside it.

        The message is first sent as with `reject`: with no run going it simply starts, and the same message sent
        again finds the run it started (it never cancels its own answer). A run paused for approval is refused
        (409 `run_paused`), as the cancel route refuses it. A message queued behind the run starts before this
        one (the queue is older), which then gets 409."""
        try:
            return await self.send_message(user, chat, text, client_message_id, title=title, files=files,
                                           strategy="reject")
        except ApiError as exc:
            if exc.code != "run_active":
                raise
        running = await self.store.active_run(chat.id)
        if running is not None and running.status == "running" and running.leaf_id is not None:
            parent = await self._turn_parent(chat.id, running.leaf_id)
            await self.signals.cancel(running.id, "cancel")  # on whichever replica runs it
            local = self._local.get(running.id)
            with anyio.move_on_after(_CHAIN_WAIT):
                if local is not None:
                    await local.done.wait()
                while True:  # on another replica, the run's end shows in the store
                    active = await self.store.active_run(chat.id)
                    if active is None or active.id != running.id:
                        break
                    await anyio.sleep(0.05)
        else:
            parent = None
        return await self.send_message(user, chat, text, client_message_id, title=title, files=files,
                                       parent_id=parent, strategy="reject")

    async def _turn_parent(self, chat_id: str, leaf_id: str) -> str:
        """The parent of the user message of the turn a run extends from `leaf_id` (`""`: the chat's root)."""
        rows = (await self.store.chat_path(chat_id, through=leaf_id)).rows
        index = next(i for i, row in enumerate(rows) if row.id == leaf_id)
        turn = next(row for row in reversed(rows[:index + 1]) if row.kind == "user")
        return turn.parent_id or ""

    async def _send_queued(self, user: User, chat: Chat, message: Message, client_message_id: str, *, title: str | None,
                           strategy: Literal["enqueue", "interrupt"]) -> RunHandle:
        if self.queue is None:
            raise ApiError(422, "unsupported", f"The {strategy} strategy needs a store that keeps queued messages "
                                               "(SQLStore does; this server's store does not). Send with reject.")
        queue = self.queue
        # Before the queueing is written: a run of the chat that starts or ends from now on reads the queue.
        self._unqueued.pop(chat.id, None)
        queued = await self._stored(user, lambda: queue.queue_run(
            chat.id, user_message=message, client_message_id=client_message_id, owner=self.owner,
            lease_seconds=self.lease_seconds, title=title, strategy=strategy))
        if queued.start is not None:
            return await self._launched(user, queued.start)
        assert queued.queued is not None
        ahead = queued.ahead
        if strategy == "interrupt" and ahead is not None and ahead.status == "running":
            # After the queueing committed: a run that starts later sees the interrupt in the store (`_launch`).
            await self.signals.cancel(ahead.id, "cancel")
        elif ahead is None:
            # Nothing runs: the queue's head is being started (or its replica died doing so): start it here.
            self._start_soon(chat.id)
        placeholder = ahead or Run(id=queued.queued.id, chat_id=chat.id, run_number=0, status="running")
        return RunHandle(run=placeholder, created=queued.created, queued=queued.queued)

    async def start_waiting(self) -> None:
        """Start the head of every queue whose chat is free (see the module docstring)."""
        if self.queue is None or not self.accepting:
            return
        for chat_id in await self.queue.waiting_chats():
            await self._start_queued(chat_id)

    def _start_soon(self, chat_id: str) -> None:
        if self._tg is not None:
            self._tg.start_soon(self._start_queued, chat_id)

    async def _start_queued(self, chat_id: str) -> None:
        """Start the chat's first queued run if the chat is free (on whichever replica asks first)."""
        if self.queue is None or not self.accepting:
            return  # a stopping server leaves the queue to the other replicas, or to its next start
        if chat_id in self._unqueued:
            return  # nothing was ever queued on it
        with anyio.CancelScope(shield=True):  # once started in the store, the run must be launched
            try:
                promoted = await self.queue.promote_queued(chat_id, owner=self.owner, lease_seconds=self.lease_seconds)
            except Exception:  # the next maintenance round tries again
                logger.warning("Starting the queued run of chat %s failed; retrying shortly", chat_id, exc_info=True)
                return
            if promoted is not None:
                await self._launch(promoted.user, promoted.start.run, user_row=promoted.start.user_row)

    async def decide(self, user: User, chat: Chat, decisions: Sequence[Decision]) -> RunHandle:
        """Decide the paused run's approvals and start the run that resumes it."""
        resumption = await self._stored(user, lambda: self.store.resume_run(
            chat.id, decisions, owner=self.owner, lease_seconds=self.lease_seconds))
        with anyio.CancelScope(shield=True):
            await self._launch(user, resumption.run, user_row=None,
                               resume=resume_arguments(resumption.paused, resumption.decisions),
                               resumed_from=resumed_view(resumption))
        return RunHandle(run=resumption.run, created=True)

    async def _launch(self, user: User, run: Run, *, user_row: MessageRow | None,
                      resume: tuple[object, object] | None = None,
                      resumed_from: dict[str, object] | None = None) -> None:
        assert self._tg is not None, "the run manager was not started"
        chat_id = run.chat_id
        done = anyio.Event()
        # The run is this process's from its insert on: listed before anything is awaited, so that its lease is
        # renewed (and `recover_expired` leaves it alone) while it waits for the chat's previous run to end. That
        # wait may outlast a lease: unlisted, the run was taken over by another replica (or by this one) as if its
        # process had stopped, and ran twice.
        self._local[run.id] = _Local(chat_id=chat_id, run_number=run.run_number, done=done)
        try:
            await self._start(user, run, done, user_row=user_row, resume=resume, resumed_from=resumed_from)
        except BaseException:
            self._local.pop(run.id, None)
            done.set()
            raise

    async def _start(self, user: User, run: Run, done: anyio.Event, *, user_row: MessageRow | None,
                     resume: tuple[object, object] | None, resumed_from: dict[str, object] | None) -> None:
        """The rest of `_launch`: once the chat's previous run has ended, publish `run_started` and drive the run."""
        assert self._tg is not None, "the run manager was not started"
        chat_id = run.chat_id
        previous = self._chat_last.get(chat_id)
        if previous is not None:
            with anyio.move_on_after(_CHAIN_WAIT):
                await previous.wait()
        elif run.run_number > 1:
            await self._previous_end_published(chat_id, run.run_number - 1)
        self._chat_last[chat_id] = done
        watch = self.signals.watch(run.id)
        if self.queue is not None and chat_id not in self._unqueued and await self.queue.interrupt_waiting(chat_id):
            watch.fire("cancel")  # an interrupt was queued before this run could be reached: it ends at once
        model = run.model if run.model is not None else await self._run_model(user, run)
        publisher = RunPublisher(self.log, chat_id=chat_id, run_id=run.id, run_number=run.run_number)
        await publisher.run_event("run_started", None, chat_id=chat_id, run_number=run.run_number,
                                  resumed=resume is not None, resumed_from=resumed_from, leaf_id=run.leaf_id,
                                  user_message=user_row.to_dict() if user_row is not None else None,
                                  **({"model": model} if model is not None else {}))
        runner = Runner(user=user, chat_id=chat_id, run_id=run.id, publisher=publisher, store=self.store,
                        factory=self.factory, watch=watch, policy=self.policy, limiter=self.limiter,
                        max_parallel_tools=self.limits.max_tool_concurrency,
                        resume=resume, trace_context=telemetry.capture_context(),  # type: ignore[arg-type]
                        retry_seconds=self.store_retry_seconds, files=self.files, model=model,
                        history=_first_branch(run, user_row, resume))
        self._local[run.id].runner = runner
        self._tg.start_soon(self._drive, runner, run.id, chat_id, done)

    async def _run_model(self, user: User, run: Run) -> str | None:
        """The id of the model the run uses (its chat's choice, else the default: `model_choice.py`), recorded
        with the run before its `run_started` says it. A store away leaves it unrecorded, not the run unstarted."""
        if self.models.default is None:
            return None
        try:
            chat = await self.store.get_chat(user.id, run.chat_id)
            model = self.models.resolve(chat.model if chat is not None else None)
            if model is not None:
                await self.store.record_run_model(run.id, model)
        except StoreUnavailable as exc:
            logger.warning("Run %s of chat %s: its model could not be read or recorded (%s); it uses the default",
                           run.id, run.chat_id, exc, extra={"run_id": run.id, "chat_id": run.chat_id})
            return self.models.default
        return model

    async def _continue(self, continued: Continued) -> None:
        """Launch a run taken over from a stopped process, its events numbered on from the log's last one."""
        assert self._tg is not None, "the run manager was not started"
        run = continued.run
        chat_id = run.chat_id
        done = anyio.Event()
        self._chat_last[chat_id] = done
        self._local[run.id] = _Local(chat_id=chat_id, run_number=run.run_number, done=done)
        watch = self.signals.watch(run.id)
        last = await self.log.last_cursor(chat_id, run.run_number)
        if last is not None:
            index = last.index
        else:
            index = continued.continuation * _RESTART_STRIDE
            seed = getattr(self.log, "seed", None)  # the in-memory log: earlier cursors of the run are expired
            if seed is not None:
                seed(chat_id, Cursor(run.run_number, index))
        publisher = RunPublisher(self.log, chat_id=chat_id, run_id=run.id, run_number=run.run_number,
                                 last_index=index)
        restarted = continued.round is None
        await publisher.run_event("run_resumed", None, replica=self.owner,
                                  reason="handover" if continued.handover else "lease_expired",
                                  continuation=continued.continuation,
                                  checkpoint={"step": continued.steps, "message_id": continued.last_row_id},
                                  restarted_step=continued.steps if restarted else None)
        runner = Runner(user=continued.user, chat_id=chat_id, run_id=run.id, publisher=publisher, store=self.store,
                        factory=self.factory, watch=watch, policy=self.policy, limiter=self.limiter,
                        max_parallel_tools=self.limits.max_tool_concurrency, retry_seconds=self.store_retry_seconds,
                        files=self.files, continued=continued,
                        model=self.models.resolve(run.model))  # the model it started on, while offered
        self._local[run.id].runner = runner
        self._tg.start_soon(self._drive, runner, run.id, chat_id, done)

    async def _previous_end_published(self, chat_id: str, previous: int) -> None:
        """Wait (up to `_CHAIN_WAIT`) until the log holds the previous run's `run_finished`, if it holds that run:
        it may have ended on another replica a moment ago, its `run_finished` not yet written."""
        with anyio.move_on_after(_CHAIN_WAIT):
            while True:
                last = await self.log.last_cursor(chat_id, previous)
                if last is None:
                    return
                try:
                    [entry] = await self.log.read_after(chat_id, Cursor(previous, last.index - 1), limit=1)
                except (CursorExpired, ValueError):
                    return
                if entry.type == "run_finished":
                    return
                await self.log.wait(chat_id, last, 1.0)

    async def _drive(self, runner: Runner, run_id: str, chat_id: str, done: anyio.Event) -> None:
        try:
            await runner.run()
            if runner.handed_over:
                with anyio.CancelScope(shield=True):  # released once: should it fail, the lease expires instead
                    await self.store.release_lease(run_id, owner=self.owner)
        except Exception:  # `run()` never raises; should it, the manager (and every other run) must go on
            logger.exception("Run %s of chat %s ended with an error the runner did not handle", run_id, chat_id,
                             extra={"run_id": run_id, "chat_id": chat_id})
        finally:
            self._local.pop(run_id, None)
            self.signals.release(run_id)
            done.set()
            if self._chat_last.get(chat_id) is done:
                del self._chat_last[chat_id]
        await self._start_queued(chat_id)

    # -- stopping runs -----------------------------------------------------------------------

    async def cancel(self, chat_id: str, run_id: str) -> Run:
        """Ask a running run to stop; it ends with `run_finished{cancelled}`."""
        run = await self.store.get_run(chat_id, run_id)
        if run is None and self.queue is not None and await self.queue.cancel_queued(chat_id, run_id):
            return Run(id=run_id, chat_id=chat_id, run_number=0, status="cancelled")  # it leaves the queue unsent
        if run is None:
            raise ApiError(404, "run_not_found", f"This chat has no run {run_id!r}.")
        if run.status == "paused":
            raise ApiError(409, "run_paused", "This run is paused for approval, not running; deny its tool calls "
                                              "(POST /api/chats/{id}/approvals) to end it.")
        if run.status != "running":
            raise ApiError(409, "run_finished", f"This run has already ended ({run.status}); there is nothing to "
                                                "cancel.")
        await self.signals.cancel(run_id, "cancel")
        return run

    async def delete_chat(self, user: User, chat: Chat) -> None:
        """Cancel the chat's run (waiting for it to record its end), then delete the chat.

        The log goes first, on every replica (`EventLog.discard`): once the rows are gone the id may be used
        again, and nothing of this chat may be served under it. Should the log not answer, nothing is deleted.
        """
        if self.queue is not None:  # first, or the run cancelled below would start the queue's head
            for queued in await self.queue.queued_runs(chat.id):
                await self.queue.cancel_queued(chat.id, queued.id)
        active = await self.store.active_run(chat.id)
        if active is not None:
            await self.signals.cancel(active.id, "cancel")
            local = self._local.get(active.id)
            with anyio.move_on_after(_CHAIN_WAIT):
                if local is not None:
                    await local.done.wait()
                else:  # running on another replica: it records its end there
                    while (await self.store.active_run(chat.id)) is not None:  # noqa: ASYNC110 - another process
                        await anyio.sleep(0.05)
        await self.log.discard(chat.id)
        await self.store.delete_chat(user.id, chat.id)

    # -- branches (a chat is a tree of rows: store/_tree.py) ------------------------------------

    async def branch_from(self, user: User, chat: Chat, parent_id: str, text: str, client_message_id: str, *,
                          title: str | None = None) -> RunHandle:
        """Store a user message under the row `parent_id` (a new branch there: `""` for a new first message), make
        it the chat's active leaf and start a run answering it, in one transaction; the run sees exactly the
        path from the root to that message. Refuses while the chat has a run going (`run_active`), like
        `send_message`: cancel the run and wait for its end first (as a `rollback` of a running turn does,
        with the parent of that turn's user message)."""
        return await self.send_message(user, chat, text, client_message_id, title=title, parent_id=parent_id)

    async def regenerate(self, user: User, chat: Chat, message_id: str, client_message_id: str | None) -> RunHandle:
        """Start a run answering again the user message of `message_id`'s turn (regenerate an answer, or retry
        after a failed run): the new answer is a sibling of the earlier one and nothing is stored twice."""
        start = await self._stored(user, lambda: self.store.start_answer(
            chat.id, message_id, client_message_id=client_message_id, owner=self.owner,
            lease_seconds=self.lease_seconds))
        return await self._launched(user, start, new_row=False)


def _first_branch(run: Run, user_row: MessageRow | None, resume: object) -> list[Message] | None:
    """The branch a new run answers when the store just wrote all of it: a chat's first message, the run's one
    row (its tip, with no parent). The run's memory takes it instead of reading it back (`RunMemory.load`)."""
    if user_row is None or resume is not None or user_row.parent_id is not None or run.leaf_id != user_row.id:
        return None
    return user_row.messages
