"""Pure helpers of the store: grouping messages into rows, and the round a crashed run leaves behind.

No I/O here: `rows_for` and `interrupted_round` are plain functions over messages, unit-tested alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from ._records import MessageKind

__all__ = ["INTERRUPTED", "interrupted_round", "rows_for"]

INTERRUPTED = "interrupted"
"""The error text of a call whose tool had not finished when the process running it stopped
(as `"cancelled"` is the agent's for a call stopped by a cancellation)."""


def rows_for(messages: Sequence[Message]) -> list[tuple[MessageKind, list[Message]]]:
    """Messages grouped into rows: an assistant message with calls and the user message holding their
    results become one `tools_aggregate`; every other message is a row of its own role."""
    rows: list[tuple[MessageKind, list[Message]]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        following = messages[i + 1] if i + 1 < len(messages) else None
        calls = message.role == "assistant" and any(
            isinstance(p, (ToolCallPart, InvalidToolCallPart)) for p in message.parts)
        if calls and following is not None and following.role == "user" and following.tool_results_parts:
            rows.append(("tools_aggregate", [message, following]))
            i += 2
            continue
        rows.append((message.role, [message]))
        i += 1
    return rows


def interrupted_round(
    *,
    step_message: Message | None,
    calls: Sequence[ToolCallPart],
    results: Sequence[ToolResultPart],
    committed: Sequence[Message],
) -> list[Message] | None:
    """The tool round a dead run was in, answered: `[assistant message, results message]`, or `None`.

    The assistant message is the step's assembled message when its response had ended (`step_message`),
    else one holding the calls that had started (eager execution starts tools while the model is still
    streaming), marked `incomplete`. Each call gets its recorded result, or an `interrupted` error.
    Calls already part of a committed round (`committed`, the run's stored messages) are left out: the
    journal may lag behind a commit, and nothing is stored twice.
    """
    done = {p.id for m in committed for p in m.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}
    message: Message | None = None
    if step_message is not None:
        own = [p for p in step_message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
        if own and not any(p.id in done for p in own):
            message = step_message
    if message is None:
        started = [c for c in calls if c.id not in done]
        if not started:
            return None
        message = Message(role="assistant", parts=list(started), metadata={"incomplete": True})
    known = {r.call_id: r for r in results}
    answers: list[ToolResultPart] = []
    for part in message.parts:
        if not isinstance(part, (ToolCallPart, InvalidToolCallPart)):
            continue
        result = known.get(part.id)
        if result is None:
            result = ToolResultPart(call_id=part.id, name=part.name, result={"error": INTERRUPTED}, is_error=True)
        answers.append(result)
    return [message, Message.tool_results(answers)]
