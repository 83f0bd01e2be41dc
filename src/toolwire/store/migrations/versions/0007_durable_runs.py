"""Durable runs: how many times a run was continued after the process running it stopped, and the text of its
step in progress.

A replica that takes over an expired lease continues the run (docs/guides/durable-runs.md) and counts it here,
in the transaction that takes the lease; past the server's limit the run ends `interrupted` instead. Existing
runs start at 0. `step_text` holds the text the step in progress has streamed so far (checkpointed at a bounded
rate), stored as an incomplete row if the run cannot be continued.

Revision ID: 0007_durable_runs
Revises: 0006_chat_models
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_durable_runs"
down_revision: str | None = "0006_chat_models"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: SQLite adds the column in place, PostgreSQL without rewriting the table.
    op.add_column("runs", sa.Column("continuations", sa.Integer(), nullable=False, server_default=sa.text("0")))
    op.add_column("runs", sa.Column("step_text", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "step_text")
    op.drop_column("runs", "continuations")
