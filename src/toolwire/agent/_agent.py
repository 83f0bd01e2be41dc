"""The public `Agent`: a model, tools and instructions, run as a loop until the model answers.

Its extensions live beside the loop: human approval with resume (`_approval`), typed output and output
validators (`_output`), dynamic instructions (`_instructions`), usage limits (`_limits`), toolsets
(`toolwire.toolsets`, MCP in `toolwire.mcp`), chat memory (`toolwire.memory`) and tracing
(`toolwire.telemetry`); `Agent` wires them into each run's `RunConfig`.

Typing: `Agent[OutputT, DepsT]`, output first, so `Agent[City]` (deps default to `None`) means what it
meant before dependencies existed. `output_type=` takes any type form, unions included (`City | Country`
makes `result.output` a `City | Country`); `deps_type=` only types `deps=` and `RunContext.deps`, it is
not checked at run time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Generic, TypedDict, TypeVar, get_args, overload

import httpx
from typing_extensions import TypeForm, Unpack

from .._fresh_loop import run_in_new_loop
from ..events import ToolResultEvent
from ..exceptions import UserError
from ..memory import ChatMemory, ResumeClaims
from ..messages import Message
from ..models import HTTPModel, Model, Timeout, get_model
from ..settings import ModelSettings
from ..telemetry import Instrumentation, instrumentation_for
from ..tools import ApprovalPredicate, DepsT, Tool, check_retries
from ..toolsets import Toolset
from ._approval import Approval, RunState
from ._config import RunConfig
from ._execute import Toolbox
from ._instructions import Instruction, Instructions, normalize_instructions
from ._limits import UsageBudget, UsageLimits
from ._output import FINAL_RESULT_TOOL, OutputMode, OutputSpec, OutputValidator, check_validators
from ._override import UNSET, AgentOverride, Overrides, checked_overrides
from ._run import AgentRun
from ._stream import RunStream
from ._types import OutputT, RunResult, ToolExecution

__all__ = ["Agent", "AgentOptions", "RunStream"]

Prompt = str | Message | None
InstructionT = TypeVar("InstructionT", bound=Instruction)
ValidatorT = TypeVar("ValidatorT", bound=OutputValidator)


class AgentOptions(TypedDict, total=False):
    """The options of `Agent(...)` besides `output_type` and `deps_type` (see `Agent` for each)."""

    tools: Iterable[Tool[..., Any] | Callable[..., Any]]
    toolsets: Iterable[Toolset]
    system: Instructions
    name: str | None
    max_steps: int
    tool_timeout: float | None
    max_parallel_tools: int
    base_url: str | None
    api_key: str | None
    settings: ModelSettings | None
    stream_tool_steps: bool
    on_tool_result: Callable[[ToolResultEvent], Any] | None
    tool_execution: ToolExecution
    http_client: httpx.AsyncClient | None
    requires_approval: ApprovalPredicate | None
    memory: ChatMemory | None
    own_history: bool
    output_mode: OutputMode
    output_retries: int
    output_validators: Iterable[OutputValidator]
    resume_claims: ResumeClaims | None
    usage_limits: UsageLimits | None
    budget: UsageBudget | None
    retries: int
    instrument: bool | Instrumentation | None
    timeout: float | Timeout | None


class Agent(Generic[OutputT, DepsT]):
    """A model with tools, run in a loop: request, run the tools the model called, repeat until it answers.

        agent = Agent("anthropic:claude-sonnet-4-5", tools=[get_weather], system="Be brief.")
        result = await agent.run("Weather in Boston and Paris?")

    Dependencies: `agent.run(..., deps=...)` hands a value (a database handle, the user) to everything
    the run calls through `RunContext.deps`: tools, approval rules, dynamic instructions, output
    validators and toolset filters. `deps_type=` types it.

    Human approval: a tool with `requires_approval` (or a call the agent's `requires_approval` picks)
    pauses the run: `result.paused`, `result.pending` (the calls), `result.state` (store
    `state.to_json()`). Resume, in any process, with `agent.run(resume=RunState.from_json(saved),
    approvals={call_id: True, other_id: Denial("why not")})`: approved calls run, denied ones answer the
    model with the denial, and the run goes on from that point.

    Chat memory: with `memory=`, each run reads its history from the memory (`conversation_id=`) and
    appends every message once it is complete, an assistant message with calls only together with its
    results, before the next request. `own_history=False` makes the memory the single source of truth.

    Typed output: with `output_type=`, `result.output` is a validated object of that type and
    `run_stream` chunks carry the JSON so far (`chunk.partial_data`) and, whenever it validates, the
    object so far (`chunk.partial`).

    Every attribute (`agent.tools`, `agent.system`, `agent.output_type`, `agent.tool_timeout`...) is read
    when a run starts: a change applies to the next run, never to one already running.

    Args:
        model: `"provider:model"` (see `toolwire.get_model`) or a `Model` object.
        tools: `Tool`s (from `@tool` or `Tool.from_schema`) or plain functions, which are wrapped with `@tool`.
        toolsets: `Toolset`s asked for their tools at every step (`FunctionToolset`, `toolwire.mcp.MCPServer`,
            `.filtered(...)`, `.prefixed(...)`); `async with agent:` opens those that hold a connection.
        system: The instructions sent as a system prompt before the history on every request (never stored
            in messages): text, a function of the run context (sync or async) returning text, or a list of
            both, evaluated before each request (see `_instructions`).
        name: The agent's name, for traces (`invoke_agent {name}`) and logs.
        deps_type: The type of `deps=` (typing only).
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
        output_type: The type of the answer (a pydantic model, dataclass, TypedDict, a union of them or any
            type pydantic validates); `result.output` is then a validated object of it instead of text.
        output_mode: `"auto"` (default): the provider's native structured output where the capability
            table says it has one, a `final_result` tool otherwise (also for models of unknown
            providers, such as `ScriptedModel`); `"native"` or `"tool"` to choose.
        output_retries: How many invalid typed answers (or answers an output validator rejected) are sent
            back to the model before the run fails with `OutputValidationError`.
        output_validators: Functions `fn(output)` or `fn(ctx, output)` (sync or async) run on every valid
            answer, text or typed: each returns the output to use (or `None` to keep it), or raises
            `OutputRejected("why")` to send the answer back to the model; see also `@agent.output_validator`.
        usage_limits: The most one run may use (`UsageLimits`: requests, tokens, tool calls); a run's own
            `usage_limits=` replaces it.
        budget: A `UsageBudget` every run of this agent draws from, shared with any other run or agent
            given the same object; a run's own `budget=` replaces it.
        retries: How many times in a row a tool may raise `ModelRetry` in one run (default 1) unless it
            sets its own (`@tool(retries=N)`); one more stops the run with `ToolRetriesExceeded`.
        instrument: OpenTelemetry spans for this agent's runs: `None` (default) follows
            `toolwire.telemetry.instrument()`, `True` always, `False` never, or an `Instrumentation`.
        resume_claims: Who guarantees that a paused run is resumed at most once (`ResumeClaims`). By
            default the memory, when it implements `claim_resume`, else a registry of this process
            (which cannot see resumes made by other processes).
    """

    @overload
    def __init__(
        self: Agent[str, DepsT],
        model: str | Model,
        *,
        output_type: None = None,
        deps_type: type[DepsT] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self,
        model: str | Model,
        *,
        output_type: TypeForm[OutputT],
        deps_type: type[DepsT] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...

    def __init__(
        self,
        model: str | Model,
        *,
        output_type: Any = None,
        deps_type: Any = None,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        toolsets: Iterable[Toolset] = (),
        system: Instructions = None,
        name: str | None = None,
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
        output_mode: OutputMode = "auto",
        output_retries: int = 1,
        output_validators: Iterable[OutputValidator] = (),
        resume_claims: ResumeClaims | None = None,
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
        retries: int = 1,
        instrument: bool | Instrumentation | None = None,
        timeout: float | Timeout | None = None,
    ) -> None:
        if isinstance(model, str):
            _check_base_url(base_url)
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
        self.tools: list[Tool[..., Any]] = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self.toolsets: list[Toolset] = list(toolsets)
        self.system: Instructions = system
        self.name = name
        self.deps_type = deps_type
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
        self.output_mode: OutputMode = output_mode
        self.output_retries = output_retries
        self.output_validators: list[OutputValidator] = list(output_validators)
        self.resume_claims = resume_claims
        self.usage_limits = usage_limits
        self.budget = budget
        self.retries = retries
        self.instrument = instrument
        self.instruction_functions: list[Instruction] = []
        """Functions added with `@agent.instructions`, evaluated after the parts of `system=`."""
        self.partial_output_validators: list[OutputValidator] = []
        """Output validators added with `partial=True`: they also check partial answers while they stream."""
        self._overrides: contextvars.ContextVar[Overrides | None] = contextvars.ContextVar(
            f"toolwire_agent_overrides_{id(self)}", default=None)
        self._outputs: dict[tuple[Any, str, int], OutputSpec] = {}
        self._open: AsyncExitStack | None = None
        self._entries = 0
        self._configure()

    def _configure(self) -> RunConfig:
        """The configuration of a run, from the agent's attributes as they are now; checks them all.

        Every attribute is read when a run starts, so changing one (`agent.tools.append(t)`,
        `agent.output_type = City`) applies to the next run and never to one already running.
        """
        override = self._overrides.get() or Overrides()
        model = self.model if override.model is UNSET else override.model
        if not isinstance(model, Model):
            raise UserError(f"agent.model must be a Model (e.g. from get_model); got {type(model).__name__}.")
        if self.max_steps < 1:
            raise UserError(f"max_steps must be at least 1; got {self.max_steps}.")
        if self.max_parallel_tools < 1:
            raise UserError(f"max_parallel_tools must be at least 1; got {self.max_parallel_tools}.")
        if self.tool_timeout is not None and not self.tool_timeout > 0:
            raise UserError(f"tool_timeout must be a positive number of seconds or None; got {self.tool_timeout}.")
        if self.tool_execution not in get_args(ToolExecution):
            raise UserError(f"tool_execution must be 'eager', 'after_stream' or 'sequential'; "
                            f"got {self.tool_execution!r}.")
        if self.output_retries < 0:
            raise UserError(f"output_retries must be 0 or more; got {self.output_retries}.")
        if self.output_mode not in get_args(OutputMode):
            raise UserError(f"output_mode must be 'auto', 'native' or 'tool'; got {self.output_mode!r}.")
        memory = self.memory
        if memory is not None and not isinstance(memory, ChatMemory):
            raise UserError(f"memory must be a ChatMemory (async load() and append()); got {type(memory).__name__}.")
        if not self.own_history and memory is None:
            raise UserError("own_history=False makes the memory the only copy of the conversation, so it needs "
                            "memory=...; pass a ChatMemory such as InMemoryChatMemory().")
        claims = self.resume_claims
        if claims is not None and not isinstance(claims, ResumeClaims):
            raise UserError(f"resume_claims must be a ResumeClaims (async claim_resume(state_id, conversation_id)); "
                            f"got {type(claims).__name__}.")
        if self.usage_limits is not None and not isinstance(self.usage_limits, UsageLimits):
            raise UserError(f"usage_limits must be a UsageLimits; got {type(self.usage_limits).__name__}.")
        if self.budget is not None and not isinstance(self.budget, UsageBudget):
            raise UserError(f"budget must be a UsageBudget; got {type(self.budget).__name__}.")
        check_retries(self.retries, "Agent(retries=...)")
        if self.retries is None:
            raise UserError("Agent(retries=...) must be a whole number of 0 or more; got None.")
        toolsets = list(self.toolsets if override.toolsets is UNSET else override.toolsets)
        for toolset in toolsets:
            if not isinstance(toolset, Toolset):
                raise UserError(f"toolsets must hold Toolset objects (FunctionToolset, MCPServer...); got "
                                f"{type(toolset).__name__}.")
        tools = [t if isinstance(t, Tool) else Tool(t) for t in (self.tools if override.tools is UNSET else
                                                                   override.tools)]
        if override.system is UNSET:
            instructions = (*normalize_instructions(self.system),
                            *normalize_instructions(list(self.instruction_functions)))
        else:
            instructions = override.system
        output = self._output_spec(model)
        if output is not None and output.kind == "tool" and any(t.name == FINAL_RESULT_TOOL for t in tools):
            raise UserError(f"A tool is named {FINAL_RESULT_TOOL!r}, the name typed output gives the tool that "
                            "ends the run; rename that tool.")
        return RunConfig(
            model=model,
            toolbox=Toolbox(tools, default_timeout=self.tool_timeout),
            instructions=instructions,
            max_steps=self.max_steps,
            max_parallel_tools=self.max_parallel_tools,
            tool_execution=self.tool_execution,
            settings=ModelSettings(**self.settings),
            on_tool_result=self.on_tool_result,
            requires_approval=self.requires_approval,
            memory=memory,
            own_history=self.own_history,
            output=output,
            output_retries=self.output_retries,
            output_validators=tuple(check_validators(self.output_validators)),
            partial_validators=tuple(check_validators(self.partial_output_validators)),
            retries=self.retries,
            resume_claims=claims,
            toolsets=tuple(toolsets),
            usage_limits=self.usage_limits,
            budget=self.budget,
            telemetry=instrumentation_for(self.instrument),
            name=self.name,
        )

    def _output_spec(self, model: Model) -> OutputSpec | None:
        """The typed-output spec for the current output type, mode and model (built once per combination)."""
        if self.output_type is None:
            return None
        if model is not self.model:
            # An override's model: not cached, since its id may be reused by another model once it is gone.
            return OutputSpec.for_model(self.output_type, model, self.output_mode)
        key = (self.output_type, self.output_mode, id(model))
        spec = self._outputs.get(key)
        if spec is None:
            spec = self._outputs[key] = OutputSpec.for_model(self.output_type, model, self.output_mode)
        return spec

    def __repr__(self) -> str:
        return f"Agent(model={self.model.name!r}, tools={[t.name for t in self.tools]!r})"

    @overload
    def output_validator(self, function: ValidatorT) -> ValidatorT: ...

    @overload
    def output_validator(self, *, partial: bool = False) -> Callable[[ValidatorT], ValidatorT]: ...

    def output_validator(self, function: Any = None, *, partial: bool = False) -> Any:
        """Decorator adding an output validator: `@agent.output_validator` over `def check(ctx, output): ...`.

        With `@agent.output_validator(partial=True)` the validator also checks each partial answer of
        `run_stream` (typed output), with `ctx.partial_output` true: what it returns replaces
        `chunk.partial`, and a rejection (`OutputRejected`, `ModelRetry`) only withholds that partial
        (the chunk's `partial` is `None`; the model is asked again only about the final answer).
        Validators added without it never see partial answers.
        """

        def add(fn: Any) -> Any:
            check_validators([fn])
            self.output_validators.append(fn)
            if partial:
                self.partial_output_validators.append(fn)
            return fn

        return add(function) if function is not None else add

    def instructions(self, function: InstructionT) -> InstructionT:
        """Decorator adding a dynamic instruction: `@agent.instructions` over `def who(ctx) -> str: ...`.

        The function (sync or async, of the run context or of nothing) is evaluated before every request
        like a function given in `system=`; its text follows the parts of `system=`, in the order the
        functions were decorated. It returns text, or `None` to add nothing.
        """
        if not callable(function):
            raise UserError(f"@agent.instructions decorates a function (sync or async) of the run context that "
                            f"returns text; got {type(function).__name__}. Put fixed text in system=.")
        self.instruction_functions.append(function)
        return function

    def override(
        self,
        *,
        model: Model | str | Any = UNSET,
        deps: Any = UNSET,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] | Any = UNSET,
        toolsets: Iterable[Toolset] | Any = UNSET,
        system: Instructions | Any = UNSET,
    ) -> AgentOverride:
        """Replace the agent's model, deps, tools, toolsets or instructions inside a block (for tests).

            with agent.override(model=ScriptedModel(["Hi."]), deps=FakeDb()):
                await code_under_test()

        Works with `with` and `async with`; blocks nest, and each task and thread sees only its own
        overrides (a `ContextVar`), so tests running in parallel do not leak into each other. Inside the
        block the override wins over a run's own `deps=`. `tools` replaces the agent's tools (a run's
        `tools=` are still added); `toolsets` the agent's toolsets (also those `async with agent:` opens
        inside the block); `system` replaces both `system=` and `@agent.instructions`.
        """
        return AgentOverride(self._overrides, checked_overrides(model=model, deps=deps, tools=tools,
                                                                toolsets=toolsets, system=system))

    def stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: DepsT | None = None,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        toolsets: Iterable[Toolset] = (),
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
        trace_context: Any = None,
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
            deps: Handed to tools, approval rules, instructions, output validators and toolset filters as
                `RunContext.deps`.
            tools: Tools for this run only, offered next to the agent's.
            toolsets: Toolsets for this run only, next to the agent's; one that is not open is opened for
                the run and closed when it ends.
            usage_limits: This run's limits, instead of the agent's.
            budget: A `UsageBudget` this run draws from (shared with whatever else is given it), instead of
                the agent's.
            trace_context: An OpenTelemetry context to parent the run's span (default: the current one).
        """
        config = self._configure()
        override = self._overrides.get()
        if override is not None and override.deps is not UNSET:
            deps = override.deps
        return AgentRun(config, history=history, prompt=_prompt_message(prompt), settings=settings,
                        conversation_id=conversation_id, resume=resume, approvals=approvals, deps=deps,
                        tools=[t if isinstance(t, Tool) else Tool(t) for t in tools], toolsets=list(toolsets),
                        usage_limits=usage_limits, budget=budget, trace_context=trace_context)

    def run_stream(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: DepsT | None = None,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        toolsets: Iterable[Toolset] = (),
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
        trace_context: Any = None,
    ) -> RunStream[OutputT]:
        """Stream text and completed messages: `async for chunk in agent.run_stream("..."):`.

        Iterate it to the end, or use `async with agent.run_stream(...) as chunks:` when the loop may stop
        early: leaving the block stops the run at once and `chunks.messages` is the valid history so far.
        With an `output_type`, chunks also carry the partial object (`chunk.partial`) as its JSON streams.
        The arguments are those of `stream`.
        """
        run = self.stream(prompt, history=history, settings=settings, conversation_id=conversation_id,
                          resume=resume, approvals=approvals, deps=deps, tools=tools, toolsets=toolsets,
                          usage_limits=usage_limits, budget=budget, trace_context=trace_context)
        return RunStream(run, stream_tool_steps=self.stream_tool_steps, output=run.config.output)

    async def run(
        self,
        prompt: Prompt = None,
        *,
        history: Sequence[Message] = (),
        settings: ModelSettings | None = None,
        conversation_id: str | None = None,
        resume: RunState | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: DepsT | None = None,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        toolsets: Iterable[Toolset] = (),
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
        trace_context: Any = None,
    ) -> RunResult[OutputT]:
        """Run to the final answer (or a pause for approval) and return the result.

        The arguments are those of `stream`: `agent.run(resume=state, approvals={...})` resumes a paused run.
        """
        async with self.stream(prompt, history=history, settings=settings, conversation_id=conversation_id,
                               resume=resume, approvals=approvals, deps=deps, tools=tools, toolsets=toolsets,
                               usage_limits=usage_limits, budget=budget, trace_context=trace_context) as run:
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
        deps: DepsT | None = None,
        tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
        toolsets: Iterable[Toolset] = (),
        usage_limits: UsageLimits | None = None,
        budget: UsageBudget | None = None,
    ) -> RunResult[OutputT]:
        """`run` for code that is not async (scripts, notebooks).

        Inside a running event loop (a notebook cell) the run happens on a separate thread with its own
        loop, so call it from plain code only; async code should `await agent.run(...)`.
        """
        call = functools.partial(self.run, prompt, history=history, settings=settings,
                                 conversation_id=conversation_id, resume=resume, approvals=approvals, deps=deps,
                                 tools=tools, toolsets=toolsets, usage_limits=usage_limits, budget=budget)
        # Each call has an event loop of its own; the model's HTTP client belongs to one loop and is
        # closed when that loop ends (see `HTTPModel.client`), so nothing crosses from one to the next.
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_in_new_loop(call)
        # The worker thread runs in a copy of this context, so an `override` block around the call applies.
        context = contextvars.copy_context()

        def in_thread() -> RunResult[OutputT]:
            return context.run(run_in_new_loop, call)

        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(in_thread).result()

    async def aclose(self) -> None:
        """Close the HTTP client of a model this agent created from a string."""
        if self._owns_model and isinstance(self.model, HTTPModel):
            await self.model.aclose()

    async def __aenter__(self) -> Agent[OutputT, DepsT]:
        """Open the agent's toolsets (MCP connections) for every run inside the block.

        Nested or concurrent blocks share one opening; the last to leave closes the toolsets and the HTTP
        client of a model made from a string. Toolsets that hold processes or connections must be closed
        by the task that opened them, so open the agent once around the runs that share it (a server's
        lifespan, a script's main).
        """
        if self._open is None:
            stack = AsyncExitStack()
            override = self._overrides.get()
            toolsets = self.toolsets if override is None or override.toolsets is UNSET else override.toolsets
            try:
                for toolset in list(toolsets):
                    await stack.enter_async_context(toolset)
            except BaseException:
                await stack.aclose()
                raise
            self._open, self._entries = stack, 0
        self._entries += 1
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entries -= 1
        if self._entries > 0:
            return
        stack, self._open = self._open, None
        try:
            if stack is not None:
                await stack.__aexit__(exc_type, exc, tb)
        finally:
            await self.aclose()


def _check_base_url(base_url: str | None) -> None:
    if base_url is None:
        return
    scheme, sep, rest = base_url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise UserError(f"The base URL {base_url!r} must start with http:// or https:// (e.g. "
                        f"'http://{base_url.split('://')[-1] or 'localhost:8000'}').")


def _prompt_message(prompt: Prompt) -> Message | None:
    if prompt is None or isinstance(prompt, Message):
        return prompt
    if isinstance(prompt, str):
        return Message.user(prompt)
    raise UserError(f"A prompt is text or a Message; got {type(prompt).__name__}.")
