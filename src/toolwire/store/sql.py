"""`SQLStore`: the `Store` on SQLite (the default, one file, zero set-up) or PostgreSQL, one schema for both.

    async with SQLStore("sqlite:///toolwire.db") as store:         # or "postgresql://user:pw@host/db"
        agent = Agent("openai:gpt-4.1-mini", memory=store)          # a ChatMemory, as it is
        await agent.run("Hi!", conversation_id="chat-1")

Writes go through the store's one writer (`_writer.py`, group commit): each write is an operation
(`_writes.py`) queued and committed with the others queued at the same time, in one transaction; an awaited
write has committed when it returns, and an operation that fails fails alone. Sequence and run numbers are
taken by incrementing the chat's counter in the transaction that inserts the rows (`UPDATE chats ...
RETURNING`): PostgreSQL locks the chat row until commit, SQLite takes its write lock at `BEGIN IMMEDIATE`, so
writers of several processes queue and numbers have no gaps or duplicates.

`user_for_token` and `get_chat` are cached (`_lookups.py`): exact inside the process, at most
`LOOKUP_CACHE_SECONDS` stale for another process's changes (docs/guides/store-writes.md).

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
from contextlib import asynccontextmanager, suppress
from functools import partial
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
from sqlalchemy import Connection, Engine, Row, bindparam, func, select
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ..messages import Message, ToolCallPart, ToolResultPart
from . import _tree as tree
from ._engine import (
    SINGLE_READ_OPTION,
    WRITE_OPTION,
    StoreHealth,
    StoreUnavailable,
    create_engine_for,
    create_sqlite_writer,
    describe_outage,
    normalize_url,
    redacted_url,
    unavailable,
    upgrade_schema,
    watch_health,
)
from ._lookups import LOOKUP_CACHE_SECONDS, Lookups
from ._protocol import ApprovalsIncomplete, ChatIdTaken
from ._queue import (
    INTERRUPT_WAITING,
    QUEUE_HEAD,
    Promoted,
    Queued,
    QueuedRun,
    QueueStrategy,
    cancel_queued as _cancel_queued,
    promote,
    queue_query,
    queue_run,
    queued_from,
    queued_runs,
    waiting_chats_query,
)
from ._reads import Reads
from ._records import (
    Chat,
    ChatPath,
    Continued,
    Decision,
    MessageRow,
    PausedRun,
    Recovered,
    Resumption,
    Run,
    RunStart,
    RunStatus,
    RunSummary,
    SearchHit,
    User,
    new_chat,
    utc_now,
)
from ._recovery import rows_for
from ._run_reads import ACTIVE_RUN, run_summaries, run_where
from ._schema import api_tokens, chats, messages, runs, users
from ._search import search_chats
from ._writer import WRITE_BATCH, Operation, Writer, run_batch
from ._writes import (
    DEFAULT_USER,
    RUN_COLUMNS,
    Earlier,
    Writes,
    call_adapter,
    chat_from,
    message_row_from,
    result_adapter,
    run_from,
)

__all__ = ["DEFAULT_USER", "SQLStore", "hash_token"]

_P = ParamSpec("_P")
_T = TypeVar("_T")

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


class SQLStore:
    """The chat server's store on SQLite or PostgreSQL (see the module docstring).

    Args:
        url: `sqlite:///path.db` (or a bare path), `postgresql://user:password@host:port/database`.
        migrate: bring the schema up to date when opened (the default); `False` expects it current.
        engine_options: passed to SQLAlchemy's `create_async_engine` (pool sizes, echo...).
        write_batch: the most write operations committed in one transaction (`WRITE_BATCH`, 64).
        lookup_seconds: how long a token or chat lookup is cached (`LOOKUP_CACHE_SECONDS`, 1 s): the longest
            another process's revocation, rename or deletion takes to be seen here; 0 turns the caches off.
    """

    def __init__(self, url: str | URL = "toolwire.db", *, migrate: bool = True,
                 engine_options: Mapping[str, Any] | None = None, write_batch: int = WRITE_BATCH,
                 lookup_seconds: float = LOOKUP_CACHE_SECONDS) -> None:
        self.url = normalize_url(url)
        self._migrate = migrate
        self._engine_options = dict(engine_options or {})
        self._engine: AsyncEngine | None = None
        self._postgres_writer: AsyncEngine | None = None
        """The PostgreSQL writer's engine: its connection is made and used on the writer's own loop only."""
        self._read_engine: AsyncEngine | None = None
        self._write_engine: Engine | None = None
        self._write_connection: Connection | None = None
        """The SQLite writer's one connection, kept from batch to batch (see `_run_batch`)."""
        self._postgres_connection: AsyncConnection | None = None
        """The PostgreSQL writer's one connection, kept from batch to batch in the same way."""
        self._postgres_used_at = 0.0
        self._sqlite = self.url.get_backend_name() == "sqlite"
        self._writes = Writes(self.dialect)
        self.health = StoreHealth()
        """The database's last outage, as this store met it (see `StoreHealth`)."""
        self.writer = Writer(self._run_batch, self.health, batch_size=write_batch,
                             name=f"toolwire-{'sqlite' if self._sqlite else 'postgres'}-writer")
        """The store's one writer (group commit, see `_writer.py`); `writer.batches` counts its transactions."""
        self._reads = Reads(self.url, self._engine_options, self.health)
        """Where the reads every chat makes run (`_reads.py`)."""
        self._tokens: Lookups[str, User] = Lookups(lookup_seconds)
        self._chats: Lookups[str, Chat] = Lookups(lookup_seconds)
        self._run_chats: dict[str, str] = {}
        """The chat of each run this store started, resumed or saw expire (most recent `_RUN_CHATS_KEPT`): a write
        keyed by its run is ordered in its batch by that chat (`_write`)."""

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

    @property
    def write_engine(self) -> Engine:
        """The engine the writer commits through (a listener on it sees every write transaction): on SQLite the
        writer's own synchronous engine, on PostgreSQL the writer's own connection."""
        if self._write_engine is not None:
            return self._write_engine
        if self._postgres_writer is not None:
            return self._postgres_writer.sync_engine
        return self.engine.sync_engine

    @property
    def read_engines(self) -> list[Engine]:
        """The engines reads go through (a listener on each sees every read): the pool's, and the hot reads' own
        (`_reads.py`)."""
        return [self.engine.sync_engine, *self._reads.engines]

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        if self._engine is not None:
            return
        self._engine = create_engine_for(self.url, **self._engine_options)
        if not self._sqlite:  # the same pool, its connections in autocommit while they are lent out
            self._read_engine = self._engine.execution_options(isolation_level="AUTOCOMMIT")
        if not self._sqlite:
            # The writer's own connection (it runs one batch at a time): when requests hold every pooled
            # connection, no write waits for one, and no lease renewal (a write like the others, see
            # `renew_leases`) either, which could let leases expire under runs still alive. A pool class of the
            # caller's is kept as it is (its own size options may not apply to it).
            own_pool = {} if "poolclass" in self._engine_options else {"pool_size": 1, "max_overflow": 0,
                                                                       "pool_timeout": 5}
            self._postgres_writer = create_engine_for(self.url, **{**self._engine_options, **own_pool})
        self.writer.start()
        try:
            watch_health(self._engine, self.health)
            if self._postgres_writer is not None:
                watch_health(self._postgres_writer, self.health)
            if self._migrate:
                await self._upgrade()
            if self._sqlite:
                self._write_engine = create_sqlite_writer(self.url)
            self._reads.open(self._engine)
        except BaseException:
            # A database that cannot be reached (or migrated) leaves nothing behind: the writer's thread and the
            # pools are closed, and `open` may be called again.
            with anyio.CancelScope(shield=True):
                await self.close()
            raise

    @_shielded
    async def _upgrade(self) -> None:
        if self._sqlite or "connect_args" in self._engine_options:
            async with self.engine.connect() as conn:
                conn = await conn.execution_options(**{WRITE_OPTION: True})
                async with conn.begin():
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
        async def dispose_on_writer_loop() -> None:  # after the writes queued were committed
            postgres_writer, write_engine = self._postgres_writer, self._write_engine
            self._postgres_writer = self._write_engine = None
            if self._write_connection is not None:
                connection, self._write_connection = self._write_connection, None
                connection.close()
            if self._postgres_connection is not None:
                postgres_connection, self._postgres_connection = self._postgres_connection, None
                with suppress(Exception):  # a connection the database dropped is let go all the same
                    await postgres_connection.close()
            if postgres_writer is not None:
                await postgres_writer.dispose()
            if write_engine is not None:
                write_engine.dispose()

        await self.writer.close(last=dispose_on_writer_loop)  # what is queued is committed first
        await self._reads.close()
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

    @property
    def write_backlog(self) -> int:
        """Writes queued for the writer and not yet in a batch."""
        return self.writer.backlog

    async def _write(self, operation: Callable[[Connection], _T], *,
                     after_commit: Callable[[_T], None] | None = None, urgent: bool = False,
                     refusable: bool = False, run_id: str | None = None,
                     refuses_first: tuple[type[Exception], ...] = ()) -> _T:
        """`operation` committed by the writer (in a batch with whatever else is queued); `refusable` and
        `refuses_first`: see `Writer.write`. An operation keyed by `run_id` (it names no chat) is ordered by its
        run's chat: it locks the run's row, which the chat's next run start waits for (the one active run per chat
        is a unique index), and sorted apart from its chat it took its locks out of the order two replicas'
        batches agree on."""
        self.engine  # noqa: B018 - raises when the store is not open
        chat = self._run_chats.get(run_id) if run_id is not None else None
        return await self.writer.write(operation, after_commit=after_commit, urgent=urgent, refusable=refusable,
                                       chat=chat, refuses_first=refuses_first)

    def _knows(self, run: Run) -> Run:
        """Note the run's chat (for `_write`); returns the run."""
        kept = self._run_chats
        if run.id not in kept and len(kept) >= _RUN_CHATS_KEPT:
            del kept[next(iter(kept))]
        kept[run.id] = run.chat_id
        return run

    def _forgets(self, run_id: str, value: _T) -> _T:
        self._run_chats.pop(run_id, None)
        return value

    async def _run_batch(self, batch: Sequence[Operation[Any]]) -> None:
        """On the writer's own loop (see `_writer.py`): SQLite's whole transaction on the writer's `sqlite3`
        connection, PostgreSQL's through the writer's asyncpg connection."""
        if self._write_engine is not None:
            # One connection from batch to batch: checking one out of the pool and back for each batch was a
            # seventh of the writer's Python time (py-spy). A batch that fails invalidates it; the next gets a new one.
            kept = self._write_connection
            if kept is None or kept.invalidated or kept.closed:
                if kept is not None:
                    kept.close()
                kept = self._write_connection = self._write_engine.connect()
            run_batch(kept, batch)
            return
        if self._postgres_writer is None:
            raise RuntimeError("The store is not open: use `async with SQLStore(...)` or await store.open().")
        # Checked out of the pool and back for each batch, a connection cost a reset on its return and the
        # pool's bookkeeping both ways, in a batch that is often one operation. A connection a failed batch
        # invalidated is replaced by the next batch, which checks a new one out (pinged while an outage lasts:
        # `watch_health`). So is one left idle for `_KEEP_IDLE_SECONDS`: it goes back to the pool, whose own
        # options (`pool_recycle`, `pool_pre_ping`) then apply, as they did to every batch before.
        connection = self._postgres_connection
        now = time.monotonic()
        if connection is None or connection.invalidated or connection.closed or \
                now - self._postgres_used_at > _KEEP_IDLE_SECONDS:
            if connection is not None:
                with suppress(Exception):
                    await connection.close()
            connection = self._postgres_connection = await self._postgres_writer.connect()
        self._postgres_used_at = now
        await connection.run_sync(run_batch, batch)

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        """A read of several statements, in one transaction (one snapshot)."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def _read_one(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one SELECT: on PostgreSQL in autocommit, since one statement is its own snapshot
        anyway, and the `BEGIN` and `ROLLBACK` around it were two of the three round trips of every lookup
        (each round trip costs the server process a system call or two, which adds up under load); on SQLite
        without a `BEGIN`, for the same reason (`SINGLE_READ_OPTION`)."""
        if self._read_engine is None:
            async with self.engine.connect() as conn:
                yield await conn.execution_options(**{SINGLE_READ_OPTION: True})
        else:
            async with self._read_engine.connect() as conn:
                yield conn

    async def _select(self, query: Any, params: Mapping[str, Any] | None = None) -> Sequence[Row[Any]]:
        """The rows of one SELECT, off the server's loop (`_reads.py`). For the reads every chat makes; their
        rows are converted by the caller."""
        return await self._reads.select(query, params)

    async def _read_many(self, read: Callable[..., _T], *args: Any, snapshot: bool = True) -> _T:
        """`read(conn, *args)`, a read of several statements, off the server's loop (`Reads.many`)."""
        return await self._reads.many(read, *args, snapshot=snapshot)

    # -- users and tokens --------------------------------------------------------------------

    @_shielded
    async def ensure_user(self, name: str) -> User:
        return await self._write(partial(self._writes.ensure_user, name=name))

    @_shielded
    async def add_token(self, user_id: str, token: str, *, source: str = "api") -> None:
        token_hash = hash_token(token)
        await self._write(partial(self._writes.upsert_token, user_id=user_id, token_hash=token_hash, source=source),
                          after_commit=lambda _: self._tokens.forget(token_hash))

    @_shielded
    async def replace_tokens(self, tokens: Mapping[str, Sequence[str]], *, source: str = "config") -> None:
        hashes = {name: [hash_token(token) for token in user_tokens] for name, user_tokens in tokens.items()}
        await self._write(partial(self._writes.replace_tokens, hashes=hashes, source=source),
                          after_commit=lambda _: self._tokens.clear())

    @_shielded
    async def revoke_token(self, token: str) -> bool:
        token_hash = hash_token(token)
        return await self._write(partial(self._writes.revoke_token, token_hash=token_hash),
                                 after_commit=lambda _: self._tokens.forget(token_hash))

    @_shielded
    async def user_for_token(self, token: str) -> User | None:
        token_hash = hash_token(token)
        cached = self._tokens.get(token_hash)
        if cached is not None:
            return cached
        ticket = self._tokens.ticket()
        found = await self._select(_USER_FOR_TOKEN, {"b_hash": token_hash})
        if not found:
            return None
        row = found[0]
        user = User(id=row.id, name=row.name)
        self._tokens.fill(token_hash, user, ticket)
        return user

    # -- chats -------------------------------------------------------------------------------

    @_shielded
    async def create_chat(self, user_id: str, title: str = "", *, chat_id: str | None = None,
                          model: str | None = None) -> Chat:
        chat = new_chat(user_id, title, chat_id=chat_id, model=model)
        return await self._write(partial(self._writes.create_chat, chat=chat), after_commit=self._chats_put)

    @_shielded
    async def list_chats(self, user_id: str, *, limit: int = 200) -> list[Chat]:
        query = (select(chats).where(chats.c.user_id == user_id)
                 .order_by(chats.c.updated_at.desc(), chats.c.id.desc()).limit(limit))
        async with self._read_one() as conn:
            return [chat_from(row) for row in await conn.execute(query)]

    @_shielded
    async def get_chat(self, user_id: str, chat_id: str) -> Chat | None:
        chat = self._chats.get(chat_id)
        if chat is None:
            ticket = self._chats.ticket()
            found = await self._select(_CHAT_BY_ID, {"b_chat": chat_id})
            if not found:
                return None
            chat = chat_from(found[0])
            self._chats.fill(chat_id, chat, ticket)
        # Cached by id whoever owns it: another user's chat is not found, as in the database.
        return chat if chat.user_id == user_id else None

    @_shielded
    async def rename_chat(self, user_id: str, chat_id: str, title: str) -> Chat | None:
        return await self._write(partial(self._writes.rename_chat, user_id=user_id, chat_id=chat_id, title=title),
                                 after_commit=self._chats_put)

    @_shielded
    async def set_chat_model(self, user_id: str, chat_id: str, model: str | None) -> Chat | None:
        return await self._write(partial(Writes.set_chat_model, user_id=user_id, chat_id=chat_id, model=model),
                                 after_commit=self._chats_put)

    @_shielded
    async def record_run_model(self, run_id: str, model: str) -> None:
        await self._write(partial(Writes.record_run_model, run_id=run_id, model=model))

    @_shielded
    async def search_chats(self, user_id: str, query: str, *, limit: int = 20, offset: int = 0) -> list[SearchHit]:
        async with self._read_one() as conn:
            return await search_chats(conn, user_id, query, limit=limit, offset=offset)

    @_shielded
    async def delete_chat(self, user_id: str, chat_id: str) -> bool:
        return await self._write(partial(self._delete_chat, user_id=user_id, chat_id=chat_id),
                                 after_commit=lambda _: self._chats.forget(chat_id))

    def _delete_chat(self, conn: Connection, user_id: str, chat_id: str) -> bool:
        if conn.execute(select(chats.c.id).where(chats.c.id == chat_id, chats.c.user_id == user_id)).first() is None:
            return False
        conn.execute(queued_runs.delete().where(queued_runs.c.chat_id == chat_id))
        return self._writes.delete_chat(conn, user_id, chat_id)

    def _chats_put(self, chat: Chat | None) -> None:
        if chat is not None:
            self._chats.put(chat.id, chat)

    def _chats_put_second(self, value: tuple[Any, Chat | None, *tuple[Any, ...]] | None) -> None:
        if value is not None:
            self._chats_put(value[1])

    # -- messages ----------------------------------------------------------------------------

    @_shielded
    async def append_messages(self, chat_id: str, messages_: Sequence[Message], *,
                              run_id: str | None = None, parent_id: str | None = None,
                              usage: Mapping[str, Any] | None = None) -> list[MessageRow]:
        groups = rows_for(messages_)
        insert = partial(self._writes.insert_rows, chat_id=chat_id, groups=groups, run_id=run_id, parent_id=parent_id)
        if usage is not None and run_id is not None:
            insert = partial(self._writes.insert_round, insert=insert, run_id=run_id, usage=usage)
        rows, _ = await self._write(insert, after_commit=self._chats_put_second)
        return rows

    @_shielded
    async def list_messages(self, chat_id: str, *, after: int = 0, limit: int | None = None) -> list[MessageRow]:
        query = (select(messages).where(messages.c.chat_id == chat_id, messages.c.sequence_number > after)
                 .order_by(messages.c.sequence_number))
        if limit is not None:
            query = query.limit(limit)
        return [message_row_from(row) for row in await self._select(query)]

    # -- ChatMemory --------------------------------------------------------------------------

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        """The messages of the conversation's active branch, oldest first (`ChatMemory`); the chat id is the
        conversation id."""
        path = await self.chat_path(conversation_id or "default")
        return [message for row in path.rows for message in row.messages]

    @_shielded
    async def append(self, messages_: Sequence[Message], conversation_id: str | None = None) -> None:
        """Add messages to the conversation in one transaction (`ChatMemory`), creating its chat if needed."""
        chat_id = conversation_id or "default"
        await self._write(partial(self._writes.append, chat_id=chat_id, groups=rows_for(messages_)),
                          after_commit=lambda _: self._chats.forget(chat_id))

    # -- runs --------------------------------------------------------------------------------

    @_shielded
    async def start_run(self, chat_id: str, *, user_message: Message, client_message_id: str, owner: str,
                        lease_seconds: float, title: str | None = None, parent_id: str | None = None,
                        model: str | None = None, new_chat: Chat | None = None) -> RunStart:
        if new_chat is not None and new_chat.id != chat_id:
            raise ValueError(f"new_chat is the chat {new_chat.id!r}, not {chat_id!r}.")
        try:
            start, _ = await self._write(partial(
                self._writes.start_run, chat_id=chat_id, user_message=user_message,
                client_message_id=client_message_id, owner=owner, lease_seconds=lease_seconds, title=title,
                parent_id=parent_id, model=model, new_chat=new_chat),
                # A new chat's start refuses only when its id is taken, found before anything is written (and
                # with a parent, not found after: that one runs again first in the next batch, as any failure).
                after_commit=self._chats_put_second, refusable=new_chat is None,
                refuses_first=(ChatIdTaken,) if new_chat is not None else ())
        except Earlier as earlier:
            return earlier.start
        self._knows(start.run)
        return start

    @_shielded
    async def start_answer(self, chat_id: str, message_id: str, *, client_message_id: str | None, owner: str,
                           lease_seconds: float) -> RunStart:
        try:
            start, _ = await self._write(partial(
                tree.start_answer, chat_id=chat_id, row_id=message_id, client_message_id=client_message_id,
                owner=owner, lease_seconds=lease_seconds), after_commit=lambda _: self._chats.forget(chat_id),
                refusable=True)
        except Earlier as earlier:
            return earlier.start
        self._knows(start.run)
        return start

    # -- branches ----------------------------------------------------------------------------

    @_shielded
    async def chat_path(self, chat_id: str, through: str | None = None) -> ChatPath:
        return await self._read_many(tree.chat_path, chat_id, through)

    @_shielded
    async def switch_leaf(self, chat_id: str, message_id: str) -> ChatPath:
        return await self._write(partial(tree.switch_leaf, chat_id=chat_id, row_id=message_id),
                                 after_commit=lambda _: self._chats.forget(chat_id))

    @_shielded
    async def run_history(self, chat_id: str, run_id: str) -> list[Message]:
        # No shared snapshot needed: a row's parent never changes, so the path up from the run's tip is the same
        # whenever it is read, and the tip is the run's own (only the run writes under it).
        rows = await self._read_many(tree.run_history, chat_id, run_id, snapshot=False)
        return [message for row in rows for message in row.messages]

    @_shielded
    async def resume_run(self, chat_id: str, decisions: Sequence[Decision], *, owner: str,
                         lease_seconds: float) -> Resumption:
        ids = [d.approval_id for d in decisions]
        if len(set(ids)) != len(ids):
            raise ApprovalsIncomplete("The request decides the same approval twice; send one decision per approval.")
        resumption, _ = await self._write(partial(self._writes.resume_run, chat_id=chat_id, decisions=decisions,
                                                  owner=owner, lease_seconds=lease_seconds),
                                          after_commit=self._chats_put_second, refusable=True)
        self._knows(resumption.run)
        return resumption

    @_shielded
    async def get_run(self, chat_id: str, run_id: str) -> Run | None:
        async with self._read_one() as conn:
            return await run_where(conn, runs.c.id == run_id, runs.c.chat_id == chat_id)

    @_shielded
    async def run_by_number(self, chat_id: str, run_number: int) -> Run | None:
        async with self._read_one() as conn:
            return await run_where(conn, runs.c.chat_id == chat_id, runs.c.run_number == run_number)

    @_shielded
    async def active_run(self, chat_id: str) -> Run | None:
        found = await self._select(ACTIVE_RUN, {"b_chat": chat_id})
        return run_from(found[0]) if found else None

    @_shielded
    async def paused_run(self, chat_id: str) -> PausedRun | None:
        return await self._read_many(Writes.paused, chat_id)

    @_shielded
    async def run_summaries(self, chat_id: str, *, after: int = 0) -> list[RunSummary]:
        async with self._read() as conn:
            return await run_summaries(conn, chat_id, after)

    @_shielded
    async def record_step_text(self, run_id: str, step: int, text: str) -> None:
        await self._write(partial(Writes.record_step_text, run_id=run_id, step=step, text=text), run_id=run_id)

    def checkpoint_step_text(self, run_id: str, step: int, text: str) -> None:
        """`record_step_text` without waiting: the text goes with the writer's next batch, or after at most
        `RIDE_SECONDS` in one of its own (`Writer.ride`); a newer checkpoint of the run not written yet replaces
        it. A failure is logged: the run's next checkpoint makes it good."""
        self.engine  # noqa: B018 - raises when the store is not open
        self.writer.ride(f"step_text:{run_id}", partial(Writes.record_step_text, run_id=run_id, step=step, text=text),
                         chat=self._run_chats.get(run_id, ""))

    async def record_step_message(self, run_id: str, message: Message) -> None:
        await self.record_journal(run_id, step_message=message)

    async def record_tool_call(self, run_id: str, call: ToolCallPart) -> None:
        await self.record_journal(run_id, calls=[call])

    async def record_tool_result(self, run_id: str, result: ToolResultPart) -> None:
        await self.record_journal(run_id, results=[result])

    @_shielded
    async def record_journal(self, run_id: str, *, calls: Sequence[ToolCallPart] = (),
                             results: Sequence[ToolResultPart] = (), step_message: Message | None = None) -> None:
        await self._write(partial(
            self._writes.record_journal, run_id=run_id,
            calls=[(call.id, call_adapter.dump_json(call).decode()) for call in calls],
            results=[(result.call_id, result_adapter.dump_json(result).decode()) for result in results],
            step_message=step_message.to_json().decode() if step_message is not None else None, now=utc_now()),
            run_id=run_id)

    @_shielded
    async def pause_run(self, run_id: str, *, state_json: str, pending: Sequence[tuple[str, ToolCallPart]],
                        usage: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        return self._forgets(run_id, await self._write(partial(
            self._writes.pause_run, run_id=run_id, state_json=state_json, pending=pending, usage=usage, steps=steps,
            event_count=event_count), run_id=run_id))

    @_shielded
    async def finish_run(self, run_id: str, *, status: RunStatus, usage: Mapping[str, Any] | None,
                         error: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        return self._forgets(run_id, await self._write(partial(
            Writes.close_run, run_id=run_id, status=status, usage=usage, error=error, steps=steps,
            event_count=event_count), run_id=run_id))

    @_shielded
    async def finish_run_storing(self, run_id: str, *, chat_id: str, messages: Sequence[Message], status: RunStatus,
                                 usage: Mapping[str, Any] | None, error: Mapping[str, Any] | None, steps: int,
                                 event_count: int | None) -> tuple[list[MessageRow], bool]:
        """The run's last round (`append_messages`) and its end (`finish_run`) in one transaction: the server holds
        a run's answer for its end (`RunMemory.answer`), one commit instead of two."""
        def write(conn: Connection) -> tuple[list[MessageRow], Chat | None, bool]:
            rows, chat = self._writes.insert_rows(conn, chat_id, rows_for(messages), run_id=run_id)
            return rows, chat, Writes.close_run(conn, run_id, status=status, usage=usage, error=error, steps=steps,
                                                event_count=event_count)
        rows, _, finished = await self._write(write, run_id=run_id, after_commit=self._chats_put_second)
        return rows, self._forgets(run_id, finished)

    # -- queued runs (double texting, `_queue.py`) ---------------------------------------------

    @_shielded
    async def queue_run(self, chat_id: str, *, user_message: Message, client_message_id: str, owner: str,
                        lease_seconds: float, title: str | None, strategy: QueueStrategy) -> Queued:
        try:
            queued, _ = await self._write(partial(
                queue_run, self._writes, chat_id=chat_id, user_message=user_message,
                client_message_id=client_message_id, owner=owner, lease_seconds=lease_seconds, title=title,
                strategy=strategy), after_commit=self._chats_put_second, refusable=True)
        except Earlier as earlier:
            return Queued(start=earlier.start, created=False)
        if queued.queued is not None and title:
            self._chats.forget(chat_id)  # titled in the queueing transaction
        return queued

    @_shielded
    async def promote_queued(self, chat_id: str, *, owner: str, lease_seconds: float) -> Promoted | None:
        # Asked after every run's end: a read first, so that a chat with no queue (nearly all) costs no write.
        if not await self._select(QUEUE_HEAD, {"b_chat": chat_id}):
            return None
        promoted, _ = await self._write(partial(promote, self._writes, chat_id=chat_id, owner=owner,
                                                lease_seconds=lease_seconds), after_commit=self._chats_put_second)
        if promoted is not None:
            self._knows(promoted.start.run)
        return promoted

    @_shielded
    async def waiting_chats(self, *, limit: int = 100) -> list[str]:
        async with self._read_one() as conn:
            return [row.chat_id for row in await conn.execute(waiting_chats_query(limit))]

    @_shielded
    async def queued_runs(self, chat_id: str) -> list[QueuedRun]:
        async with self._read_one() as conn:
            return [queued_from(row) for row in await conn.execute(queue_query(chat_id))]

    @_shielded
    async def interrupt_waiting(self, chat_id: str) -> bool:
        return bool(await self._select(INTERRUPT_WAITING, {"b_chat": chat_id}))

    @_shielded
    async def cancel_queued(self, chat_id: str, run_id: str) -> bool:
        return await self._write(partial(_cancel_queued, chat_id=chat_id, run_id=run_id))

    # -- leases and recovery -----------------------------------------------------------------

    @_shielded
    async def renew_leases(self, owner: str, run_ids: Sequence[str], lease_seconds: float) -> int:
        if not run_ids:
            return 0
        # Through the writer, at the head of its queue: it waits for the batch in flight, never behind the others.
        # On a connection of its own, a renewal locked the runs' rows in its order while a batch locked them in
        # its own (the order its operations came in): PostgreSQL broke each such deadlock after a second
        # (deadlock_timeout) by failing one of them, the batch's commits waiting all that time. In the batch it
        # shares the writer's transaction and locks: nothing of this process can be waiting on the other.
        return await self._write(partial(Writes.renew_leases, owner=owner, run_ids=run_ids,
                                         lease_seconds=lease_seconds), urgent=True)

    @_shielded
    async def expired_runs(self) -> list[Run]:
        query = select(*RUN_COLUMNS).where(runs.c.status == "running",
                                           func.coalesce(runs.c.lease_expires_at, 0.0) < time.time())
        return [self._knows(run_from(row)) for row in await self._select(query)]

    @_shielded
    async def recover_run(self, run_id: str, *, owner: str, lease_seconds: float) -> Recovered | None:
        recovered = await self._write(partial(self._writes.recover_run, run_id=run_id, owner=owner,
                                              lease_seconds=lease_seconds), after_commit=self._chats_put_second,
                                      run_id=run_id)
        return recovered[0] if recovered is not None else None

    @_shielded
    async def take_over_run(self, run_id: str, *, owner: str, lease_seconds: float,
                            continue_limit: int) -> Continued | Recovered | None:
        taken = await self._write(partial(self._writes.take_over_run, run_id=run_id, owner=owner,
                                          lease_seconds=lease_seconds, continue_limit=continue_limit),
                                  after_commit=self._chats_put_second, run_id=run_id)
        return taken[0] if taken is not None else None

    @_shielded
    async def release_lease(self, run_id: str, *, owner: str) -> bool:
        return self._forgets(run_id, await self._write(partial(Writes.release_lease, run_id=run_id, owner=owner),
                                                       run_id=run_id))

    @_shielded
    async def claim_resume(self, state_id: str, conversation_id: str | None = None) -> bool:
        return await self._write(partial(self._writes.claim_resume, state_id=state_id,
                                         conversation_id=conversation_id))


_KEEP_IDLE_SECONDS = 30.0
"""The PostgreSQL writer gives its connection back to the pool after this long without a batch (`_run_batch`): the
pool's own options (`pool_recycle`, `pool_pre_ping`, for connections that a firewall or a proxy drops while idle)
then apply to the next batch, as they applied to every batch when each checked its connection out."""

_RUN_CHATS_KEPT = 10_000
"""Runs whose chat a store keeps for ordering writes (far more than a process runs at once; a run forgotten early
only loses that ordering)."""
_USER_FOR_TOKEN = (select(users.c.id, users.c.name).join(api_tokens, api_tokens.c.user_id == users.c.id)
                   .where(api_tokens.c.token_hash == bindparam("b_hash"), api_tokens.c.revoked_at.is_(None)))
_CHAT_BY_ID = select(chats).where(chats.c.id == bindparam("b_chat"))

