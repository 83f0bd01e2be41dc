"""`Store.release_lease`: a run handed over (`--drain-handover`) is taken over at once, and not counted against the
limit of continuations (docs/guides/durable-runs.md, "Handing runs over on a graceful stop")."""

from __future__ import annotations

import anyio
import pytest

from tests.store.test_sql_store import new_chat, start
from toolwire.store import Continued, Recovered, SQLStore

from ._migrations import downgrade_to

pytestmark = pytest.mark.anyio


async def test_a_released_lease_is_taken_over_at_once_and_not_counted(store: SQLStore) -> None:
    _, chat_id = await new_chat(store)
    started = await start(store, chat_id, lease=30)
    run_id = started.run.id
    assert started.run.lease_owner is not None
    assert not await store.release_lease(run_id, owner="someone-else")  # only the holder hands a run over
    assert await store.take_over_run(run_id, owner="p2", lease_seconds=30, continue_limit=0) is None  # still held
    assert await store.release_lease(run_id, owner=started.run.lease_owner)
    first = await store.take_over_run(run_id, owner="p2", lease_seconds=30, continue_limit=0)
    assert isinstance(first, Continued) and first.handover and first.continuation == 1
    assert first.run.lease_owner == "p2"
    assert await store.release_lease(run_id, owner="p2")
    second = await store.take_over_run(run_id, owner="p3", lease_seconds=0.05, continue_limit=0)
    assert isinstance(second, Continued) and second.handover and second.continuation == 2
    await anyio.sleep(0.1)  # p3 dies: its lease runs out, with its name on it
    ended = await store.take_over_run(run_id, owner="p4", lease_seconds=30, continue_limit=0)
    assert isinstance(ended, Recovered) and ended.run.status == "interrupted"  # a crash counts; handovers did not


async def test_a_running_run_of_the_previous_schema_can_be_handed_over_after_the_upgrade(db_url: str) -> None:
    """0008 adds `runs.handovers` in place: a run that was running before the upgrade counts from 0."""
    async with SQLStore(db_url) as store:
        _, chat_id = await new_chat(store)
        started = await start(store, chat_id, lease=30)
        await downgrade_to(store, "0007_durable_runs")
    async with SQLStore(db_url) as store:  # opening migrates to the head again
        assert started.run.lease_owner is not None
        assert await store.release_lease(started.run.id, owner=started.run.lease_owner)
        taken = await store.take_over_run(started.run.id, owner="p", lease_seconds=30, continue_limit=1)
        assert isinstance(taken, Continued) and taken.handover and taken.continuation == 1
