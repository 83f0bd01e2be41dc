"""The public `Agent`: a model, tools and a system prompt, run as a loop until the model answers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, get_args

import anyio
import httpx

from ..events import MessageEndEvent, TextDelta, ToolResultEvent
from ..exceptions import UserError
from ..messages import Message
from ..models import HTTPModel, Model, get_model
from ..settings import ModelSettings
from ..tools import Tool
from ._execute import Toolbox
from ._run import AgentRun, Committed, Item, RunConfig
from ._types import RunChunk, RunResult, ToolExecution

__all__ = ["Agent", "RunStream"]

Prompt = str | Message | None


class Agent:
    """A model with tools, run in a loop: request, run the tools the model called, repeat until it answers.

        agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], system="Be brief.")
        result = await agent.run("Weather in Boston and Paris?")

    Args:
        model: `"provider:model"` (see `toolwire.get_model`) or a `Model` object.
        tools: `Tool`s (from `@tool` or `Tool.from_schema`) or plain functions, which are wrapped with `@tool`.
        system: A system prompt sent before the history on every request (it is not stored in messages).
        max_steps: The most model requests one run may make; then `MaxStepsExceeded` is raised.
        tool_timeout: Seconds a tool may run before it is stopped (a tool's own `timeout` wins).
        max_parallel_tools: How many tools of one step may run at the same time.
        base_url: Endpoint for a model named by string (a proxy, a compatible host, a local server).
        api_key: API key for a model named by string (defaults to the provider's environment variable).
        settings: Model settings for every request (a run's own `settings` are merged over them).
        stream_tool_steps: `True` (chat UIs): `run_stream` shows the text of every step as it arrives.
            `False` (API backends that want only the answer): text of steps that call tools is never
            shown. Since a step is known to be the final answer only when its message ends without
            tool calls, each step's text is then held back and shown in one piece when it ends.
            Messages and events are never filtered.
        on_tool_result: Called (sync or async) with each `ToolResultEvent` as soon as the result exists.
        tool_execution: `"eager"` (default): each tool starts the moment its call is complete, while the
            model is still streaming; `"after_stream"`: all tools start when the response has ended;
            `"sequential"`: one tool at a time, in call order, after the response.
        http_client: An `httpx.AsyncClient` for a model named by string.
    """

    def __init__(
        self,
        model: str | Model,
        *,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        system: str | None = None,
        max_steps: int = 20,
        tool_timeout: float | None = None,
        max_parallel_tools: int = 8,
        base_url: str | None = None,
        api_key: str | None = None,
        settings: ModelSettings | None = None,
        stream_tool_steps: bool = True,
        on_tool_result: Callable[[ToolResultEvent], Any] | None = None,
        tool_execution: ToolExecution = "eager",
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if isinstance(model, str):
            self.model: Model = get_model(model, api_key=api_key, base_url=base_url, http_client=http_client)
            self._owns_model = True
        elif isinstance(model, Model):
            if base_url is not None or api_key is not None or http_client is not None:
                raise UserError("base_url, api_key and http_client configure a model named by string; "
                                "configure the Model object you passed instead.")
            self.model = model
            self._owns_model = False
        else:
            raise UserError(f"Agent needs a 'provider:model' string or a Model object; got {model!r}.")
        if max_steps < 1:
            raise UserError(f"max_steps must be at least 1; got {max_steps}.")
        if max_parallel_tools < 1:
            raise UserError(f"max_parallel_tools must be at least 1; got {max_parallel_tools}.")
        if tool_execution not in get_args(ToolExecution):
            raise UserError(f"tool_execution must be 'eager', 'after_stream' or 'sequential'; got {tool_execution!r}.")
        self.tools: list[Tool[..., Any]] = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self._toolbox = Toolbox(self.tools, default_timeout=tool_timeout)
        self.system = system
        self.max_steps = max_steps
        self.tool_timeout = tool_timeout
        self.max_parallel_tools = max_parallel_tools
        self.settings: ModelSettings = settings or {}
        self.stream_tool_steps = stream_tool_steps
        self.on_tool_result = on_tool_result
        self.tool_execution: ToolExecution = tool_execution

    def __repr__(self) -> str:
        return f"Agent(model={self.model.name!r}, tools={[t.name for t in self.tools]!r})"

    def stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
    ) -> AgentRun:
        """Start a run and observe every event: `async with agent.stream("...") as run: async for e in run:`.

        Args:
            prompt: The user's message (text or a `Message`); `None` to answer the history as it is.
            history: Earlier messages; checked before the first request (`UserError` names a broken one).
            settings: Settings for this run's requests, merged over the agent's.
        """
        config = RunConfig(
            model=self.model,
            toolbox=self._toolbox,
            system=self.system,
            max_steps=self.max_steps,
            max_parallel_tools=self.max_parallel_tools,
            tool_execution=self.tool_execution,
            settings=self.settings,
            on_tool_result=self.on_tool_result,
        )
        return AgentRun(config, history=history, prompt=_prompt_message(prompt), settings=settings)

    def run_stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
    ) -> RunStream:
        """Stream text and completed messages: `async for chunk in agent.run_stream("..."):`.

        Iterate it to the end, or use `async with agent.run_stream(...) as chunks:` when the loop may stop
        early: leaving the block stops the run at once and `chunks.messages` is the valid history so far.
        """
        return RunStream(self.stream(prompt, history=history, settings=settings),
                         stream_tool_steps=self.stream_tool_steps)

    async def run(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
    ) -> RunResult:
        """Run to the final answer and return the result (output, new messages, usage)."""
        async with self.stream(prompt, history=history, settings=settings) as run:
            async for _ in run:
                pass
        return run.result

    def run_sync(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
    ) -> RunResult:
        """`run` for code that is not async (scripts, notebooks).

        Inside a running event loop (a notebook cell) the run happens on a separate thread with its own
        loop, so call it from plain code only; async code should `await agent.run(...)`.
        """
        call = functools.partial(self._run_and_release, prompt, history, settings)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(call)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(anyio.run, call).result()

    async def _run_and_release(
        self, prompt: Prompt, history: Sequence[Message], settings: ModelSettings | None
    ) -> RunResult:
        try:
            return await self.run(prompt, history=history, settings=settings)
        finally:
            # Each run_sync has its own event loop; an HTTP client must not outlive the loop it was used in.
            if isinstance(self.model, HTTPModel):
                await self.model.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client of a model this agent created from a string."""
        if self._owns_model and isinstance(self.model, HTTPModel):
            await self.model.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _prompt_message(prompt: Prompt) -> Message | None:
    if prompt is None or isinstance(prompt, Message):
        return prompt
    if isinstance(prompt, str):
        return Message.user(prompt)
    raise UserError(f"A prompt is text or a Message; got {type(prompt).__name__}.")


class RunStream:
    """`Agent.run_stream`'s result: an async iterator of `RunChunk`s, and an async context manager.

    Bare `async for` runs the whole loop inside the iteration; it must be iterated to the end (or closed
    with `aclose()` from the same task). `async with ... as chunks:` is the safe form when iteration may
    stop early: leaving the block stops the run, closes the model response and cancels running tools.
    Either way, `messages` is the run's valid history so far and `result` the result once it ended.
    """

    def __init__(self, run: AgentRun, *, stream_tool_steps: bool) -> None:
        self._run = run
        self._builder = _ChunkBuilder(stream_tool_steps)
        self._entered = False
        self._iterated = False

    @property
    def messages(self) -> list[Message]:
        """The run's new messages so far, every tool call answered (also after the run was stopped)."""
        return self._run.messages

    @property
    def result(self) -> RunResult:
        """The run's result, once iteration ended."""
        return self._run.result

    @property
    def run(self) -> AgentRun:
        """The underlying run (steps, usage, error)."""
        return self._run

    async def __aenter__(self) -> RunStream:
        await self._run.__aenter__()
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._run.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> AsyncIterator[RunChunk]:
        if self._iterated:
            raise UserError("A run stream can be iterated only once.")
        self._iterated = True
        return self._chunks(own=not self._entered)

    async def _chunks(self, *, own: bool) -> AsyncIterator[RunChunk]:
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

    async def _next_chunks(self) -> list[RunChunk] | None:
        while True:
            try:
                item = await self._run.next_item()
            except StopAsyncIteration:
                return None
            chunks = self._builder.feed(item)
            if chunks:
                return chunks


class _DetachedHost:
    """Owns a run's task group in a task of its own, for `async for` over `run_stream` without `async with`.

    An async generator cannot hold a task group across its `yield`s: when the loop that iterates it stops
    early, the generator is closed later, from another task, and the group's cancel scope would cancel
    the wrong task. So the run's scope lives in a separate task; the generator only reads the run's
    stream and, when it ends for any reason (end of run, `break`, an exception, cancellation, garbage
    collection), releases the host and waits until the run has been stopped and its history repaired.
    """

    def __init__(self, run: AgentRun) -> None:
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
    """Events and commits → `RunChunk`s: newline prefixing and the tool-step filter live here."""

    __slots__ = ("_after_tools", "_held", "_message_start", "_shown", "_stream_tool_steps")

    def __init__(self, stream_tool_steps: bool) -> None:
        self._stream_tool_steps = stream_tool_steps
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

    def feed(self, item: Item) -> list[RunChunk]:
        if isinstance(item, TextDelta):
            if not item.text:
                return []
            if self._stream_tool_steps:
                return [RunChunk(output=self._output(item.text))]
            self._held.append(item.text)
            return []
        if isinstance(item, Committed):
            return [RunChunk(messages=item.messages)]
        if isinstance(item, MessageEndEvent):
            message = item.message
            calls = bool(message.tool_calls or message.invalid_tool_calls)
            chunks: list[RunChunk] = []
            if self._held:
                if not calls:
                    chunks.append(RunChunk(output=self._output("".join(self._held))))
                self._held = []
            self._after_tools = calls
            self._message_start = True
            return chunks
        return []
