"""The model picker: each chat's chosen model and the model each run used (docs/guides/models.md).

`chats.model` is the id of one of the server's models (`toolwire serve --model`/`--models-file`); NULL, which
every existing chat gets, means the server's default model. `runs.model` is the id the run used, recorded as
it starts; existing runs keep NULL (which model they used was not recorded). Both are plain nullable columns
added in place: no table is rebuilt and no row is rewritten, on SQLite and on PostgreSQL.

Revision ID: 0006_chat_models
Revises: 0005_queued_runs
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_chat_models"
down_revision: str | None = "0005_queued_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chats", sa.Column("model", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("model", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "model")
    op.drop_column("chats", "model")
