"""Chat memory: what a store receives, when, and that it never holds a half-streamed message or an unpaired call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from tests.agent.support import assert_valid_history, results_of
from toolwire import (
    Agent,
    ChatMemory,
    InMemoryChatMemory,
    Message,
    ProviderStreamError,
    ToolCallPart,
    ToolResultEvent,
    ToolStartedEvent,
    UserError,
    tool,
)
from toolwire.events import MessageEndEvent
from toolwire.testing import Delay, Fail, ScriptedModel, Text, ToolCall


class RecordingMemory(InMemoryChatMemory):
    """Records every append (with how many model requests had been opened by then) and checks the store
    after each one: a valid history, no message cut short."""

    def __init__(self, model: ScriptedModel | None = None, *, append_delay: float = 0.0,
                 allow_incomplete: bool = False) -> None:
        super().__init__()
        self.model = model
        self.allow_incomplete = allow_incomplete
        self.append_delay = append_delay
        self.appends: list[list[Message]] = []
        self.requests_at_append: list[int] = []
        self.loads = 0

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        self.loads += 1
        return await super().load(conversation_id)

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        if self.append_delay:
            await anyio.sleep(self.append_delay)  # a slow store: the append must not be cut short
        self.appends.append(list(messages))
        self.requests_at_append.append(len(self.model.requests) if self.model is not None else -1)
        await super().append(messages, conversation_id)
        stored = self.messages(conversation_id)
        assert_valid_history(stored)  # never an unpaired call
        if not self.allow_incomplete:
            assert not any(m.metadata.get("incomplete") for m in stored)  # never a half-streamed message

    def roles(self) -> list[list[str]]:
        return [[m.role for m in batch] for batch in self.appends]


def slow_tool(log: list[str]) -> Any:
    @tool
    async def work(name: str, seconds: float = 0.0) -> str:
        log.append(f"start:{name}")
        await anyio.sleep(seconds)
        log.append(f"end:{name}")
        return f"{name} done"

    return work


def test_the_in_memory_store_satisfies_the_protocol() -> None:
    assert isinstance(InMemoryChatMemory(), ChatMemory)
    assert not isinstance(object(), ChatMemory)


@pytest.mark.anyio
async def test_each_message_is_appended_once_complete_and_before_the_next_request() -> None:
    model = ScriptedModel([Text("Let me check.", chunks=3), ToolCall("work", {"name": "a"}),
                           ToolCall("work", {"name": "b"})],
                          [Text("Both are done.", chunks=2)])
    memory = RecordingMemory(model)
    agent = Agent(model, tools=[slow_tool([])], memory=memory)
    result = await agent.run("Run a and b.", conversation_id="c1")

    assert memory.roles() == [["user"], ["assistant", "user"], ["assistant"]]
    # The prompt before the first request; the round after it and before the second; the answer last.
    assert memory.requests_at_append == [0, 1, 2]
    assert memory.messages("c1") == result.messages
    assert memory.appends[1][0] == result.steps[0].message  # the assembled message, exactly
    assert memory.conversations() == ["c1"]


@pytest.mark.anyio
async def test_nothing_is_appended_while_a_message_streams_or_its_tools_run() -> None:
    log: list[str] = []
    model = ScriptedModel([ToolCall("work", {"name": "fast"}), Delay(0.1), Text("still talking", chunks=2)],
                          ["done"])
    memory = RecordingMemory(model)
    seen: list[tuple[str, int]] = []
    async with Agent(model, tools=[slow_tool(log)], memory=memory).stream("go", conversation_id="c") as run:
        async for event in run:
            if isinstance(event, (ToolResultEvent, MessageEndEvent)):
                seen.append((event.type, len(memory.appends)))
    # The eager tool finished while the model was still streaming: the memory had only the prompt.
    assert seen[0] == ("tool_result", 1)
    assert seen[1] == ("message_end", 1)
    assert memory.roles() == [["user"], ["assistant", "user"], ["assistant"]]
    assert memory.appends[1][0].text == "still talking"


@pytest.mark.anyio
async def test_the_history_comes_from_the_memory_and_conversations_stay_apart() -> None:
    model = ScriptedModel(["Hello Ada."], ["Hello Bob."], ["Your name is Ada."])
    memory = InMemoryChatMemory()
    agent = Agent(model, memory=memory, system="Be brief.")
    await agent.run("I am Ada.", conversation_id="ada")
    await agent.run("I am Bob.", conversation_id="bob")
    result = await agent.run("What is my name?", conversation_id="ada")
    assert [m.text for m in model.requests[2].messages] == ["Be brief.", "I am Ada.", "Hello Ada.", "What is my name?"]
    assert result.messages == memory.messages("ada")[2:]
    assert [m.text for m in memory.messages("bob")] == ["I am Bob.", "Hello Bob."]


@pytest.mark.anyio
async def test_without_its_own_history_every_request_is_built_from_the_memory() -> None:
    class NotedMemory(RecordingMemory):
        """Puts a note first on every load; the note can change while a run goes on."""

        note = "Prefer Celsius."

        async def load(self, conversation_id: str | None = None) -> list[Message]:
            return [Message.user(self.note), *await super().load(conversation_id)]

    async def run(own_history: bool) -> tuple[ScriptedModel, NotedMemory]:
        model = ScriptedModel([ToolCall("set_note", {"text": "Prefer Fahrenheit."})], ["ok"])
        memory = NotedMemory(model)

        @tool
        def set_note(text: str) -> str:
            memory.note = text
            return "noted"

        await Agent(model, tools=[set_note], memory=memory, own_history=own_history).run("Weather?",
                                                                                         conversation_id="c")
        return model, memory

    model, memory = await run(own_history=True)
    second = model.requests[1].messages
    assert second[0].text == "Prefer Celsius."  # read once, when the run started
    assert memory.loads == 1
    assert second[1:] == memory.messages("c")[:3]  # prompt, the call, its result; then the answer

    model, memory = await run(own_history=False)
    second = model.requests[1].messages
    assert second[0].text == "Prefer Fahrenheit."  # the memory is the single source of truth
    assert memory.loads == 3  # at the start, then before each of the two requests
    assert second[1:] == memory.messages("c")[:3]


@pytest.mark.anyio
async def test_cancelled_mid_tool_the_memory_gets_the_round_with_cancelled_results() -> None:
    log: list[str] = []
    model = ScriptedModel([ToolCall("work", {"name": "fast", "seconds": 0.0}),
                           ToolCall("work", {"name": "slow", "seconds": 10})])
    memory = RecordingMemory(model, append_delay=0.05)
    async with Agent(model, tools=[slow_tool(log)], memory=memory).stream("go", conversation_id="c") as run:
        async for event in run:
            if isinstance(event, ToolStartedEvent) and event.call.arguments["name"] == "slow":
                await anyio.sleep(0.02)
                break
    assert "end:slow" not in log
    stored = memory.messages("c")
    assert stored == run.messages  # the shielded append finished although the run was being cancelled
    assert [m.role for m in stored] == ["user", "assistant", "user"]
    assert [r.result for r in results_of(stored)] == ["fast done", {"error": "cancelled"}]


@pytest.mark.anyio
async def test_cancelled_mid_stream_after_a_tool_started_the_memory_keeps_the_cut_off_round() -> None:
    """A tool that started may have had its effect: the model must learn of it, so the round is stored."""
    log: list[str] = []
    model = ScriptedModel(["Working. ", ToolCall("work", {"name": "slow", "seconds": 10}), Delay(10), "never"])
    memory = RecordingMemory(model, allow_incomplete=True)
    async with Agent(model, tools=[slow_tool(log)], memory=memory).stream("go", conversation_id="c") as run:
        async for event in run:
            if isinstance(event, ToolStartedEvent):
                break
    assert run.messages[1].metadata == {"incomplete": True}
    assert_valid_history(run.messages)
    assert memory.messages("c") == run.messages
    assert results_of(memory.messages("c"))[0].result == {"error": "cancelled"}


@pytest.mark.anyio
async def test_cancelled_mid_stream_before_any_tool_the_memory_gets_nothing_of_that_step() -> None:
    model = ScriptedModel(["Working. ", ToolCall("work", {"name": "slow", "seconds": 10}, chunks=4, delay=5)])
    memory = RecordingMemory(model)
    async with Agent(model, tools=[slow_tool([])], memory=memory).stream("go", conversation_id="c") as run:
        async for event in run:
            if event.type == "tool_call_delta":
                break
    assert run.messages[1].metadata == {"incomplete": True}  # the run keeps the cut-off message...
    assert_valid_history(run.messages)
    assert memory.messages("c") == [Message.user("go")]  # ...the memory never sees it: nothing happened


@pytest.mark.anyio
async def test_a_broken_stream_leaves_the_memory_at_the_last_complete_message() -> None:
    model = ScriptedModel([Text("Partial answ"), Fail("overloaded")])
    memory = RecordingMemory(model)
    with pytest.raises(ProviderStreamError) as caught:
        await Agent(model, memory=memory).run("go", conversation_id="x")
    assert caught.value.messages is not None and len(caught.value.messages) == 2
    assert memory.messages("x") == [Message.user("go")]
    # Running again without a prompt answers the stored prompt: nothing was lost or duplicated.
    model.add_turn(["Full answer."])
    result = await Agent(model, memory=memory).run(conversation_id="x")
    assert [m.text for m in memory.messages("x")] == ["go", "Full answer."]
    assert result.messages == [memory.messages("x")[1]]


@pytest.mark.anyio
async def test_typed_output_retries_reach_the_memory_as_whole_messages() -> None:
    class City(BaseModel):
        name: str

    model = ScriptedModel([Text("{}")], [Text('{"name": "Paris"}')])
    memory = RecordingMemory(model)
    result = await Agent(model, output_type=City, output_mode="native", memory=memory).run("City?",
                                                                                           conversation_id="c")
    assert result.output == City(name="Paris")
    assert memory.roles() == [["user"], ["assistant"], ["user"], ["assistant"]]
    assert memory.requests_at_append == [0, 1, 1, 2]


@pytest.mark.anyio
async def test_a_failing_store_fails_the_run() -> None:
    class FullDisk(InMemoryChatMemory):
        async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
            if len(messages) == 2:
                raise OSError("disk full")
            await super().append(messages, conversation_id)

    model = ScriptedModel([ToolCall("work", {"name": "a"})], ["never requested"])
    with pytest.raises(OSError, match="disk full"):
        await Agent(model, tools=[slow_tool([])], memory=FullDisk()).run("go", conversation_id="c")
    assert len(model.requests) == 1  # the run did not go on past a round it could not store


@pytest.mark.anyio
async def test_misuse_is_a_clear_user_error() -> None:
    memory = InMemoryChatMemory()
    with pytest.raises(UserError, match="own_history=False"):
        Agent(ScriptedModel(), own_history=False)
    with pytest.raises(UserError, match="memory must be a ChatMemory"):
        Agent(ScriptedModel(), memory=[])  # type: ignore[arg-type]
    agent = Agent(ScriptedModel(["hi"]), memory=memory)
    with pytest.raises(UserError, match="instead of history="):
        agent.stream("hi", history=[Message.user("earlier")])
    # A store holding an unanswerable history (written by something else) is named before any request.
    call = ToolCallPart(id="x", name="t", arguments={}, arguments_raw="{}")
    await memory.append([Message.user("a"), Message(role="assistant", parts=[call])], "broken")
    model = ScriptedModel(["never"])
    with pytest.raises(UserError, match="Message 1 of the history calls tool 't'"):
        await Agent(model, memory=memory).run(conversation_id="broken")
    assert model.requests == []
