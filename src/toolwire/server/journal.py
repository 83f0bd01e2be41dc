"""A run's journal writes (server/runner.py), done in order by one task, behind the events it publishes.

The journal (each started call, each finished result, each step's assembled message) exists for recovery and
for continuing a run whose process stopped (docs/guides/durable-runs.md); nothing that streams waits for it.
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

    __slots__ = ("_batch_done", "_pending", "_write_parts", "_writes", "_written")

    def __init__(self, write_parts: Callable[[list[ToolCallPart], list[ToolResultPart], Message | None],
                                             Awaitable[object]]) -> None:
        self._writes: ItemQueue[_Item] = ItemQueue()
        self._write_parts = write_parts
        self._pending = 0
        self._written = 0
        self._batch_done: anyio.Event | None = None

    def add_call(self, call: ToolCallPart) -> None:
        self._put(("call", call))

    async def record_call(self, call: ToolCallPart) -> None:
        """Add the call and wait until it is committed (with whatever was added before it), but not for what is
        added after: a tool that must not run twice waits for this before it starts (`AgentRun.before_tool`)."""
        self.add_call(call)
        await self.drained()

    def add_result(self, result: ToolResultPart) -> None:
        self._put(("result", result))

    def add_step(self, message: Message) -> None:
        self._put(("step", message))

    def add(self, write: Callable[[], Awaitable[object]]) -> None:
        self._put(("write", write))

    def _put(self, item: _Item) -> None:
        self._pending += 1
        self._writes.put(item)

    async def run(self) -> None:
        writes = self._writes
        while (first := await writes.get()) is not None:
            taken = [first]
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
            if self._batch_done is not None:
                self._batch_done.set()
                self._batch_done = None

    async def drained(self) -> None:
        """Wait until every write added so far is committed, not those added meanwhile (`run` must be running)."""
        target = self._written + self._pending
        while self._written < target:
            if self._batch_done is None:
                self._batch_done = anyio.Event()
            await self._batch_done.wait()

    def end(self) -> None:
        """No more writes: `run` returns once it has done those added."""
        self._writes.end()


_Item: TypeAlias = (tuple[Literal["call"], ToolCallPart] | tuple[Literal["result"], ToolResultPart]
                    | tuple[Literal["step"], Message] | tuple[Literal["write"], Callable[[], Awaitable[object]]])
