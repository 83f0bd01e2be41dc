"""Durable runs: how many times a run was continued after the process running it stopped.

A replica that takes over an expired lease continues the run (docs/guides/durable-runs.md) and counts it here,
in the transaction that takes the lease; past the server's limit the run ends `interrupted` instead. Existing
runs start at 0.

Revision ID: 0007_durable_runs
Revises: 0005_queued_runs
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_durable_runs"
down_revision: str | None = "0005_queued_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: SQLite adds the column in place, PostgreSQL without rewriting the table.
    op.add_column("runs", sa.Column("continuations", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.drop_column("runs", "continuations")
