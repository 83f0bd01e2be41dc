"""Human approval: a run pauses on calls that need a person, its state is stored as JSON, and it resumes."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest
from pydantic import BaseModel

from tests.agent.support import assert_valid_history, results_of
from toolwire import (
    Agent,
    Denial,
    InMemoryChatMemory,
    Message,
    RunState,
    ToolCallPart,
    ToolResultEvent,
    ToolStartedEvent,
    UserError,
    load_messages,
    tool,
)
from toolwire.testing import FakeProviderServer, FakeText, FakeToolCall, FakeTurn, ScriptedModel, ToolCall


class Bank:
    """Tools of a small bank; records which transfers really ran."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

        @tool(requires_approval=True)
        async def transfer(account: str, amount: int) -> str:
            """Send money to an account."""
            self.sent.append((account, amount))
            return f"sent {amount} to {account}"

        @tool
        def balance() -> int:
            """The current balance."""
            return 1000

        self.tools = [transfer, balance]


ROUND = [ToolCall("balance", {}, id="c_balance"),
         ToolCall("transfer", {"account": "alice", "amount": 50}, id="c_alice"),
         ToolCall("transfer", {"account": "bob", "amount": 900}, id="c_bob")]


@pytest.mark.anyio
async def test_pause_store_as_json_and_resume_in_a_fresh_agent_with_approvals_and_denials() -> None:
    bank = Bank()
    first = ScriptedModel(["Checking the balance first.", *ROUND])
    paused = await Agent(first, tools=bank.tools, system="You run a bank.").run("Pay alice 50 and bob 900.")

    assert paused.paused and paused.status == "paused"
    assert [(c.id, c.name, c.arguments) for c in paused.pending] == [
        ("c_alice", "transfer", {"account": "alice", "amount": 50}),
        ("c_bob", "transfer", {"account": "bob", "amount": 900})]
    assert bank.sent == []  # nothing that needs a person ran
    assert paused.messages == [Message.user("Pay alice 50 and bob 900.")]  # only whole rounds
    assert_valid_history(paused.messages)
    assert paused.state is not None
    assert [r.result for r in paused.state.results] == [1000]  # the call needing no approval did run
    assert paused.steps[-1].message.text == "Checking the balance first."
    with pytest.raises(UserError, match=r"paused until a person decides on the tool calls transfer \(c_alice\)"):
        _ = paused.output

    saved = paused.state.to_json()
    assert isinstance(saved, str) and "pending" not in orjson.loads(saved)  # derived from the message alone

    # Later, elsewhere: a fresh model and agent, and the state read back from its JSON text.
    bank_later = Bank()
    second = ScriptedModel(["Sent 50 to alice; the transfer to bob was refused."])
    agent = Agent(second, tools=bank_later.tools, system="You run a bank.")
    resumed = await agent.run(resume=RunState.from_json(saved),
                              approvals={"c_alice": True, "c_bob": Denial("Bob's transfer is over the limit.")})

    assert resumed.status == "completed" and resumed.output == "Sent 50 to alice; the transfer to bob was refused."
    assert bank_later.sent == [("alice", 50)]
    assert [m.role for m in resumed.messages] == ["assistant", "user", "assistant"]
    assert [(r.call_id, r.result, r.is_error) for r in results_of(resumed.messages)] == [
        ("c_balance", 1000, False),
        ("c_alice", "sent 50 to alice", False),
        ("c_bob", {"error": "Bob's transfer is over the limit."}, True)]
    # The model went on from exactly the paused point: system, prompt, the calls, every result.
    request = second.requests[0].messages
    assert [m.role for m in request] == ["system", "user", "assistant", "user"]
    assert request[2] == paused.state.message
    assert_valid_history([*paused.messages, *resumed.messages])
    assert resumed.steps[0].index == 0 and resumed.steps[1].index == 1


@pytest.mark.anyio
async def test_a_stored_state_resumes_in_a_new_process(tmp_path: Path) -> None:
    bank = Bank()
    paused = await Agent(ScriptedModel(ROUND), tools=bank.tools).run("Pay alice and bob.")
    assert paused.state is not None
    state_file = tmp_path / "state.json"
    state_file.write_text(paused.state.to_json())
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent('''
        import sys
        import anyio
        from toolwire import Agent, Denial, RunState, dump_messages, tool
        from toolwire.testing import ScriptedModel

        sent = []

        @tool(requires_approval=True)
        def transfer(account: str, amount: int) -> str:
            sent.append(account)
            return f"sent {amount} to {account}"

        @tool
        def balance() -> int:
            return 1000

        async def main() -> None:
            state = RunState.from_json(open(sys.argv[1]).read())
            model = ScriptedModel(["Done."])
            result = await Agent(model, tools=[transfer, balance]).run(
                resume=state, approvals={"c_alice": True, "c_bob": Denial("No.")})
            assert sent == ["alice"], sent
            sys.stdout.write(dump_messages(result.messages).decode())

        anyio.run(main)
    '''))
    with anyio.fail_after(30):
        done = await anyio.run_process([sys.executable, str(script), str(state_file)], check=False)
    assert done.returncode == 0, done.stderr.decode()
    messages = load_messages(done.stdout)
    assert messages[-1].text == "Done."
    assert [r.result for r in results_of(messages)] == [1000, "sent 50 to alice", {"error": "No."}]
    assert_valid_history([*paused.messages, *messages])


HTTP_ROUND = [FakeText(text="On it."),
              FakeToolCall(name="balance", arguments={}, id="call_balance01"),
              FakeToolCall(name="transfer", arguments={"account": "alice", "amount": 50}, id="call_alice01",
                           chunks=5),
              FakeToolCall(name="transfer", arguments={"account": "bob", "amount": 900}, id="call_bob01")]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["openai-chat", "anthropic"])
async def test_pause_and_resume_over_http(protocol: str) -> None:
    turns = [FakeTurn(parts=HTTP_ROUND), FakeTurn(parts=[FakeText(text="Alice is paid; Bob is not.")])]
    async with FakeProviderServer(protocol, turns) as server:
        bank = Bank()
        model = server.model("m")
        try:
            chunks_history: list[Message] = []
            stream = Agent(model, tools=bank.tools).run_stream("Pay alice 50 and bob 900.")
            async for chunk in stream:
                chunks_history.extend(chunk.messages)
                assert_valid_history(chunks_history)
            paused = stream.result
        finally:
            await model.aclose()
        assert paused.paused and [c.id for c in paused.pending] == ["call_alice01", "call_bob01"]
        assert chunks_history == paused.messages == [Message.user("Pay alice 50 and bob 900.")]
        assert paused.state is not None
        saved = paused.state.to_json()

        bank_later = Bank()
        fresh = server.model("m")  # a new client, as a new process would have
        try:
            resumed = await Agent(fresh, tools=bank_later.tools).run(
                resume=RunState.from_json(saved), approvals={"call_alice01": True, "call_bob01": False})
        finally:
            await fresh.aclose()

    assert resumed.output == "Alice is paid; Bob is not."
    assert bank_later.sent == [("alice", 50)] and bank.sent == []
    assert len(server.requests) == 2
    sent = server.requests[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert [c.id for c in sent[1].tool_calls] == ["call_balance01", "call_alice01", "call_bob01"]
    results = sent[2].tool_results_parts
    assert [r.call_id for r in results] == ["call_balance01", "call_alice01", "call_bob01"]
    assert results[1].result == "sent 50 to alice"
    assert "did not approve" in str(results[2].result)
    assert results[2].is_error == (protocol == "anthropic")  # OpenAI chat has no error flag on tool messages
    assert_valid_history([*paused.messages, *resumed.messages])


@pytest.mark.anyio
async def test_per_call_predicates_on_the_tool_and_on_the_agent() -> None:
    ran: list[str] = []

    @tool(requires_approval=lambda call: call.arguments["amount"] > 100)
    def pay(account: str, amount: int) -> str:
        ran.append(account)
        return "paid"

    @tool
    def email(to: str) -> str:
        ran.append(f"mail:{to}")
        return "sent"

    async def outside_the_company(call: ToolCallPart) -> bool:
        await anyio.lowlevel.checkpoint()
        return call.name == "email" and not call.arguments["to"].endswith("@example.com")

    model = ScriptedModel([ToolCall("pay", {"account": "a", "amount": 20}, id="small"),
                           ToolCall("pay", {"account": "b", "amount": 500}, id="large"),
                           ToolCall("email", {"to": "boss@example.com"}, id="inside"),
                           ToolCall("email", {"to": "press@news.test"}, id="outside")],
                          ["ok"])
    agent = Agent(model, tools=[pay, email], requires_approval=outside_the_company)
    paused = await agent.run("go")
    assert [c.id for c in paused.pending] == ["large", "outside"]
    assert sorted(ran) == ["a", "mail:boss@example.com"]
    assert paused.state is not None
    resumed = await agent.run(resume=paused.state, approvals={"large": True, "outside": Denial("Not to the press.")})
    assert sorted(ran) == ["a", "b", "mail:boss@example.com"]
    assert [r.call_id for r in results_of(resumed.messages)] == ["small", "large", "inside", "outside"]


@pytest.mark.anyio
async def test_resumed_runs_stream_events_and_commit_the_round_whole() -> None:
    bank = Bank()
    model = ScriptedModel(ROUND, ["Done."])
    agent = Agent(model, tools=bank.tools, tool_execution="sequential")
    paused = await agent.run("Pay.")
    assert paused.state is not None
    stream = agent.run_stream(resume=paused.state, approvals={"c_alice": True, "c_bob": True})
    history = list(paused.messages)
    firsts: list[list[str]] = []
    async for chunk in stream:
        if chunk.messages:
            firsts.append([m.role for m in chunk.messages])
        history.extend(chunk.messages)
        assert_valid_history(history)
    assert firsts == [["assistant", "user"], ["assistant"]]  # the paused round arrives with all its results
    assert bank.sent == [("alice", 50), ("bob", 900)]  # sequential: in the calls' order
    events: list[Any] = []
    model.add_turn(ROUND)
    model.add_turn(["Done again."])
    again = await agent.run("Pay again.")
    assert again.state is not None
    async with agent.stream(resume=again.state, approvals={"c_alice": True, "c_bob": Denial()}) as run:
        async for event in run:
            events.append(event)
    assert [e.call.id for e in events if isinstance(e, ToolStartedEvent)] == ["c_alice"]
    assert [e.result.call_id for e in events if isinstance(e, ToolResultEvent)] == ["c_alice", "c_bob"]


@pytest.mark.anyio
async def test_cancelling_a_resumed_run_mid_tool_keeps_the_history_valid() -> None:
    started = anyio.Event()

    @tool(requires_approval=True)
    async def deploy(env: str) -> str:
        started.set()
        await anyio.sleep(10)
        return "deployed"

    model = ScriptedModel([ToolCall("deploy", {"env": "prod"}, id="d1")])
    agent = Agent(model, tools=[deploy])
    paused = await agent.run("Deploy.")
    assert paused.state is not None
    async with agent.stream(resume=paused.state, approvals={"d1": True}) as run:
        async for event in run:
            if isinstance(event, ToolStartedEvent):
                break
    assert started.is_set()
    assert_valid_history(run.messages)
    assert results_of(run.messages)[0].result == {"error": "cancelled"}


@pytest.mark.anyio
async def test_the_memory_holds_the_paused_round_only_once_it_is_complete() -> None:
    memory = InMemoryChatMemory()
    bank = Bank()
    model = ScriptedModel(ROUND, ["Done."])
    agent = Agent(model, tools=bank.tools, memory=memory, own_history=False)
    paused = await agent.run("Pay.", conversation_id="c1")
    assert paused.state is not None and paused.state.from_memory and paused.state.conversation == []
    assert memory.messages("c1") == [Message.user("Pay.")]  # no call without its result

    saved = paused.state.to_json()
    fresh = Agent(model, tools=Bank().tools, memory=memory, own_history=False)
    resumed = await fresh.run(resume=RunState.from_json(saved), approvals={"c_alice": True, "c_bob": False})
    assert resumed.output == "Done."
    stored = memory.messages("c1")
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
    assert_valid_history(stored)
    assert model.requests[1].messages == stored[:3]

    with pytest.raises(UserError, match="resume it with an agent given that memory"):
        Agent(model, tools=bank.tools).stream(resume=RunState.from_json(saved), approvals={"c_alice": True,
                                                                                          "c_bob": True})


@pytest.mark.anyio
async def test_typed_output_can_follow_an_approved_round() -> None:
    class Receipt(BaseModel):
        paid: list[str]

    bank = Bank()
    model = ScriptedModel([ROUND[1]], [ToolCall("final_result", {"paid": ["alice"]})])
    agent = Agent(model, tools=bank.tools, output_type=Receipt)
    paused = await agent.run("Pay alice.")
    assert paused.state is not None
    resumed = await agent.run(resume=RunState.from_json(paused.state.to_json()), approvals={"c_alice": True})
    assert resumed.output == Receipt(paid=["alice"])
    assert bank.sent == [("alice", 50)]


@pytest.mark.anyio
async def test_wrong_decisions_and_states_are_clear_user_errors() -> None:
    model = ScriptedModel(ROUND)
    agent = Agent(model, tools=Bank().tools)
    paused = await agent.run("Pay.")
    state = paused.state
    assert state is not None
    with pytest.raises(UserError, match=r"no decision for 'c_bob' \(transfer\)"):
        agent.stream(resume=state, approvals={"c_alice": True})
    with pytest.raises(UserError, match="'c_carol', which is not waiting for approval"):
        agent.stream(resume=state, approvals={"c_alice": True, "c_bob": True, "c_carol": True})
    with pytest.raises(UserError, match="use True to run the call"):
        agent.stream(resume=state, approvals={"c_alice": True, "c_bob": "yes"})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="without a prompt or a history"):
        agent.stream("Pay.", resume=state, approvals={"c_alice": True, "c_bob": True})
    with pytest.raises(UserError, match="pass it together with resume="):
        agent.stream("Pay.", approvals={"c_alice": True})
    with pytest.raises(UserError, match="not a saved run state"):
        RunState.from_json('{"pending": []}')
    broken = state.to_dict()
    broken["results"] = []  # the balance call loses its result: it would be taken for a pending call...
    broken["message"]["parts"] = broken["message"]["parts"][1:]  # ...and with no call, nothing is pending
    broken["results"] = [{"type": "tool_result", "call_id": "c_other", "name": "balance", "result": 1}]
    with pytest.raises(UserError, match="holds a result for call id 'c_other'"):
        RunState.from_dict(broken)
    broken = {**state.to_dict(), "version": 99}
    with pytest.raises(UserError, match="format version 99"):
        RunState.from_dict(broken)


@pytest.mark.anyio
async def test_a_failing_predicate_stops_the_run_with_its_error() -> None:
    def broken(call: ToolCallPart) -> bool:
        raise LookupError("policy service unavailable")

    @tool(requires_approval=broken)
    def act() -> str:
        return "done"

    model = ScriptedModel([ToolCall("act", {})])
    with pytest.raises(LookupError, match="policy service"):
        await Agent(model, tools=[act]).run("go")
