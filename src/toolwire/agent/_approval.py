"""Human approval: the state of a paused run, and the decisions that resume it.

    result = await agent.run("Clean up the old backups.")
    if result.paused:
        saved = result.state.to_json(key=SECRET)   # store it anywhere: a database row, a file, a queue
        ...                                        # later, maybe in another process:
        state = RunState.from_json(saved, key=SECRET)
        result = await agent.run(resume=state, approvals={state.pending[0].id: True,
                                                          state.pending[1].id: Denial("Not that one.")})

A run pauses when the model calls a tool that needs approval (`@tool(requires_approval=True)`, a
per-call predicate, or the agent's `requires_approval`). The round's other calls still run; the run
ends once they finished, holding the round in a `RunState`: the assistant message, the results
already known and the conversation the round continues (unless the agent's memory is its single
source of truth, which then holds it). The paused round is not part of `RunResult.messages` or of the
memory yet: it joins them, whole, when the run resumes and every call has its result.

Invariants of a state:
- One source of truth: the pending calls are the calls of `message` that have no result; nothing else
  names a call, so what runs is exactly what the history (and the model) say was called.
- Checked whole before anything runs (`RunState.check`): the message, the results, the conversation and
  every number; a resume fails before any tool of it runs, never half-way.
- Signed on request: `to_json(key=...)` adds an HMAC-SHA256 of the state's canonical JSON, and
  `from_json(data, key=...)` refuses a state that is unsigned or was altered (`RunStateSignatureError`).
- Resumed at most once: `id` is claimed (`ResumeClaims`) before the resumed round's tools run.
- Stale states are refused: `conversation_length` records where the run paused; a memory conversation
  that has moved on since (`RunStateStaleError`) would put the resumed round after newer messages.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pydantic import TypeAdapter, ValidationError

from ..exceptions import RunStateError, RunStateSignatureError, UserError
from ..messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart
from ._execute import results_in_order
from ._history import validate_history

__all__ = ["Approval", "Denial", "Restarted", "RunState", "StateKey", "decisions_for", "new_state_id"]

STATE_VERSION = 2

DENIED = "A person reviewed this call and did not approve it, so it was not run."

StateKey: TypeAlias = bytes | str
"""A signing key: bytes, or text (used as its UTF-8 bytes)."""


@dataclass(frozen=True, slots=True)
class Denial:
    """A decision not to run a call; `message` is the error result the model reads instead."""

    message: str = DENIED


@dataclass(frozen=True, slots=True)
class Restarted(Denial):
    """The decision on a call of a round continued in another process after the one playing it stopped (the
    server's durable runs, docs/guides/durable-runs.md). A call that had `started` runs again only when its tool
    is idempotent; otherwise it is answered with `message` (its effect is unknown, and the model is told so). A
    call that had not started is admitted as in any round: a person approves it first when its tool says so."""

    started: bool = True


Approval: TypeAlias = bool | Denial
"""The decision on one pending call: `True` runs it, `False` or a `Denial` answers it with an error."""


def new_state_id() -> str:
    """A random id for a paused run (128 bits, URL-safe)."""
    return secrets.token_urlsafe(16)


@dataclass(slots=True, kw_only=True)
class RunState:
    """A run paused for approval: everything needed to resume it, in any process.

    Attributes:
        message: The assistant message whose calls the paused round answers.
        results: The results already known (calls that needed no approval, invalid calls...), in the
            calls' order. Every other call of `message` is pending.
        conversation: The messages before `message` (history and the run's earlier messages); empty
            when the agent's memory is its single source of truth (`from_memory`).
        conversation_length: How many messages came before `message` when the run paused: the length
            of `conversation`, or of the memory conversation for `from_memory` states.
        step: The index of the paused step among the run's model requests.
        conversation_id: The memory conversation the run writes to (`None` without a memory).
        from_memory: The conversation is read from the agent's memory, not from this state.
        output_retries: Typed-output retries used so far.
        id: A random id given when the run paused; "resume once" claims it.
        version: The format version of this state.
        signature: The HMAC-SHA256 (hex) written by `to_json(key=...)`, else `None`.
    """

    message: Message
    results: list[ToolResultPart] = field(default_factory=list)
    conversation: list[Message] = field(default_factory=list)
    conversation_length: int = 0
    step: int = 0
    conversation_id: str | None = None
    from_memory: bool = False
    output_retries: int = 0
    id: str = field(default_factory=new_state_id)
    version: int = STATE_VERSION
    signature: str | None = None

    @property
    def pending(self) -> list[ToolCallPart]:
        """The calls waiting for a decision: the calls of `message` without a result, in its order."""
        answered = {r.call_id for r in self.results}
        return [p for p in self.message.parts if isinstance(p, ToolCallPart) and p.id not in answered]

    def to_json(self, *, key: StateKey | None = None) -> str:
        """The state as a JSON string; with `key`, signed (`RunState.from_json(data, key=key)` checks it)."""
        return _adapter.dump_json(self._signed(key)).decode()

    def to_dict(self, *, key: StateKey | None = None) -> dict[str, Any]:
        """The state as JSON-compatible data; with `key`, signed like `to_json`."""
        data: dict[str, Any] = _adapter.dump_python(self._signed(key), mode="json")
        return data

    @classmethod
    def from_json(cls, data: str | bytes, *, key: StateKey | None = None) -> RunState:
        """Read and check a state written by `to_json`.

        With `key`, the state must carry a valid signature made with that key; an unsigned or altered
        state raises `RunStateSignatureError`. Any other problem raises `RunStateError`.
        """
        try:
            state = _adapter.validate_json(data)
        except ValidationError as exc:
            raise _not_a_state(exc, "to_json()") from None
        return state._verified(key).check()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, key: StateKey | None = None) -> RunState:
        """Read and check a state written by `to_dict` (`key` as for `from_json`)."""
        try:
            state = _adapter.validate_python(dict(data))
        except ValidationError as exc:
            raise _not_a_state(exc, "to_dict()") from None
        return state._verified(key).check()

    def check(self) -> RunState:
        """Raise `RunStateError` unless the state is whole and consistent; returns the state.

        Checked: the format version, the field ranges, that `message` is an assistant message whose
        every call has either one result (matching its name) or is pending, that at least one call is
        pending, and that the conversation and the round form a valid history.
        """
        if self.version != STATE_VERSION:
            raise RunStateError(f"This run state has format version {self.version}; this toolwire reads version "
                                f"{STATE_VERSION}. Resume it with the toolwire version that saved it.")
        problem = self._problem()
        if problem is not None:
            raise RunStateError(f"This run state cannot be resumed: {problem} Pass a state exactly as "
                                "to_json() wrote it.")
        return self

    def _problem(self) -> str | None:
        if not self.id or len(self.id) > 200:
            return "its id is empty or too long."
        for name in ("step", "output_retries", "conversation_length"):
            if getattr(self, name) < 0:
                return f"{name} is {getattr(self, name)}, below 0."
        if self.from_memory and self.conversation:
            return "it reads its conversation from the memory (from_memory) yet carries one."
        if not self.from_memory and self.conversation_length != len(self.conversation):
            return (f"conversation_length is {self.conversation_length} but the conversation holds "
                    f"{len(self.conversation)} messages.")
        if self.message.role != "assistant":
            return f"its message has role {self.message.role!r}; a paused round continues an assistant message."
        calls = {p.id: p for p in self.message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}
        answered: set[str] = set()
        for result in self.results:
            call = calls.get(result.call_id)
            if call is None:
                return f"it holds a result for call id {result.call_id!r}, which its message does not make."
            if result.call_id in answered:
                return f"it holds two results for call id {result.call_id!r}."
            if result.name != call.name:
                return f"the result for call {call.id!r} names tool {result.name!r}, the call names {call.name!r}."
            answered.add(result.call_id)
        unanswered = [c.id for c in calls.values() if isinstance(c, InvalidToolCallPart) and c.id not in answered]
        if unanswered:
            return f"the invalid call {unanswered[0]!r} has no result."
        if not self.pending:
            return "no call of its message is waiting for a decision."
        if not self.from_memory:
            round_ = [self.message, Message.tool_results(results_in_order(calls.values(), {}, "pending"))]
            try:
                validate_history([*self.conversation, *round_])
            except UserError as exc:
                return f"its conversation is not a valid history ({exc})"
        return None

    def _signed(self, key: StateKey | None) -> RunState:
        if key is None:
            return self if self.signature is None else dataclasses.replace(self, signature=None)
        # Sign the state as it reads back, so the digest `from_json` recomputes is over the same bytes.
        normal = _adapter.validate_json(_adapter.dump_json(dataclasses.replace(self, signature=None)))
        return dataclasses.replace(normal, signature=_digest(normal, key))

    def _verified(self, key: StateKey | None) -> RunState:
        if key is None:
            return self
        if self.signature is None:
            raise RunStateSignatureError("This run state is not signed, and a key was given to check it: it was "
                                         "not written by to_json(key=...) with your key. Refuse it, or sign "
                                         "the states you issue.")
        if not hmac.compare_digest(self.signature, _digest(self, key)):
            raise RunStateSignatureError("This run state's signature does not match: it was altered after it was "
                                         "signed, or signed with another key. Refuse it; do not resume it.")
        return self


def _digest(state: RunState, key: StateKey) -> str:
    if isinstance(key, str):
        key = key.encode()
    if not key:
        raise UserError("A signing key must not be empty; use a long random secret (e.g. secrets.token_bytes(32)).")
    canonical = _adapter.dump_json(dataclasses.replace(state, signature=None))
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def _not_a_state(exc: ValidationError, writer: str) -> RunStateError:
    return RunStateError(f"This is not a saved run state ({exc.error_count()} problem(s), first: "
                         f"{exc.errors(include_url=False)[0]['msg']}). Pass what RunState.{writer} returned.")


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
