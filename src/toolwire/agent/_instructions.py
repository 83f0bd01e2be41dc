"""Dynamic instructions: a system prompt built from the run context before every request.

    def user_name(ctx: RunContext[Deps]) -> str:
        return f"The user is {ctx.deps.user.name}."

    agent = Agent(model, system=["Be brief.", user_name], deps_type=Deps)

`system=` is text, a function, or a list of both. A function takes the run context (or nothing) and
returns text (or `None` to add nothing); it may be async. All parts are evaluated before each request, in
order, and joined with blank lines, so an instruction may depend on the run so far (`ctx.step`,
`ctx.usage`). An instruction that raises stops the run before that request with `InstructionError`,
which names the function and carries the run's valid history.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from ..exceptions import InstructionError, UserError
from ..messages import Message
from ..tools import RunContext, positional_arity

__all__ = ["Instruction", "Instructions", "normalize_instructions", "render_instructions"]

_Text: TypeAlias = "str | Awaitable[str | None] | None"
Instruction: TypeAlias = str | Callable[[RunContext[Any]], _Text] | Callable[[], _Text]
"""One part of a system prompt: text, or a function (sync or async) of the run context returning text."""

Instructions: TypeAlias = Instruction | Sequence[Instruction] | None
"""What `system=` accepts: one part or a list of parts."""


def normalize_instructions(system: Instructions) -> tuple[Instruction, ...]:
    """The parts of `system=` as a tuple; raises `UserError` for anything that is not text or a function."""
    if system is None:
        return ()
    parts: Sequence[Any] = [system] if isinstance(system, str) or callable(system) else system
    if isinstance(parts, (bytes, dict)) or not isinstance(parts, Sequence):
        raise UserError(f"system= takes text, a function of the run context, or a list of them; "
                        f"got {type(system).__name__}.")
    for part in parts:
        if not (isinstance(part, str) or callable(part)):
            raise UserError(f"Each part of system= is text or a function of the run context; got "
                            f"{type(part).__name__} ({part!r}).")
    return tuple(parts)


def is_static(parts: Sequence[Instruction]) -> bool:
    return all(isinstance(p, str) for p in parts)


async def render_instructions(
    parts: Sequence[Instruction], context: RunContext[Any], messages: list[Message]
) -> str | None:
    """The system prompt for one request; `InstructionError` (with `messages`) when a function raises."""
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text: Any = part
        else:
            try:
                text = part(context) if positional_arity(part) >= 1 else part()  # type: ignore[call-arg]
                if inspect.isawaitable(text):
                    text = await text
            except Exception as exc:
                name = describe_function(part)
                raise InstructionError(
                    f"The dynamic instruction {name} raised {type(exc).__name__}: {exc}. The run stopped before "
                    f"model request {context.step + 1}; fix the function (its traceback is this error's "
                    "__cause__), then go on from this error's `messages`.",
                    instruction=name,
                    messages=list(messages),
                ) from exc
            if text is not None and not isinstance(text, str):
                name = describe_function(part)
                raise InstructionError(
                    f"The dynamic instruction {name} returned {type(text).__name__}; it must return text (or None "
                    "to add nothing).",
                    instruction=name,
                    messages=list(messages),
                )
        if text:
            texts.append(text)
    return "\n\n".join(texts) or None


def describe_function(function: Callable[..., Any]) -> str:
    """A function's name as a person finds it in the code: `module.qualname`."""
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function)
    module = getattr(function, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else str(name)
