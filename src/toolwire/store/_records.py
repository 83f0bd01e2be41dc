"""What a store holds, as plain values: users, chats, message rows, runs and approvals.

Records are frozen and carry no connection to the database; they are what `Store` methods return.
`MessageRow.message_json` is the stored JSON exactly as written (a list of messages), so a server can
send it on without parsing it; `MessageRow.messages` parses it when a caller needs `Message` objects.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import orjson

from ..messages import Message, ToolCallPart, load_messages

if TYPE_CHECKING:
    from ._recovery import ContinuedRound

__all__ = [
    "ACTIVE_STATUSES",
    "Approval",
    "ApprovalStatus",
    "Chat",
    "ChatPath",
    "Continued",
    "Decision",
    "MessageKind",
    "MessageRow",
    "PausedRun",
    "Recovered",
    "Resumption",
    "Run",
    "RunStart",
    "RunStatus",
    "RunSummary",
    "SearchHit",
    "User",
    "iso",
    "new_chat",
    "new_id",
    "utc_now",
]

MessageKind: TypeAlias = Literal["user", "assistant", "tools_aggregate", "system"]
"""`user` / `assistant`: one message. `tools_aggregate`: one tool round, the assistant message with its
calls and the user message with every result, in call order. (`system` only appears when a library
user appends system messages through `ChatMemory`; the server never stores one.)"""

RunStatus: TypeAlias = Literal["running", "paused", "resumed", "completed", "cancelled", "failed", "interrupted"]
"""`running` holds a lease; `paused` waits for approvals and becomes `resumed` once they are decided (the
resumed run is a new run); the rest are final."""

ACTIVE_STATUSES: tuple[RunStatus, ...] = ("running", "paused")
"""A chat has at most one run in one of these statuses (a unique index says so)."""

ApprovalStatus: TypeAlias = Literal["pending", "approved", "denied"]


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str) -> str:
    """A random, unguessable identifier such as `chat_Xq3...` (the prefix says what it names)."""
    return f"{prefix}_{secrets.token_urlsafe(12)}"


def new_chat(user_id: str, title: str = "", *, chat_id: str | None = None, model: str | None = None) -> Chat:
    """A chat not stored yet: `Store.create_chat` stores one, `Store.start_run(new_chat=...)` stores one with its
    first message."""
    now = utc_now()
    return Chat(id=chat_id or new_id("chat"), user_id=user_id, title=title, created_at=now, updated_at=now, model=model)


@dataclass(frozen=True, slots=True, kw_only=True)
class User:
    id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Chat:
    id: str
    user_id: str
    title: str
    created_at: datetime
    updated_at: datetime
    last_sequence: int = 0
    run_count: int = 0
    active_leaf_id: str | None = None
    """The row the chat shows and answers next: the end of its active branch (`None` while it is empty)."""
    model: str | None = None
    """The id of the server's model the chat's runs use; `None`: the server's default."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageRow:
    """One row of a chat's history; `sequence_number` orders the chat (1, 2, 3... without gaps)."""

    id: str
    chat_id: str
    sequence_number: int
    kind: MessageKind
    role: Literal["user", "assistant", "system"]
    run_id: str | None
    created_at: datetime
    message_json: str
    client_message_id: str | None = None
    parent_id: str | None = None
    """The row this one follows; `None` for a first message (a chat is a tree: edits and regenerations branch)."""

    @property
    def messages(self) -> list[Message]:
        """The row's messages: one, or two for a `tools_aggregate` (the calls, then the results)."""
        return load_messages(self.message_json)

    def to_dict(self) -> dict[str, Any]:
        """The row as the server's JSON (`messages` parsed into plain data)."""
        return {
            "id": self.id,
            "sequence_number": self.sequence_number,
            "kind": self.kind,
            "role": self.role,
            "run_id": self.run_id,
            "parent_id": self.parent_id,
            "created_at": iso(self.created_at),
            "messages": orjson.loads(self.message_json),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One run of the agent in a chat. `run_number` counts the chat's runs from 1."""

    id: str
    chat_id: str
    run_number: int
    status: RunStatus
    resumed_from: str | None = None
    client_message_id: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    steps: int = 0
    event_count: int | None = None
    """The index of the run's last event (its `run_finished`), once it ended in a live process."""
    created_at: datetime = field(default_factory=utc_now)
    finished_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    leaf_id: str | None = None
    """The row the run's answer goes under: its user message, or the last row of the run it resumes."""
    model: str | None = None
    """The id of the server's model the run used (recorded as it starts)."""

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """How a run ended, for a client showing stored rows: the run, and the decisions it resumed with.

    `decisions` are the decided approvals of the paused run this run resumed (`run.resumed_from`), in
    the order they were issued; empty for a run that resumed nothing.
    """

    run: Run
    decisions: list[Approval]


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A tool call waiting for (or given) a person's decision; `id` is issued by the server."""

    id: str
    run_id: str
    chat_id: str
    call: ToolCallPart
    status: ApprovalStatus
    reason: str | None = None
    created_at: datetime = field(default_factory=utc_now)
    decided_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PausedRun:
    """A chat's paused run: its saved agent state and the approvals it waits for."""

    run: Run
    state_json: str
    approvals: list[Approval]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """A person's decision on one approval, as a client sends it."""

    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart:
    """What `Store.start_run` did: a new run (`created`), or the run an earlier identical request started."""

    run: Run
    user_row: MessageRow
    created: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumption:
    """A paused run whose approvals were just decided, and the new run that goes on from it."""

    run: Run
    paused: PausedRun
    decisions: dict[str, Approval]
    """Each decided approval, by the id of the call it decides."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """A run whose process died: now `interrupted`, with the round it left committed (`rows`)."""

    run: Run
    rows: list[MessageRow]


@dataclass(frozen=True, slots=True, kw_only=True)
class Continued:
    """A run whose process died, taken over to go on in this process (its lease is now this process's).

    `continuation` counts the takeovers, handovers included (1 for the first); `steps` are the steps the run
    committed so far (the next one has that index); `round` is the round it was in, when a call of it had started
    or its response had ended (`None`: the step in progress is sent again); `user` is the chat's owner, whom the
    run answers; `last_row_id` is the newest row the run stored (its checkpoint), `None` if it stored none yet.
    """

    run: Run
    user: User
    continuation: int
    steps: int
    round: ContinuedRound | None
    last_row_id: str | None = None
    handover: bool = False
    """Its server handed it over as it stopped (`release_lease`), rather than dying: not counted against the limit."""
    usage: Mapping[str, Any] | None = None
    """The usage of the steps it stored so far (`None`: none recorded), which the run's usage goes on from."""


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with a `Z` (what the JSON API shows)."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit:
    """A chat that matches: the newest matching message (None when only its title matches)."""

    chat: Chat
    message_id: str | None
    sequence_number: int | None
    snippet: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatPath:
    """One branch of a chat: the rows from its first message to `leaf_id`, oldest first.

    `siblings` gives, for each row of the path, the ids of the rows that share its parent (itself included,
    oldest first): the versions a client switches between ("2 of 3"). A row without others has `[its id]`.
    """

    leaf_id: str | None
    rows: list[MessageRow]
    siblings: dict[str, list[str]]
