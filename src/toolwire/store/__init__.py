"""Persistence: the `Store` protocol and `SQLStore`, its implementation on SQLite and PostgreSQL.

    from toolwire.store import SQLStore

    async with SQLStore("sqlite:///toolwire.db") as store:     # migrations run on open
        chat = await store.create_chat(user.id, "Trip")
        rows = await store.append_messages(chat.id, [Message.user("Hi")])

A store is a `ChatMemory` too: `Agent(memory=store)` keeps conversations in the database (the
conversation id is the chat id). The chat server (`toolwire.server`) keeps everything here: users and
hashed API tokens, chats, their rows (one `tools_aggregate` row per tool round), runs with their
leases and recovery journal, and approvals.
"""

from ._engine import StoreUnavailable as StoreUnavailable
from ._protocol import (
    ApprovalDecided as ApprovalDecided,
    ApprovalNotFound as ApprovalNotFound,
    ApprovalsIncomplete as ApprovalsIncomplete,
    ChatIdTaken as ChatIdTaken,
    ChatNotFound as ChatNotFound,
    IdempotencyConflict as IdempotencyConflict,
    InvalidParent as InvalidParent,
    MessageNotFound as MessageNotFound,
    NotPaused as NotPaused,
    RunConflict as RunConflict,
    Store as Store,
    StoreError as StoreError,
)
from ._records import (
    Approval as Approval,
    Chat as Chat,
    ChatPath as ChatPath,
    Continued as Continued,
    Decision as Decision,
    MessageRow as MessageRow,
    PausedRun as PausedRun,
    Recovered as Recovered,
    Resumption as Resumption,
    Run as Run,
    RunStart as RunStart,
    RunStatus as RunStatus,
    RunSummary as RunSummary,
    SearchHit as SearchHit,
    User as User,
    iso as iso,
    new_chat as new_chat,
    new_id as new_id,
)
from ._recovery import INTERRUPTED as INTERRUPTED
from .sql import SQLStore as SQLStore, hash_token as hash_token

__all__ = [
    "INTERRUPTED",
    "Approval",
    "ApprovalDecided",
    "ApprovalNotFound",
    "ApprovalsIncomplete",
    "Chat",
    "ChatIdTaken",
    "ChatNotFound",
    "ChatPath",
    "Continued",
    "Decision",
    "IdempotencyConflict",
    "InvalidParent",
    "MessageNotFound",
    "MessageRow",
    "NotPaused",
    "PausedRun",
    "Recovered",
    "Resumption",
    "Run",
    "RunConflict",
    "RunStart",
    "RunStatus",
    "RunSummary",
    "SQLStore",
    "SearchHit",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "User",
    "hash_token",
    "iso",
    "new_chat",
    "new_id",
]
