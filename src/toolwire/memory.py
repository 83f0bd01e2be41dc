"""Chat memory: where an agent keeps a conversation between runs.

    memory = InMemoryChatMemory()
    agent = Agent("openai:gpt-4.1-mini", memory=memory)
    await agent.run("My name is Ada.", conversation_id="ada")
    await agent.run("What is my name?", conversation_id="ada")   # the memory supplies the history

`ChatMemory` is the protocol every store implements: `load` a conversation, `append` messages to it.
The agent guarantees what a store receives (see `Agent`): only whole messages whose stream finished,
appended before the next model request starts, and an assistant message that calls tools only in the
same `append` as the user message answering every one of its calls. So a store never holds a
half-streamed message or an unpaired call, and whatever it holds can be sent to a provider as it is.
A store only has to keep each `append` whole (one transaction) and return messages in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .messages import Message

__all__ = ["ChatMemory", "InMemoryChatMemory"]


@runtime_checkable
class ChatMemory(Protocol):
    """A store of conversations: load one, append messages to it.

    `conversation_id` names the conversation; `None` is the store's default conversation.
    """

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        """The conversation's messages, oldest first (an empty list for a conversation never written)."""
        ...

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        """Add `messages`, in order, at the end of the conversation; all of them or none."""
        ...


class InMemoryChatMemory:
    """A `ChatMemory` in a dict: conversations last as long as the object (tests, scripts, one process).

    `messages(conversation_id)` reads a conversation without awaiting, for inspection.
    """

    def __init__(self) -> None:
        self._conversations: dict[str | None, list[Message]] = {}

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        return list(self._conversations.get(conversation_id, ()))

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        # No await between reading and writing: an append is atomic for every task of the event loop.
        self._conversations.setdefault(conversation_id, []).extend(messages)

    def messages(self, conversation_id: str | None = None) -> list[Message]:
        """A copy of the conversation's messages."""
        return list(self._conversations.get(conversation_id, ()))

    def conversations(self) -> list[str | None]:
        """The ids of the conversations written so far."""
        return list(self._conversations)

    def clear(self, conversation_id: str | None = None) -> None:
        """Forget one conversation."""
        self._conversations.pop(conversation_id, None)

    def __repr__(self) -> str:
        sizes = {k: len(v) for k, v in self._conversations.items()}
        return f"InMemoryChatMemory({sizes!r})"
