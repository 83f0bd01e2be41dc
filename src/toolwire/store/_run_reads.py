"""Reads of a chat's runs that `SQLStore` makes on its async reader connections: its running run, one run by
condition, and the runs behind a page of messages with the decisions that resumed them (`run_summaries`, which
the messages route sends)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ._records import Approval, Run, RunSummary
from ._schema import approvals, messages, runs
from ._writes import RUN_COLUMNS, approval_from, run_from

__all__ = ["ACTIVE_RUN", "run_summaries", "run_where"]

ACTIVE_RUN = select(*RUN_COLUMNS).where(runs.c.chat_id == bindparam("b_chat"), runs.c.status == "running")


async def run_where(conn: AsyncConnection, *conditions: Any) -> Run | None:
    row = (await conn.execute(select(*RUN_COLUMNS).where(*conditions))).first()
    return run_from(row) if row is not None else None


async def run_summaries(conn: AsyncConnection, chat_id: str, after: int) -> list[RunSummary]:
    """The runs whose rows come after sequence number `after`, in order, each with the decisions that resumed it."""
    # Subqueries rather than lists of ids: a long chat has as many runs as it has messages.
    run_ids = select(messages.c.run_id).where(messages.c.chat_id == chat_id, messages.c.sequence_number > after,
                                              messages.c.run_id.is_not(None))
    found = [run_from(row) for row in await conn.execute(
        select(*RUN_COLUMNS).where(runs.c.chat_id == chat_id, runs.c.id.in_(run_ids)).order_by(runs.c.run_number))]
    decided: dict[str, list[Approval]] = {}
    if any(run.resumed_from is not None for run in found):
        paused_ids = select(runs.c.resumed_from).where(runs.c.chat_id == chat_id, runs.c.id.in_(run_ids))
        query = (select(approvals).where(approvals.c.chat_id == chat_id, approvals.c.run_id.in_(paused_ids),
                                         approvals.c.status != "pending")
                 .order_by(approvals.c.run_id, approvals.c.position))
        for row in await conn.execute(query):
            decided.setdefault(row.run_id, []).append(approval_from(row))
    return [RunSummary(run=run, decisions=decided.get(run.resumed_from or "", [])) for run in found]
