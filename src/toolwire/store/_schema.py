"""The SQL schema, one definition for SQLite and PostgreSQL.

The Alembic migrations in `migrations/versions/` create exactly these tables (a test compares them).
Types are chosen to mean the same on both databases: text ids, JSON kept as text (written and read
whole, never queried into), timestamps in UTC, lease expiry as seconds since the epoch.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.types import TypeDecorator

__all__ = ["UTCDateTime", "api_tokens", "approvals", "blob_chunks", "blob_contents", "chats", "described_by_metadata",
           "files", "messages", "metadata", "resume_claims", "run_tool_calls", "runs", "users"]


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # pragma: no cover - SQLAlchemy parses SQLite's text already
            value = datetime.fromisoformat(value)
        moment: datetime = value
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})

users = Table(
    "users", metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

api_tokens = Table(
    "api_tokens", metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    # sha256 of the token: the token itself is never stored.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("source", String(32), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("revoked_at", UTCDateTime(), nullable=True),
)

chats = Table(
    "chats", metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("title", Text(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # Counters bumped in the inserting transaction: gap-free sequence and run numbers per chat.
    Column("last_sequence", Integer(), nullable=False, server_default=text("0")),
    Column("run_count", Integer(), nullable=False, server_default=text("0")),
    # The row the chat shows and answers next (a chat is a tree of rows, see `_tree.py`); NULL when empty.
    Column("active_leaf_id", String(64), nullable=True),
    # The id of the model the chat's runs use (one of the server's models); NULL: the server's default.
    Column("model", String(200), nullable=True),
    Index(None, "user_id", "updated_at"),
)

messages = Table(
    "messages", metadata,
    Column("id", String(64), primary_key=True),
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
    Column("sequence_number", Integer(), nullable=False),
    Column("role", String(16), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("run_id", String(64), nullable=True),
    Column("client_message_id", String(200), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    # A JSON list of toolwire messages: one, or two for a tools_aggregate (calls, then results).
    Column("message_json", Text(), nullable=False),
    # The row this one follows (NULL for a first message): rows form a tree, a branch per edit or regenerate.
    Column("parent_id", String(64), nullable=True),
    UniqueConstraint("chat_id", "sequence_number"),
    UniqueConstraint("chat_id", "client_message_id"),
    Index(None, "run_id"),
    Index(None, "parent_id", "chat_id"),
)

runs = Table(
    "runs", metadata,
    Column("id", String(64), primary_key=True),
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
    Column("run_number", Integer(), nullable=False),
    Column("status", String(16), nullable=False),
    Column("resumed_from", String(64), nullable=True),
    Column("client_message_id", String(200), nullable=True),
    Column("paused_state", Text(), nullable=True),
    # The assistant message of the step in progress, kept for recovery after a crash.
    Column("step_message", Text(), nullable=True),
    Column("usage_json", Text(), nullable=True),
    Column("error_json", Text(), nullable=True),
    Column("steps", Integer(), nullable=False, server_default=text("0")),
    Column("event_count", Integer(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", Float(), nullable=True),
    # The row the run's answer goes under: its user message, or the last row of the run it resumes.
    Column("leaf_id", String(64), nullable=True),
    # The id of the model the run used, recorded as it starts (NULL: a server that offers no model choice).
    Column("model", String(200), nullable=True),
    # How many times the run was continued after the process running it stopped (docs/guides/durable-runs.md).
    Column("continuations", Integer(), nullable=False, server_default=text("0")),
    # How many times a stopping server handed it over (`--drain-handover`): not counted in `continuations`.
    Column("handovers", Integer(), nullable=False, server_default=text("0")),
    # The text the step in progress streamed so far, `{"step": n, "text": ...}` (durable-runs.md).
    Column("step_text", Text(), nullable=True),
    UniqueConstraint("chat_id", "run_number"),
    # One running-or-paused run per chat, enforced by the database itself.
    Index("uq_runs_one_active_per_chat", "chat_id", unique=True,
          sqlite_where=text("status IN ('running', 'paused')"),
          postgresql_where=text("status IN ('running', 'paused')")),
    Index(None, "status", "lease_expires_at"),
)

run_tool_calls = Table(
    "run_tool_calls", metadata,
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("call_id", String(200), primary_key=True),
    Column("call_json", Text(), nullable=True),
    Column("result_json", Text(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

approvals = Table(
    "approvals", metadata,
    Column("id", String(64), primary_key=True),
    Column("run_id", String(64), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
    Column("call_id", String(200), nullable=False),
    Column("call_json", Text(), nullable=False),
    Column("position", Integer(), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", Text(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("decided_at", UTCDateTime(), nullable=True),
    Index(None, "run_id"),
)

resume_claims = Table(
    "resume_claims", metadata,
    Column("state_id", String(200), primary_key=True),
    Column("conversation_id", String(200), nullable=True),
    Column("claimed_at", UTCDateTime(), nullable=False),
)

# Files (migration 0004, `blobs.py`): a file belongs to a chat and its user and names its content by sha256;
# the content is kept once per sha256 in a blob store (a folder, or the two tables after it).
files = Table(
    "files", metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(64), ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("media_type", String(200), nullable=False),
    Column("name", Text(), nullable=False),
    Column("size", BigInteger(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Index(None, "user_id"),
    Index(None, "chat_id"),
    Index(None, "sha256"),
)

blob_contents = Table(
    "blob_contents", metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", BigInteger(), nullable=False),
    # Seconds since the epoch of the last put: the sweep spares contents put within its grace period.
    Column("touched_at", Float(), nullable=False),
)

blob_chunks = Table(
    "blob_chunks", metadata,
    Column("sha256", String(64), ForeignKey("blob_contents.sha256", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer(), primary_key=True),
    Column("data", LargeBinary(), nullable=False),
)


def described_by_metadata(name: str | None, type_: str, parent_names: object) -> bool:
    """False for the search index (migration 0002's FTS5 tables with their shadow tables, and expression
    indexes): no `Table` here describes them, so schema comparisons (Alembic's `include_name`) leave them out."""
    return not (name or "").startswith(("search_", "ix_search_"))
