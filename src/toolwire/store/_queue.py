"""Queued runs: messages sent while their chat's run was going (double texting), kept until their turn.

A queued run is a row of `queued_runs`: its id (the run's id once it starts), its user message and its
strategy (`enqueue`, or `interrupt`: it also cancelled the run ahead of it). It has no run number and no
message row yet; both are taken in the transaction that starts it (`promote`), so a chat's run numbers and
sequence numbers stay in the order its runs really start, and the rows of the run it waited for come
before its message.

Order: a chat's queue is read `interrupt` first, then `enqueue`, each in the order the database committed
them (`position`, taken under the chat row's lock). Every function here locks the chat's row first (an
`UPDATE` of it: PostgreSQL holds the row lock until commit, SQLite's writer holds its write lock), like
`start_run` and `resume_run` do, so run starts, decisions and queue changes of one chat happen one after
another on every replica.

Like `_writes.py`: synchronous functions of a `Connection`, run in the writer's batches; none commits.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import orjson
from sqlalchemy import (
    Column,
    Connection,
    ForeignKey,
    Integer,
    Row,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)

from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from . import _tree as tree
from ._protocol import ChatNotFound, IdempotencyConflict
from ._records import ACTIVE_STATUSES, Chat, Run, RunStart, User, new_id, utc_now
from ._schema import UTCDateTime, approvals, chats, messages, metadata, runs, users
from ._writes import Writes, chat_from, result_adapter

__all__ = ["CANCELLED", "Promoted", "QueueStrategy", "Queued", "QueuedRun", "RunQueue", "queued_runs"]

QueueStrategy: TypeAlias = Literal["enqueue", "interrupt"]

CANCELLED = "cancelled"
"""The error of a call that an interrupt left unanswered (the agent's own word for a cancelled call)."""

queued_runs = Table(
    "queued_runs", metadata,
    Column("id", String(64), primary_key=True),
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
    Column("client_message_id", String(200), nullable=False),
    Column("strategy", String(16), nullable=False),
    Column("position", Integer(), nullable=False),
    # A JSON toolwire message: the user message the run will answer.
    Column("message_json", Text(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("chat_id", "client_message_id"),
    UniqueConstraint("chat_id", "position"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedRun:
    """A message waiting for its chat's run to end; `id` is the id its run gets."""

    id: str
    chat_id: str
    client_message_id: str
    strategy: QueueStrategy
    position: int
    message: Message
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Queued:
    """What `queue_run` did: started the run at once (`start`, the chat was free), or queued it (`queued`)
    behind `ahead` (the chat's running or paused run then, `None` when only other queued runs were ahead)."""

    start: RunStart | None = None
    queued: QueuedRun | None = None
    ahead: Run | None = None
    created: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Promoted:
    """A queued run that `promote` started: the run, its user message's row and the user it answers."""

    start: RunStart
    user: User
    strategy: QueueStrategy


@runtime_checkable
class RunQueue(Protocol):
    """A store that keeps queued runs (`SQLStore` does; a store of one's own may not: then the server answers
    `enqueue` and `interrupt` with 422 `unsupported`)."""

    async def queue_run(self, chat_id: str, *, user_message: Message, client_message_id: str, owner: str,
                        lease_seconds: float, title: str | None, strategy: QueueStrategy) -> Queued:
        """Start a run for the message if the chat is free and nothing is queued, else queue it.

        With `interrupt` and a run paused for approval, the paused run is cancelled in the same transaction
        (its pending calls answered `cancelled`) and the message's run starts at once.
        """
        ...

    async def promote_queued(self, chat_id: str, *, owner: str, lease_seconds: float) -> Promoted | None:
        """Start the first queued run of the chat if the chat has no running or paused run."""
        ...

    async def waiting_chats(self, *, limit: int = 100) -> list[str]:
        """Chats with queued runs and no running or paused run (whose queue nobody has started yet)."""
        ...

    async def queued_runs(self, chat_id: str) -> list[QueuedRun]:
        """The chat's queue, in the order it will run."""
        ...

    async def interrupt_waiting(self, chat_id: str) -> bool:
        """Whether an `interrupt` is queued in the chat (the run starting now must stop for it)."""
        ...

    async def cancel_queued(self, chat_id: str, run_id: str) -> bool:
        """Take a queued run out of its queue (its message is not stored); `False` if it is not queued."""
        ...


_QUEUE_ORDER = (case((queued_runs.c.strategy == "interrupt", 0), else_=1), queued_runs.c.position)


# Asked at every run's start and end (`RunManager`, through `SQLStore`): built once, with parameters.
QUEUE_HEAD = select(queued_runs.c.id).where(queued_runs.c.chat_id == bindparam("b_chat")).limit(1)
INTERRUPT_WAITING = (select(queued_runs.c.id).where(queued_runs.c.chat_id == bindparam("b_chat"),
                                                   queued_runs.c.strategy == "interrupt").limit(1))


def queued_from(row: Row[Any]) -> QueuedRun:
    return QueuedRun(id=row.id, chat_id=row.chat_id, client_message_id=row.client_message_id,
                     strategy=row.strategy, position=row.position, message=Message.from_json(row.message_json),
                     created_at=row.created_at)


def _lock_chat(conn: Connection, chat_id: str) -> Chat:
    # A no-op update: it takes the chat row's lock until commit (see the module docstring).
    row = conn.execute(update(chats).where(chats.c.id == chat_id).values(run_count=chats.c.run_count)
                       .returning(*chats.c)).first()
    if row is None:
        raise ChatNotFound(f"There is no chat {chat_id!r}.")
    return chat_from(row)


def _active(conn: Connection, chat_id: str) -> Run | None:
    return Writes.run_where(conn, runs.c.chat_id == chat_id, runs.c.status.in_(ACTIVE_STATUSES))


def queue_run(writes: Writes, conn: Connection, chat_id: str, user_message: Message, client_message_id: str,
              owner: str, lease_seconds: float, title: str | None,
              strategy: QueueStrategy) -> tuple[Queued, Chat | None]:
    _lock_chat(conn, chat_id)
    earlier = conn.execute(select(queued_runs).where(queued_runs.c.chat_id == chat_id,
                                                     queued_runs.c.client_message_id == client_message_id)).first()
    if earlier is not None:
        queued = queued_from(earlier)
        if queued.message.text != user_message.text:
            raise IdempotencyConflict(
                f"client_message_id {client_message_id!r} was already used in this chat for another message; give "
                "every new message its own client_message_id.")
        return Queued(queued=queued, ahead=_active(conn, chat_id), created=False), None
    sent = conn.execute(select(messages.c.id).where(messages.c.chat_id == chat_id,
                                                    messages.c.client_message_id == client_message_id)).first()
    active = _active(conn, chat_id)
    if strategy == "interrupt" and active is not None and active.status == "paused":
        _cancel_paused(conn, active)
        active = None
    waiting = conn.execute(select(queued_runs.c.id).where(queued_runs.c.chat_id == chat_id).limit(1)).first()
    # An interrupt goes ahead of what is queued: a free chat starts it at once, whatever waits.
    free = active is None and (waiting is None or strategy == "interrupt")
    if sent is not None or free:
        # Sent before (start_run raises `Earlier` with its run), or the chat is free: started as any message is.
        start, chat = writes.start_run(conn, chat_id, user_message, client_message_id, owner, lease_seconds, title)
        return Queued(start=start), chat
    position = conn.execute(select(func.coalesce(func.max(queued_runs.c.position), 0) + 1)
                            .where(queued_runs.c.chat_id == chat_id)).scalar_one()
    queued = QueuedRun(id=new_id("run"), chat_id=chat_id, client_message_id=client_message_id, strategy=strategy,
                       position=position, message=user_message, created_at=utc_now())
    conn.execute(insert(queued_runs).values(
        id=queued.id, chat_id=chat_id, client_message_id=client_message_id, strategy=strategy, position=position,
        message_json=user_message.to_json().decode(), created_at=queued.created_at))
    if title:
        conn.execute(update(chats).where(chats.c.id == chat_id, chats.c.title == "").values(title=title))
    return Queued(queued=queued, ahead=active), None


def _cancel_paused(conn: Connection, paused: Run) -> None:
    """End a run paused for approval as `cancelled`, its round stored with the results it had and `cancelled`
    errors for the calls that waited for a decision (their approvals are denied): the history stays valid."""
    row = conn.execute(select(runs.c.paused_state).where(runs.c.id == paused.id)).one()
    state = orjson.loads(row.paused_state) if row.paused_state else None
    if state is not None:
        message = Message.from_json(orjson.dumps(state["message"]))
        known = {r.call_id: r for r in (result_adapter.validate_python(r) for r in state.get("results", []))}
        answers = [known.get(p.id) or ToolResultPart(call_id=p.id, name=p.name, result={"error": CANCELLED},
                                                     is_error=True)
                   for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
        Writes.insert_rows(conn, paused.chat_id, [("tools_aggregate", [message, Message.tool_results(answers)])],
                           run_id=paused.id)
    now = utc_now()
    conn.execute(update(approvals).where(approvals.c.run_id == paused.id, approvals.c.status == "pending")
                 .values(status="denied", reason="A new message interrupted the run.", decided_at=now))
    error = {"code": "cancelled", "message": "A new message interrupted the run while it waited for approvals; its "
                                             "waiting tool calls were cancelled."}
    conn.execute(update(runs).where(runs.c.id == paused.id, runs.c.status == "paused").values(
        status="cancelled", error_json=orjson.dumps(error).decode(), paused_state=None, finished_at=now))


def promote(writes: Writes, conn: Connection, chat_id: str, owner: str,
            lease_seconds: float) -> tuple[Promoted | None, Chat | None]:
    _lock_chat(conn, chat_id)
    if _active(conn, chat_id) is not None:
        return None, None
    head = conn.execute(select(queued_runs).where(queued_runs.c.chat_id == chat_id).order_by(*_QUEUE_ORDER)
                        .limit(1)).first()
    if head is None:
        return None, None
    queued = queued_from(head)
    conn.execute(delete(queued_runs).where(queued_runs.c.id == queued.id))
    taken = conn.execute(update(chats).where(chats.c.id == chat_id).values(
        run_count=chats.c.run_count + 1, last_sequence=chats.c.last_sequence + 1, updated_at=utc_now(),
    ).returning(*chats.c)).one()
    chat = chat_from(taken)
    # The message answers what the chat shows when it starts (the run it waited for ended there), and becomes
    # the active leaf, as a message sent then would (store/_tree.py).
    [user_row], _ = writes.insert_rows(conn, chat_id, [("user", [queued.message])], run_id=queued.id,
                                       client_message_id=queued.client_message_id, last=chat.last_sequence,
                                       parent_id=chat.active_leaf_id or tree.ROOT)
    run = Run(id=queued.id, chat_id=chat_id, run_number=chat.run_count, status="running",
              client_message_id=queued.client_message_id, lease_owner=owner,
              lease_expires_at=time.time() + lease_seconds, leaf_id=user_row.id)
    writes.insert_run(conn, run)
    conn.execute(update(chats).where(chats.c.id == chat_id).values(active_leaf_id=user_row.id))
    chat = dataclasses.replace(chat, active_leaf_id=user_row.id)
    user = conn.execute(select(users.c.id, users.c.name).where(users.c.id == chat.user_id)).one()
    return Promoted(start=RunStart(run=run, user_row=user_row, created=True), user=User(id=user.id, name=user.name),
                    strategy=queued.strategy), chat


def cancel_queued(conn: Connection, chat_id: str, run_id: str) -> bool:
    _lock_chat(conn, chat_id)
    result = conn.execute(delete(queued_runs).where(queued_runs.c.id == run_id, queued_runs.c.chat_id == chat_id))
    return bool(result.rowcount == 1)


def waiting_chats_query(limit: int) -> Any:
    busy = exists().where(runs.c.chat_id == queued_runs.c.chat_id, runs.c.status.in_(ACTIVE_STATUSES))
    return select(queued_runs.c.chat_id).where(~busy).distinct().limit(limit)


def queue_query(chat_id: str) -> Any:
    return select(queued_runs).where(queued_runs.c.chat_id == chat_id).order_by(*_QUEUE_ORDER)


