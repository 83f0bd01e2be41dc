"""Lease renewal while the writer commits rounds of the same runs: no deadlock, nothing fails (PostgreSQL, where
another connection could hold the runs' rows; SQLite has one writer)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from sqlalchemy import Connection, select, text

from tests.store.test_sql_store import start
from toolwire.store import SQLStore
from toolwire.store._schema import runs
from toolwire.store._writes import Writes

pytestmark = pytest.mark.anyio

RUNS = 12


async def running_runs(store: SQLStore, count: int) -> list[str]:
    user = await store.ensure_user("alice")
    run_ids = []
    for index in range(count):
        chat = await store.create_chat(user.id, f"chat {index}")
        run_ids.append((await start(store, chat.id, lease=30)).run.id)
    return run_ids


async def scan_order(store: SQLStore, run_ids: list[str]) -> list[str]:
    """The order PostgreSQL reads these runs in for the renewal's WHERE (the order its UPDATE locks them in)."""
    async with store.engine.connect() as conn:
        found = await conn.execute(select(runs.c.id).where(runs.c.id.in_(run_ids), runs.c.lease_owner == "proc-1",
                                                           runs.c.status == "running"))
        return list(found.scalars())


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_renewing_leases_while_a_batch_writes_the_same_runs_does_not_deadlock(db_url: str) -> None:
    """A batch checkpoints one run's text, then (a moment later) the others'; a renewal of all of them starts in
    that moment. Renewing on a connection of its own, it locked the others and waited for the first: PostgreSQL
    broke the deadlock after a second by failing the renewal (the writer retries its batch; the renewal did not)."""
    async with SQLStore(db_url) as store:
        run_ids = await running_runs(store, RUNS)
        assert await store.renew_leases("proc-1", run_ids, 30) == RUNS  # (connections open before the race)
        order = await scan_order(store, run_ids)
        assert sorted(order) == sorted(run_ids)
        first, others = order[-1], order[:-1]  # locked first by the batch, last by a renewal in scan order
        first_locked = anyio.Event()

        def batch(conn: Connection) -> None:
            Writes.record_step_text(conn, first, 0, "first")
            first_locked.set()
            conn.execute(text("SELECT pg_sleep(0.8)"))  # (shorter than deadlock_timeout: the renewal waits longer)
            for run_id in others:
                Writes.record_step_text(conn, run_id, 0, "later")

        renewed: list[int] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.writer.write, batch)
            await first_locked.wait()
            with anyio.fail_after(30):
                renewed.append(await store.renew_leases("proc-1", run_ids, 60))
        assert renewed == [RUNS]
        async with store.engine.connect() as conn:
            rows = (await conn.execute(select(runs.c.id, runs.c.step_text, runs.c.lease_expires_at)
                                       .where(runs.c.id.in_(run_ids)))).all()
        texts: dict[str, Any] = {row.id: row.step_text for row in rows}
        assert texts[first] is not None and "first" in texts[first]
        assert all("later" in texts[run_id] for run_id in others)
        expiries = sorted(row.lease_expires_at for row in rows)
        assert expiries[-1] - expiries[0] < 1  # all renewed by the one renewal (60 s), none left at 30 s


async def test_renewal_renews_only_the_owners_running_runs(store: SQLStore) -> None:
    run_ids = await running_runs(store, 3)
    await store.finish_run(run_ids[0], status="completed", usage=None, error=None, steps=1, event_count=None)
    assert await store.renew_leases("someone-else", run_ids, 30) == 0
    assert await store.renew_leases("proc-1", [*run_ids, "run_unknown"], 30) == 2
    assert await store.renew_leases("proc-1", [], 30) == 0


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_row_referencing_the_run_in_another_transaction_does_not_keep_its_lease_from_renewal(
        db_url: str) -> None:
    """A transaction that inserts a row referencing a run (a journal entry, an approval) holds the run's row
    FOR KEY SHARE until it ends. The renewal skips rows others hold, and it locked them FOR UPDATE, which that
    lock blocks: under load the lease was skipped round after round and expired under a live run (another
    replica continued it while it ran). FOR NO KEY UPDATE (all an UPDATE of the lease needs) is not blocked."""
    async with SQLStore(db_url) as store:
        run_ids = await running_runs(store, 2)
        held = run_ids[0]
        async with store.engine.connect() as other, other.begin():
            await other.execute(text("INSERT INTO run_tool_calls (run_id, call_id, call_json, created_at) "
                                     "VALUES (:run, 'call-1', '{}', now())"), {"run": held})
            with anyio.fail_after(30):
                renewed = await store.renew_leases("proc-1", run_ids, 600)
            await other.rollback()
        assert renewed == 2
        async with store.engine.connect() as conn:
            expiries = (await conn.execute(select(runs.c.lease_expires_at).where(runs.c.id.in_(run_ids)))).scalars()
            assert all(expiry > time.time() + 500 for expiry in expiries)  # both renewed for 600 s
