"""`ItemQueue`: items on their way from one task to another, with one wake-up per batch of items.

Shared by the agent (a run's events and commits, from the run's task group to the task iterating the
run) and the server's runner (the agent's items and the saved rows, to the task that publishes them; the
run's journal writes, to the task that writes them). One reader; unbounded: the writer never waits for a
slow reader, and what is buffered is bounded by what the writers produce.

This is what `anyio.create_memory_object_stream` would do, minus its per-item costs, which at one
item per streamed token were several times the cost of parsing the token:
- the reader takes an item that is already there without a checkpoint (a scheduler round trip per
  item), and waits only when nothing is buffered. Cancellation reaches it whenever it waits, which it
  does as soon as it has caught up with the run;
- the writer only appends and wakes a waiting reader; an item is never handed to a waiter directly,
  so a reader cancelled while it waits loses nothing;
- on asyncio the wait is on a bare future, which costs about a third of an `anyio.Event` (an event
  and a future of its own per wait); other backends wait on an `anyio.Event`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["BACKLOG", "ItemQueue"]

# A writer with this many items buffered lets the reader run (one checkpoint) before it goes on. Over a
# socket the writer waits for every read and the reader keeps up; over reads that never wait (a mock
# transport, a response already buffered) the writer would otherwise queue the whole response first,
# and the garbage collector would walk every buffered event again and again (about 0.8 µs per event on
# a 100,000-event stream). One checkpoint per 256 items costs nothing measurable.
BACKLOG = 256

T = TypeVar("T")


class ItemQueue(Generic[T]):
    """Items (never `None`) in order from one writer to one reader; `get` returns `None` after the last.

    Create it in the task group's event loop (the loop decides how the reader waits).
    """

    __slots__ = ("_closed", "_ended", "_items", "_loop", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: Any = None
        self._ended = False
        self._closed = False
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio)
            self._loop = None

    def put(self, item: T) -> int:
        """Append an item; dropped once the reader has closed its side (the run is being stopped).

        Returns how many items are buffered, so that a writer that never waits (a response whose reads
        are all ready at once) can step aside for the reader now and then (see `BACKLOG`).
        """
        if self._closed or self._ended:
            return 0
        items = self._items
        items.append(item)
        if self._waiter is not None:
            self._wake()
        return len(items)

    def end(self) -> None:
        """No more items: the reader gets those buffered, then `None`."""
        self._ended = True
        self._wake()

    def close(self) -> None:
        """The reader is gone: buffered items are dropped and later ones are ignored."""
        self._closed = True
        self._items.clear()
        self.end()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        if isinstance(waiter, anyio.Event):
            waiter.set()
        elif not waiter.done():  # a reader cancelled while waiting left its future cancelled
            waiter.set_result(None)

    @property
    def buffered(self) -> bool:
        """Items are waiting to be taken."""
        return bool(self._items)

    def get_nowait(self) -> T | None:
        """The next buffered item, or `None` when none is buffered."""
        return self._items.popleft() if self._items else None

    async def get(self) -> T | None:
        """The next item, waiting only when none is buffered; `None` once the queue ended or was closed."""
        items = self._items
        while not items:
            if self._ended:
                return None
            if self._loop is not None:
                future = self._waiter = self._loop.create_future()
                await future
            else:
                event = self._waiter = anyio.Event()
                await event.wait()
        return items.popleft()
