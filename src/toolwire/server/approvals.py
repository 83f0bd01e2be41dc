"""Approvals: the one place the server reads and writes the agent's `RunState`.

A paused run's state is kept server-side, in the store, next to one approval row per pending call
with an id the server issued. A client only ever sends approval ids and yes/no (and a reason); the
calls, their arguments and the history come from the stored state and rows, never from the client.
Deciding is a conditional update in the store, so an approval id is decided once.

What is stored is what may be shown: tool results in the state pass through the same `ResultPolicy`
(redaction, size cap) as everything else, before the state is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import TypeAdapter

from ..agent import Approval as AgentApproval, Denial, RunState
from ..messages import Part, ToolCallPart
from ..store import Approval, PausedRun, Resumption, new_id
from .limits import ResultPolicy

__all__ = ["PauseRecord", "part_dicts", "paused_view", "record_pause", "resume_arguments", "resumed_view"]

_parts: TypeAdapter[list[Part]] = TypeAdapter(list[Part])


def part_dicts(parts: Sequence[Any]) -> list[dict[str, Any]]:
    """Message parts as toolwire's JSON."""
    data: list[dict[str, Any]] = _parts.dump_python(list(parts), mode="json")
    return data


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseRecord:
    """What the store keeps of a paused run: its state as JSON and the approvals it issues."""

    state_json: str
    approvals: list[tuple[str, ToolCallPart]]


def record_pause(state: RunState, policy: ResultPolicy) -> PauseRecord:
    """The state to store for a paused run (results made safe), with a fresh approval id per pending call."""
    safe = replace(state, results=[policy.result(r) for r in state.results],
                   conversation=[policy.message(m) for m in state.conversation])
    return PauseRecord(state_json=safe.to_json(),
                       approvals=[(new_id("apv"), call) for call in state.pending])


def resume_arguments(paused: PausedRun, decided: dict[str, Approval]) -> tuple[RunState, dict[str, AgentApproval]]:
    """The state to resume and the agent's decisions, from the stored state and the decided approval rows."""
    state = RunState.from_json(paused.state_json)
    decisions: dict[str, AgentApproval] = {}
    for call_id, approval in decided.items():
        if approval.status == "approved":
            decisions[call_id] = True
        else:
            decisions[call_id] = Denial(approval.reason) if approval.reason else Denial()
    return state, decisions


def paused_view(paused: PausedRun) -> dict[str, Any]:
    """`ChatDetail.paused`: the message whose calls wait, the results known, the approvals to decide."""
    state = RunState.from_json(paused.state_json)
    return {
        "run_id": paused.run.id,
        "message": state.message.to_dict(),
        "results": part_dicts(state.results),
        "approvals": [{"approval_id": a.id, "call": part_dicts([a.call])[0]}
                      for a in paused.approvals if a.status == "pending"],
    }


def resumed_view(resumption: Resumption) -> dict[str, Any]:
    """`run_started.resumed_from` of a resumed run: the round it finishes and how each waiting call was decided.

    With it a follower that joins the resumed run (a browser protocol replaying the turn, say) can show
    the paused round without reading the store: the message whose calls waited, the results known at
    the pause, and each decision by approval id and call id.
    """
    paused = resumption.paused
    state = RunState.from_json(paused.state_json)
    return {
        "run_id": paused.run.id,
        "message": state.message.to_dict(),
        "results": part_dicts(state.results),
        "decisions": [{"approval_id": a.id, "call_id": call_id, "approved": a.status == "approved",
                       "reason": a.reason} for call_id, a in resumption.decisions.items()],
    }
