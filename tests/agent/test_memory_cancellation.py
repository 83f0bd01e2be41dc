"""Agent state item 1: cancelling a run at any moment never loses a finished round from the memory.

A store whose `append` awaits I/O, a run with two tool rounds, and a cancellation at a random moment,
over hundreds of seeded trials and both memory modes: every tool that ran to completion has its result
in the stored conversation, and the stored conversation is always a valid history.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import anyio
import pytest

from tests.agent.support import assert_valid_history, results_of
from toolwire import Agent, InMemoryChatMemory, Message, tool
from toolwire.testing import ScriptedModel, Text, ToolCall

TRIALS = 150


class SlowStore(InMemoryChatMemory):
    """A store whose append takes a few milliseconds of I/O before the write lands."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        await anyio.sleep(self.rng.uniform(0.001, 0.004))
        await super().append(messages, conversation_id)


async def one_trial(seed: int, own_history: bool) -> tuple[list[str], list[Message]]:
    rng = random.Random(seed)
    effects: list[str] = []

    @tool
    async def charge(ref: str) -> str:
        """Charge a card (a side effect that must never be forgotten)."""
        await anyio.sleep(rng.uniform(0.0, 0.004))
        effects.append(ref)  # the effect is the tool's last act: done means recorded
        return f"charged {ref}"

    model = ScriptedModel(
        [Text("Charging.", chunks=2, delay=0.001), ToolCall("charge", {"ref": "r1"}, id="a1"),
         ToolCall("charge", {"ref": "r2"}, id="a2", chunks=2, delay=0.001)],
        [ToolCall("charge", {"ref": "r3"}, id="b1")],
        [Text("All charged.", chunks=3, delay=0.001)],
    )
    memory = SlowStore(rng)
    agent = Agent(model, tools=[charge], memory=memory, own_history=own_history)
    with anyio.move_on_after(rng.uniform(0.0, 0.03)):
        await agent.run("Charge r1, r2 and r3.", conversation_id="c")
    return effects, memory.messages("c")


@pytest.mark.anyio
@pytest.mark.parametrize("own_history", [True, False])
async def test_item1_randomised_cancellation_never_loses_a_finished_round(own_history: bool) -> None:
    """Agent state item 1: zero lost rounds over seeded random cancellations of a slow-append store."""
    lost: list[tuple[int, list[str], list[str]]] = []
    cut_while_appending_or_running = 0
    for seed in range(TRIALS):
        effects, stored = await one_trial(seed, own_history)
        assert_valid_history(stored)
        remembered = [r.result.removeprefix("charged ") for r in results_of(stored) if isinstance(r.result, str)]
        if sorted(remembered) != sorted(effects):
            lost.append((seed, effects, remembered))
        if effects and len(effects) < 3:
            cut_while_appending_or_running += 1
    assert lost == []
    # The trials really cut runs between side effects, not only before or after all of them.
    assert cut_while_appending_or_running > TRIALS // 5
