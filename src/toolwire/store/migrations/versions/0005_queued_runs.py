"""Queued runs: messages sent while the chat's run is going, waiting for their turn (docs/guides/double-texting.md).

A queued run has an id (the run's id once it starts) and its user message, but no run number and no row in
`messages` yet: both are taken in the transaction that starts it, so run numbers and sequence numbers stay in
the order runs really start. `position` orders a chat's queue (taken under the chat row's lock).

Revision ID: 0005_queued_runs
Revises: 0004_blobs
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from toolwire.store._schema import UTCDateTime

revision: str = "0005_queued_runs"
down_revision: str | None = "0004_blobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "queued_runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("client_message_id", sa.String(200), nullable=False),
        sa.Column("strategy", sa.String(16), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("message_json", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_queued_runs_chat_id_chats", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_queued_runs"),
        sa.UniqueConstraint("chat_id", "client_message_id", name="uq_queued_runs_chat_id_client_message_id"),
        sa.UniqueConstraint("chat_id", "position", name="uq_queued_runs_chat_id_position"),
    )


def downgrade() -> None:
    op.drop_table("queued_runs")
