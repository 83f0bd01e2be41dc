"""`Agent.run_stream`'s side: `RunStream`, which turns a run's events and commits into `RunChunk`s.

Chunks carry text to show (newline-prefixed after a tool round, held back per step when only the final
answer should be shown), completed messages, and for typed output the partial answer as its JSON streams.
Partials are fed incrementally and snapshotted at a linear total cost (see `_Partials`). Output validators
registered with `partial=True` check each partial object (`ctx.partial_output` true) before its chunk is
handed out; nothing else runs per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Generic

import anyio

from .._accumulate import _PREVIEW_EVERY_FRAGMENT_BELOW
from .._partial_json import PartialJSON
from ..events import MessageEndEvent, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from ..exceptions import UserError
from ..messages import Message
from ._output import FINAL_RESULT_TOOL, MISSING as _NOTHING, OutputSpec, apply_validators, is_missing
from ._run import AgentRun, Committed, Item
from ._types import OutputT, RunChunk, RunResult

__all__ = ["RunStream"]


class RunStream(Generic[OutputT]):
    """`Agent.run_stream`'s result: an async iterator of `RunChunk`s, and an async context manager.

    Bare `async for` runs the whole loop inside the iteration; it must be iterated to the end (or closed
    with `aclose()` from the same task). `async with ... as chunks:` is the safe form when iteration may
    stop early: leaving the block stops the run, closes the model response and cancels running tools.
    Either way, `messages` is the run's valid history so far and `result` the result once it ended.
    """

    def __init__(self, run: AgentRun[OutputT], *, stream_tool_steps: bool, output: OutputSpec | None = None) -> None:
        self._run = run
        self._builder = _ChunkBuilder(stream_tool_steps, _Partials(output) if output is not None else None)
        self._entered = False
        self._iterated = False

    @property
    def messages(self) -> list[Message]:
        """The run's new messages so far, every tool call answered (also after the run was stopped)."""
        return self._run.messages

    @property
    def result(self) -> RunResult[OutputT]:
        """The run's result, once iteration ended."""
        return self._run.result

    @property
    def run(self) -> AgentRun[OutputT]:
        """The underlying run (steps, usage, error)."""
        return self._run

    async def __aenter__(self) -> RunStream[OutputT]:
        await self._run.__aenter__()
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._run.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> AsyncIterator[RunChunk[OutputT]]:
        if self._iterated:
            raise UserError("A run stream can be iterated only once.")
        self._iterated = True
        return self._chunks(own=not self._entered)

    async def _chunks(self, *, own: bool) -> AsyncIterator[RunChunk[OutputT]]:
        host = _DetachedHost(self._run) if own else None
        if host is not None:
            await host.start()
        try:
            while (chunks := await self._next_chunks()) is not None:
                for chunk in chunks:
                    yield chunk
        finally:
            if host is not None:
                await host.stop()

    async def _next_chunks(self) -> list[RunChunk[OutputT]] | None:
        while True:
            try:
                item = await self._run.next_item()
            except StopAsyncIteration:
                return None
            chunks = self._builder.feed(item)
            if chunks:
                if self._run.config.partial_validators:
                    await self._validate_partials(chunks)
                return chunks

    async def _validate_partials(self, chunks: list[RunChunk[OutputT]]) -> None:
        """Pass each partial object through the `partial=True` output validators; a rejection withholds it."""
        validators = self._run.config.partial_validators
        for chunk in chunks:
            if chunk.partial is None:
                continue
            checked = await apply_validators(validators, self._run.partial_context(), chunk.partial)
            chunk.partial = None if checked.error is not None else checked.value


class _DetachedHost:
    """Owns a run's task group in a task of its own, for `async for` over `run_stream` without `async with`.

    An async generator cannot hold a task group across its `yield`s: when the loop that iterates it stops
    early, the generator is closed later, from another task, and the group's cancel scope would cancel
    the wrong task. So the run's scope lives in a separate task; the generator only reads the run's
    stream and, when it ends for any reason (end of run, `break`, an exception, cancellation, garbage
    collection), releases the host and waits until the run has been stopped and its history repaired.
    """

    def __init__(self, run: AgentRun[Any]) -> None:
        self._run = run
        self._task: asyncio.Task[None] | None = None
        self._error: Exception | None = None
        self._started = anyio.Event()
        self._release = anyio.Event()
        self._done = anyio.Event()

    async def start(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise UserError(
                "Iterating agent.run_stream(...) without `async with` needs asyncio; with another event loop "
                "write `async with agent.run_stream(...) as chunks: async for chunk in chunks: ...`."
            ) from None
        self._task = loop.create_task(self._host())
        await self._started.wait()
        if self._error is not None:
            raise self._error

    async def _host(self) -> None:
        try:
            async with self._run:
                self._started.set()
                await self._release.wait()
        except Exception as exc:  # handed to the iterating task, which raises it
            self._error = exc
        finally:
            self._started.set()
            self._done.set()

    async def stop(self) -> None:
        self._release.set()
        with anyio.CancelScope(shield=True):
            await self._done.wait()


class _ChunkBuilder:
    """Events and commits → `RunChunk`s: newline prefixing, the tool-step filter and partial objects."""

    __slots__ = ("_after_tools", "_held", "_message_start", "_partials", "_shown", "_stream_tool_steps")

    def __init__(self, stream_tool_steps: bool, partials: _Partials | None = None) -> None:
        self._stream_tool_steps = stream_tool_steps
        self._partials = partials
        self._shown = False          # some text was already output in this run
        self._after_tools = False    # the previous assistant message called tools
        self._message_start = True   # no text of the current message was output yet
        self._held: list[str] = []

    def _output(self, text: str) -> str:
        if self._message_start and self._after_tools and self._shown:
            text = "\n" + text
        self._message_start = False
        self._shown = True
        return text

    def feed(self, item: Item) -> list[RunChunk[Any]]:
        partials = self._partials
        if isinstance(item, TextDelta):
            if not item.text:
                return []
            partial = partials.text(item.text) if partials is not None else _NOTHING
            if self._stream_tool_steps:
                return [_chunk(self._output(item.text), partial)]
            self._held.append(item.text)
            return [] if is_missing(partial) else [_chunk("", partial)]
        if isinstance(item, Committed):
            return [RunChunk(messages=item.messages)]
        if partials is not None:
            if isinstance(item, ToolCallStart):
                partials.call_start(item.id, item.name)
                return []
            if isinstance(item, ToolCallDelta):
                partial = partials.call_delta(item.id, item.arguments_delta)
                return [] if is_missing(partial) else [_chunk("", partial)]
            if isinstance(item, ToolCallEnd):
                partial = partials.call_end(item.call.id)
                return [] if is_missing(partial) else [_chunk("", partial)]
        if isinstance(item, MessageEndEvent):
            message = item.message
            calls = bool(message.tool_calls or message.invalid_tool_calls)
            chunks: list[RunChunk[Any]] = []
            if partials is not None:
                partial = partials.message_end()
                if not is_missing(partial):
                    chunks.append(_chunk("", partial))
            if self._held:
                if not calls:
                    chunks.append(RunChunk(output=self._output("".join(self._held))))
                self._held = []
            self._after_tools = calls
            self._message_start = True
            return chunks
        return []


def _chunk(text: str, partial: Any) -> RunChunk[Any]:
    """A chunk with the text and, when there is one, the partial answer (`(data, value)`)."""
    if is_missing(partial):
        return RunChunk(output=text)
    data, value = partial
    return RunChunk(output=text, partial_data=data, partial=None if is_missing(value) else value)


class _Partials:
    """Partial answers of a typed output while its JSON streams, fed incrementally: `(data, value)` pairs.

    Native output feeds each message's text, tool output the `final_result` call's argument text, into
    one `PartialJSON` (linear in the stream's size). A snapshot is taken on every fragment while the
    JSON is short and, beyond that, each time it has grown by a quarter (and once at its end), so
    building previews stays linear too; a partial is produced only when the snapshot changed.
    """

    __slots__ = ("_call_id", "_last", "_next_at", "_parser", "_spec")

    def __init__(self, spec: OutputSpec) -> None:
        self._spec = spec
        self._parser: PartialJSON | None = None
        self._call_id: str | None = None
        self._last: Any = None
        self._next_at = 0

    def _reset(self) -> None:
        self._parser, self._call_id, self._last, self._next_at = None, None, None, 0

    def text(self, delta: str) -> Any:
        if self._spec.kind == "tool":
            return _NOTHING
        if self._parser is None:
            self._parser = PartialJSON()
        return self._feed(delta)

    def call_start(self, call_id: str, name: str) -> None:
        if self._spec.kind == "tool" and name == FINAL_RESULT_TOOL and self._call_id is None:
            self._reset()
            self._call_id = call_id
            self._parser = PartialJSON()

    def call_delta(self, call_id: str, fragment: str) -> Any:
        if call_id != self._call_id or not fragment:
            return _NOTHING
        return self._feed(fragment)

    def call_end(self, call_id: str) -> Any:
        if call_id != self._call_id:
            return _NOTHING
        partial = self._snapshot()
        self._parser = None  # later calls of the message are not the answer; keep the id so none restarts
        return partial

    def message_end(self) -> Any:
        partial = self._snapshot() if self._parser is not None else _NOTHING
        self._reset()
        return partial

    def _feed(self, fragment: str) -> Any:
        parser = self._parser
        assert parser is not None
        parser.feed(fragment)
        size = parser.size
        if size >= _PREVIEW_EVERY_FRAGMENT_BELOW and size < self._next_at:
            return _NOTHING
        self._next_at = size + (size >> 2)
        return self._snapshot()

    def _snapshot(self) -> Any:
        if self._parser is None:
            return _NOTHING
        snapshot = self._parser.snapshot()
        if snapshot is None or snapshot == self._last:
            return _NOTHING
        self._last = snapshot
        data, value = self._spec.partial(snapshot)
        return _NOTHING if is_missing(data) else (data, value)
