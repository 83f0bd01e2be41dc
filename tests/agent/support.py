"""Helpers for the agent tests: an independent history check and event collection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from toolwire import Agent, Event
from toolwire.messages import InvalidToolCallPart, Message, ToolCallPart, ToolResultPart


def assert_valid_history(messages: Sequence[Message]) -> None:
    """Every call is answered in the next message (a user message), and every result answers a call.

    Written separately from the agent's own validator so the tests do not grade it with itself.
    """
    for i, message in enumerate(messages):
        calls = [p.id for p in message.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))]
        if calls:
            assert message.role == "assistant", f"message {i} holds calls but is {message.role}"
            assert i + 1 < len(messages), f"message {i} has calls and nothing answers them"
            following = messages[i + 1]
            assert following.role == "user", f"message {i + 1} should carry results"
            answered = [p.call_id for p in following.parts if isinstance(p, ToolResultPart)]
            assert answered == calls, f"message {i + 1} answers {answered}, calls were {calls}"
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        if results:
            previous = messages[i - 1] if i else None
            assert previous is not None and previous.role == "assistant"
            ids = {p.id for p in previous.parts if isinstance(p, (ToolCallPart, InvalidToolCallPart))}
            assert {r.call_id for r in results} <= ids


def results_of(messages: Sequence[Message]) -> list[ToolResultPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


async def collect(agent: Agent, prompt: str | None = "go", **kwargs: Any) -> tuple[list[Event], Any]:
    """All events of a run, and the run."""
    events: list[Event] = []
    async with agent.stream(prompt, **kwargs) as run:
        async for event in run:
            events.append(event)
    return events, run


def kinds(events: Sequence[Event]) -> list[str]:
    return [e.type for e in events]


async def eventually(predicate: Callable[[], bool], timeout: float = 2.0) -> None:
    """Wait until `predicate()` holds (state another task or a finaliser changes), or fail."""
    with anyio.fail_after(timeout):
        while not predicate():  # noqa: ASYNC110 - polling state with no event to wait on
            await anyio.sleep(0.005)
