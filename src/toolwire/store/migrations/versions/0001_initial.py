"""The first schema: users, API tokens, chats, messages, runs, the run journal, approvals, resume claims.

Revision ID: 0001_initial
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from toolwire.store._schema import UTCDateTime

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE = sa.text("status IN ('running', 'paused')")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_api_tokens_user_id_users", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    op.create_table(
        "chats",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("last_sequence", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("run_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_chats_user_id_users", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_chats"),
    )
    op.create_index("ix_chats_user_id_updated_at", "chats", ["user_id", "updated_at"])
    op.create_table(
        "messages",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("sequence_number", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("client_message_id", sa.String(200), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("message_json", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_messages_chat_id_chats", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.UniqueConstraint("chat_id", "sequence_number", name="uq_messages_chat_id_sequence_number"),
        sa.UniqueConstraint("chat_id", "client_message_id", name="uq_messages_chat_id_client_message_id"),
    )
    op.create_index("ix_messages_run_id", "messages", ["run_id"])
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("run_number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("resumed_from", sa.String(64), nullable=True),
        sa.Column("client_message_id", sa.String(200), nullable=True),
        sa.Column("paused_state", sa.Text(), nullable=True),
        sa.Column("step_message", sa.Text(), nullable=True),
        sa.Column("usage_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("steps", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("event_count", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_runs_chat_id_chats", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("chat_id", "run_number", name="uq_runs_chat_id_run_number"),
    )
    op.create_index("uq_runs_one_active_per_chat", "runs", ["chat_id"], unique=True,
                    sqlite_where=_ACTIVE, postgresql_where=_ACTIVE)
    op.create_index("ix_runs_status_lease_expires_at", "runs", ["status", "lease_expires_at"])
    op.create_table(
        "run_tool_calls",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("call_json", sa.Text(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_tool_calls_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "call_id", name="pk_run_tool_calls"),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("call_id", sa.String(200), nullable=False),
        sa.Column("call_json", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("decided_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_approvals_chat_id_chats", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_approvals_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
    )
    op.create_index("ix_approvals_run_id", "approvals", ["run_id"])
    op.create_table(
        "resume_claims",
        sa.Column("state_id", sa.String(200), nullable=False),
        sa.Column("conversation_id", sa.String(200), nullable=True),
        sa.Column("claimed_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("state_id", name="pk_resume_claims"),
    )


def downgrade() -> None:
    for table in ("resume_claims", "approvals", "run_tool_calls", "runs", "messages", "chats", "api_tokens", "users"):
        op.drop_table(table)
