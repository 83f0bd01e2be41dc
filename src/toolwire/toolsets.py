"""Toolsets: groups of tools an agent asks for at every step, for tools that come and go.

    weather = FunctionToolset([get_weather, get_forecast], name="weather")
    agent = Agent(model, toolsets=[weather.prefixed("wx")])
    await agent.run("...", toolsets=[MCPServer.stdio("my-mcp-server")], tools=[one_more_tool])

A `Toolset` answers `get_tools(ctx)` with `Tool`s; the agent asks every toolset at the start of each step,
so a toolset may change between steps (an MCP server that announced a new list, a filter that looks at
`ctx.deps`). Tools from toolsets run exactly like the agent's own: same validation, timeouts, approval and
error results.

- `filtered(...)` keeps the tools a list of names or a predicate `(ctx, tool) -> bool` allows.
- `prefixed("wx")` renames every tool `wx_<name>`, so two toolsets with a tool of the same name can be
  offered together (a clash is a `UserError` naming both sources).

A toolset holding a connection (MCP) is opened with `async with toolset:` around any number of runs. A run
given a toolset that is not open opens it for itself and closes it when it ends; such a run-owned
connection belongs to that run alone (its task opened it), so share one between concurrent runs by opening
it yourself, or with `async with agent:`, which opens the agent's toolsets.
"""

from __future__ import annotations

import copy
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from types import TracebackType
from typing import Any, Self, TypeAlias

from .exceptions import UserError
from .tools import RunContext, Tool

__all__ = ["FilteredToolset", "FunctionToolset", "PrefixedToolset", "ToolFilter", "Toolset", "resolve_tools",
           "toolset_instructions"]

ToolFilter: TypeAlias = Callable[[RunContext[Any], Tool[..., Any]], "bool | Awaitable[bool]"]
"""Keeps a tool for this step when it returns true (sync or async); it may consult `ctx.deps`."""


class Toolset(ABC):
    """A source of tools that the agent asks at the start of every step.

    Subclasses implement `get_tools`; a toolset that holds a resource (a connection, a process) also
    implements `__aenter__`/`__aexit__` and `run_scope`.
    """

    name: str = "toolset"
    """Names the toolset in error messages and traces."""

    @abstractmethod
    async def get_tools(self, context: RunContext[Any]) -> Sequence[Tool[..., Any]]:
        """The tools to offer the model at this step."""

    async def get_instructions(self, context: RunContext[Any]) -> str | None:
        """Text for the system prompt of this step, after the agent's instructions (an MCP server's
        `instructions`); `None` adds nothing."""
        return None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def run_scope(self) -> AbstractAsyncContextManager[Any]:
        """What a run enters around its steps: opens a toolset that is not open yet (nothing by default)."""
        return nullcontext()

    def filtered(self, keep: ToolFilter | Iterable[str]) -> FilteredToolset:
        """This toolset with only the tools `keep` allows: a collection of tool names, or a predicate."""
        return FilteredToolset(self, keep)

    def prefixed(self, prefix: str) -> PrefixedToolset:
        """This toolset with every tool renamed `<prefix>_<name>`."""
        return PrefixedToolset(self, prefix)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class FunctionToolset(Toolset):
    """A fixed list of tools (`Tool`s or plain functions, which are wrapped with `@tool`)."""

    def __init__(self, tools: Iterable[Tool[..., Any] | Callable[..., Any]], *, name: str = "tools") -> None:
        self.tools: list[Tool[..., Any]] = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self.name = name

    async def get_tools(self, context: RunContext[Any]) -> Sequence[Tool[..., Any]]:
        return self.tools


class _WrapperToolset(Toolset):
    """A toolset that changes another one's tools; opening it opens the wrapped toolset."""

    def __init__(self, wrapped: Toolset) -> None:
        if not isinstance(wrapped, Toolset):
            raise UserError(f"A toolset wraps a Toolset; got {type(wrapped).__name__}.")
        self.wrapped = wrapped
        self.name = wrapped.name

    async def __aenter__(self) -> Self:
        await self.wrapped.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.wrapped.__aexit__(exc_type, exc, tb)

    def run_scope(self) -> AbstractAsyncContextManager[Any]:
        return self.wrapped.run_scope()

    async def get_instructions(self, context: RunContext[Any]) -> str | None:
        return await self.wrapped.get_instructions(context)


class FilteredToolset(_WrapperToolset):
    """The tools of another toolset that a list of names or a predicate allows, decided at every step."""

    def __init__(self, wrapped: Toolset, keep: ToolFilter | Iterable[str]) -> None:
        super().__init__(wrapped)
        if callable(keep):
            self._names: frozenset[str] | None = None
            self._keep: ToolFilter | None = keep
        elif isinstance(keep, str):
            raise UserError(f"filtered() takes tool names as a list, or a predicate; got the string {keep!r} "
                            f"(write [{keep!r}]).")
        else:
            self._names, self._keep = frozenset(keep), None

    async def get_tools(self, context: RunContext[Any]) -> Sequence[Tool[..., Any]]:
        tools = await self.wrapped.get_tools(context)
        if self._names is not None:
            return [t for t in tools if t.name in self._names]
        assert self._keep is not None
        kept = []
        for t in tools:
            verdict = self._keep(context, t)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict:
                kept.append(t)
        return kept


class PrefixedToolset(_WrapperToolset):
    """The tools of another toolset, each renamed `<prefix>_<name>` (the model sees and calls the new name)."""

    def __init__(self, wrapped: Toolset, prefix: str) -> None:
        super().__init__(wrapped)
        if not prefix or not prefix.replace("-", "_").isidentifier():
            raise UserError(f"A tool name prefix is letters, digits, '_' or '-'; got {prefix!r}.")
        self.prefix = prefix
        self.name = f"{prefix}:{wrapped.name}"

    async def get_tools(self, context: RunContext[Any]) -> Sequence[Tool[..., Any]]:
        renamed = []
        for t in await self.wrapped.get_tools(context):
            # A shallow copy: the function, schema and options are shared, only the name differs.
            copied = copy.copy(t)
            copied.name = f"{self.prefix}_{t.name}"
            renamed.append(copied)
        return renamed


async def toolset_instructions(toolsets: Sequence[Toolset], context: RunContext[Any]) -> str | None:
    """The toolsets' instructions for this step, in toolset order, joined with blank lines."""
    texts = [text for toolset in toolsets if (text := await toolset.get_instructions(context))]
    return "\n\n".join(texts) or None


async def resolve_tools(
    sources: Sequence[tuple[str, Sequence[Tool[..., Any]]]],
    toolsets: Sequence[Toolset],
    context: RunContext[Any],
) -> list[Tool[..., Any]]:
    """Every tool of a step: the fixed ones (named by source), then each toolset's; names must be unique.

    A clash raises `UserError` naming both sources, since the model could not tell the tools apart.
    """
    seen: dict[str, str] = {}
    tools: list[Tool[..., Any]] = []

    def add(source: str, items: Iterable[Tool[..., Any]]) -> None:
        for t in items:
            other = seen.get(t.name)
            if other is not None:
                hint = ("give one toolset a prefix (toolset.prefixed('name')) or filter it"
                        if source.startswith("toolset") else "rename one of them")
                raise UserError(f"Two tools are named {t.name!r}: one from {other}, one from {source}; {hint}.")
            seen[t.name] = source
            tools.append(t)

    for source, items in sources:
        add(source, items)
    for toolset in toolsets:
        add(f"toolset {toolset.name!r}", await toolset.get_tools(context))
    return tools
