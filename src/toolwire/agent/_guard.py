"""Guards around a memory conversation: one run at a time, and a paused run resumed once, in place.

- `ActiveConversations` refuses a second run on a conversation while one is running (in this process,
  for the same memory object), instead of letting two runs interleave their rounds in one history.
- `claim_resume` asks the `ResumeClaims` (the memory's, the agent's, or this process's) for a state's
  id before any tool of the resumed round runs, so a saved state is resumed at most once.
- `check_resumable` checks a state against the agent resuming it, before the run starts.
- `check_position` refuses a resume whose conversation has moved on since the pause: appending the
  resumed round after newer messages would store a history that disagrees with what the model saw.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ..exceptions import ConversationBusyError, RunStateResumedError, RunStateStaleError, UserError
from ..memory import ChatMemory, InMemoryResumeClaims, ResumeClaims

if TYPE_CHECKING:
    from ._approval import RunState
    from ._config import RunConfig

__all__ = ["ACTIVE", "PROCESS_CLAIMS", "ActiveConversations", "check_position", "check_resumable", "claim_resume"]

PROCESS_CLAIMS = InMemoryResumeClaims()
"""The claims of agents given neither `resume_claims=` nor a memory that claims."""


class ActiveConversations:
    """The memory conversations that have a run in progress, across every thread of the process."""

    def __init__(self) -> None:
        self._active: set[tuple[int, str | None]] = set()
        self._lock = threading.Lock()

    def enter(self, memory: ChatMemory, conversation_id: str | None) -> tuple[int, str | None]:
        """Mark the conversation busy; raises `ConversationBusyError` when it already is."""
        # The memory object's id: runs of two memories never share a conversation, and the run holds
        # a reference to its memory, so the id cannot be reused while the entry exists.
        key = (id(memory), conversation_id)
        with self._lock:
            if key in self._active:
                raise ConversationBusyError(
                    f"Another run is using conversation {conversation_id!r} of this memory right now. Runs on "
                    "one conversation must take turns: wait for the other run to finish (or cancel it), then "
                    "start this one.",
                    conversation_id=conversation_id,
                )
            self._active.add(key)
        return key

    def leave(self, key: tuple[int, str | None]) -> None:
        with self._lock:
            self._active.discard(key)


ACTIVE = ActiveConversations()


def check_position(*, expected: int, found: int, conversation_id: str | None) -> None:
    """Raise `RunStateStaleError` unless the conversation has exactly the length it had at the pause."""
    if found == expected:
        return
    change = f"{found - expected} message(s) were added" if found > expected else "messages were removed"
    raise RunStateStaleError(
        f"Conversation {conversation_id!r} has changed since this run paused for approval ({change}; it had "
        f"{expected}, it has {found}). The paused round would land after messages the model never saw, so it "
        "is not resumed; its pending calls did not run. Start a new run on the conversation instead.",
        expected=expected,
        found=found,
    )


async def claim_resume(claims: ResumeClaims, state_id: str, conversation_id: str | None) -> None:
    """Claim the state for this resume; raises `RunStateResumedError` when it was resumed before."""
    if not await claims.claim_resume(state_id, conversation_id):
        raise RunStateResumedError(
            f"This run state ({state_id}) was already resumed, so its approved tools have run or are running; "
            "resuming it again would run them twice. Read the outcome from that run (or its conversation), "
            "and save the new state if it paused again.",
            state_id=state_id,
        )


def check_resumable(state: RunState, config: RunConfig, conversation_id: str | None) -> None:
    """Everything about a state that can be checked before the run starts (see `RunState.check`)."""
    state.check()
    if conversation_id is not None and conversation_id != state.conversation_id:
        raise UserError(f"This run state belongs to conversation {state.conversation_id!r}, not "
                        f"{conversation_id!r}; resume it without conversation_id= (the state names its own).")
    if config.memory is None and state.conversation_id is not None:
        raise UserError("This run state belongs to a conversation of a chat memory; resume it with an agent "
                        "given that memory (memory=...), so the resumed round is stored where it belongs.")
    if config.memory is not None and state.conversation_id is None:
        raise UserError("This run state was saved by an agent without a memory, so it names no conversation; "
                        "resume it with an agent without memory=.")
    if state.from_memory and not config.memory_is_source:
        raise UserError("This run state keeps its conversation in the chat memory (own_history=False); resume "
                        "it with an agent configured the same way.")
    if state.step >= config.max_steps:
        raise UserError(f"This run state paused at step {state.step}, and this agent allows max_steps="
                        f"{config.max_steps}; resume it with an agent allowing more steps.")
    if state.output_retries > config.output_retries:
        raise UserError(f"This run state has used {state.output_retries} typed-output retries, more than this "
                        f"agent's output_retries={config.output_retries}; resume it with the agent that paused it.")
