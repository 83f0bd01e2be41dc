"""Chat memory: where an agent keeps a conversation between runs, and who may resume a paused run.

    memory = InMemoryChatMemory()
    agent = Agent("openai:gpt-4.1-mini", memory=memory)
    await agent.run("My name is Ada.", conversation_id="ada")
    await agent.run("What is my name?", conversation_id="ada")   # the memory supplies the history

`ChatMemory` is the protocol every store implements: `load` a conversation, `append` messages to it.
`ResumeClaims` is the optional second protocol a store implements to make "resume a paused run once"
hold across processes: `claim_resume(state_id, conversation_id)` answers `True` exactly once per state.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .messages import Message

__all__ = ["ChatMemory", "InMemoryChatMemory", "InMemoryResumeClaims", "ResumeClaims"]


@runtime_checkable
class ChatMemory(Protocol):
    """A store of conversations: load one, append messages to it.

    What the agent guarantees a store:
    - Only whole rounds: an assistant message that calls tools arrives in the same `append` as the user
      message answering every one of its calls, so whatever a store holds can be sent to a provider.
    - Every round whose tools started is stored, also when the run is cancelled or its stream breaks
      (calls that did not finish are answered `{"error": "cancelled"}`, and a message cut short carries
      `metadata={"incomplete": True}`): a tool's side effect is never missing from the conversation.
      An append in progress is not cut short by cancellation (it is shielded, for at most 30 seconds).
    - Appends happen before the next model request starts, in conversation order.

    What a store must do: keep each `append` whole (one transaction) and return messages in order.

    One run at a time per conversation: the agent refuses (`ConversationBusyError`) to start a run on a
    conversation that another run in the same process is using with the same memory object, so runs
    never interleave their rounds. Across processes that is the application's job (the server allows one
    active run per chat). A run paused for approval does not hold its conversation; its `RunState`
    records the conversation's length, and resuming it after the conversation moved on is refused
    (`RunStateStaleError`).

    `conversation_id` names the conversation; the agent always passes one (a run with a memory needs
    `conversation_id=`), `None` is only a store's own default for direct use.
    """

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        """The conversation's messages, oldest first (an empty list for a conversation never written)."""
        ...

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        """Add `messages`, in order, at the end of the conversation; all of them or none."""
        ...


@runtime_checkable
class ResumeClaims(Protocol):
    """Makes "a paused run is resumed at most once" enforceable: one claim per state id succeeds.

    The agent calls `claim_resume` after checking a resumed state and before any tool of the resumed
    round runs. The first call for a `state_id` must return `True` and every later one `False`, also
    when they race (a unique row in a database, `SET NX` in Redis, a set under a lock in one process).
    A claim is never given back: a resumed run that then fails or is cancelled has still used its state.
    A `ChatMemory` may implement it too; the agent then uses the memory's claims.
    """

    async def claim_resume(self, state_id: str, conversation_id: str | None) -> bool:
        """`True` the first time `state_id` is claimed, `False` ever after."""
        ...


class InMemoryResumeClaims:
    """`ResumeClaims` in a set: claims last as long as the object, for every thread of this process.

    An agent without a memory that claims uses one of these for the whole process, so one process never
    resumes a state twice; a state resumed by two processes needs claims in a shared store.
    """

    def __init__(self) -> None:
        self._claimed: set[str] = set()
        self._lock = threading.Lock()  # runs of several threads (run_sync) may share one object

    async def claim_resume(self, state_id: str, conversation_id: str | None) -> bool:
        with self._lock:
            if state_id in self._claimed:
                return False
            self._claimed.add(state_id)
            return True

    def __len__(self) -> int:
        return len(self._claimed)


class InMemoryChatMemory:
    """A `ChatMemory` (and `ResumeClaims`) in a dict: conversations last as long as the object.

    For tests, scripts and one process. `messages(conversation_id)` reads a conversation without
    awaiting, for inspection.
    """

    def __init__(self) -> None:
        self._conversations: dict[str | None, list[Message]] = {}
        self._claims = InMemoryResumeClaims()

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        return list(self._conversations.get(conversation_id, ()))

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        # No await between reading and writing: an append is atomic for every task of the event loop.
        self._conversations.setdefault(conversation_id, []).extend(messages)

    async def claim_resume(self, state_id: str, conversation_id: str | None) -> bool:
        return await self._claims.claim_resume(state_id, conversation_id)

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
