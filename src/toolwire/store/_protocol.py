"""The `Store` protocol: everything the chat server keeps, behind one interface.

A store is also a `ChatMemory` (`load` / `append` by conversation id = chat id), so
`Agent(memory=store)` works unchanged outside the server.

Invariants every implementation keeps:
- A chat's rows are numbered 1, 2, 3... (`sequence_number`) in the same transaction that inserts them,
  without gaps or duplicates, whatever the number of concurrent writers.
- A chat has at most one run that is `running` or `paused`; starting a second one is a `RunConflict`.
- A user message with a given `client_message_id` is stored once per chat; the same id again returns
  the run it started instead of starting another.
- An approval is decided at most once (a conditional update in the transaction that starts the
  resumed run); unknown, foreign and decided ids start nothing.
- A running run holds a lease (owner, expiry). A run whose lease expired is recovered by whoever claims
  it first: the round it was in is committed with its finished tools' real results (recorded as each
  finished) and `interrupted` errors for the rest, and the run becomes `interrupted`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..exceptions import ToolwireError
from ..memory import ChatMemory
from ..messages import Message, ToolCallPart, ToolResultPart
from ._records import (
    Chat,
    ChatPath,
    Continued,
    Decision,
    MessageRow,
    PausedRun,
    Recovered,
    Resumption,
    Run,
    RunStart,
    RunStatus,
    RunSummary,
    SearchHit,
    User,
)

__all__ = [
    "ApprovalDecided",
    "ApprovalNotFound",
    "ApprovalsIncomplete",
    "ChatIdTaken",
    "ChatNotFound",
    "IdempotencyConflict",
    "InvalidParent",
    "MessageNotFound",
    "NotPaused",
    "RunConflict",
    "Store",
    "StoreError",
]


class StoreError(ToolwireError):
    """A store refused an operation; `code` names the reason (the server's error code)."""

    code = "store_error"


class ChatNotFound(StoreError):
    code = "chat_not_found"


class ChatIdTaken(StoreError):
    """A chat with the id a caller chose already exists (its own or another user's)."""

    code = "chat_exists"


class RunConflict(StoreError):
    """The chat already has a run that is running (`run_active`) or paused for approval (`run_paused`)."""

    def __init__(self, message: str, *, run: Run) -> None:
        super().__init__(message)
        self.run = run
        self.code = "run_paused" if run.status == "paused" else "run_active"


class IdempotencyConflict(StoreError):
    """A `client_message_id` was used again with a different text."""

    code = "client_message_id_reused"


class ApprovalNotFound(StoreError):
    """No pending approval with that id exists in this chat (never issued, or another user's/chat's)."""

    code = "approval_not_found"


class ApprovalDecided(StoreError):
    code = "approval_decided"


class ApprovalsIncomplete(StoreError):
    """A decision request does not decide every pending approval of the paused run (or repeats one)."""

    code = "approvals_incomplete"


class NotPaused(StoreError):
    code = "not_paused"


class MessageNotFound(StoreError):
    """The chat has no message with that id (a branch to show, a parent, a message to regenerate)."""

    code = "message_not_found"


class InvalidParent(StoreError):
    """A new user message was put under a row it cannot follow (another user message)."""

    code = "invalid_parent"


@runtime_checkable
class Store(ChatMemory, Protocol):
    """Chats, their messages, runs, approvals, users and API tokens."""

    # -- lifecycle ---------------------------------------------------------------------------
    async def open(self) -> None:
        """Connect and bring the schema up to date (migrations); idempotent."""
        ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise if the database cannot be reached (readiness checks)."""
        ...

    # -- users and tokens --------------------------------------------------------------------
    async def ensure_user(self, name: str) -> User: ...

    async def add_token(self, user_id: str, token: str, *, source: str = "api") -> None:
        """Accept `token` for the user (only its hash is stored)."""
        ...

    async def replace_tokens(self, tokens: Mapping[str, Sequence[str]], *, source: str = "config") -> None:
        """Make `tokens` (user name → tokens) the valid tokens of `source`; revoke its others."""
        ...

    async def revoke_token(self, token: str) -> bool: ...

    async def user_for_token(self, token: str) -> User | None:
        """The user a valid (not revoked) token belongs to."""
        ...

    # -- chats and messages ------------------------------------------------------------------
    async def create_chat(self, user_id: str, title: str = "", *, chat_id: str | None = None,
                          model: str | None = None) -> Chat:
        """A new chat (using the server's model `model`, `None` for its default); with `chat_id` (a client's own
        id) it raises `ChatIdTaken` when that id exists."""
        ...

    async def list_chats(self, user_id: str, *, limit: int = 200) -> list[Chat]:
        """The user's chats, most recently updated first."""
        ...

    async def get_chat(self, user_id: str, chat_id: str) -> Chat | None:
        """The chat if it exists and belongs to the user (another user's chat is `None`)."""
        ...

    async def rename_chat(self, user_id: str, chat_id: str, title: str) -> Chat | None: ...

    async def set_chat_model(self, user_id: str, chat_id: str, model: str | None) -> Chat | None:
        """Set the id of the model the chat's runs use (`None`: the server's default); `None` if there is no
        such chat of the user's."""
        ...

    async def record_run_model(self, run_id: str, model: str) -> None:
        """Record the id of the model a run uses (as it starts)."""
        ...

    async def search_chats(self, user_id: str, query: str, *, limit: int = 20, offset: int = 0) -> list[SearchHit]:
        """The user's chats whose title or message text has every word of `query` (as a word prefix), most
        recently updated first, each with its newest matching message and a snippet."""
        ...

    async def delete_chat(self, user_id: str, chat_id: str) -> bool:
        """Delete the chat with its messages, runs and approvals."""
        ...

    async def append_messages(self, chat_id: str, messages: Sequence[Message], *,
                              run_id: str | None = None, parent_id: str | None = None,
                              usage: Mapping[str, Any] | None = None) -> list[MessageRow]:
        """Store messages as rows in one transaction (a call round becomes one `tools_aggregate` row).

        The rows form a chain under `parent_id` (`""`: as a new first message); without one, under the run's
        last row (or the row it extends), or, with no run, the chat's active leaf. The active leaf follows
        the rows when it was their parent. `usage`, with `run_id`: the run's usage with these rows, written to
        its row in the same transaction (a server that continues the run counts on from it).
        """
        ...

    async def list_messages(self, chat_id: str, *, after: int = 0, limit: int | None = None) -> list[MessageRow]:
        """Rows with `sequence_number > after`, in order: every branch's (`chat_path` reads one branch)."""
        ...

    # -- branches (a chat is a tree of rows, see `_tree.py`) -----------------------------------
    async def chat_path(self, chat_id: str, through: str | None = None) -> ChatPath:
        """The branch through the row `through` down to its newest leaf (`None`: the active branch), with each
        row's siblings. Raises `MessageNotFound` for a row the chat does not have."""
        ...

    async def switch_leaf(self, chat_id: str, message_id: str) -> ChatPath:
        """Make the branch through `message_id` (down to its newest leaf) the chat's active branch; returns it."""
        ...

    async def run_history(self, chat_id: str, run_id: str) -> list[Message]:
        """What the model answering in `run_id` sees: the messages from the root to the run's last row."""
        ...

    # -- runs --------------------------------------------------------------------------------
    async def start_run(self, chat_id: str, *, user_message: Message, client_message_id: str, owner: str,
                        lease_seconds: float, title: str | None = None, parent_id: str | None = None,
                        model: str | None = None, new_chat: Chat | None = None) -> RunStart:
        """Store the user's message and a new `running` run with a lease, in one transaction.

        With `new_chat` (made by `new_chat()`, not stored yet; its id is `chat_id`), that transaction inserts the
        chat first: a chat and its first message are one write, and nothing is stored if the start is refused.

        The message goes under `parent_id` (an edit: a new branch there; `""` as a new first message), by
        default under the chat's active leaf, and becomes the active leaf. A `parent_id` the chat does not
        have raises `MessageNotFound`, a user message as parent `InvalidParent`.

        `title`, when given, becomes the chat's title in that same transaction if the chat has none yet
        (a chat is named after its first message without a transaction of its own). `model`, when given, is
        recorded as the run's model in the same insert (`record_run_model` without a statement of its own).

        Raises `RunConflict` when the chat has a running or paused run, and `IdempotencyConflict` when
        `client_message_id` was used before with another text. The same id with the same text returns
        the earlier run (`created=False`) and stores nothing.
        """
        ...

    async def start_answer(self, chat_id: str, message_id: str, *, client_message_id: str | None, owner: str,
                           lease_seconds: float) -> RunStart:
        """Start a run answering again the user message of `message_id`'s turn (regenerate; retry after a failed
        run): its answer becomes a sibling of the earlier one, and nothing is stored twice. The user message
        becomes the active leaf. Refuses like `start_run`; the same `client_message_id` again returns the
        earlier run (`created=False`)."""
        ...

    async def resume_run(self, chat_id: str, decisions: Sequence[Decision], *, owner: str,
                         lease_seconds: float) -> Resumption:
        """Decide every pending approval of the chat's paused run and start the run that resumes it.

        Raises `ApprovalNotFound`, `ApprovalDecided`, `ApprovalsIncomplete` or `NotPaused`; then
        nothing is changed.
        """
        ...

    async def get_run(self, chat_id: str, run_id: str) -> Run | None: ...

    async def run_by_number(self, chat_id: str, run_number: int) -> Run | None: ...

    async def active_run(self, chat_id: str) -> Run | None:
        """The chat's `running` run, if any."""
        ...

    async def paused_run(self, chat_id: str) -> PausedRun | None: ...

    async def run_summaries(self, chat_id: str, *, after: int = 0) -> list[RunSummary]:
        """The runs that the chat's rows after `after` belong to, in run order, with their decisions."""
        ...

    async def record_step_text(self, run_id: str, step: int, text: str) -> None:
        """Remember the text step `step` has streamed so far (for a run that cannot be continued after a crash)."""
        ...

    async def record_step_message(self, run_id: str, message: Message) -> None:
        """Remember the assistant message of the step in progress (for recovery)."""
        ...

    async def record_tool_call(self, run_id: str, call: ToolCallPart) -> None:
        """Remember that a call started (for recovery, also before its message ended)."""
        ...

    async def record_tool_result(self, run_id: str, result: ToolResultPart) -> None:
        """Remember a finished call's result the moment it exists (for recovery)."""
        ...

    async def record_journal(self, run_id: str, *, calls: Sequence[ToolCallPart] = (),
                             results: Sequence[ToolResultPart] = (), step_message: Message | None = None) -> None:
        """`record_tool_call`, `record_tool_result` and `record_step_message` of several entries, in one write."""
        ...

    async def pause_run(self, run_id: str, *, state_json: str, pending: Sequence[tuple[str, ToolCallPart]],
                        usage: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        """Mark a running run `paused` with its state and pending approvals (approval id, call)."""
        ...

    async def finish_run(self, run_id: str, *, status: RunStatus, usage: Mapping[str, Any] | None,
                         error: Mapping[str, Any] | None, steps: int, event_count: int | None) -> bool:
        """Mark a running run final; `False` if it was not running any more (someone recovered it)."""
        ...

    # -- leases and recovery -----------------------------------------------------------------
    async def renew_leases(self, owner: str, run_ids: Sequence[str], lease_seconds: float) -> int:
        """Extend the leases this owner holds on these running runs; returns how many it renewed (a run whose row
        another transaction holds at that moment is skipped, not waited for: its lease is renewed next time)."""
        ...

    async def expired_runs(self) -> list[Run]:
        """Running runs whose lease has expired."""
        ...

    async def recover_run(self, run_id: str, *, owner: str, lease_seconds: float) -> Recovered | None:
        """Claim an expired run and finish it as `interrupted` (see the module docstring).

        `None` when the run is not running with an expired lease any more (another process claimed
        it, or its owner renewed it).
        """
        ...

    async def take_over_run(self, run_id: str, *, owner: str, lease_seconds: float,
                            continue_limit: int) -> Continued | Recovered | None:
        """Claim an expired run to continue it in this process (`Continued`: its journal's round, its owner, how
        many times it was continued), or, once it was continued `continue_limit` times, finish it as
        `recover_run` does (`Recovered`). `None` as for `recover_run`."""
        ...

    async def release_lease(self, run_id: str, *, owner: str) -> bool:
        """Hand a running run over: its lease, if this owner still holds it, is released (no owner, expired now), so
        the next `take_over_run` continues it as a handover (`Continued.handover`). `False` if it was not held."""
        ...

    async def claim_resume(self, state_id: str, conversation_id: str | None = None) -> bool:
        """Claim the one resumption of a saved run state: `True` the first time for that id only."""
        ...
