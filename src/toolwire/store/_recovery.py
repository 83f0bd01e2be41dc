"""Pure helpers of the store: grouping messages into rows, and the round a crashed run leaves behind.

No I/O here: `rows_for`, `interrupted_round` and `continued_round` are plain functions over messages,
unit-tested alone. A dead run's round is either ended (`interrupted_round`: every unfinished call answered
`interrupted`, the run over) or handed to the process that continues the run (`continued_round`: the calls
that finished keep their results, and the continuing agent decides what the others get).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from ._records import MessageKind

__all__ = ["INTERRUPTED", "ContinuedRound", "continued_round", "interrupted_round", "rows_for"]

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


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinuedRound:
    """The round a dead run was in, for the process that continues the run.

    `message` is the round's assistant message (its calls). `results` are the results the journal holds for
    them, in the message's order: those calls are never run again. `started` are the ids of the calls that
    started and have no result (their tool may have done part of its work); every other call of the message
    had not started. `pending` is true when some call still needs an answer.
    """

    message: Message
    results: list[ToolResultPart]
    started: frozenset[str]

    @property
    def pending(self) -> bool:
        answered = {r.call_id for r in self.results}
        return any(isinstance(p, ToolCallPart) and p.id not in answered for p in self.message.parts)


def _round_message(step_message: Message | None, calls: Sequence[ToolCallPart],
                   done: set[str]) -> Message | None:
    """The assistant message of the round in progress (see `interrupted_round`), or `None` if there is none."""
    if step_message is not None:
        own = [p for p in step_message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
        if own and not any(p.id in done for p in own):
            return step_message
    started = [c for c in calls if c.id not in done]
    if not started:
        return None
    return Message(role="assistant", parts=list(started), metadata={"incomplete": True})


def _committed_calls(committed: Sequence[Message]) -> set[str]:
    return {p.id for m in committed for p in m.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}


def continued_round(
    *,
    step_message: Message | None,
    calls: Sequence[ToolCallPart],
    results: Sequence[ToolResultPart],
    committed: Sequence[Message],
) -> ContinuedRound | None:
    """The round a dead run was in, to be finished by the process that continues it; `None` when no call of it
    had started and its response had not ended (the continuing process sends the step's request again).

    The message is found as in `interrupted_round`. An invalid call (its arguments cut off) without a recorded
    result gets the `interrupted` error: nothing of it can run.
    """
    message = _round_message(step_message, calls, _committed_calls(committed))
    if message is None:
        return None
    known = {r.call_id: r for r in results}
    kept: list[ToolResultPart] = []
    for part in message.parts:
        if isinstance(part, ToolCallPart) and part.id in known:
            kept.append(known[part.id])
        elif isinstance(part, InvalidToolCallPart):
            kept.append(known.get(part.id) or ToolResultPart(call_id=part.id, name=part.name,
                                                             result={"error": INTERRUPTED}, is_error=True))
    started = frozenset(c.id for c in calls if c.id not in known)
    return ContinuedRound(message=message, results=kept, started=started)


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
    message = _round_message(step_message, calls, _committed_calls(committed))
    if message is None:
        return None
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
