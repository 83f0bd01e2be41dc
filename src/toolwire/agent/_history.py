"""Checking that a conversation can be sent: every tool call answered, every part where its role allows.

The agent checks the whole conversation before each model request, so a broken history given by the
caller fails at once with a message naming the offending message, instead of as a provider's 400 later.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..exceptions import UserError
from ..messages import (
    FilePart,
    InvalidToolCallPart,
    Message,
    ProviderToolPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["validate_history"]

_ALLOWED: dict[str, tuple[type, ...]] = {
    "system": (TextPart,),
    "user": (TextPart, FilePart, ToolResultPart),
    "assistant": (TextPart, ThinkingPart, ToolCallPart, InvalidToolCallPart, ProviderToolPart, FilePart),
}

_FIX_PAIRING = (
    "Every tool call in an assistant message needs a ToolResultPart with the same call_id in the very "
    "next message, which must be a user message (Message.tool_results([...]) builds one)."
)


def _error(text: str) -> UserError:
    return UserError(text[:1].upper() + text[1:])


def _a(role: str) -> str:
    return f"an {role}" if role[:1] in "aeio" else f"a {role}"  # "a user", "an assistant"


def validate_history(messages: Sequence[Message], *, prompt_index: int | None = None) -> None:
    """Raise `UserError` naming the first message that makes `messages` unsendable.

    Args:
        messages: The conversation, without the agent's system prompt.
        prompt_index: Index of the run's prompt message, named "the prompt" in errors.
    """
    if not messages:
        raise _error("There is nothing to answer: pass a prompt, or a history that ends with a user message.")

    def where(i: int) -> str:
        if i == prompt_index:
            return "the prompt message"
        return f"message {i} of the history"

    pending: dict[str, ToolCallPart | InvalidToolCallPart] = {}
    pending_at = -1
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            raise _error(f"{where(i)} is {_a(type(message).__name__)}, not a toolwire Message.")
        allowed = _ALLOWED.get(message.role)
        if allowed is None:
            raise _error(f"{where(i)} has role {message.role!r}; use 'system', 'user' or 'assistant'.")
        for part in message.parts:
            if not isinstance(part, allowed):
                raise _error(
                    f"{where(i)} is {_a(message.role)} message holding a {type(part).__name__}, which "
                    f"{message.role} messages cannot carry. Tool calls belong in assistant messages and "
                    "tool results in user messages."
                )
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        if pending:
            if message.role != "user":
                call = next(iter(pending.values()))
                raise _error(
                    f"{where(pending_at)} calls tool {call.name!r} (id {call.id!r}), but {where(i)} is "
                    f"{_a(message.role)} message, not the user message with its results. {_FIX_PAIRING}"
                )
            answered = {r.call_id for r in results}
            missing = [c for c_id, c in pending.items() if c_id not in answered]
            if missing:
                call = missing[0]
                raise _error(
                    f"{where(pending_at)} calls tool {call.name!r} (id {call.id!r}), but {where(i)} holds "
                    f"no result for it. {_FIX_PAIRING}"
                )
        seen: set[str] = set()
        for result in results:
            if result.call_id not in pending:
                raise _error(
                    f"{where(i)} holds a result for call id {result.call_id!r} ({result.name!r}), but the "
                    "assistant message just before it made no such call. Results must answer the calls of "
                    "the message right before them; drop the stray result or restore its call."
                )
            if result.call_id in seen:
                raise _error(f"{where(i)} holds two results for call id {result.call_id!r}; keep one.")
            seen.add(result.call_id)
        pending = {}
        if message.role == "assistant":
            for part in message.parts:
                if isinstance(part, (ToolCallPart, InvalidToolCallPart)):
                    if part.id in pending:
                        raise _error(
                            f"{where(i)} has two tool calls with the id {part.id!r}; results are matched "
                            "to calls by id, so each call needs its own."
                        )
                    pending[part.id] = part
            pending_at = i
    if pending:
        call = next(iter(pending.values()))
        raise _error(
            f"{where(pending_at)} calls tool {call.name!r} (id {call.id!r}), but the history ends there "
            f"without its result. {_FIX_PAIRING} Or drop that message."
        )
