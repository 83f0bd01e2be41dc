"""`Agent.override`: replace an agent's model, deps, tools, toolsets or instructions for a block of code.

    with agent.override(model=ScriptedModel(["Sunny."]), deps=FakeDb()):
        result = await code_that_runs_the_agent()

Meant for tests: the application keeps its agent as it is, and a test swaps what the agent talks to.
What an override replaces wins over what a run is given (`deps=` of a call inside the block is replaced
too), so code under test cannot escape it.

The overrides live in a `ContextVar` of the agent: entering sets it, leaving resets it to what it was,
so blocks nest (an inner block changes only what it names, the rest comes from the outer one) and every
asyncio task and thread sees only the overrides of its own context. Tasks copy their context when they
are created, so a task started inside the block keeps the override; parallel tests, each in a task of
its own, never see each other's. `with` and `async with` both work; leave blocks in the order they
were entered (the `ContextVar` token says so if not).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Final

from ..models import Model, get_model
from ..tools import Tool
from ..toolsets import Toolset
from ._instructions import Instructions, normalize_instructions

__all__ = ["UNSET", "AgentOverride", "Overrides"]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final[Any] = _Unset()
"""Not overridden: the agent's own value (or the outer override's) applies."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """What an override block replaces; `UNSET` fields keep the agent's value."""

    model: Any = UNSET
    deps: Any = UNSET
    tools: Any = UNSET
    toolsets: Any = UNSET
    system: Any = UNSET


class AgentOverride:
    """The context manager `Agent.override(...)` returns; usable with `with` and `async with`."""

    def __init__(self, var: ContextVar[Overrides | None], changes: Overrides) -> None:
        self._var = var
        self._changes = changes
        self._tokens: list[Token[Overrides | None]] = []

    def __enter__(self) -> AgentOverride:
        outer = self._var.get()
        merged = outer if outer is not None else Overrides()
        for name in ("model", "deps", "tools", "toolsets", "system"):
            value = getattr(self._changes, name)
            if value is not UNSET:
                merged = replace(merged, **{name: value})
        self._tokens.append(self._var.set(merged))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._var.reset(self._tokens.pop())

    async def __aenter__(self) -> AgentOverride:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def checked_overrides(
    *,
    model: Model | str | Any,
    deps: Any,
    tools: Iterable[Tool[..., Any] | Callable[..., Any]] | Any,
    toolsets: Iterable[Toolset] | Any,
    system: Instructions | Any,
) -> Overrides:
    """The overrides with each given value checked and normalised (a model named by string is built)."""
    from ..exceptions import UserError

    if model is not UNSET:
        if isinstance(model, str):
            model = get_model(model)
        elif not isinstance(model, Model):
            raise UserError(f"override(model=...) takes a Model or a 'provider:model' string; got "
                            f"{type(model).__name__}.")
    if tools is not UNSET:
        tools = [t if isinstance(t, Tool) else Tool(t) for t in tools]
    if toolsets is not UNSET:
        toolsets = list(toolsets)
        for toolset in toolsets:
            if not isinstance(toolset, Toolset):
                raise UserError(f"override(toolsets=...) takes Toolset objects; got {type(toolset).__name__}.")
    if system is not UNSET:
        system = normalize_instructions(system)
    return Overrides(model=model, deps=deps, tools=tools, toolsets=toolsets, system=system)
