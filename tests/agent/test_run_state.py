"""A paused run's state can be neither tampered with, replayed, resumed twice nor resumed out of place.

Regression tests for the "Agent state" items 2 to 7 of the trust review: one source of truth for pending
calls with every check before any tool runs, signing, resume once, stale conversations, one run per
conversation, and the memory / conversation_id pairing.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest

from tests.agent.support import assert_valid_history, results_of
from toolwire import (
    Agent,
    ConversationBusyError,
    InMemoryChatMemory,
    InMemoryResumeClaims,
    Message,
    RunState,
    RunStateError,
    RunStateResumedError,
    RunStateSignatureError,
    RunStateStaleError,
    UserError,
    tool,
)
from toolwire.exceptions import ProviderStreamError, StreamInterruptedError
from toolwire.models import Model, ModelResponse
from toolwire.testing import Delay, Fail, ScriptedModel, Text, ToolCall

KEY = b"server-secret-key"


class Bank:
    """A transfer tool that needs approval, and a record of the transfers that really ran."""

    def __init__(self, delay: float = 0.0) -> None:
        self.sent: list[tuple[str, int]] = []

        @tool(requires_approval=True)
        async def transfer(account: str, amount: int) -> str:
            """Send money to an account."""
            if delay:
                await anyio.sleep(delay)
            self.sent.append((account, amount))
            return f"sent {amount} to {account}"

        self.tools = [transfer]


def transfer_model(*more: Any) -> ScriptedModel:
    return ScriptedModel([ToolCall("transfer", {"account": "alice", "amount": 50}, id="t1")], *more)


async def paused_state(**agent_kwargs: Any) -> tuple[RunState, Bank, Agent]:
    bank = Bank()
    agent = Agent(transfer_model(["Done."], ["Done again."], ["Done thrice."]), tools=bank.tools, **agent_kwargs)
    kwargs = {"conversation_id": "c1"} if "memory" in agent_kwargs else {}
    paused = await agent.run("Pay alice 50.", **kwargs)
    assert paused.paused and paused.state is not None
    return paused.state, bank, agent


# -- item 2: one source of truth, checked before anything runs, optionally signed ----------------------


@pytest.mark.anyio
async def test_item2_pending_calls_come_from_the_message_alone() -> None:
    """Agent state item 2: the tool runs exactly what the history (and the model) say was called."""
    state, bank, agent = await paused_state()
    data = orjson.loads(state.to_json())
    assert "pending" not in data  # no second copy to disagree with the message
    data["pending"] = [{"type": "tool_call", "id": "t1", "name": "transfer",
                        "arguments": {"account": "mallory", "amount": 5000}, "arguments_raw": "{}"}]
    resumed = await agent.run(resume=RunState.from_dict(data), approvals={"t1": True})
    assert bank.sent == [("alice", 50)]  # the stray copy is ignored
    call = resumed.messages[0].tool_calls[0]
    assert call.arguments == {"account": "alice", "amount": 50}


@pytest.mark.anyio
async def test_item2_an_edited_call_is_refused_when_signed() -> None:
    """Agent state item 2: with a key, an altered or unsigned state is refused and no tool runs."""
    state, bank, _ = await paused_state()
    signed = orjson.loads(state.to_json(key=KEY))
    assert isinstance(signed["signature"], str) and len(signed["signature"]) == 64
    assert RunState.from_json(orjson.dumps(signed), key=KEY).pending[0].arguments["account"] == "alice"

    signed["message"]["parts"][0]["arguments"] = {"account": "mallory", "amount": 5000}
    with pytest.raises(RunStateSignatureError, match="altered after it was signed"):
        RunState.from_json(orjson.dumps(signed), key=KEY)
    with pytest.raises(RunStateSignatureError, match="not signed"):
        RunState.from_json(state.to_json(), key=KEY)
    with pytest.raises(RunStateSignatureError, match="altered after it was signed, or signed with another key"):
        RunState.from_json(state.to_json(key=KEY), key=b"another-key")
    for field, value in (("step", 3), ("id", "forged"), ("conversation_length", 0), ("output_retries", 1)):
        edited = {**orjson.loads(state.to_json(key=KEY)), field: value}
        with pytest.raises(RunStateSignatureError):
            RunState.from_dict(edited, key=KEY)
    with pytest.raises(UserError, match="must not be empty"):
        state.to_json(key=b"")
    assert bank.sent == []


def test_item2_signing_survives_unusual_json() -> None:
    """Agent state item 2: the signature is over a canonical form, so any JSON value signs and verifies."""
    call = {"type": "tool_call", "id": "t1", "name": "transfer", "arguments_raw": "{}",
            "arguments": {"note": "Grüße \u2028 \"quoted\"", "ratio": 0.1, "big": 2**70, "nested": [{"z": 1, "a": None}]}}
    state = RunState.from_dict({
        "message": {"role": "assistant", "parts": [call], "metadata": {"provider": "x"}},
        "conversation": [{"role": "user", "parts": [{"type": "text", "text": "pay"}]}],
        "conversation_length": 1,
    })
    for key in (KEY, "text key"):
        again = RunState.from_json(state.to_json(key=key), key=key)
        assert again.message == state.message
        assert RunState.from_dict(state.to_dict(key=key), key=key).id == state.id


@pytest.mark.anyio
async def test_item2_every_field_is_checked_before_any_tool_runs() -> None:
    """Agent state item 2: broken conversations and out-of-range numbers fail before a tool runs."""
    state, bank, agent = await paused_state()
    good = state.to_dict()

    def edited(**changes: Any) -> dict[str, Any]:
        return {**good, **changes}

    cases: list[tuple[dict[str, Any], str]] = [
        (edited(step=-1), "step is -1, below 0"),
        (edited(output_retries=-2), "output_retries is -2"),
        (edited(conversation_length=5), "conversation_length is 5 but the conversation holds 1"),
        (edited(id=""), "id is empty"),
        (edited(message={**good["message"], "role": "user"}), "has role 'user'"),
        (edited(results=[{"type": "tool_result", "call_id": "t1", "name": "other", "result": 1}]), "names tool 'other'"),
        (edited(results=[{"type": "tool_result", "call_id": "t1", "name": "transfer", "result": 1}]), "no call of its"),
        # A conversation that ends with an unanswered call cannot be continued by the paused round.
        (edited(conversation=[*good["conversation"], good["message"]], conversation_length=2), "not a valid history"),
        (edited(conversation=[], conversation_length=0, from_memory=True, conversation_id=None) | {"conversation": [
            good["conversation"][0]]}, "reads its conversation from the memory"),
    ]
    for data, message in cases:
        with pytest.raises(RunStateError, match=message):
            RunState.from_dict(data)
    # Checks that depend on the resuming agent: they also run before anything else.
    with pytest.raises(UserError, match="max_steps=1"):
        Agent(transfer_model(), tools=bank.tools, max_steps=1).stream(
            resume=RunState.from_dict(edited(step=1)), approvals={"t1": True})
    with pytest.raises(UserError, match="used 3 typed-output retries"):
        agent.stream(resume=RunState.from_dict(edited(output_retries=3)), approvals={"t1": True})
    # A state built in Python (never read from JSON) is checked as well when resumed.
    state.results.append(state.results[0] if state.results else _fake_result())
    with pytest.raises(RunStateError):
        await agent.run(resume=state, approvals={"t1": True})
    assert bank.sent == []


def _fake_result() -> Any:
    from toolwire import ToolResultPart

    return ToolResultPart(call_id="t1", name="transfer", result="forged")


@pytest.mark.anyio
async def test_item2_a_broken_memory_conversation_fails_before_any_tool_runs() -> None:
    """Agent state item 2: a from-memory state is checked against the stored conversation first."""
    memory = InMemoryChatMemory()
    state, bank, agent = await paused_state(memory=memory, own_history=False)
    assert state.from_memory and state.conversation_length == 1
    # Something else rewrote the stored conversation into one ending with an unanswered call.
    memory.clear("c1")
    await memory.append([Message(role="assistant", parts=list(state.message.parts))], "c1")
    with pytest.raises(UserError, match="calls tool 'transfer'"):
        await agent.run(resume=state, approvals={"t1": True})
    assert bank.sent == []


# -- item 3: resume once --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("with_memory", [False, True])
async def test_item3_the_same_state_resumed_three_times_runs_its_tools_once(with_memory: bool) -> None:
    """Agent state item 3: a replayed state is refused (memory claims, or this process's claims)."""
    kwargs: dict[str, Any] = {"memory": InMemoryChatMemory()} if with_memory else {}
    state, bank, agent = await paused_state(**kwargs)
    saved = state.to_json(key=KEY)
    first = await agent.run(resume=RunState.from_json(saved, key=KEY), approvals={"t1": True})
    assert first.output == "Done."
    for _ in range(2):
        with pytest.raises(RunStateResumedError, match="already resumed") as caught:
            await agent.run(resume=RunState.from_json(saved, key=KEY), approvals={"t1": True})
        assert caught.value.state_id == state.id
    assert bank.sent == [("alice", 50)]


@pytest.mark.anyio
async def test_item3_concurrent_resumes_run_the_tools_once() -> None:
    """Agent state item 3: two resumes racing through a slow shared claim store: exactly one runs."""

    class SlowClaims(InMemoryResumeClaims):
        async def claim_resume(self, state_id: str, conversation_id: str | None) -> bool:
            await anyio.sleep(0.01)  # a database round trip: both resumes are inside it at once
            return await super().claim_resume(state_id, conversation_id)

    claims = SlowClaims()
    state, bank, _ = await paused_state()
    saved = state.to_json()
    outcomes: list[str] = []

    async def resume() -> None:
        # Two agents, as in two processes sharing one claim store.
        agent = Agent(ScriptedModel(["Done."]), tools=bank.tools, resume_claims=claims)
        try:
            result = await agent.run(resume=RunState.from_json(saved), approvals={"t1": True})
            outcomes.append(result.output)
        except RunStateResumedError:
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        tg.start_soon(resume)
        tg.start_soon(resume)
    assert sorted(outcomes) == ["Done.", "refused"]
    assert bank.sent == [("alice", 50)]
    assert len(claims) == 1


@pytest.mark.anyio
async def test_item3_a_resume_that_fails_later_has_still_used_its_state() -> None:
    """Agent state item 3: at most once, not exactly once: the claim is not given back."""
    state, bank, _ = await paused_state()
    saved = state.to_json()
    agent = Agent(ScriptedModel([Fail("overloaded")]), tools=bank.tools)
    with pytest.raises(ProviderStreamError):
        await agent.run(resume=RunState.from_json(saved), approvals={"t1": True})
    with pytest.raises(RunStateResumedError):
        await agent.run(resume=RunState.from_json(saved), approvals={"t1": True})
    assert bank.sent == [("alice", 50)]


# -- item 4: the conversation moved on while the run was paused ----------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("own_history", [True, False])
async def test_item4_a_resume_after_the_conversation_moved_on_is_refused(own_history: bool) -> None:
    """Agent state item 4: the state records where it paused; a newer turn makes it stale, nothing runs."""
    memory = InMemoryChatMemory()
    bank = Bank()
    model = ScriptedModel([ToolCall("transfer", {"account": "alice", "amount": 50}, id="t1")], ["Sure."])
    agent = Agent(model, tools=bank.tools, memory=memory, own_history=own_history)
    paused = await agent.run("Pay alice 50.", conversation_id="c1")
    assert paused.state is not None and paused.state.conversation_length == 1
    await agent.run("Actually, what is my balance?", conversation_id="c1")  # the user went on meanwhile
    before = memory.messages("c1")
    with pytest.raises(RunStateStaleError, match="2 message\\(s\\) were added; it had 1, it has 3") as caught:
        await agent.run(resume=paused.state, approvals={"t1": True})
    assert (caught.value.expected, caught.value.found) == (1, 3)
    assert bank.sent == [] and memory.messages("c1") == before
    # Where the conversation is as it was at the pause (here: another store, with its own claims), it resumes.
    fresh_memory = InMemoryChatMemory()
    await fresh_memory.append(before[:1], "c1")
    model.add_turn(["Done."])
    resumed = await Agent(model, tools=bank.tools, memory=fresh_memory, own_history=own_history).run(
        resume=paused.state, approvals={"t1": True})
    assert resumed.output == "Done." and bank.sent == [("alice", 50)]
    assert_valid_history(fresh_memory.messages("c1"))


# -- item 5: one run at a time per conversation ---------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("own_history", [True, False])
async def test_item5_a_second_run_on_a_busy_conversation_is_refused(own_history: bool) -> None:
    """Agent state item 5: runs on one conversation never interleave; other conversations are free."""
    memory = InMemoryChatMemory()
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Takes a while."""
        started.set()
        await anyio.sleep(0.1)
        return "slow done"

    model = ScriptedModel([ToolCall("slow", {})], ["A done."])
    agent = Agent(model, tools=[slow], memory=memory, own_history=own_history)
    other_agent = Agent(ScriptedModel(["C done."], ["B done."]), memory=memory, own_history=own_history)
    outcomes: dict[str, Any] = {}

    async def run_a() -> None:
        outcomes["a"] = (await agent.run("A", conversation_id="c1")).output

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_a)
        await started.wait()
        with pytest.raises(ConversationBusyError, match="Another run is using conversation 'c1'") as caught:
            await other_agent.run("B", conversation_id="c1")
        assert caught.value.conversation_id == "c1"
        outcomes["c"] = (await other_agent.run("C", conversation_id="c2")).output
    assert outcomes == {"a": "A done.", "c": "C done."}
    # A's requests never saw B's prompt, and B's turn can go once A is done.
    assert all("B" not in [m.text for m in r.messages] for r in model.requests)
    assert (await other_agent.run("B", conversation_id="c1")).output == "B done."
    assert [m.text for m in memory.messages("c1") if m.role == "user" and m.text] == ["A", "B"]


# -- item 6: memory and conversation_id belong together -----------------------------------------------


def test_item6_memory_without_conversation_id_and_the_reverse_are_errors() -> None:
    """Agent state item 6: no silent shared `None` conversation, no silently ignored conversation_id."""
    with pytest.raises(UserError, match="needs conversation_id"):
        Agent(ScriptedModel(["hi"]), memory=InMemoryChatMemory()).stream("hi")
    with pytest.raises(UserError, match="but this agent has none"):
        Agent(ScriptedModel(["hi"])).stream("hi", conversation_id="u42")


# -- item 7: a partial answer cut off by a stream error is marked --------------------------------------


@pytest.mark.anyio
async def test_item7_a_message_cut_off_by_a_stream_error_is_marked_incomplete() -> None:
    """Agent state item 7: the cut-off message carries metadata incomplete=True, like a cancelled one."""
    model = ScriptedModel([Text("Partial answ"), Fail("overloaded")])
    with pytest.raises(ProviderStreamError) as caught:
        await Agent(model).run("go")
    kept = caught.value.messages
    assert kept is not None and kept[1].text == "Partial answ"
    assert kept[1].metadata["incomplete"] is True


@pytest.mark.anyio
async def test_item7_marking_is_idempotent_when_the_model_already_marked_it() -> None:
    """Agent state item 7: a partial message that arrives marked stays marked once, other metadata kept."""

    class MarkingModel(Model):
        name = "marking:model"

        def stream(self, messages: Any, *, tools: Any = (), settings: Any = None) -> ModelResponse:
            return _BrokenResponse()

    with pytest.raises(StreamInterruptedError) as caught:
        await Agent(MarkingModel()).run("go")
    assert caught.value.messages is not None
    assert caught.value.messages[1].metadata == {"incomplete": True, "provider": "marking"}


class _BrokenResponse(ModelResponse):
    async def __aenter__(self) -> _BrokenResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __aiter__(self) -> Any:
        return self._events()

    async def _events(self) -> Any:
        await anyio.lowlevel.checkpoint()
        partial = Message(role="assistant", parts=Message.assistant("half").parts,
                          metadata={"incomplete": True, "provider": "marking"})
        raise StreamInterruptedError("dropped", provider="marking", partial_message=partial)
        yield  # pragma: no cover - makes this an async generator


@pytest.mark.anyio
async def test_item7_memory_keeps_a_stream_error_round_whose_tool_started() -> None:
    """Agent state items 1 and 7: a tool that started mid-stream is stored with its cut-off message."""
    memory = InMemoryChatMemory()
    ran: list[str] = []

    @tool
    async def note() -> str:
        """Write a note."""
        ran.append("note")
        return "noted"

    model = ScriptedModel([ToolCall("note", {}), Delay(0.05), Text("and then"), Fail("overloaded")])
    with pytest.raises(ProviderStreamError):
        await Agent(model, tools=[note], memory=memory).run("go", conversation_id="c")
    stored = memory.messages("c")
    assert ran == ["note"]
    assert_valid_history(stored)
    assert stored[1].metadata["incomplete"] is True
    assert [r.result for r in results_of(stored)] == ["noted"]
