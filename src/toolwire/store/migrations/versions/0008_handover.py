"""Handover: how many times a run was handed over by a server that stopped gracefully (`--drain-handover`).

A handover is not a failure, so it does not count against `--max-continuations` (`runs.continuations`); it is
counted here so that every takeover still gets its own `continuation` number (the events of a run continued after
a single server's restart are numbered from it, docs/guides/durable-runs.md). Existing runs start at 0.

Revision ID: 0008_handover
Revises: 0007_durable_runs
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_handover"
down_revision: str | None = "0007_durable_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: SQLite adds the column in place, PostgreSQL without rewriting the table.
    op.add_column("runs", sa.Column("handovers", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.drop_column("runs", "handovers")
