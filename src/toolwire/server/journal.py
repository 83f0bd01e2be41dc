"""A run's journal writes (server/runner.py), done in order by one task, behind the events it publishes.

The journal (each started call, each finished result, each step's assembled message) exists for recovery and
for continuing a run whose process stopped (docs/guides/durable-runs.md); nothing that streams waits for it.

**It lingers.** The task waits up to `linger` seconds before it writes what it took, unless something hurries it
(`hurry`): an urgent entry, a caller waiting for the journal (`drained`, `record_call`), its end, or the run's
round on its way to the store. That last one is the common case: a round whose tools answer within the linger is
stored whole by the agent right after its last result, and the runner leaves out of the journal what that round
holds, so the round's journal entries (its message, calls and results) cost no write at all. Before, they were a
transaction of their own for almost every round: one of the five of a chat with one tool round, written a few
milliseconds before the round that made it useless. What the linger costs: a process that dies within it loses
those entries, which recovery treats as it treats entries not written yet (a call without its round is asked
for again; a result the store never got is answered `interrupted`). Entries whose loss would run a tool twice are
urgent (`add_result(..., urgent=True)` for the calls `record_call` committed before their tool started), and once a
round has had such a call, the rest of it does not linger either (`record_call` made it a write anyway, and the
round's message and its other calls belong with it for the server that continues the run) until `round_stored`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, TypeAlias

import anyio

from .._queue import ItemQueue
from ..messages import Message, ToolCallPart, ToolResultPart

__all__ = ["Journal"]


class Journal:
    """The run's journal writes (and its tool-call accounting), done in order by one task, behind the events.

    `add_call`, `add_result`, `add_step` and `add` never wait; `drained` returns once every write added so far
    is committed. The task takes whatever has been added when it gets to run and writes the journal's part of
    it in one store operation (`write_parts`): the entries a burst of events adds (a round's calls, its
    message, its results) cost one operation of the store's group commit, not one each. A write that fails
    (after its own retries) raises in `run`, which stops the run's task group: the run fails as it did when
    the consumer made the write itself.
    """

    __slots__ = ("_batch_done", "_eager", "_held", "_hurried", "_linger", "_pending", "_wake", "_write_parts",
                 "_writes", "_written")

    def __init__(self, write_parts: Callable[[list[ToolCallPart], list[ToolResultPart], Message | None],
                                             Awaitable[object]], *, linger: float = 0.0) -> None:
        self._writes: ItemQueue[_Item] = ItemQueue()
        self._write_parts = write_parts
        self._linger = linger
        self._pending = 0
        self._written = 0
        self._batch_done: anyio.Event | None = None
        self._held: list[_Item] = []
        """Entries taken from the queue and not written yet: a task cancelled while it lingers leaves them to the
        next `run` (a hand-over writes what is left that way)."""
        self._hurried = False
        self._eager = False
        """A call of the round in progress was committed before its tool started: the round lingers no more."""
        self._wake: anyio.Event | None = None

    def add_call(self, call: ToolCallPart) -> None:
        self._put(("call", call))

    async def record_call(self, call: ToolCallPart) -> None:
        """Add the call and wait until it is committed (with whatever was added before it), but not for what is
        added after: a tool that must not run twice waits for this before it starts (`AgentRun.before_tool`)."""
        self._eager = True
        self.add_call(call)
        await self.drained()

    def add_result(self, result: ToolResultPart, *, urgent: bool = False) -> None:
        self._put(("result", result))
        if urgent:
            self.hurry()

    def round_stored(self) -> None:
        """The round in progress is on its way to the store: what the journal holds of it is left out of its writes
        now (by `write_parts`), so the journal writes it without lingering, and the next round lingers again."""
        self._eager = False
        self.hurry()

    def hurry(self) -> None:
        """Write what is added so far without lingering (see the module docstring)."""
        if not self._pending:  # nothing to hurry: the next entries linger as usual
            return
        self._hurried = True
        if self._wake is not None:
            self._wake.set()

    def add_step(self, message: Message) -> None:
        self._put(("step", message))

    def add(self, write: Callable[[], Awaitable[object]]) -> None:
        self._put(("write", write))

    def _put(self, item: _Item) -> None:
        self._pending += 1
        self._writes.put(item)

    async def run(self) -> None:
        writes = self._writes
        taken = self._held
        while True:
            if not taken:
                first = await writes.get()
                if first is None:
                    return
                taken.append(first)
            if self._linger and not (self._hurried or self._eager):
                await self._pause()
            self._hurried = False
            while (more := writes.get_nowait()) is not None:
                taken.append(more)
            calls: list[ToolCallPart] = []
            results: list[ToolResultPart] = []
            step: Message | None = None
            others: list[Callable[[], Awaitable[object]]] = []
            for kind, payload in taken:
                if kind == "call":
                    calls.append(payload)  # type: ignore[arg-type]
                elif kind == "result":
                    results.append(payload)  # type: ignore[arg-type]
                elif kind == "step":
                    step = payload  # type: ignore[assignment]  # the column holds the latest step's message
                else:
                    others.append(payload)  # type: ignore[arg-type]
            if calls or results or step is not None:
                await self._write_parts(calls, results, step)
            for write in others:
                await write()
            self._pending -= len(taken)
            self._written += len(taken)
            taken.clear()
            if self._batch_done is not None:
                self._batch_done.set()
                self._batch_done = None

    async def _pause(self) -> None:
        """Up to `linger` seconds, or until `hurry`."""
        self._wake = anyio.Event()
        try:
            with anyio.move_on_after(self._linger):
                await self._wake.wait()
        finally:
            self._wake = None

    async def drained(self) -> None:
        """Wait until every write added so far is committed, not those added meanwhile (`run` must be running)."""
        target = self._written + self._pending
        while self._written < target:
            self.hurry()
            if self._batch_done is None:
                self._batch_done = anyio.Event()
            await self._batch_done.wait()

    def end(self) -> None:
        """No more writes: `run` returns once it has done those added, at once."""
        self._writes.end()
        self.hurry()


_Item: TypeAlias = (tuple[Literal["call"], ToolCallPart] | tuple[Literal["result"], ToolResultPart]
                    | tuple[Literal["step"], Message] | tuple[Literal["write"], Callable[[], Awaitable[object]]])
