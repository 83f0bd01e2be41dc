"""Human approval: the state of a paused run, and the decisions that resume it.

    result = await agent.run("Clean up the old backups.")
    if result.paused:
        saved = result.state.to_json()            # store it anywhere: a database row, a file, a queue
        ...                                       # later, maybe in another process:
        state = RunState.from_json(saved)
        result = await agent.run(resume=state, approvals={state.pending[0].id: True,
                                                          state.pending[1].id: Denial("Not that one.")})

A run pauses when the model calls a tool that needs approval (`@tool(requires_approval=True)`, a
per-call predicate, or the agent's `requires_approval`). The round's other calls still run; the run
ends once they finished, holding the round in a `RunState`: the assistant message, the results
already known, the calls waiting for a person, and the conversation the round continues (unless the
agent's memory is its single source of truth, which then holds it). The paused round is not part of
`RunResult.messages` or of the memory yet: it joins them, whole, when the run resumes and every call
has its result, so every history handed out stays valid.

The state is plain JSON and holds the calls' arguments as the model gave them: keep it where the people
approving cannot edit it, or they could approve one call and run another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import TypeAdapter, ValidationError

from ..exceptions import UserError
from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart

__all__ = ["Approval", "Denial", "RunState", "decisions_for"]

STATE_VERSION = 1

DENIED = "A person reviewed this call and did not approve it, so it was not run."


@dataclass(frozen=True, slots=True)
class Denial:
    """A decision not to run a call; `message` is the error result the model reads instead."""

    message: str = DENIED


Approval: TypeAlias = bool | Denial
"""The decision on one pending call: `True` runs it, `False` or a `Denial` answers it with an error."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """A run paused for approval: everything needed to resume it, in any process.

    Attributes:
        message: The assistant message whose calls the paused round answers.
        pending: The calls waiting for a decision, in the message's order.
        results: The results already known (calls that needed no approval, invalid calls...).
        conversation: The messages before `message` (history and the run's earlier messages); empty
            when the agent's memory is its single source of truth (`from_memory`).
        step: The index of the paused step among the run's model requests.
        conversation_id: The memory conversation the run writes to.
        from_memory: The conversation is read from the agent's memory, not from this state.
        output_retries: Typed-output retries used so far.
        version: The format version of this state.
    """

    message: Message
    pending: list[ToolCallPart]
    results: list[ToolResultPart] = field(default_factory=list)
    conversation: list[Message] = field(default_factory=list)
    step: int = 0
    conversation_id: str | None = None
    from_memory: bool = False
    output_retries: int = 0
    version: int = STATE_VERSION

    def to_json(self) -> str:
        """The state as a JSON string (`RunState.from_json` reads it back)."""
        return _adapter.dump_json(self).decode()

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-compatible data."""
        data: dict[str, Any] = _adapter.dump_python(self, mode="json")
        return data

    @classmethod
    def from_json(cls, data: str | bytes) -> RunState:
        """Read a state written by `to_json`."""
        try:
            state = _adapter.validate_json(data)
        except ValidationError as exc:
            raise UserError(f"This is not a saved run state ({exc.error_count()} problem(s), first: "
                            f"{exc.errors(include_url=False)[0]['msg']}). Pass what RunState.to_json() "
                            "returned.") from None
        return state._checked()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Read a state written by `to_dict`."""
        try:
            state = _adapter.validate_python(dict(data))
        except ValidationError as exc:
            raise UserError(f"This is not a saved run state ({exc.error_count()} problem(s), first: "
                            f"{exc.errors(include_url=False)[0]['msg']}). Pass what RunState.to_dict() "
                            "returned.") from None
        return state._checked()

    def _checked(self) -> RunState:
        if self.version != STATE_VERSION:
            raise UserError(f"This run state has format version {self.version}; this toolwire reads version "
                            f"{STATE_VERSION}. Resume it with the toolwire version that saved it.")
        calls = {p.id for p in self.message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}
        answered = [r.call_id for r in self.results]
        waiting = [c.id for c in self.pending]
        if (not waiting or len(set(answered) | set(waiting)) != len(answered) + len(waiting)
                or set(answered) | set(waiting) != calls):
            raise UserError("This run state is inconsistent: each call of its message must have either a result "
                            "or a place among the pending calls. Pass a state exactly as to_json() wrote it.")
        return self


_adapter: TypeAdapter[RunState] = TypeAdapter(RunState)


def decisions_for(state: RunState, approvals: Mapping[str, Approval] | None) -> dict[str, Denial | None]:
    """Each pending call's decision: `None` to run it, a `Denial` to answer it with an error.

    Raises `UserError` when a pending call has no decision, a decision names no pending call, or a
    decision is not `True`, `False` or a `Denial`.
    """
    approvals = dict(approvals or {})
    waiting = {c.id: c for c in state.pending}
    unknown = [k for k in approvals if k not in waiting]
    if unknown:
        known = ", ".join(repr(k) for k in waiting)
        raise UserError(f"approvals names call id {unknown[0]!r}, which is not waiting for approval in this "
                        f"state; the pending calls are {known}.")
    missing = [c for c in state.pending if c.id not in approvals]
    if missing:
        listed = ", ".join(f"{c.id!r} ({c.name})" for c in missing)
        raise UserError(f"Decide every pending call before resuming: no decision for {listed}. Pass "
                        "approvals={call_id: True | False | Denial('why'), ...} with one entry per pending call.")
    decided: dict[str, Denial | None] = {}
    for call_id, decision in approvals.items():
        if decision is True:
            decided[call_id] = None
        elif decision is False:
            decided[call_id] = Denial()
        elif isinstance(decision, Denial):
            decided[call_id] = decision
        else:
            raise UserError(f"The decision for call {call_id!r} is {decision!r}; use True to run the call, "
                            "False or Denial('message for the model') to refuse it.")
    return decided
