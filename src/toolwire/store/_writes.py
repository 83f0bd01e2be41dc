"""The store's write operations: synchronous functions of a `Connection`, run by the writer in its batches.

Every function here runs inside a transaction it does not own (the writer's batch, see `_writer.py`): it
runs its statements and returns a value, or raises to be left out of the batch (whatever it did is rolled
back with the batch's first attempt). None of them commits, sleeps or awaits.

The statements a chat runs for every event of a run (the journal, the round's rows, the run's end) are built
once per store (`Writes`), with bound parameters, so SQLAlchemy finds them compiled in its cache at once; the
others are built when called, as they are rare.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import orjson
from pydantic import TypeAdapter
from sqlalchemy import Connection, Row, bindparam, case, delete, func, insert, select, update

from ..messages import Message, TextPart, ToolCallPart, ToolResultPart, dump_messages, load_messages
from . import _tree as tree
from ._protocol import (
    ApprovalDecided,
    ApprovalNotFound,
    ApprovalsIncomplete,
    ChatIdTaken,
    ChatNotFound,
    IdempotencyConflict,
    NotPaused,
    RunConflict,
)
from ._records import (
    ACTIVE_STATUSES,
    Approval,
    ApprovalStatus,
    Chat,
    Continued,
    Decision,
    MessageKind,
    MessageRow,
    PausedRun,
    Recovered,
    Resumption,
    Run,
    RunStart,
    RunStatus,
    User,
    new_id,
    utc_now,
)
from ._recovery import continued_round, interrupted_round
from ._schema import UTCDateTime, api_tokens, approvals, chats, messages, resume_claims, run_tool_calls, runs, users

__all__ = ["DEFAULT_USER", "Earlier", "Writes", "approval_from", "chat_from", "message_row_from", "run_from"]

DEFAULT_USER = "local"
"""The user owning conversations created through `ChatMemory.append` (library use, no server)."""

call_adapter: TypeAdapter[ToolCallPart] = TypeAdapter(ToolCallPart)
result_adapter: TypeAdapter[ToolResultPart] = TypeAdapter(ToolResultPart)
_Rows = tuple[list[MessageRow], Chat | None]


class Earlier(Exception):
    """Leaves `start_run` (its batch runs again without it) with the run an earlier identical request started."""

    def __init__(self, start: RunStart) -> None:
        super().__init__()
        self.start = start


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _loads(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def chat_from(row: Row[Any]) -> Chat:
    return Chat(id=row.id, user_id=row.user_id, title=row.title, created_at=row.created_at,
                updated_at=row.updated_at, last_sequence=row.last_sequence, run_count=row.run_count,
                active_leaf_id=getattr(row, "active_leaf_id", None), model=getattr(row, "model", None))


def message_row_from(row: Row[Any]) -> MessageRow:
    return MessageRow(id=row.id, chat_id=row.chat_id, sequence_number=row.sequence_number, kind=row.kind,
                      role=row.role, run_id=row.run_id, created_at=row.created_at, message_json=row.message_json,
                      client_message_id=row.client_message_id, parent_id=getattr(row, "parent_id", None))


def run_from(row: Row[Any]) -> Run:
    return Run(id=row.id, chat_id=row.chat_id, run_number=row.run_number, status=row.status,
               resumed_from=row.resumed_from, client_message_id=row.client_message_id,
               usage=_loads(row.usage_json), error=_loads(row.error_json), steps=row.steps,
               event_count=row.event_count, created_at=row.created_at, finished_at=row.finished_at,
               lease_owner=row.lease_owner, lease_expires_at=row.lease_expires_at, leaf_id=row.leaf_id,
               model=getattr(row, "model", None))


def approval_from(row: Row[Any]) -> Approval:
    return Approval(id=row.id, run_id=row.run_id, chat_id=row.chat_id, call=call_adapter.validate_json(row.call_json),
                    status=row.status, reason=row.reason, created_at=row.created_at, decided_at=row.decided_at)


def run_conflict(run: Run) -> RunConflict:
    if run.status == "paused":
        return RunConflict("This chat's run is paused until its tool calls are approved or denied; decide them "
                           "(POST /api/chats/{id}/approvals) before sending a new message.", run=run)
    return RunConflict(f"This chat already has a run in progress ({run.id}); wait for it to finish, follow it at "
                       "GET /api/chats/{id}/stream, or cancel it, before sending a new message.", run=run)


RUN_COLUMNS = [column for column in runs.c if column.name not in ("paused_state", "step_message", "step_text")]
"""What `run_from` reads (a run's saved state can be large and stays behind)."""

_NOW = bindparam("b_now", type_=UTCDateTime())
_ID = chats.c.active_leaf_id.type

# -- the statements of every run, built once -----------------------------------------------------------------
_RUNNING = update(runs).where(runs.c.id == bindparam("b_run"), runs.c.status == "running")
_RECORD_STEP = _RUNNING.values(step_message=bindparam("b_message"))
_RECORD_STEP_TEXT = _RUNNING.values(step_text=bindparam("b_text"))
_ROUND_USAGE = _RUNNING.values(usage_json=bindparam("b_usage"))
# The numbers of a round's rows, and the chat's active leaf moved to the round's last row if it was the round's
# parent (the person looks at that branch, see _tree.py): one statement, where a second UPDATE of the same row
# used to move the leaf.
_FOLLOWED_LEAF = case((func.coalesce(chats.c.active_leaf_id, "") == bindparam("b_parent", type_=_ID),
                       bindparam("b_leaf", type_=_ID)), else_=chats.c.active_leaf_id)
_TAKE_SEQUENCE = (update(chats).where(chats.c.id == bindparam("b_chat"))
                  .values(last_sequence=chats.c.last_sequence + bindparam("b_count"), updated_at=_NOW,
                          active_leaf_id=_FOLLOWED_LEAF)
                  .returning(*chats.c))
_START_VALUES: dict[str, Any] = {"run_count": chats.c.run_count + 1, "last_sequence": chats.c.last_sequence + 1,
                                 "updated_at": _NOW, "active_leaf_id": bindparam("b_leaf")}  # the new user message
_START = update(chats).where(chats.c.id == bindparam("b_chat")).values(**_START_VALUES).returning(*chats.c)
_START_TITLED = (update(chats).where(chats.c.id == bindparam("b_chat"))
                 .values(**_START_VALUES, title=case((chats.c.title == "", bindparam("b_title")), else_=chats.c.title))
                 .returning(*chats.c))
_START_FOUND = select(
    select(messages.c.id).where(messages.c.chat_id == bindparam("b_chat"),
                                messages.c.client_message_id == bindparam("b_client"))
    .scalar_subquery().label("earlier"),
    select(runs.c.id).where(runs.c.chat_id == bindparam("b_chat"), runs.c.status.in_(ACTIVE_STATUSES)).limit(1)
    .scalar_subquery().label("active"),
    select(chats.c.active_leaf_id).where(chats.c.id == bindparam("b_chat")).scalar_subquery().label("leaf"))
_NOTHING_FOUND = SimpleNamespace(earlier=None, active=None, leaf=None)
"""`_START_FOUND`'s answer for a chat inserted in the same transaction."""
_INSERT_RUN = insert(runs)
_INSERT_MESSAGE = insert(messages)
_CLOSE_RUN = (update(runs).where(runs.c.id == bindparam("b_run"), runs.c.status == "running").values(
    status=bindparam("b_status"), usage_json=bindparam("b_usage"), error_json=bindparam("b_error"),
    steps=bindparam("b_steps"), event_count=bindparam("b_events"), paused_state=bindparam("b_state"),
    step_message=None, step_text=None, finished_at=_NOW, lease_owner=None, lease_expires_at=None))
_FORGET_JOURNAL = delete(run_tool_calls).where(run_tool_calls.c.run_id == bindparam("b_run"))
_RUN_BY_ID = select(runs).where(runs.c.id == bindparam("b_run"))


class Writes:
    """The write operations of a store on one database (see the module docstring)."""

    def __init__(self, dialect: str) -> None:
        from sqlalchemy.dialects import postgresql, sqlite

        dialect_insert: Any = sqlite.insert if dialect == "sqlite" else postgresql.insert
        self._insert = dialect_insert
        calls = dialect_insert(run_tool_calls)
        self._record_call = calls.on_conflict_do_nothing(index_elements=["run_id", "call_id"])
        self._record_result = calls.on_conflict_do_update(index_elements=["run_id", "call_id"],
                                                          set_={"result_json": calls.excluded.result_json})
        # A run start moves the active leaf to its message: PostgreSQL reads the leaf it had under the lock its
        # UPDATE takes (`tree.with_previous_leaf`); SQLite, whose write transactions hold the lock from BEGIN
        # IMMEDIATE, reads it before, with the checks.
        self._locks_start = dialect != "sqlite"
        self._start, self._start_titled = ((tree.with_previous_leaf(_START), tree.with_previous_leaf(_START_TITLED))
                                           if self._locks_start else (_START, _START_TITLED))
        # Built once with bound parameters: a statement built per call costs its construction and cache key
        # (about 0.2 ms of Python on every `POST /api/chats`) before the compiled cache can be used.
        self._create_chat = dialect_insert(chats).values(
            id=bindparam("b_id"), user_id=bindparam("b_user"), title=bindparam("b_title"),
            created_at=bindparam("b_created"), updated_at=bindparam("b_updated"),
            model=bindparam("b_model")).on_conflict_do_nothing(
            index_elements=["id"])

    # -- users and tokens --------------------------------------------------------------------

    def ensure_user(self, conn: Connection, name: str) -> User:
        conn.execute(self._insert(users).values(id=new_id("user"), name=name, created_at=utc_now())
                     .on_conflict_do_nothing(index_elements=["name"]))
        row = conn.execute(select(users.c.id, users.c.name).where(users.c.name == name)).one()
        return User(id=row.id, name=row.name)

    def upsert_token(self, conn: Connection, user_id: str, token_hash: str, source: str) -> None:
        stmt = self._insert(api_tokens).values(id=new_id("tok"), user_id=user_id, token_hash=token_hash,
                                               source=source, created_at=utc_now(), revoked_at=None)
        conn.execute(stmt.on_conflict_do_update(index_elements=["token_hash"],
                                                set_={"user_id": user_id, "source": source, "revoked_at": None}))

    def replace_tokens(self, conn: Connection, hashes: Mapping[str, Sequence[str]], source: str) -> None:
        kept: list[str] = []
        for name, user_hashes in hashes.items():
            user = self.ensure_user(conn, name)
            for token_hash in user_hashes:
                kept.append(token_hash)
                self.upsert_token(conn, user.id, token_hash, source)
        conn.execute(update(api_tokens)
                     .where(api_tokens.c.source == source, api_tokens.c.revoked_at.is_(None),
                            api_tokens.c.token_hash.not_in(kept))
                     .values(revoked_at=utc_now()))

    @staticmethod
    def revoke_token(conn: Connection, token_hash: str) -> bool:
        result = conn.execute(update(api_tokens).where(api_tokens.c.token_hash == token_hash,
                                                       api_tokens.c.revoked_at.is_(None))
                              .values(revoked_at=utc_now()))
        return bool(result.rowcount == 1)

    # -- chats -------------------------------------------------------------------------------

    def create_chat(self, conn: Connection, chat: Chat) -> Chat:
        inserted = conn.execute(self._create_chat, {"b_id": chat.id, "b_user": chat.user_id, "b_title": chat.title,
                                                    "b_created": chat.created_at, "b_updated": chat.updated_at,
                                                    "b_model": chat.model})
        if inserted.rowcount != 1:
            raise ChatIdTaken(f"The chat id {chat.id!r} is already taken; choose another id.")
        return chat

    @staticmethod
    def rename_chat(conn: Connection, user_id: str, chat_id: str, title: str) -> Chat | None:
        row = conn.execute(update(chats).where(chats.c.id == chat_id, chats.c.user_id == user_id)
                           .values(title=title, updated_at=utc_now()).returning(*chats.c)).first()
        return chat_from(row) if row is not None else None

    @staticmethod
    def set_chat_model(conn: Connection, *, user_id: str, chat_id: str, model: str | None) -> Chat | None:
        # A setting, not news: `updated_at` (the order of the chat list) stays.
        row = conn.execute(update(chats).where(chats.c.id == chat_id, chats.c.user_id == user_id)
                           .values(model=model).returning(*chats.c)).first()
        return chat_from(row) if row is not None else None

    @staticmethod
    def record_run_model(conn: Connection, *, run_id: str, model: str) -> None:
        conn.execute(update(runs).where(runs.c.id == run_id).values(model=model))

    @staticmethod
    def delete_chat(conn: Connection, user_id: str, chat_id: str) -> bool:
        owned = conn.execute(select(chats.c.id).where(chats.c.id == chat_id, chats.c.user_id == user_id)).first()
        if owned is None:
            return False
        # Children first: SQLite enforces the foreign keys but the order keeps both databases simple.
        run_ids = select(runs.c.id).where(runs.c.chat_id == chat_id).scalar_subquery()
        conn.execute(delete(run_tool_calls).where(run_tool_calls.c.run_id.in_(run_ids)))
        for table in (approvals, messages, runs):
            conn.execute(delete(table).where(table.c.chat_id == chat_id))
        conn.execute(delete(chats).where(chats.c.id == chat_id))
        return True

    # -- messages ----------------------------------------------------------------------------

    @staticmethod
    def insert_rows(conn: Connection, chat_id: str, groups: Sequence[tuple[MessageKind, list[Message]]], *,
                    run_id: str | None, client_message_id: str | None = None,
                    last: int | None = None, parent_id: str | None = None,
                    ids: list[str] | None = None) -> tuple[list[MessageRow], Chat | None]:
        """Insert message rows in one statement; `last`: the chat's last sequence number, when the caller has
        already taken the numbers (with the chat's row locked), else taken here. Returns the rows and, when the
        numbers were taken here, the chat as it is now.

        The rows form a chain under `parent_id` (`tree.ROOT`: as a first message); without one, under the run's
        tip or the chat's active leaf (`tree.parent_for`), and the active leaf follows them if it was there."""
        if not groups:
            return [], None
        now = utc_now()
        chat: Chat | None = None
        ids = ids or [new_id("msg") for _ in groups]
        row: Row[Any] | None = None
        if parent_id is None and last is None and run_id is not None:
            # A run's round: its parent and the leaf's move come with the numbers (one statement, not three).
            row = tree.take_under_run(conn, chat_id, run_id, len(groups), now, ids[-1])
            parent_id = row.run_tip if row is not None else None
        if parent_id is None:
            parent_id = tree.parent_for(conn, chat_id, run_id)
        if last is None:
            if row is None:  # not a run's round: the numbers and the leaf's move in one statement
                row = conn.execute(_TAKE_SEQUENCE, {"b_chat": chat_id, "b_count": len(groups), "b_now": now,
                                                    "b_parent": parent_id, "b_leaf": ids[-1]}).first()
                if row is None:
                    raise ChatNotFound(f"There is no chat {chat_id!r}; create it before adding messages.")
                chat = chat_from(row)  # as it is now: its leaf already moved (RETURNING gives the updated row)
            else:
                chat = chat_from(row)
                if row.run_tip is None:  # numbers taken under a run without a tip yet: the leaf follows here
                    tree.follow_leaf(conn, chat_id, parent_id, ids[-1])
                    if chat.active_leaf_id == (parent_id or None):
                        chat = dataclasses.replace(chat, active_leaf_id=ids[-1])
            last = chat.last_sequence
        first = last - len(groups) + 1
        parents = [parent_id or None, *ids[:-1]]
        rows = [
            MessageRow(id=ids[i], chat_id=chat_id, sequence_number=first + i, kind=kind,
                       role="assistant" if kind == "tools_aggregate" else kind, run_id=run_id, created_at=now,
                       message_json=dump_messages(group).decode(),
                       client_message_id=client_message_id if i == 0 else None, parent_id=parents[i])
            for i, (kind, group) in enumerate(groups)
        ]
        values = [
            {"id": r.id, "chat_id": chat_id, "sequence_number": r.sequence_number, "role": r.role, "kind": r.kind,
             "run_id": run_id, "client_message_id": r.client_message_id, "created_at": now,
             "message_json": r.message_json, "parent_id": r.parent_id}
            for r in rows
        ]
        # The driver's executemany of the one prepared INSERT (SQLite loops in C; asyncpg pipelines the rows in one
        # round trip): a multi-row VALUES is a new statement for SQLAlchemy each time, whose cache key and
        # compilation cost about 0.5 ms of Python for a round of two rows, against 0.08 ms.
        conn.execute(_INSERT_MESSAGE, values[0] if len(values) == 1 else values)
        return rows, chat

    def append(self, conn: Connection, chat_id: str, groups: Sequence[tuple[MessageKind, list[Message]]],
               parent_id: str | None = None) -> None:
        """`ChatMemory.append`: the rows, and the conversation's chat first if it has none."""
        if conn.execute(select(chats.c.id).where(chats.c.id == chat_id)).first() is None:
            user = self.ensure_user(conn, DEFAULT_USER)
            now = utc_now()
            conn.execute(insert(chats).values(id=chat_id, user_id=user.id, title="", created_at=now, updated_at=now))
        self.insert_rows(conn, chat_id, groups, run_id=None, parent_id=parent_id)

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, conn: Connection, chat_id: str, user_message: Message, client_message_id: str, owner: str,
                  lease_seconds: float, title: str | None, parent_id: str | None = None,
                  model: str | None = None, new_chat: Chat | None = None) -> tuple[RunStart, Chat]:
        # Four statements: the numbers, the checks, the run and the message (the batch's BEGIN and COMMIT are shared).
        # The run number, the user message's sequence number and the active leaf in one statement, which also locks
        # the chat's row (PostgreSQL) until commit: run starts and decisions on one chat happen one after another.
        # A `new_chat` is inserted first, and then has nothing to check: no earlier message, no run, no leaf.
        row_id = new_id("msg")
        params: dict[str, Any] = {"b_chat": chat_id, "b_now": utc_now(), "b_leaf": row_id}
        if title:
            params["b_title"] = title
        checks = {"b_chat": chat_id, "b_client": client_message_id}
        if new_chat is not None:
            self.create_chat(conn, new_chat)
            found: Any = _NOTHING_FOUND
        else:
            found = None if self._locks_start else conn.execute(_START_FOUND, checks).one()
        taken = conn.execute(self._start_titled if title else self._start, params).first()
        if taken is None:
            raise ChatNotFound(f"There is no chat {chat_id!r}.")
        if found is None:
            found = conn.execute(_START_FOUND, checks).one()
        if found.earlier is not None:
            row = message_row_from(conn.execute(select(messages).where(messages.c.id == found.earlier)).one())
            if row.messages[0].text != user_message.text:
                raise IdempotencyConflict(
                    f"client_message_id {client_message_id!r} was already used in this chat for another "
                    "message; give every new message its own client_message_id.")
            earlier = self.run_where(conn, runs.c.id == row.run_id)
            assert earlier is not None
            raise Earlier(RunStart(run=earlier, user_row=row, created=False))  # rolls the numbers back
        if found.active is not None:
            active = self.run_where(conn, runs.c.id == found.active)
            assert active is not None
            raise run_conflict(active)  # rolls the numbers (and the title) back
        chat = chat_from(taken)
        # Under the given row (an edit branches there), else after the leaf that was active; it is the active leaf.
        if parent_id is None:
            parent_id = (taken.previous_leaf if self._locks_start else found.leaf) or tree.ROOT
        else:
            tree.checked_parent(conn, chat_id, parent_id)
        run_id = new_id("run")
        [row], _ = self.insert_rows(conn, chat_id, [("user", [user_message])], run_id=run_id,
                                    client_message_id=client_message_id, last=chat.last_sequence, parent_id=parent_id,
                                    ids=[row_id])
        run = Run(id=run_id, chat_id=chat_id, run_number=chat.run_count, status="running",
                  client_message_id=client_message_id, lease_owner=owner, lease_expires_at=time.time() + lease_seconds,
                  leaf_id=row.id, model=model)
        self.insert_run(conn, run)
        return RunStart(run=run, user_row=row, created=True), chat

    @staticmethod
    def insert_run(conn: Connection, run: Run, *, step_message: str | None = None) -> None:
        conn.execute(_INSERT_RUN, {
            "id": run.id, "chat_id": run.chat_id, "run_number": run.run_number, "status": run.status,
            "resumed_from": run.resumed_from, "client_message_id": run.client_message_id, "step_message": step_message,
            "created_at": run.created_at, "lease_owner": run.lease_owner, "lease_expires_at": run.lease_expires_at,
            "leaf_id": run.leaf_id, "model": run.model})

    @staticmethod
    def run_where(conn: Connection, *conditions: Any) -> Run | None:
        row = conn.execute(select(*RUN_COLUMNS).where(*conditions)).first()
        return run_from(row) if row is not None else None

    @staticmethod
    def paused(conn: Connection, chat_id: str) -> PausedRun | None:
        row = conn.execute(select(runs).where(runs.c.chat_id == chat_id, runs.c.status == "paused")).first()
        if row is None:
            return None
        found = conn.execute(select(approvals).where(approvals.c.run_id == row.id).order_by(approvals.c.position))
        return PausedRun(run=run_from(row), state_json=row.paused_state or "",
                         approvals=[approval_from(a) for a in found])

    def resume_run(self, conn: Connection, chat_id: str, decisions: Sequence[Decision], owner: str,
                   lease_seconds: float) -> tuple[Resumption, Chat]:
        ids = [d.approval_id for d in decisions]
        # Takes the chat's next run number; this also locks the chat row (PostgreSQL) until the transaction ends,
        # so run starts and decisions on one chat happen one after another.
        taken = conn.execute(update(chats).where(chats.c.id == chat_id).values(run_count=chats.c.run_count + 1)
                             .returning(*chats.c)).first()
        if taken is None:
            raise ChatNotFound(f"There is no chat {chat_id!r}.")
        chat = chat_from(taken)
        found = {row.id: approval_from(row) for row in conn.execute(
            select(approvals).where(approvals.c.id.in_(ids), approvals.c.chat_id == chat_id))}
        for approval_id in ids:
            if approval_id not in found:
                raise ApprovalNotFound(f"There is no approval {approval_id!r} in this chat. Use the approval_id "
                                       "of an approval_required event (or of GET /api/chats/{id}).")
        for approval in found.values():
            if approval.status != "pending":
                raise ApprovalDecided(f"The approval {approval.id!r} was already decided ({approval.status}); "
                                      "each approval is decided once.")
        paused = self.paused(conn, chat_id)
        if paused is None:
            raise NotPaused("This chat has no run waiting for approvals.")
        pending = {a.id for a in paused.approvals if a.status == "pending"}
        missing = pending - set(ids)
        stale = set(ids) - pending
        if stale:
            raise ApprovalDecided(f"The approval {sorted(stale)[0]!r} does not belong to the run waiting now.")
        if missing:
            raise ApprovalsIncomplete(
                f"Decide every pending approval of the paused run in one request; missing: "
                f"{', '.join(sorted(missing))}.")
        now = utc_now()
        decided: dict[str, Approval] = {}
        for decision in decisions:
            status: ApprovalStatus = "approved" if decision.approved else "denied"
            result = conn.execute(
                update(approvals).where(approvals.c.id == decision.approval_id, approvals.c.status == "pending")
                .values(status=status, reason=decision.reason, decided_at=now))
            if result.rowcount != 1:  # decided by another replica a moment ago
                raise ApprovalDecided(f"The approval {decision.approval_id!r} was already decided.")
            approval = found[decision.approval_id]
            decided[approval.call.id] = Approval(
                id=approval.id, run_id=approval.run_id, chat_id=chat_id, call=approval.call, status=status,
                reason=decision.reason, created_at=approval.created_at, decided_at=now)
        moved = conn.execute(update(runs).where(runs.c.id == paused.run.id, runs.c.status == "paused")
                             .values(status="resumed"))
        if moved.rowcount != 1:
            raise ApprovalDecided("The paused run was resumed by another request a moment ago.")
        run = Run(id=new_id("run"), chat_id=chat_id, run_number=chat.run_count, status="running",
                  resumed_from=paused.run.id, lease_owner=owner, lease_expires_at=time.time() + lease_seconds,
                  leaf_id=tree.parent_for(conn, chat_id, paused.run.id) or None)
        self.insert_run(conn, run)
        return Resumption(run=run, paused=paused, decisions=decided), chat

    @staticmethod
    def record_step_text(conn: Connection, run_id: str, step: int, text: str) -> None:
        conn.execute(_RECORD_STEP_TEXT, {"b_run": run_id, "b_text": _dumps({"step": step, "text": text})})

    def record_journal(self, conn: Connection, run_id: str, calls: Sequence[tuple[str, str]],
                       results: Sequence[tuple[str, str]], step_message: str | None, now: datetime) -> None:
        """Several journal entries (call id and JSON of each call and result) in one operation; the calls first, so
        a result's upsert finds its call's row."""
        if calls:
            conn.execute(self._record_call, [{"run_id": run_id, "call_id": call_id, "call_json": call_json,
                                              "created_at": now} for call_id, call_json in calls])
        if results:
            conn.execute(self._record_result, [{"run_id": run_id, "call_id": call_id, "result_json": result_json,
                                                "created_at": now} for call_id, result_json in results])
        if step_message is not None:
            conn.execute(_RECORD_STEP, {"b_run": run_id, "b_message": step_message})

    def pause_run(self, conn: Connection, run_id: str, state_json: str, pending: Sequence[tuple[str, ToolCallPart]],
                  usage: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        if not self.close_run(conn, run_id, status="paused", usage=usage, error=None, steps=steps,
                              event_count=event_count, paused_state=state_json):
            return False
        now = utc_now()
        chat_id = conn.execute(select(runs.c.chat_id).where(runs.c.id == run_id)).scalar_one()
        conn.execute(insert(approvals), [
            {"id": approval_id, "run_id": run_id, "chat_id": chat_id, "call_id": call.id,
             "call_json": call_adapter.dump_json(call).decode(), "position": position, "status": "pending",
             "reason": None, "created_at": now, "decided_at": None}
            for position, (approval_id, call) in enumerate(pending)
        ])
        return True

    @staticmethod
    def close_run(conn: Connection, run_id: str, *, status: RunStatus, usage: Mapping[str, Any] | None,
                  error: Mapping[str, Any] | None, steps: int, event_count: int | None,
                  paused_state: str | None = None) -> bool:
        result = conn.execute(_CLOSE_RUN, {
            "b_run": run_id, "b_status": status, "b_usage": _dumps(usage) if usage is not None else None,
            "b_error": _dumps(error) if error is not None else None, "b_steps": steps, "b_events": event_count,
            "b_state": paused_state, "b_now": utc_now()})
        if result.rowcount != 1:
            return False
        conn.execute(_FORGET_JOURNAL, {"b_run": run_id})
        return True

    # -- leases and recovery -----------------------------------------------------------------

    @staticmethod
    def renew_leases(conn: Connection, owner: str, run_ids: Sequence[str], lease_seconds: float) -> int:
        # A row another transaction holds (another server's take-over, say) is skipped, not waited for: waiting
        # while holding the rows renewed so far deadlocked with transactions that lock their rows in their own
        # order, and PostgreSQL broke it by failing the renewal. This process's own writes cannot hold them: the
        # renewal runs in the writer's batch (`SQLStore.renew_leases`). A skipped lease is renewed at the next
        # round, a third of a lease later. The lock is FOR NO KEY UPDATE (all an UPDATE of the lease takes): FOR
        # UPDATE conflicts with the FOR KEY SHARE lock that a row referencing the run (a journal entry, an
        # approval) holds until its transaction ends, and under load such leases were skipped round after round
        # until they expired under live runs. (SQLite has one writer at a time and no FOR UPDATE: no skip.)
        held = select(runs.c.id).where(runs.c.id.in_(list(run_ids)), runs.c.lease_owner == owner,
                                       runs.c.status == "running").with_for_update(skip_locked=True, key_share=True)
        result = conn.execute(update(runs).where(runs.c.id.in_(held.scalar_subquery()))
                              .values(lease_expires_at=time.time() + lease_seconds))
        return int(result.rowcount)

    @staticmethod
    def release_lease(conn: Connection, run_id: str, owner: str) -> bool:
        result = conn.execute(update(runs).where(runs.c.id == run_id, runs.c.lease_owner == owner,
                                                 runs.c.status == "running")
                              .values(lease_owner=None, lease_expires_at=0.0))
        return bool(result.rowcount == 1)

    @staticmethod
    def insert_round(conn: Connection, *, insert: Callable[[Connection], _Rows], run_id: str,
                     usage: Mapping[str, Any]) -> _Rows:
        """A run's round (`insert`) and the run's usage with it, in one transaction: while the run runs, its row's
        usage is that of its stored steps, from which a server that continues it counts on."""
        inserted = insert(conn)
        conn.execute(_ROUND_USAGE, {"b_run": run_id, "b_usage": _dumps(usage)})
        return inserted

    def recover_run(self, conn: Connection, run_id: str, owner: str,
                    lease_seconds: float) -> tuple[Recovered, Chat | None] | None:
        if not _claim_expired(conn, run_id, owner, lease_seconds):
            return None
        return self._end_interrupted(conn, run_id)

    def take_over_run(self, conn: Connection, run_id: str, owner: str, lease_seconds: float,
                      continue_limit: int) -> tuple[Continued | Recovered, Chat | None] | None:
        """Claim an expired run and continue it here (`Continued`), or end it as `recover_run` does once it was
        continued `continue_limit` times (`Recovered`); `None` when it is not running with an expired lease."""
        # A lease without an owner was released by a server handing the run over (`release_lease`), not left by a
        # process that died: the takeover is counted apart, and not against the limit.
        handed_over = conn.execute(select(runs.c.lease_owner).where(runs.c.id == run_id)).scalar() is None
        if not _claim_expired(conn, run_id, owner, lease_seconds):
            return None
        row = conn.execute(_RUN_BY_ID, {"b_run": run_id}).one()
        if not handed_over and row.continuations >= continue_limit:
            return self._end_interrupted(conn, run_id)
        conn.execute(update(runs).where(runs.c.id == run_id).values(
            **({"handovers": runs.c.handovers + 1} if handed_over else {"continuations": runs.c.continuations + 1})))
        step_message, calls, results, committed = _journal(conn, row)
        owner_row = conn.execute(select(users.c.id, users.c.name).join(chats, chats.c.user_id == users.c.id)
                                 .where(chats.c.id == row.chat_id)).one()
        stored = list(conn.execute(select(messages.c.id, messages.c.kind).where(messages.c.run_id == run_id)
                                   .order_by(messages.c.sequence_number)))
        steps = sum(1 for r in stored if r.kind in ("assistant", "tools_aggregate"))
        run = self.run_where(conn, runs.c.id == run_id)
        assert run is not None
        return Continued(run=run, user=User(id=owner_row.id, name=owner_row.name),
                         continuation=row.continuations + row.handovers + 1, handover=handed_over, steps=steps,
                         usage=_loads(row.usage_json),
                         last_row_id=stored[-1].id if stored else None,
                         round=continued_round(step_message=step_message, calls=calls, results=results,
                                               committed=committed)), None

    def _end_interrupted(self, conn: Connection, run_id: str) -> tuple[Recovered, Chat | None]:
        row = conn.execute(_RUN_BY_ID, {"b_run": run_id}).one()
        step_message, calls, results, committed = _journal(conn, row)
        round_ = interrupted_round(step_message=step_message, calls=calls, results=results, committed=committed)
        groups: list[tuple[MessageKind, list[Message]]] = [("tools_aggregate", round_)] if round_ else []
        cut = _cut_text(row, conn) if not round_ else None
        if cut is not None:  # the text its step had streamed, as far as it was checkpointed
            groups.append(("assistant", [cut]))
        rows, chat = self.insert_rows(conn, row.chat_id, groups, run_id=run_id) if groups else ([], None)
        error = {"code": "interrupted", "message": "The server running this run stopped before it finished; its "
                                                   "finished tool results were kept. Send a new message to go on."}
        self.close_run(conn, run_id, status="interrupted", usage=_loads(row.usage_json), error=error, steps=row.steps,
                       event_count=None)
        run = self.run_where(conn, runs.c.id == run_id)
        assert run is not None
        return Recovered(run=run, rows=rows), chat

    def claim_resume(self, conn: Connection, state_id: str, conversation_id: str | None) -> bool:
        result = conn.execute(self._insert(resume_claims).values(
            state_id=state_id, conversation_id=conversation_id, claimed_at=utc_now(),
        ).on_conflict_do_nothing(index_elements=["state_id"]))
        return bool(result.rowcount == 1)


def _claim_expired(conn: Connection, run_id: str, owner: str, lease_seconds: float) -> bool:
    """Take the lease of a running run whose lease expired; `False` if it is not such a run (any more)."""
    now = time.time()
    claimed = conn.execute(update(runs).where(
        runs.c.id == run_id, runs.c.status == "running", func.coalesce(runs.c.lease_expires_at, 0.0) < now,
    ).values(lease_owner=owner, lease_expires_at=now + lease_seconds))
    return bool(claimed.rowcount == 1)


def _journal(conn: Connection, row: Row[Any]) -> tuple[Message | None, list[ToolCallPart], list[ToolResultPart],
                                                       list[Message]]:
    """A run's journal: the step message, the calls started and the results finished (oldest first), and the
    messages of the rounds it committed (whose calls the journal may still hold)."""
    journal = list(conn.execute(select(run_tool_calls).where(run_tool_calls.c.run_id == row.id)
                                .order_by(run_tool_calls.c.created_at)))
    committed = [r.message_json for r in conn.execute(
        select(messages.c.message_json).where(messages.c.run_id == row.id, messages.c.kind == "tools_aggregate"))]
    return (Message.from_json(row.step_message) if row.step_message else None,
            [call_adapter.validate_json(j.call_json) for j in journal if j.call_json],
            [result_adapter.validate_json(j.result_json) for j in journal if j.result_json],
            [m for text in committed for m in load_messages(text)])


def _cut_text(row: Row[Any], conn: Connection) -> Message | None:
    """The checkpointed text of the step a dead run was in, as an assistant message marked incomplete; `None` when
    there is none, or when it belongs to a step the run has stored since (its index is below the stored steps)."""
    checkpoint = _loads(row.step_text)
    if not checkpoint or not checkpoint.get("text"):
        return None
    stored = conn.execute(select(func.count()).select_from(messages).where(
        messages.c.run_id == row.id, messages.c.kind.in_(("assistant", "tools_aggregate")))).scalar_one()
    if checkpoint.get("step") != stored:
        return None
    return Message(role="assistant", parts=[TextPart(text=str(checkpoint["text"]))], metadata={"incomplete": True})
