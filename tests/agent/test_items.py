"""`ItemQueue`: a run's items reach its reader in order, whole, and a cancelled wait loses nothing.

Each test runs with the queue waiting on a bare asyncio future (made inside the loop) and on an
`anyio.Event` (made outside any loop, the path other backends take).
"""

from __future__ import annotations

from typing import Any

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


# -- a run delivering into its caller's queue (`AgentRun.deliver_to`, the server's runner) ------------------------

def _agent(rounds: int = 2, saved: ItemQueue[Any] | None = None) -> Any:
    """An agent of `rounds` rounds (tool rounds, then an answer); its memory puts `("saved", n)` into `saved` after
    each append, in the agent's task, as the server's run memory reports the rows it committed."""
    from collections.abc import Sequence

    from toolwire import Agent, InMemoryChatMemory, Message, tool
    from toolwire.testing import ScriptedModel, Text, ToolCall

    class Reporting(InMemoryChatMemory):
        appended = 0

        async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
            await super().append(messages, conversation_id)
            self.appended += 1
            if saved is not None:
                saved.put(("saved", self.appended))

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        await anyio.sleep(0.001)
        return f"value of {key}"

    scripts: list[Any] = [[Text("Looking.", chunks=2, delay=0.001), ToolCall("lookup", {"key": f"k{i}"}, id=f"c{i}")]
                          for i in range(rounds - 1)]
    scripts.append([Text("Done.", chunks=2, delay=0.001)])
    return Agent(ScriptedModel(*scripts), tools=[lookup], memory=Reporting())


async def test_a_run_delivers_into_its_callers_queue_in_order_with_the_callers_items() -> None:
    from toolwire.agent._round import Committed

    queue: ItemQueue[Any] = ItemQueue()
    queue.put(("caller", 0))
    run = _agent(saved=queue).stream("Go.", conversation_id="c")
    run.deliver_to(queue)
    seen: list[Any] = []
    async with run:
        while True:
            try:
                seen.append(await run.next_item())  # the caller's items too, in the order they were put
            except StopAsyncIteration:
                break
    kinds = [item if isinstance(item, tuple) else "commit" if isinstance(item, Committed) else item.type
             for item in seen]
    assert kinds[0] == ("caller", 0)
    commits = [i for i, kind in enumerate(kinds) if kind == "commit"]
    assert len(commits) == 3  # the prompt, the tool round, the answer
    assert [kinds[i + 1] for i in commits] == [("saved", 1), ("saved", 2), ("saved", 3)]  # each right after its commit
    assert kinds.count("text_delta") == 4
    assert run.result.output == "Done."
    queue.put(("caller", 1))  # the run ended the queue: nothing more goes in
    assert queue.get_nowait() is None


async def test_a_cancelled_run_leaves_its_last_commit_in_the_callers_queue() -> None:
    """The run ends the queue but never closes it: its owner reads what the stopped run left (its last round)."""
    from toolwire.agent._round import Committed

    queue: ItemQueue[Any] = ItemQueue()
    run = _agent(rounds=3, saved=queue).stream("Go.", conversation_id="c")
    run.deliver_to(queue)
    async with run:
        while True:
            item = await run.next_item()
            if getattr(item, "type", None) == "tool_started":
                break  # the consumer stops mid-round; leaving the block cancels the run
    left = []
    while (item := queue.get_nowait()) is not None:
        left.append(item)
    committed = [item for item in left if isinstance(item, Committed)]
    assert committed, f"the cancelled round's commit is left for the queue's owner: {left}"
    assert committed[-1].messages[-1].parts[0].result == {"error": "cancelled"}
    assert left[-1] == ("saved", 2)  # and what its memory reported after storing it
    assert await queue.get() is None  # ended by the run


async def test_deliver_to_goes_before_the_run_starts() -> None:
    from toolwire import UserError

    agent = _agent(rounds=1)
    run = agent.stream("Go.", conversation_id="c")
    async with run:
        with pytest.raises(UserError, match="before `async with`"):
            run.deliver_to(ItemQueue())
        async for _ in run:
            pass
