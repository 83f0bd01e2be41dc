"""Group commit: one writer per store takes the queued write operations and commits them in one transaction.

A write operation is a plain synchronous function of a SQLAlchemy `Connection` (it runs statements and
returns a value). `Writer.write(operation)` queues it and returns its value once the transaction that ran it
has committed, so an awaited write is durable when it returns. The writer runs on an event loop of its own,
in a thread (`LoopThread`): it takes up to `WRITE_BATCH` queued operations, runs them in one transaction,
commits, and hands the batch back to the callers' loop in one callback, which resolves them in order; then it
takes the next batch at once. Nobody waits on a lock across round trips, a batch of any size costs one
`BEGIN` and one `COMMIT`, and the server's event loop is not in the writer's cycle at all.

Why a thread of its own. The writer used to run on the server's event loop, led by the first caller that
found no batch in flight: each batch cost that loop two turns (the batch's result, then waking the next
leader). With 1,000 chats streaming a turn takes tens of milliseconds, so the writer committed fewer
operations a second than the chats queued (about 630 were waiting in a snapshot of such a run) while its
worker thread idled at a tenth of a core. Now each batch's cost is its statements and the GIL only.

Where a batch runs (`Writer(run)`, a coroutine function run on the writer's loop): on SQLite the whole
transaction on a synchronous `sqlite3` connection of the writer's own (blocking its loop, which does nothing
else); on PostgreSQL on an asyncpg connection made on that loop, through `AsyncConnection.run_sync`, one
round trip per statement.

Failures. An operation that raises (a refusal such as `RunConflict`, a constraint) fails alone: the
transaction is rolled back and the batch is run again without it, so the others commit and it gets its own
exception (no savepoint per operation, which would add two statements to each). A refusal is final only for
the first operation of a transaction: a later one may have been refused because of what an earlier one wrote
and the rollback undid, so it runs again, first in the next batch, once the others have committed.

Operations that refuse in the normal course of things (`refusable`: a run start finding the message already
sent, or another run going) run in a SAVEPOINT when others precede them in the transaction: a refusal rolls
back to it and is final at once, since what it saw commits with it. Rolling the whole transaction back for
each of them made a batch's cost grow with the square of its refusals: two replicas each given the same 90
messages at once ran batches of 30 operations up to 20 times over, held the chats' locks across all those
attempts, and deadlocked with each other for seconds. An operation whose refusals all come before its first write
(`refuses_first`: a new chat's first run, refused only when its chat id is taken, which an `INSERT ... ON
CONFLICT DO NOTHING` finds without failing a statement) needs no SAVEPOINT: its refusal leaves the transaction as
it found it. That saves the SAVEPOINT and its RELEASE, two round trips to PostgreSQL, on every new chat whose
start shares a batch.

An outage (`unavailable`: the database away, a disk refusing writes) or a failed commit fails the whole
batch: each of its callers gets its own `StoreUnavailable` and retries as it would have (the runner does, see
`server/runner.py`).

Riders. A write nobody waits for and that may come a little late (a run's text checkpoint) need not cost a
transaction of its own: `ride` keeps it until the next batch starts for something else, and only when none has
started after `RIDE_SECONDS` does it start one. Under a few hundred chats, where a batch starts every few
milliseconds but most hold one write, each checkpoint was a transaction of its own (two of a chat's six); riding,
it is one more statement in a transaction that runs anyway. A later ride under the same key replaces one not
taken yet (a run's newer text replaces its older). Closing the writer writes the riders too.

Cancellation. A caller is shielded while its operation is queued or running: it is written (or refused)
whatever happens to the caller, and the caller's cancellation takes effect once it returns. Closing the
writer commits what is queued first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
from sqlalchemy import Connection

from ._engine import StoreHealth, StoreUnavailable, describe_outage, unavailable

__all__ = ["RIDE_SECONDS", "WRITE_BATCH", "LoopThread", "Operation", "Writer", "run_batch"]

_T = TypeVar("_T")

logger = logging.getLogger("toolwire.store")

RIDE_SECONDS = 0.2
"""The longest a rider waits for another write's batch before it starts one of its own."""

WRITE_BATCH = 64
"""The most operations committed in one transaction. A batch holds SQLite's write lock (or PostgreSQL's row
locks) for as long as its statements take, about 0.1 ms each on SQLite, so 64 operations (~200 statements)
keep it to a few ms while a turn boundary of hundreds of chats still commits in a handful of transactions."""


class Operation(Generic[_T]):
    """One queued write: its function, then its value or its error once its batch is over."""

    __slots__ = ("after_commit", "chat", "error", "finished", "function", "loop", "refusable", "refuses_first",
                 "rerun", "value", "woken")

    def __init__(self, function: Callable[[Connection], _T], after_commit: Callable[[_T], None] | None,
                 loop: asyncio.AbstractEventLoop, *, refusable: bool = False, chat: str | None = None,
                 refuses_first: tuple[type[Exception], ...] = ()) -> None:
        self.function = function
        self.chat = chat if chat is not None else chat_written(function)
        """The chat whose rows it locks ("" for none): a batch runs its operations in this order."""
        self.refusable = refusable
        """It refuses in the normal course of things: after other operations it runs in a SAVEPOINT."""
        self.refuses_first = refuses_first
        """The refusals it raises before its first write, if any: final at once, with no SAVEPOINT around it."""
        self.loop = loop
        """The caller's event loop, where the batch's outcome is handed back."""
        self.after_commit = after_commit
        self.value: Any = None
        self.error: BaseException | None = None
        self.finished = False
        self.rerun = False
        """Refused after other operations of its transaction: run again first in the next batch (`run_batch`)."""
        self.woken = anyio.Event()

    def outcome(self) -> _T:
        if self.error is not None:
            raise self.error
        result: _T = self.value
        return result


def run_batch(conn: Connection, batch: Sequence[Operation[Any]]) -> None:
    """Run `batch` in one transaction on `conn` and commit it (synchronous: on the writer's thread, or in
    `run_sync`). An operation that raises is left out and the rest run again; an outage is raised."""
    todo = list(batch)
    deadlocks = 0
    while todo:
        failed: Operation[Any] | None = None
        transaction = conn.begin()
        try:
            for index, operation in enumerate(todo):
                operation.error = None  # a refusal in a savepoint of an attempt that was then rolled back
                savepoint = operation.refusable and index > 0
                if savepoint:
                    conn.exec_driver_sql(_SAVEPOINT)
                try:
                    operation.value = operation.function(conn)
                except Exception as exc:
                    if deadlocked(exc) and deadlocks < _DEADLOCK_RETRIES:
                        # Another process's batch locked the same rows in the other order and PostgreSQL chose
                        # this transaction to abort: no operation is at fault, the whole batch runs again.
                        deadlocks += 1
                        break
                    if unavailable(exc):
                        raise
                    if savepoint:
                        conn.exec_driver_sql(_ROLLBACK_TO_SAVEPOINT)  # its own statements only: the refusal is final
                        operation.value, operation.error = None, exc
                        continue
                    if isinstance(exc, operation.refuses_first):
                        operation.value, operation.error = None, exc  # it wrote nothing: nothing to undo
                        continue
                    if index == 0:
                        operation.error = exc
                    else:
                        # It may have been refused because of what an operation before it in this transaction
                        # wrote (the same message sent twice: "already started", by a run that the rollback
                        # has just undone). Its refusal is final only once nothing uncommitted precedes it: it
                        # runs again first in the next batch, after the others have committed.
                        operation.rerun = True
                    failed = operation
                    break
                if savepoint:
                    conn.exec_driver_sql(_RELEASE_SAVEPOINT)
            else:
                transaction.commit()
                return
            transaction.rollback()
        except BaseException:
            # An outage, or a failed COMMIT: the connection may still hold half a transaction (SQLAlchemy believes
            # a failed commit ended it, and the pool then skips its rollback), so it is never lent again.
            with contextlib.suppress(Exception):
                if transaction.is_active:
                    transaction.rollback()
            conn.invalidate()
            raise
        if failed is not None:
            todo.remove(failed)
        for operation in todo:
            operation.value = None


_SAVEPOINT = "SAVEPOINT toolwire_operation"
_ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO SAVEPOINT toolwire_operation"
_RELEASE_SAVEPOINT = "RELEASE SAVEPOINT toolwire_operation"
"""One name for every operation's savepoint (they never nest: each is released or rolled back to before the next
is taken). SQLAlchemy's `begin_nested` names each anew (`sa_savepoint_1`, `_2`, ... for as long as the writer
keeps its connection), and asyncpg prepares every statement text it has not seen: two more round trips for each
savepoint, and a cache of prepared statements (100) filled with names used once, pushing out the round's
inserts and the run's updates, which then were prepared again too."""

_DEADLOCK_RETRIES = 5
_DEADLOCK_STATES = ("40P01", "40001")
"""PostgreSQL's deadlock_detected and serialization_failure: the transaction lost a race and may run again."""


def deadlocked(error: BaseException) -> bool:
    """Whether `error` is PostgreSQL aborting the transaction to break a deadlock (or a serialization failure)."""
    seen: BaseException | None = error
    for _ in range(4):
        if seen is None:
            return False
        if getattr(seen, "sqlstate", None) in _DEADLOCK_STATES or getattr(seen, "pgcode", None) in _DEADLOCK_STATES:
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


class Writer:
    """The store's one writer (see the module docstring). `start()` starts its thread, `close()` stops it.

    Args:
        run: runs a batch (`run_batch` on a connection of the writer's) on the writer's own loop and returns
            when it committed, or raises.
        health: told of outages and of the first success after one (`/readyz`).
        batch_size: the most operations in one transaction (`WRITE_BATCH`).
        name: the thread's name.
    """

    def __init__(self, run: Callable[[Sequence[Operation[Any]]], Awaitable[None]], health: StoreHealth, *,
                 batch_size: int = WRITE_BATCH, name: str = "toolwire-writer") -> None:
        if batch_size < 1:
            raise ValueError("A write batch holds at least one operation.")
        self._run = run
        self._health = health
        self.batch_size = batch_size
        self.name = name
        self._queue: deque[Operation[Any]] = deque()  # appended by the callers' loop, taken by the writer's
        self._thread: LoopThread | None = None
        self._driver: concurrent.futures.Future[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._idle = False
        """The driver waits for `_wakeup`: the next write must set it (a flag, so a busy writer costs no wake-up)."""
        self._closing = False
        self._riders: dict[str, Operation[Any]] = {}  # added on the callers' loop, taken by the writer's
        self._riders_lock = threading.Lock()
        self._ride_timer: asyncio.TimerHandle | None = None
        self._riders_since = 0.0
        """When the oldest rider not taken yet came (the callers' loop's clock)."""
        self._riders_ready = False
        """The riders have waited long enough: they start a batch (else they only join one)."""
        self.batches = 0
        """Batches run (committed or failed) since the store opened: with `operations`, how well writes group."""
        self.operations = 0
        self.largest = 0
        """The most operations one batch held."""

    @property
    def backlog(self) -> int:
        """Operations queued and not yet taken into a batch."""
        return len(self._queue)

    def start(self) -> None:
        """Start the writer's thread and its loop's driver (once)."""
        if self._thread is not None:
            return
        self._closing = False
        self._thread = LoopThread(self.name)
        self._wakeup = asyncio.Event()
        self._driver = asyncio.run_coroutine_threadsafe(self._drive(), self._thread.loop)

    async def close(self, *, last: Callable[[], Coroutine[Any, Any, None]] | None = None) -> None:
        """Commit what is queued, run `last()` on the writer's loop (its engines are disposed of there), then stop
        the thread. Writes after this raise."""
        thread, driver = self._thread, self._driver
        if thread is None or driver is None:
            return
        self._closing = True
        if self._ride_timer is not None:
            self._ride_timer.cancel()
            self._ride_timer = None
        self._signal()
        with anyio.CancelScope(shield=True):
            try:
                await asyncio.wrap_future(driver)
            except Exception:
                logger.exception("The store's writer failed")
            try:
                if last is not None:
                    await thread.run(last())
            finally:
                self._thread = self._driver = None
                thread.stop()

    async def write(self, function: Callable[[Connection], _T], *,
                    after_commit: Callable[[_T], None] | None = None, urgent: bool = False,
                    refusable: bool = False, chat: str | None = None,
                    refuses_first: tuple[type[Exception], ...] = ()) -> _T:
        """Run `function` in the next batch; its value once committed, or its own exception.

        `after_commit(value)` runs on the caller's loop right after the commit, in the batch's order and before
        the next batch's (the store's caches are updated there, so they never go back in time). An `urgent`
        operation goes to the head of the queue: it waits for the batch in flight, never behind the others
        queued (lease renewals: a busy writer must not let the leases of live runs expire). A `refusable`
        operation is one that refuses in the normal course of things (see the module docstring); `refuses_first` names
        the refusals it raises before its first write (instead of `refusable`: no SAVEPOINT). `chat` is the chat
        whose rows it locks, for one that names none itself (`chat_written`)."""
        if self._thread is None or self._closing:
            raise RuntimeError("The store's writer is not running: open the store first.")
        operation = Operation(function, after_commit, asyncio.get_running_loop(), refusable=refusable, chat=chat,
                              refuses_first=refuses_first)
        if urgent:
            self._queue.appendleft(operation)
        else:
            self._queue.append(operation)
        self._signal()
        with anyio.CancelScope(shield=True):
            await operation.woken.wait()
        return operation.outcome()

    def ride(self, key: str, function: Callable[[Connection], object], *, chat: str = "") -> None:
        """Run `function` in the next batch that starts, without waiting for it (see "Riders" in the module
        docstring); it replaces a rider of the same `key` that no batch has taken yet. Its failure is logged, not
        raised: a rider is a write that the next one makes good (a newer checkpoint). `chat` orders it in its batch
        as `write` does. Ignored once the writer is closing."""
        if self._thread is None or self._closing:
            return
        loop = asyncio.get_running_loop()
        operation = Operation(function, _rider_done, loop, chat=chat)
        with self._riders_lock:
            if not self._riders:
                self._riders_since = loop.time()
            self._riders[key] = operation
        if self._ride_timer is None:
            self._ride_timer = loop.call_at(self._riders_since + RIDE_SECONDS, self._riders_due)

    def _riders_due(self) -> None:
        """When the oldest rider not taken has waited `RIDE_SECONDS`, the riders start a batch. (The timer is armed
        once for many rides: riders taken by a batch meanwhile leave it early for the next ones, which it sets
        again for their own due time.)"""
        self._ride_timer = None
        with self._riders_lock:
            waiting, since = bool(self._riders), self._riders_since
        if not waiting:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < since + RIDE_SECONDS:
            self._ride_timer = loop.call_at(since + RIDE_SECONDS, self._riders_due)
        else:
            self._riders_ready = True
            self._signal()

    def _take_riders(self) -> list[Operation[Any]]:
        with self._riders_lock:
            riders = list(self._riders.values())
            self._riders.clear()
            self._riders_ready = False
        return riders

    def _signal(self) -> None:
        if self._idle and self._thread is not None and self._wakeup is not None:
            self._idle = False
            self._thread.loop.call_soon_threadsafe(self._wakeup.set)

    async def _drive(self) -> None:
        """The writer's loop: a batch as soon as there is one queued, until closed with nothing queued."""
        assert self._wakeup is not None
        try:
            while True:
                if self._queue or self._riders_ready or (self._closing and self._riders):
                    await self._next_batch()
                    continue
                if self._closing:
                    return
                # Idle first, then look again: a write that queued after the look above sees `_idle` and signals.
                self._idle = True
                if not self._queue and not self._closing and not self._riders_ready:
                    await self._wakeup.wait()
                self._wakeup.clear()
                self._idle = False
        finally:
            # Only if the driver itself was stopped (its loop's task cancelled): nobody may wait forever.
            self._closing = True
            left = [self._queue.popleft() for _ in range(len(self._queue))]
            for loop in {operation.loop for operation in left}:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._finish, [op for op in left if op.loop is loop],
                                              RuntimeError("The store's writer stopped before this write ran."))

    async def _next_batch(self) -> None:
        count = min(self.batch_size, len(self._queue))
        # In the order of the chats they write: two replicas' batches then lock chat rows in one order and cannot
        # deadlock on them (each deadlock costs PostgreSQL's deadlock_timeout, 1 s, before it aborts one). The
        # sort is stable, so a chat's operations keep the order they came in.
        taken = [self._queue.popleft() for _ in range(count)]
        taken += self._take_riders()
        batch = sorted(taken, key=lambda operation: operation.chat)
        count = len(batch)
        self.batches += 1
        self.operations += count
        self.largest = max(self.largest, count)
        failure: BaseException | None = None
        try:
            await self._run(batch)
        except BaseException as exc:
            failure = exc
        if failure is None:
            again = [operation for operation in batch if operation.rerun]
            if again:
                batch = [operation for operation in batch if not operation.rerun]
                for operation in again:
                    operation.rerun, operation.error, operation.value = False, None, None
                self._queue.extendleft(reversed(again))
        for loop in {operation.loop for operation in batch}:
            mine = [operation for operation in batch if operation.loop is loop]
            with contextlib.suppress(RuntimeError):  # a caller's loop already closed: nobody is waiting there
                loop.call_soon_threadsafe(self._finish, mine, failure)
        if failure is not None and not isinstance(failure, Exception):
            raise failure

    def _finish(self, batch: Sequence[Operation[Any]], failure: BaseException | None) -> None:
        """On the callers' loop: tell the health, update the caches, wake the callers (in the batch's order)."""
        if failure is None:
            if self._health.write_error is not None:
                self._health.succeeded(write=True)
        else:
            outage = isinstance(failure, Exception) and unavailable(failure)
            if outage:
                self._health.failed(failure, write=True)
            for operation in batch:
                if operation.error is None or outage:
                    operation.error = _batch_error(failure) if isinstance(failure, Exception) else failure
        for operation in batch:
            if operation.after_commit is _rider_done and operation.error is not None:
                logger.warning("A write made without waiting for it (a run's text checkpoint) failed; the run's next "
                               "one makes it good: %s", operation.error)
            if failure is None and operation.error is None and operation.after_commit is not None:
                try:
                    operation.after_commit(operation.value)
                except Exception:  # the write is committed whatever a cache update does; a bug to log, not to raise
                    logger.exception("Updating the store's caches after a commit failed")
            operation.finished = True
            operation.woken.set()


def _rider_done(value: object) -> None:
    """A rider's `after_commit`, which marks it as one: it has nobody to tell of its outcome (`Writer.ride`)."""


def chat_written(function: Callable[..., Any]) -> str:
    """The chat a queued write locks (the `chat_id` its store method bound with `partial`, also where one
    write wraps another, as a round with usage wraps its rows' insert), or "" for a write of no chat.

    A write that locks a chat but reported none sorted first and locked it out of order: two replicas sending
    the same messages deadlocked on every batch for seconds on end (PostgreSQL breaking each after its
    deadlock_timeout)."""
    seen = [function]
    while seen:
        current = seen.pop()
        keywords = getattr(current, "keywords", None)
        if not keywords:
            continue
        chat = keywords.get("chat_id")
        if isinstance(chat, str):
            return chat
        seen.extend(value for value in keywords.values() if isinstance(value, partial))
    return ""


def _batch_error(error: Exception) -> Exception:
    """Each caller's own exception for a failure of its whole batch (one exception object raised in many
    tasks would collect all their tracebacks)."""
    copy: Exception
    if unavailable(error):
        copy = StoreUnavailable(f"The database did not answer or refused to write ({describe_outage(error)}); "
                                "try again in a moment.")
    else:
        copy = RuntimeError(f"The write batch failed: {error!r}")
    copy.__cause__ = error
    return copy


class LoopThread:
    """An asyncio event loop of its own, in a thread: where the writer runs (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    async def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run `coroutine` on the thread's loop and return its value (or raise its error) here."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def stop(self) -> None:
        """Stop the loop (nothing may be running on it) and close it."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
