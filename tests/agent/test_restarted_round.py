"""A round continued in another process (`Restarted` decisions): what runs again and what is answered."""

from __future__ import annotations

import pytest

from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, Message, RunState, ToolCallPart, tool
from toolwire.agent._approval import Restarted
from toolwire.testing import ScriptedModel


def _call(call_id: str, name: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={}, arguments_raw="{}")


@pytest.mark.anyio
async def test_started_calls_run_again_only_when_idempotent_and_unstarted_ones_are_admitted_as_usual() -> None:
    ran: list[str] = []

    @tool(idempotent=True)
    def read() -> str:
        """Read something."""
        ran.append("read")
        return "read again"

    @tool
    def pay() -> str:
        """Pay something."""
        ran.append("pay")
        return "paid"

    @tool
    def note() -> str:
        """Write a note."""
        ran.append("note")
        return "noted"

    @tool(requires_approval=True)
    def wire() -> str:
        """Wire money."""
        ran.append("wire")
        return "wired"

    message = Message(role="assistant", parts=[_call("c_read", "read"), _call("c_pay", "pay"),
                                               _call("c_note", "note"), _call("c_wire", "wire")])
    state = RunState(message=message, conversation=[Message.user("go")], conversation_length=1)
    model = ScriptedModel(["Went on."])
    result = await Agent(model, tools=[read, pay, note, wire]).run(resume=state, approvals={
        "c_read": Restarted("interrupted"), "c_pay": Restarted("interrupted"),
        "c_note": Restarted("interrupted", started=False), "c_wire": Restarted("interrupted", started=False)})
    # Started: the idempotent call ran again, the other was answered. Not started: admitted, so the call
    # needing approval holds the run for a person, and the others ran.
    assert sorted(ran) == ["note", "read"]
    assert result.paused and [c.id for c in result.pending] == ["c_wire"]
    assert {r.call_id: r.result for r in result.state.results} == {
        "c_read": "read again", "c_pay": {"error": "interrupted"}, "c_note": "noted"}
    resumed = await Agent(ScriptedModel(["Done."]), tools=[read, pay, note, wire]).run(
        resume=result.state, approvals={"c_wire": True})
    assert ran.count("wire") == 1 and resumed.output == "Done."
    assert_valid_history([Message.user("go"), *resumed.messages])
    assert len(results_of(resumed.messages)) == 4
