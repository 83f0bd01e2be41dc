"""Files and blobs: `files` (a chat's file: owner, chat, sha256, type, name, size) and the SQL blob store's
`blob_contents` / `blob_chunks` (the bytes, once per sha256, in chunks; empty when blobs are kept in a folder).

Revision ID: 0004_blobs
Revises: 0002_search
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from toolwire.store._schema import UTCDateTime

revision: str = "0004_blobs"
down_revision: str | None = "0003_branches"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64), nullable=False),
        sa.Column("chat_id", sa.String(64), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("media_type", sa.String(200), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_files_user_id_users", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["chat_id"], ["chats.id"], name="fk_files_chat_id_chats", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_files"),
    )
    op.create_index("ix_files_user_id", "files", ["user_id"])
    op.create_index("ix_files_chat_id", "files", ["chat_id"])
    op.create_index("ix_files_sha256", "files", ["sha256"])
    op.create_table(
        "blob_contents",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("touched_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blob_contents"),
    )
    op.create_table(
        "blob_chunks",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["sha256"], ["blob_contents.sha256"], name="fk_blob_chunks_sha256_blob_contents",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("sha256", "position", name="pk_blob_chunks"),
    )


def downgrade() -> None:
    op.drop_table("blob_chunks")
    op.drop_table("blob_contents")
    op.drop_index("ix_files_sha256", table_name="files")
    op.drop_index("ix_files_chat_id", table_name="files")
    op.drop_index("ix_files_user_id", table_name="files")
    op.drop_table("files")
