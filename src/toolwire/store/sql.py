"""`SQLStore`: the `Store` on SQLite (the default, one file, zero set-up) or PostgreSQL, one schema for both.

    async with SQLStore("sqlite:///toolwire.db") as store:         # or "postgresql://user:pw@host/db"
        agent = Agent("openai:gpt-4.1-mini", memory=store)          # a ChatMemory, as it is
        await agent.run("Hi!", conversation_id="chat-1")

Every write is one transaction. Sequence and run numbers are taken by incrementing the chat's counter
in the transaction that inserts the rows (`UPDATE chats ... RETURNING`): PostgreSQL locks the chat
row until commit, SQLite takes its write lock at `BEGIN IMMEDIATE`, so concurrent writers queue and
numbers have no gaps or duplicates. Inside one process SQLite writers also queue on a lock of their
own, which is fairer and cheaper than SQLite's busy-wait.

Store calls are shielded from cancellation: a cancelled caller waits for the transaction to commit or
roll back, so a connection is never abandoned halfway through one.

A call that meets an outage (the database unreachable, restarting, or its disk refusing writes) raises
`StoreUnavailable` (`_engine.unavailable` tells which errors are one); `health` remembers it for `/readyz`,
and until the next success every pooled connection is pinged before use. Calls are not retried here:
a request answers 503 at once, and a run retries its own writes (`server/runner.py`).
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import orjson
from pydantic import TypeAdapter
from sqlalchemy import Row, case, delete, func, insert, select, update
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..messages import Message, ToolCallPart, ToolResultPart, dump_messages, load_messages
from ._engine import (
    WRITE_OPTION,
    StoreHealth,
    StoreUnavailable,
    create_engine_for,
    describe_outage,
    normalize_url,
    redacted_url,
    unavailable,
    upgrade_schema,
    watch_health,
)
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
    Decision,
    MessageKind,
    MessageRow,
    PausedRun,
    Recovered,
    Resumption,
    Run,
    RunStart,
    RunStatus,
    RunSummary,
    User,
    new_id,
    utc_now,
)
from ._recovery import interrupted_round, rows_for
from ._schema import api_tokens, approvals, chats, messages, resume_claims, run_tool_calls, runs, users
from ._search import SearchHit, search_chats

__all__ = ["DEFAULT_USER", "SQLStore", "hash_token"]

DEFAULT_USER = "local"
"""The user owning conversations created through `ChatMemory.append` (library use, no server)."""

_P = ParamSpec("_P")
_T = TypeVar("_T")

_call_adapter: TypeAdapter[ToolCallPart] = TypeAdapter(ToolCallPart)
_result_adapter: TypeAdapter[ToolResultPart] = TypeAdapter(ToolResultPart)


def hash_token(token: str) -> str:
    """What is stored for an API token: its SHA-256 (tokens are long random strings, so no salt is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _shielded(
    method: Callable[Concatenate[SQLStore, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[SQLStore, _P], Coroutine[Any, Any, _T]]:
    @functools.wraps(method)
    async def call(store: SQLStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        with anyio.CancelScope(shield=True):
            try:
                result = await method(store, *args, **kwargs)
            except Exception as exc:
                if isinstance(exc, StoreUnavailable) or not unavailable(exc):
                    raise
                store.health.failed(exc, write=False)
                raise StoreUnavailable(f"The database did not answer or refused to write ({describe_outage(exc)}); "
                                       "try again in a moment.") from exc
        if store.health.failed_at is not None:
            store.health.succeeded(write=False)
        return result

    return call


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


class SQLStore:
    """The chat server's store on SQLite or PostgreSQL (see the module docstring).

    Args:
        url: `sqlite:///path.db` (or a bare path), `postgresql://user:password@host:port/database`.
        migrate: bring the schema up to date when opened (the default); `False` expects it current.
        engine_options: passed to SQLAlchemy's `create_async_engine` (pool sizes, echo...).
    """

    def __init__(self, url: str | URL = "toolwire.db", *, migrate: bool = True,
                 engine_options: Mapping[str, Any] | None = None) -> None:
        self.url = normalize_url(url)
        self._migrate = migrate
        self._engine_options = dict(engine_options or {})
        self._engine: AsyncEngine | None = None
        self._lease_engine: AsyncEngine | None = None
        self._read_engine: AsyncEngine | None = None
        self._sqlite = self.url.get_backend_name() == "sqlite"
        self._write_lock = anyio.Lock()
        self.health = StoreHealth()
        """The database's last outage, as this store met it (see `StoreHealth`)."""

    def __repr__(self) -> str:
        return f"SQLStore({redacted_url(self.url)!r})"

    @property
    def dialect(self) -> str:
        """`"sqlite"` or `"postgresql"`."""
        return self.url.get_backend_name()

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("The store is not open: use `async with SQLStore(...)` or await store.open().")
        return self._engine

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._engine is not None:
            return
        self._engine = create_engine_for(self.url, **self._engine_options)
        if not self._sqlite:  # the same pool, its connections in autocommit while they are lent out
            self._read_engine = self._engine.execution_options(isolation_level="AUTOCOMMIT")
        if not self._sqlite and "poolclass" not in self._engine_options:
            # Lease renewals on a connection of their own: when runs hold every pooled connection, a renewal
            # queued behind them could let leases expire under runs still alive (another replica ends them).
            self._lease_engine = create_engine_for(self.url, **{**self._engine_options, "pool_size": 1,
                                                                "max_overflow": 0, "pool_timeout": 5})
        watch_health(self._engine, self.health)
        if self._lease_engine is not None:
            watch_health(self._lease_engine, self.health)
        if self._migrate:
            await self._upgrade()

    @_shielded
    async def _upgrade(self) -> None:
        if self._sqlite or "connect_args" in self._engine_options:
            async with self._write() as conn:
                await conn.run_sync(upgrade_schema)
            return
        # A connection without the pool's statement timeout: a migration of a large table may take minutes.
        engine = create_engine_for(self.url, **{**self._engine_options, "pool_size": 1, "max_overflow": 0,
                                                "connect_args": {"timeout": 5}})
        try:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade_schema)
        finally:
            await engine.dispose()

    async def close(self) -> None:
        if self._lease_engine is not None:
            lease_engine, self._lease_engine = self._lease_engine, None
            await lease_engine.dispose()
        self._read_engine = None
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.dispose()

    async def __aenter__(self) -> SQLStore:
        await self.open()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    @_shielded
    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(select(1))

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction (committed on exit, rolled back on an exception)."""
        try:
            if self._sqlite:
                async with self._write_lock, self.engine.connect() as conn:
                    conn = await conn.execution_options(**{WRITE_OPTION: True})
                    async with conn.begin():
                        yield conn
            else:
                async with self.engine.begin() as conn:
                    yield conn
        except Exception as exc:
            if unavailable(exc):
                self.health.failed(exc, write=True)
            raise
        if self.health.write_error is not None:
            self.health.succeeded(write=True)

    @asynccontextmanager
    async def _lease_write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction on the lease connection where there is one (PostgreSQL)."""
        if self._lease_engine is None:
            async with self._write() as conn:
                yield conn
        else:
            async with self._lease_engine.begin() as conn:
                yield conn

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        """A read of several statements, in one transaction (one snapshot)."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def _read_one(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one SELECT: on PostgreSQL in autocommit, since one statement is its own snapshot
        anyway, and the `BEGIN` and `ROLLBACK` around it were two of the three round trips of every lookup
        (each round trip costs the server process a system call or two, which adds up under load)."""
        if self._read_engine is None:
            async with self.engine.connect() as conn:
                yield conn
        else:
            async with self._read_engine.connect() as conn:
                yield conn

    def _insert(self, table: Any) -> Any:
        """An INSERT with the dialect's ON CONFLICT support."""
        if self._sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            return sqlite_insert(table)
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)

    # -- users and tokens --------------------------------------------------------------------

    @_shielded
    async def ensure_user(self, name: str) -> User:
        async with self._write() as conn:
            return await self._ensure_user(conn, name)

    async def _ensure_user(self, conn: AsyncConnection, name: str) -> User:
        await conn.execute(self._insert(users).values(id=new_id("user"), name=name, created_at=utc_now())
                           .on_conflict_do_nothing(index_elements=["name"]))
        row = (await conn.execute(select(users.c.id, users.c.name).where(users.c.name == name))).one()
        return User(id=row.id, name=row.name)

    @_shielded
    async def add_token(self, user_id: str, token: str, *, source: str = "api") -> None:
        async with self._write() as conn:
            await self._upsert_token(conn, user_id, hash_token(token), source)

    async def _upsert_token(self, conn: AsyncConnection, user_id: str, token_hash: str, source: str) -> None:
        stmt = self._insert(api_tokens).values(id=new_id("tok"), user_id=user_id, token_hash=token_hash,
                                               source=source, created_at=utc_now(), revoked_at=None)
        await conn.execute(stmt.on_conflict_do_update(
            index_elements=["token_hash"],
            set_={"user_id": user_id, "source": source, "revoked_at": None}))

    @_shielded
    async def replace_tokens(self, tokens: Mapping[str, Sequence[str]], *, source: str = "config") -> None:
        async with self._write() as conn:
            kept: list[str] = []
            for name, user_tokens in tokens.items():
                user = await self._ensure_user(conn, name)
                for token in user_tokens:
                    token_hash = hash_token(token)
                    kept.append(token_hash)
                    await self._upsert_token(conn, user.id, token_hash, source)
            await conn.execute(update(api_tokens)
                               .where(api_tokens.c.source == source, api_tokens.c.revoked_at.is_(None),
                                      api_tokens.c.token_hash.not_in(kept))
                               .values(revoked_at=utc_now()))

    @_shielded
    async def revoke_token(self, token: str) -> bool:
        async with self._write() as conn:
            result = await conn.execute(update(api_tokens)
                                        .where(api_tokens.c.token_hash == hash_token(token),
                                               api_tokens.c.revoked_at.is_(None))
                                        .values(revoked_at=utc_now()))
            return result.rowcount == 1

    @_shielded
    async def user_for_token(self, token: str) -> User | None:
        query = (select(users.c.id, users.c.name)
                 .join(api_tokens, api_tokens.c.user_id == users.c.id)
                 .where(api_tokens.c.token_hash == hash_token(token), api_tokens.c.revoked_at.is_(None)))
        async with self._read_one() as conn:
            row = (await conn.execute(query)).first()
        return User(id=row.id, name=row.name) if row is not None else None

    # -- chats -------------------------------------------------------------------------------

    @_shielded
    async def create_chat(self, user_id: str, title: str = "", *, chat_id: str | None = None) -> Chat:
        now = utc_now()
        chat = Chat(id=chat_id or new_id("chat"), user_id=user_id, title=title, created_at=now, updated_at=now)
        async with self._write() as conn:
            inserted = await conn.execute(
                self._insert(chats).values(id=chat.id, user_id=user_id, title=title, created_at=now, updated_at=now)
                .on_conflict_do_nothing(index_elements=["id"]))
            if inserted.rowcount != 1:
                raise ChatIdTaken(f"The chat id {chat.id!r} is already taken; choose another id.")
        return chat

    @_shielded
    async def list_chats(self, user_id: str, *, limit: int = 200) -> list[Chat]:
        query = (select(chats).where(chats.c.user_id == user_id)
                 .order_by(chats.c.updated_at.desc(), chats.c.id.desc()).limit(limit))
        async with self._read_one() as conn:
            return [_chat(row) for row in await conn.execute(query)]

    @_shielded
    async def get_chat(self, user_id: str, chat_id: str) -> Chat | None:
        async with self._read_one() as conn:
            row = (await conn.execute(select(chats).where(chats.c.id == chat_id, chats.c.user_id == user_id))).first()
        return _chat(row) if row is not None else None

    @_shielded
    async def rename_chat(self, user_id: str, chat_id: str, title: str) -> Chat | None:
        async with self._write() as conn:
            row = (await conn.execute(update(chats).where(chats.c.id == chat_id, chats.c.user_id == user_id)
                                      .values(title=title, updated_at=utc_now()).returning(*chats.c))).first()
        return _chat(row) if row is not None else None

    @_shielded
    async def search_chats(self, user_id: str, query: str, *, limit: int = 20, offset: int = 0) -> list[SearchHit]:
        async with self._read_one() as conn:
            return await search_chats(conn, user_id, query, limit=limit, offset=offset)

    @_shielded
    async def delete_chat(self, user_id: str, chat_id: str) -> bool:
        async with self._write() as conn:
            owned = (await conn.execute(select(chats.c.id).where(chats.c.id == chat_id,
                                                                 chats.c.user_id == user_id))).first()
            if owned is None:
                return False
            # Children first: SQLite enforces the foreign keys but the order keeps both databases simple.
            run_ids = select(runs.c.id).where(runs.c.chat_id == chat_id).scalar_subquery()
            await conn.execute(delete(run_tool_calls).where(run_tool_calls.c.run_id.in_(run_ids)))
            for table in (approvals, messages, runs):
                await conn.execute(delete(table).where(table.c.chat_id == chat_id))
            await conn.execute(delete(chats).where(chats.c.id == chat_id))
        return True

    # -- messages ----------------------------------------------------------------------------

    @_shielded
    async def append_messages(self, chat_id: str, messages_: Sequence[Message], *,
                              run_id: str | None = None) -> list[MessageRow]:
        async with self._write() as conn:
            return await self._insert_rows(conn, chat_id, rows_for(messages_), run_id=run_id)

    async def _insert_rows(self, conn: AsyncConnection, chat_id: str,
                           groups: Sequence[tuple[MessageKind, list[Message]]], *, run_id: str | None,
                           client_message_id: str | None = None, last: int | None = None) -> list[MessageRow]:
        """Insert message rows; `last`: the chat's last sequence number, when the caller has already taken the
        numbers (with the chat's row locked), else taken here."""
        if not groups:
            return []
        now = utc_now()
        if last is None:
            last = (await conn.execute(update(chats).where(chats.c.id == chat_id)
                                       .values(last_sequence=chats.c.last_sequence + len(groups), updated_at=now)
                                       .returning(chats.c.last_sequence))).scalar_one_or_none()
            if last is None:
                raise ChatNotFound(f"There is no chat {chat_id!r}; create it before adding messages.")
        first = last - len(groups) + 1
        rows = [
            MessageRow(id=new_id("msg"), chat_id=chat_id, sequence_number=first + i, kind=kind,
                       role="assistant" if kind == "tools_aggregate" else kind, run_id=run_id, created_at=now,
                       message_json=dump_messages(group).decode(),
                       client_message_id=client_message_id if i == 0 else None)
            for i, (kind, group) in enumerate(groups)
        ]
        values = [
            {"id": r.id, "chat_id": chat_id, "sequence_number": r.sequence_number, "role": r.role, "kind": r.kind,
             "run_id": run_id, "client_message_id": r.client_message_id, "created_at": now,
             "message_json": r.message_json}
            for r in rows
        ]
        # One row is one statement; a list goes through the driver's executemany, which costs more round trips.
        await conn.execute(insert(messages), values[0] if len(values) == 1 else values)
        return rows

    @_shielded
    async def list_messages(self, chat_id: str, *, after: int = 0, limit: int | None = None) -> list[MessageRow]:
        query = (select(messages).where(messages.c.chat_id == chat_id, messages.c.sequence_number > after)
                 .order_by(messages.c.sequence_number))
        if limit is not None:
            query = query.limit(limit)
        async with self._read_one() as conn:
            return [_message_row(row) for row in await conn.execute(query)]

    # -- ChatMemory --------------------------------------------------------------------------

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        """The conversation's messages, oldest first (`ChatMemory`); the chat id is the conversation id."""
        rows = await self.list_messages(conversation_id or "default")
        return [message for row in rows for message in row.messages]

    @_shielded
    async def append(self, messages_: Sequence[Message], conversation_id: str | None = None) -> None:
        """Add messages to the conversation in one transaction (`ChatMemory`), creating its chat if needed."""
        chat_id = conversation_id or "default"
        async with self._write() as conn:
            exists = (await conn.execute(select(chats.c.id).where(chats.c.id == chat_id))).first()
            if exists is None:
                user = await self._ensure_user(conn, DEFAULT_USER)
                now = utc_now()
                await conn.execute(insert(chats).values(id=chat_id, user_id=user.id, title="", created_at=now,
                                                        updated_at=now))
            await self._insert_rows(conn, chat_id, rows_for(messages_), run_id=None)

    # -- runs --------------------------------------------------------------------------------

    @_shielded
    async def start_run(self, chat_id: str, *, user_message: Message, client_message_id: str, owner: str,
                        lease_seconds: float, title: str | None = None) -> RunStart:
        try:
            return await self._start_run(chat_id, user_message, client_message_id, owner, lease_seconds, title)
        except _Earlier as earlier:
            return earlier.start

    async def _start_run(self, chat_id: str, user_message: Message, client_message_id: str, owner: str,
                         lease_seconds: float, title: str | None) -> RunStart:
        # Four statements besides BEGIN and COMMIT, each a round trip: on a busy server every one of them costs
        # as much CPU in the driver as the statement costs PostgreSQL.
        async with self._write() as conn:
            # The run number and the user message's sequence number in one statement, which also locks the chat's
            # row (PostgreSQL) until commit: run starts and decisions on one chat happen one after another.
            values: dict[str, Any] = {"run_count": chats.c.run_count + 1, "last_sequence": chats.c.last_sequence + 1,
                                      "updated_at": utc_now()}
            if title:
                values["title"] = case((chats.c.title == "", title), else_=chats.c.title)
            taken = (await conn.execute(update(chats).where(chats.c.id == chat_id).values(**values)
                                        .returning(chats.c.run_count, chats.c.last_sequence))).first()
            if taken is None:
                raise ChatNotFound(f"There is no chat {chat_id!r}.")
            earlier_id = select(messages.c.id).where(messages.c.chat_id == chat_id,
                                                     messages.c.client_message_id == client_message_id)
            active_id = select(runs.c.id).where(runs.c.chat_id == chat_id, runs.c.status.in_(ACTIVE_STATUSES)).limit(1)
            found = (await conn.execute(select(earlier_id.scalar_subquery().label("earlier"),
                                               active_id.scalar_subquery().label("active")))).one()
            if found.earlier is not None:
                row = _message_row((await conn.execute(select(messages).where(messages.c.id == found.earlier))).one())
                if row.messages[0].text != user_message.text:
                    raise IdempotencyConflict(
                        f"client_message_id {client_message_id!r} was already used in this chat for another "
                        "message; give every new message its own client_message_id.")
                run = await self._run_where(conn, runs.c.id == row.run_id)
                assert run is not None
                raise _Earlier(RunStart(run=run, user_row=row, created=False))  # rolls the numbers back
            if found.active is not None:
                active = await self._run_where(conn, runs.c.id == found.active)
                assert active is not None
                raise _conflict(active)  # rolls the numbers (and the title) back
            run = Run(id=new_id("run"), chat_id=chat_id, run_number=taken.run_count, status="running",
                      client_message_id=client_message_id, lease_owner=owner,
                      lease_expires_at=time.time() + lease_seconds)
            await self._insert_run(conn, run)
            [row] = await self._insert_rows(conn, chat_id, [("user", [user_message])], run_id=run.id,
                                            client_message_id=client_message_id, last=taken.last_sequence)
        return RunStart(run=run, user_row=row, created=True)

    @staticmethod
    async def _next_run_number(conn: AsyncConnection, chat_id: str) -> int:
        """Take the chat's next run number; this also locks the chat row (PostgreSQL) until the transaction ends,
        so run starts and decisions on one chat happen one after another."""
        number = (await conn.execute(update(chats).where(chats.c.id == chat_id)
                                     .values(run_count=chats.c.run_count + 1)
                                     .returning(chats.c.run_count))).scalar_one_or_none()
        if number is None:
            raise ChatNotFound(f"There is no chat {chat_id!r}.")
        return int(number)

    async def _insert_run(self, conn: AsyncConnection, run: Run, *, step_message: str | None = None) -> None:
        await conn.execute(insert(runs).values(
            id=run.id, chat_id=run.chat_id, run_number=run.run_number, status=run.status,
            resumed_from=run.resumed_from, client_message_id=run.client_message_id, step_message=step_message,
            created_at=run.created_at, lease_owner=run.lease_owner, lease_expires_at=run.lease_expires_at))

    @_shielded
    async def resume_run(self, chat_id: str, decisions: Sequence[Decision], *, owner: str,
                         lease_seconds: float) -> Resumption:
        ids = [d.approval_id for d in decisions]
        if len(set(ids)) != len(ids):
            raise ApprovalsIncomplete("The request decides the same approval twice; send one decision per approval.")
        async with self._write() as conn:
            run_number = await self._next_run_number(conn, chat_id)
            found = {row.id: _approval(row) for row in await conn.execute(
                select(approvals).where(approvals.c.id.in_(ids), approvals.c.chat_id == chat_id))}
            for approval_id in ids:
                if approval_id not in found:
                    raise ApprovalNotFound(f"There is no approval {approval_id!r} in this chat. Use the approval_id "
                                           "of an approval_required event (or of GET /api/chats/{id}).")
            for approval in found.values():
                if approval.status != "pending":
                    raise ApprovalDecided(f"The approval {approval.id!r} was already decided ({approval.status}); "
                                          "each approval is decided once.")
            paused = await self._paused(conn, chat_id)
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
                result = await conn.execute(
                    update(approvals).where(approvals.c.id == decision.approval_id, approvals.c.status == "pending")
                    .values(status=status, reason=decision.reason, decided_at=now))
                if result.rowcount != 1:  # decided by a concurrent request a moment ago
                    raise ApprovalDecided(f"The approval {decision.approval_id!r} was already decided.")
                approval = found[decision.approval_id]
                decided[approval.call.id] = Approval(
                    id=approval.id, run_id=approval.run_id, chat_id=chat_id, call=approval.call, status=status,
                    reason=decision.reason, created_at=approval.created_at, decided_at=now)
            moved = await conn.execute(update(runs).where(runs.c.id == paused.run.id, runs.c.status == "paused")
                                       .values(status="resumed"))
            if moved.rowcount != 1:
                raise ApprovalDecided("The paused run was resumed by another request a moment ago.")
            run = Run(id=new_id("run"), chat_id=chat_id, run_number=run_number, status="running",
                      resumed_from=paused.run.id, lease_owner=owner, lease_expires_at=time.time() + lease_seconds)
            await self._insert_run(conn, run)
        return Resumption(run=run, paused=paused, decisions=decided)

    async def _run_where(self, conn: AsyncConnection, *conditions: Any) -> Run | None:
        row = (await conn.execute(select(runs).where(*conditions))).first()
        return _run(row) if row is not None else None

    @_shielded
    async def get_run(self, chat_id: str, run_id: str) -> Run | None:
        async with self._read_one() as conn:
            return await self._run_where(conn, runs.c.id == run_id, runs.c.chat_id == chat_id)

    @_shielded
    async def run_by_number(self, chat_id: str, run_number: int) -> Run | None:
        async with self._read_one() as conn:
            return await self._run_where(conn, runs.c.chat_id == chat_id, runs.c.run_number == run_number)

    @_shielded
    async def active_run(self, chat_id: str) -> Run | None:
        async with self._read_one() as conn:
            return await self._run_where(conn, runs.c.chat_id == chat_id, runs.c.status == "running")

    @_shielded
    async def paused_run(self, chat_id: str) -> PausedRun | None:
        async with self._read() as conn:
            return await self._paused(conn, chat_id)

    @_shielded
    async def run_summaries(self, chat_id: str, *, after: int = 0) -> list[RunSummary]:
        # Subqueries rather than lists of ids: a long chat has as many runs as it has messages.
        run_ids = select(messages.c.run_id).where(messages.c.chat_id == chat_id, messages.c.sequence_number > after,
                                                  messages.c.run_id.is_not(None))
        async with self._read() as conn:
            found = [_run(row) for row in await conn.execute(
                select(*_RUN_COLUMNS).where(runs.c.chat_id == chat_id, runs.c.id.in_(run_ids))
                .order_by(runs.c.run_number))]
            decided: dict[str, list[Approval]] = {}
            if any(run.resumed_from is not None for run in found):
                paused_ids = select(runs.c.resumed_from).where(runs.c.chat_id == chat_id, runs.c.id.in_(run_ids))
                query = (select(approvals).where(approvals.c.chat_id == chat_id, approvals.c.run_id.in_(paused_ids),
                                                 approvals.c.status != "pending")
                         .order_by(approvals.c.run_id, approvals.c.position))
                for row in await conn.execute(query):
                    decided.setdefault(row.run_id, []).append(_approval(row))
        return [RunSummary(run=run, decisions=decided.get(run.resumed_from or "", [])) for run in found]

    async def _paused(self, conn: AsyncConnection, chat_id: str) -> PausedRun | None:
        row = (await conn.execute(select(runs).where(runs.c.chat_id == chat_id, runs.c.status == "paused"))).first()
        if row is None:
            return None
        found = await conn.execute(select(approvals).where(approvals.c.run_id == row.id)
                                   .order_by(approvals.c.position))
        return PausedRun(run=_run(row), state_json=row.paused_state or "", approvals=[_approval(a) for a in found])

    @_shielded
    async def record_step_message(self, run_id: str, message: Message) -> None:
        async with self._write() as conn:
            await conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == "running")
                               .values(step_message=message.to_json().decode()))

    @_shielded
    async def record_tool_call(self, run_id: str, call: ToolCallPart) -> None:
        async with self._write() as conn:
            await conn.execute(self._insert(run_tool_calls).values(
                run_id=run_id, call_id=call.id, call_json=_call_adapter.dump_json(call).decode(),
                created_at=utc_now()).on_conflict_do_nothing(index_elements=["run_id", "call_id"]))

    @_shielded
    async def record_tool_result(self, run_id: str, result: ToolResultPart) -> None:
        result_json = _result_adapter.dump_json(result).decode()
        async with self._write() as conn:
            await conn.execute(self._insert(run_tool_calls).values(
                run_id=run_id, call_id=result.call_id, result_json=result_json, created_at=utc_now(),
            ).on_conflict_do_update(index_elements=["run_id", "call_id"], set_={"result_json": result_json}))

    @_shielded
    async def pause_run(self, run_id: str, *, state_json: str, pending: Sequence[tuple[str, ToolCallPart]],
                        usage: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        now = utc_now()
        async with self._write() as conn:
            done = await self._close_run(conn, run_id, status="paused", usage=usage, error=None, steps=steps,
                                         event_count=event_count, paused_state=state_json)
            if not done:
                return False
            chat_id = (await conn.execute(select(runs.c.chat_id).where(runs.c.id == run_id))).scalar_one()
            await conn.execute(insert(approvals), [
                {"id": approval_id, "run_id": run_id, "chat_id": chat_id, "call_id": call.id,
                 "call_json": _call_adapter.dump_json(call).decode(), "position": position, "status": "pending",
                 "reason": None, "created_at": now, "decided_at": None}
                for position, (approval_id, call) in enumerate(pending)
            ])
        return True

    @_shielded
    async def finish_run(self, run_id: str, *, status: RunStatus, usage: Mapping[str, Any] | None,
                         error: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        async with self._write() as conn:
            return await self._close_run(conn, run_id, status=status, usage=usage, error=error, steps=steps,
                                         event_count=event_count)

    async def _close_run(self, conn: AsyncConnection, run_id: str, *, status: RunStatus,
                         usage: Mapping[str, Any] | None, error: Mapping[str, Any] | None, steps: int,
                         event_count: int | None, paused_state: str | None = None) -> bool:
        result = await conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == "running").values(
            status=status, usage_json=_dumps(usage) if usage is not None else None,
            error_json=_dumps(error) if error is not None else None, steps=steps, event_count=event_count,
            paused_state=paused_state, step_message=None, finished_at=utc_now(), lease_owner=None,
            lease_expires_at=None))
        if result.rowcount != 1:
            return False
        await conn.execute(delete(run_tool_calls).where(run_tool_calls.c.run_id == run_id))
        return True

    # -- leases and recovery -----------------------------------------------------------------

    @_shielded
    async def renew_leases(self, owner: str, run_ids: Sequence[str], lease_seconds: float) -> int:
        if not run_ids:
            return 0
        async with self._lease_write() as conn:
            result = await conn.execute(update(runs).where(runs.c.id.in_(list(run_ids)), runs.c.lease_owner == owner,
                                                           runs.c.status == "running")
                                        .values(lease_expires_at=time.time() + lease_seconds))
            return int(result.rowcount)

    @_shielded
    async def expired_runs(self) -> list[Run]:
        query = select(runs).where(runs.c.status == "running",
                                   func.coalesce(runs.c.lease_expires_at, 0.0) < time.time())
        async with self._read_one() as conn:
            return [_run(row) for row in await conn.execute(query)]

    @_shielded
    async def recover_run(self, run_id: str, *, owner: str, lease_seconds: float) -> Recovered | None:
        now = time.time()
        async with self._write() as conn:
            claimed = await conn.execute(update(runs).where(
                runs.c.id == run_id, runs.c.status == "running",
                func.coalesce(runs.c.lease_expires_at, 0.0) < now,
            ).values(lease_owner=owner, lease_expires_at=now + lease_seconds))
            if claimed.rowcount != 1:
                return None
            row = (await conn.execute(select(runs).where(runs.c.id == run_id))).one()
            journal = list(await conn.execute(select(run_tool_calls).where(run_tool_calls.c.run_id == run_id)
                                              .order_by(run_tool_calls.c.created_at)))
            committed = [r.message_json for r in await conn.execute(
                select(messages.c.message_json).where(messages.c.run_id == run_id,
                                                      messages.c.kind == "tools_aggregate"))]
            step_message = Message.from_json(row.step_message) if row.step_message else None
            round_ = interrupted_round(
                step_message=step_message,
                calls=[_call_adapter.validate_json(j.call_json) for j in journal if j.call_json],
                results=[_result_adapter.validate_json(j.result_json) for j in journal if j.result_json],
                committed=[m for text in committed for m in load_messages(text)],
            )
            rows = await self._insert_rows(conn, row.chat_id, [("tools_aggregate", round_)], run_id=run_id) \
                if round_ else []
            error = {"code": "interrupted", "message": "The server running this run stopped before it finished; "
                                                       "its finished tool results were kept. Send a new message to "
                                                       "go on."}
            await self._close_run(conn, run_id, status="interrupted", usage=_loads(row.usage_json), error=error,
                                  steps=row.steps, event_count=None)
            run = await self._run_where(conn, runs.c.id == run_id)
        assert run is not None
        return Recovered(run=run, rows=rows)

    @_shielded
    async def claim_resume(self, state_id: str, conversation_id: str | None = None) -> bool:
        async with self._write() as conn:
            result = await conn.execute(self._insert(resume_claims).values(
                state_id=state_id, conversation_id=conversation_id, claimed_at=utc_now(),
            ).on_conflict_do_nothing(index_elements=["state_id"]))
            return result.rowcount == 1


class _Earlier(Exception):
    """Leaves a transaction (rolling it back) with the run an earlier identical request started."""

    def __init__(self, start: RunStart) -> None:
        super().__init__()
        self.start = start


def _conflict(run: Run) -> RunConflict:
    if run.status == "paused":
        return RunConflict("This chat's run is paused until its tool calls are approved or denied; decide them "
                           "(POST /api/chats/{id}/approvals) before sending a new message.", run=run)
    return RunConflict(f"This chat already has a run in progress ({run.id}); wait for it to finish, follow it at "
                       "GET /api/chats/{id}/stream, or cancel it, before sending a new message.", run=run)


def _loads(text: str | None) -> Any:
    return orjson.loads(text) if text else None


def _chat(row: Row[Any]) -> Chat:
    return Chat(id=row.id, user_id=row.user_id, title=row.title, created_at=row.created_at,
                updated_at=row.updated_at, last_sequence=row.last_sequence, run_count=row.run_count)


def _message_row(row: Row[Any]) -> MessageRow:
    return MessageRow(id=row.id, chat_id=row.chat_id, sequence_number=row.sequence_number, kind=row.kind,
                      role=row.role, run_id=row.run_id, created_at=row.created_at, message_json=row.message_json,
                      client_message_id=row.client_message_id)


_RUN_COLUMNS = [column for column in runs.c if column.name not in ("paused_state", "step_message")]
"""What `_run` reads (a run's saved state can be large and stays behind)."""


def _run(row: Row[Any]) -> Run:
    return Run(id=row.id, chat_id=row.chat_id, run_number=row.run_number, status=row.status,
               resumed_from=row.resumed_from, client_message_id=row.client_message_id,
               usage=_loads(row.usage_json), error=_loads(row.error_json), steps=row.steps,
               event_count=row.event_count, created_at=row.created_at, finished_at=row.finished_at,
               lease_owner=row.lease_owner, lease_expires_at=row.lease_expires_at)


def _approval(row: Row[Any]) -> Approval:
    return Approval(id=row.id, run_id=row.run_id, chat_id=row.chat_id, call=_call_adapter.validate_json(row.call_json),
                    status=row.status, reason=row.reason, created_at=row.created_at, decided_at=row.decided_at)
