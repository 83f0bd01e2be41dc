"""`ItemQueue`: a run's items reach its reader in order, whole, and a cancelled wait loses nothing.

Each test runs with the queue waiting on a bare asyncio future (made inside the loop) and on an
`anyio.Event` (made outside any loop, the path other backends take).
"""

from __future__ import annotations

import anyio
import pytest

from toolwire.agent._items import ItemQueue

pytestmark = pytest.mark.anyio


async def _queue(kind: str) -> ItemQueue[int]:
    if kind == "future":
        queue: ItemQueue[int] = ItemQueue()
        assert queue._loop is not None
        return queue
    queue = await anyio.to_thread.run_sync(ItemQueue)  # no running loop on that thread
    assert queue._loop is None
    return queue


@pytest.mark.parametrize("kind", ["future", "event"])
async def test_items_come_in_order_then_none_after_end(kind: str) -> None:
    queue = await _queue(kind)
    for item in range(3):
        queue.put(item)
    queue.end()
    queue.put(99)  # after the end: ignored
    assert [await queue.get() for _ in range(3)] == [0, 1, 2]
    assert await queue.get() is None
    assert await queue.get() is None


@pytest.mark.parametrize("kind", ["future", "event"])
async def test_a_waiting_reader_wakes_for_each_item_and_for_the_end(kind: str) -> None:
    queue = await _queue(kind)
    received: list[int | None] = []

    async def read() -> None:
        while True:
            item = await queue.get()
            received.append(item)
            if item is None:
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        for item in range(5):
            await anyio.sleep(0.001)  # the reader is waiting by now
            queue.put(item)
        await anyio.sleep(0.001)
        queue.end()
    assert received == [0, 1, 2, 3, 4, None]


@pytest.mark.parametrize("kind", ["future", "event"])
async def test_a_reader_cancelled_while_waiting_loses_no_item(kind: str) -> None:
    queue = await _queue(kind)
    with anyio.move_on_after(0.01) as scope:
        await queue.get()
    assert scope.cancelled_caught
    queue.put(1)  # wakes nobody: the cancelled wait is not handed the item
    queue.put(2)
    assert await queue.get() == 1
    assert await queue.get() == 2


@pytest.mark.parametrize("kind", ["future", "event"])
async def test_close_drops_buffered_and_later_items(kind: str) -> None:
    queue = await _queue(kind)
    queue.put(1)
    queue.close()
    queue.put(2)
    assert await queue.get() is None


@pytest.mark.parametrize("kind", ["future", "event"])
async def test_a_buffered_item_is_taken_without_waiting_and_cancellation_reaches_a_waiting_reader(kind: str) -> None:
    queue = await _queue(kind)
    queue.put(7)
    with anyio.CancelScope() as scope:
        scope.cancel()
        # Already there: handed over without a checkpoint, so even a cancelled reader gets it...
        assert await queue.get() == 7
        # ...and the first wait is where the cancellation arrives.
        await queue.get()
        pytest.fail("The wait was not cancelled.")
    assert scope.cancelled_caught


async def test_buffered_and_get_nowait_take_without_waiting() -> None:
    queue: ItemQueue[int] = ItemQueue()
    assert not queue.buffered and queue.get_nowait() is None
    queue.put(1)
    assert queue.buffered and queue.get_nowait() == 1
    assert not queue.buffered
