"""Chats become trees: each row gets a parent, each chat an active leaf, each run the row it extends.

Existing chats are linear: each row's parent is the row before it (by sequence number), a chat's active leaf
is its last row, and a run extends its user message (or, for a resumed run, nothing recorded: it falls back
on the rows it writes). Nothing else changes: sequence numbers still count every row of a chat.

Revision ID: 0003_branches
Revises: 0002_search
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_branches"
down_revision: str | None = "0002_search"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Plain ALTER TABLE ... ADD COLUMN on both databases (nullable, no default): SQLite's batch mode would copy the
# table, and dropping `messages` on the way would drop the search triggers of 0002 with it.
_PARENTS = """UPDATE messages SET parent_id = (
    SELECT p.id FROM messages AS p
    WHERE p.chat_id = messages.chat_id AND p.sequence_number < messages.sequence_number
    ORDER BY p.sequence_number DESC LIMIT 1)"""
_LEAVES = """UPDATE chats SET active_leaf_id = (
    SELECT m.id FROM messages AS m WHERE m.chat_id = chats.id ORDER BY m.sequence_number DESC LIMIT 1)"""
_RUN_LEAVES = """UPDATE runs SET leaf_id = (
    SELECT m.id FROM messages AS m WHERE m.run_id = runs.id AND m.kind = 'user'
    ORDER BY m.sequence_number LIMIT 1)"""


def upgrade() -> None:
    op.add_column("messages", sa.Column("parent_id", sa.String(64), nullable=True))
    op.add_column("chats", sa.Column("active_leaf_id", sa.String(64), nullable=True))
    op.add_column("runs", sa.Column("leaf_id", sa.String(64), nullable=True))
    op.execute(_PARENTS)
    op.execute(_LEAVES)
    op.execute(_RUN_LEAVES)
    # After the fill: one index build instead of an update of it per row.
    op.create_index("ix_messages_parent_id_chat_id", "messages", ["parent_id", "chat_id"])


def downgrade() -> None:
    """Back to linear chats: every branch's rows stay, ordered by sequence number as before."""
    op.drop_index("ix_messages_parent_id_chat_id", table_name="messages")
    # SQLite (3.35+) drops an unindexed column in place, as PostgreSQL does.
    op.drop_column("runs", "leaf_id")
    op.drop_column("chats", "active_leaf_id")
    op.drop_column("messages", "parent_id")
