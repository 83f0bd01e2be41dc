"""The public `Agent`: a model, tools and a system prompt, run as a loop until the model answers.

Its extensions live beside the loop: human approval with resume (`_approval`), typed output (`_output`)
and chat memory (`toolwire.memory`); `Agent` wires them into each run's `RunConfig`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, get_args

import anyio
import httpx

from .._accumulate import _PREVIEW_EVERY_FRAGMENT_BELOW
from .._partial_json import PartialJSON
from ..events import MessageEndEvent, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolResultEvent
from ..exceptions import UserError
from ..memory import ChatMemory
from ..messages import Message
from ..models import HTTPModel, Model, Timeout, get_model
from ..settings import ModelSettings
from ..tools import ApprovalPredicate, Tool
from ._approval import Approval, RunState
from ._execute import Toolbox
from ._output import FINAL_RESULT_TOOL, MISSING as _NOTHING, OutputMode, OutputSpec, is_missing
from ._run import AgentRun, Committed, Item, RunConfig
from ._types import OutputT, RunChunk, RunResult, ToolExecution

__all__ = ["Agent", "RunStream"]

Prompt = str | Message | None


class Agent(Generic[OutputT]):
    """A model with tools, run in a loop: request, run the tools the model called, repeat until it answers.

        agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], system="Be brief.")
        result = await agent.run("Weather in Boston and Paris?")

    Human approval: a tool with `requires_approval` (or a call the agent's `requires_approval` picks)
    pauses the run: `result.paused`, `result.pending` (the calls), `result.state` (store
    `state.to_json()`). Resume, in any process, with `agent.run(resume=RunState.from_json(saved),
    approvals={call_id: True, other_id: Denial("why not")})`: approved calls run, denied ones answer the
    model with the denial, and the run goes on from that point.

    Chat memory: with `memory=`, each run reads its history from the memory (`conversation_id=`) and
    appends every message once it is complete, an assistant message with calls only together with its
    results, before the next request. `own_history=False` makes the memory the single source of truth.

    Typed output: with `output_type=`, `result.output` is a validated object of that type and
    `run_stream` chunks carry partial objects (`chunk.partial`) while its JSON streams.

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
        timeout: For a model named by string: seconds each model request may take in all, or a
            `toolwire.Timeout` (`total`, `connect`, `idle`); see `toolwire.get_model`.
        requires_approval: Decides for every call (sync or async function of the `ToolCallPart`)
            whether a person must approve it, on top of each tool's own `requires_approval`.
        memory: A `ChatMemory` that holds the conversation: runs read their history from it and append
            their messages to it (see `toolwire.memory`).
        own_history: `False` (needs `memory`): the agent keeps no conversation of its own; every request
            is built from `memory.load(...)`, so the memory is the single source of truth.
        output_type: The type of the answer (a pydantic model, dataclass, TypedDict or any type pydantic
            validates); `result.output` is then a validated object of it instead of text.
        output_mode: `"auto"` (default): the provider's native structured output where the capability
            table says it has one, a `final_result` tool otherwise (also for models of unknown
            providers, such as `ScriptedModel`); `"native"` or `"tool"` to choose.
        output_retries: How many invalid typed answers are sent back to the model with the validation
            errors before the run fails with `OutputValidationError`.
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
        requires_approval: ApprovalPredicate | None = None,
        memory: ChatMemory | None = None,
        own_history: bool = True,
        output_type: type[OutputT] | None = None,
        output_mode: OutputMode = "auto",
        output_retries: int = 1,
        timeout: float | Timeout | None = None,
    ) -> None:
        if isinstance(model, str):
            self.model: Model = get_model(model, api_key=api_key, base_url=base_url, http_client=http_client,
                                          timeout=timeout)
            self._owns_model = True
        elif isinstance(model, Model):
            if base_url is not None or api_key is not None or http_client is not None or timeout is not None:
                raise UserError("base_url, api_key, http_client and timeout configure a model named by string; "
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
        if output_retries < 0:
            raise UserError(f"output_retries must be 0 or more; got {output_retries}.")
        if output_mode not in get_args(OutputMode):
            raise UserError(f"output_mode must be 'auto', 'native' or 'tool'; got {output_mode!r}.")
        if memory is not None and not isinstance(memory, ChatMemory):
            raise UserError(f"memory must be a ChatMemory (async load() and append()); got {type(memory).__name__}.")
        if not own_history and memory is None:
            raise UserError("own_history=False makes the memory the only copy of the conversation, so it needs "
                            "memory=...; pass a ChatMemory such as InMemoryChatMemory().")
        self.tools: list[Tool[..., Any]] = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self._output: OutputSpec | None = None
        if output_type is not None:
            self._output = OutputSpec.for_model(output_type, self.model, output_mode)
            if self._output.kind == "tool" and any(t.name == FINAL_RESULT_TOOL for t in self.tools):
                raise UserError(f"A tool is named {FINAL_RESULT_TOOL!r}, the name typed output gives the tool that "
                                "ends the run; rename that tool.")
        self._toolbox = Toolbox(self.tools, default_timeout=tool_timeout)
        self.system = system
        self.max_steps = max_steps
        self.tool_timeout = tool_timeout
        self.max_parallel_tools = max_parallel_tools
        self.settings: ModelSettings = settings or {}
        self.stream_tool_steps = stream_tool_steps
        self.on_tool_result = on_tool_result
        self.tool_execution: ToolExecution = tool_execution
        self.requires_approval = requires_approval
        self.memory = memory
        self.own_history = own_history
        self.output_type = output_type
        self.output_retries = output_retries

    def __repr__(self) -> str:
        return f"Agent(model={self.model.name!r}, tools={[t.name for t in self.tools]!r})"

    def stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> AgentRun[OutputT]:
        """Start a run and observe every event: `async with agent.stream("...") as run: async for e in run:`.

        Args:
            prompt: The user's message (text or a `Message`); `None` to answer the history as it is.
            history: Earlier messages; checked before the first request (`UserError` names a broken one).
                Agents with a memory take the history from it instead.
            settings: Settings for this run's requests, merged over the agent's.
            conversation_id: The memory conversation to read and write (agents with a memory).
            resume: The `state` of a paused result, to go on from (no prompt, no history).
            approvals: With `resume`: a decision for every pending call id, `True` to run it, `False` or
                `Denial("message for the model")` to answer it with an error instead.
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
            requires_approval=self.requires_approval,
            memory=self.memory,
            own_history=self.own_history,
            output=self._output,
            output_retries=self.output_retries,
        )
        return AgentRun(config, history=history, prompt=_prompt_message(prompt), settings=settings,
                        conversation_id=conversation_id, resume=resume, approvals=approvals)

    def run_stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> RunStream[OutputT]:
        """Stream text and completed messages: `async for chunk in agent.run_stream("..."):`.

        Iterate it to the end, or use `async with agent.run_stream(...) as chunks:` when the loop may stop
        early: leaving the block stops the run at once and `chunks.messages` is the valid history so far.
        With an `output_type`, chunks also carry the partial object (`chunk.partial`) as its JSON streams.
        The arguments are those of `stream`.
        """
        run = self.stream(prompt, history=history, settings=settings, conversation_id=conversation_id,
                          resume=resume, approvals=approvals)
        return RunStream(run, stream_tool_steps=self.stream_tool_steps, output=self._output)

    async def run(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> RunResult[OutputT]:
        """Run to the final answer (or a pause for approval) and return the result.

        The arguments are those of `stream`: `agent.run(resume=state, approvals={...})` resumes a paused run.
        """
        async with self.stream(prompt, history=history, settings=settings, conversation_id=conversation_id,
                               resume=resume, approvals=approvals) as run:
            async for _ in run:
                pass
        return run.result

    def run_sync(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
    ) -> RunResult[OutputT]:
        """`run` for code that is not async (scripts, notebooks).

        Inside a running event loop (a notebook cell) the run happens on a separate thread with its own
        loop, so call it from plain code only; async code should `await agent.run(...)`.
        """
        call = functools.partial(self.run, prompt, history=history, settings=settings,
                                 conversation_id=conversation_id, resume=resume, approvals=approvals)
        release = functools.partial(self._run_and_release, call)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return anyio.run(release)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(anyio.run, release).result()

    async def _run_and_release(self, call: Callable[[], Any]) -> RunResult[OutputT]:
        try:
            result: RunResult[OutputT] = await call()
            return result
        finally:
            # Each run_sync has its own event loop; an HTTP client must not outlive the loop it was used in.
            if isinstance(self.model, HTTPModel):
                await self.model.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client of a model this agent created from a string."""
        if self._owns_model and isinstance(self.model, HTTPModel):
            await self.model.aclose()

    async def __aenter__(self) -> Agent[OutputT]:
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
                return chunks


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
    return RunChunk(output=text) if is_missing(partial) else RunChunk(output=text, partial=partial)


class _Partials:
    """Partial objects of a typed answer while its JSON streams, fed incrementally.

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
        return self._spec.partial(snapshot)
