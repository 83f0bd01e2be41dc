"""The chat as one run's agent sees it (`RunMemory`), and the run's writes retried while the store is away
(`durably`): what `runner.py` stores through the agent's memory, apart from how it publishes and ends runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import anyio

from ..events import Usage
from ..exceptions import UserError
from ..messages import Message
from ..store import MessageRow, Store, StoreUnavailable
from ..store.blobs import Files
from .events import usage_dict
from .file_parts import keep_result_files, resolve
from .limits import ResultPolicy

__all__ = ["RETRY_FIRST", "STORE_RETRY_SECONDS", "Answer", "RunMemory", "Saved", "durably"]

logger = logging.getLogger("toolwire.server")

_T = TypeVar("_T")

STORE_RETRY_SECONDS = 20.0
"""How long a run retries a write while the database is away (`ServerConfig.store_retry_seconds`). Under the
agent's 30 s bound on a memory append; long enough for a PostgreSQL restart or a short failover."""
RETRY_FIRST = 0.05
_RETRY_LONGEST = 1.0
"""Backoff between two attempts: doubling from `RETRY_FIRST` up to `_RETRY_LONGEST` seconds."""


async def durably(write: Callable[[], Awaitable[_T]], *, seconds: float, what: str, run_id: str,
                  chat_id: str) -> _T:
    """`write()`, tried again with backoff while the store is unavailable, for up to `seconds`; then its
    `StoreUnavailable` is raised. Other errors are raised at once."""
    deadline = time.monotonic() + seconds
    delay = RETRY_FIRST
    failures = 0
    while True:
        try:
            result = await write()
        except StoreUnavailable as exc:
            failures += 1
            if failures == 1:
                logger.warning("Run %s of chat %s: %s failed, retrying for up to %.0f s: %s", run_id, chat_id, what,
                               seconds, exc, extra={"run_id": run_id, "chat_id": chat_id})
            if time.monotonic() + delay > deadline:
                raise
            await anyio.sleep(delay)
            delay = min(delay * 2, _RETRY_LONGEST)
            continue
        if failures:
            logger.warning("Run %s of chat %s: %s succeeded after %d failed attempt(s)", run_id, chat_id, what,
                           failures, extra={"run_id": run_id, "chat_id": chat_id})
        return result

@dataclass(slots=True, kw_only=True)
class Answer:
    """A run's answer held for its end (`RunMemory.answer`): as the agent committed it, and as it is stored."""
    messages: list[Message]
    safe: list[Message]


@dataclass(slots=True, kw_only=True)
class Saved:
    messages: list[Message]
    rows: list[MessageRow]
    published: bool = False


class RunMemory:
    """The chat as one run's agent sees it: `load` the history, `append` rows tagged with the run.

    Appends are shielded: a round the agent hands over while being cancelled is still written whole. The run's
    answer is not written by its append but held (`answer`) for the run's end, which writes it.
    """

    def __init__(self, store: Store, *, chat_id: str, run_id: str, policy: ResultPolicy,
                 notify: Callable[[Saved], object], retry_seconds: float = STORE_RETRY_SECONDS,
                 files: Files | None = None, user_id: str = "", history: list[Message] | None = None,
                 storing: Callable[[list[Message]], object] | None = None) -> None:
        self._store = store
        self._storing = storing
        self._history = history
        self._files = files
        self._user_id = user_id
        self.chat_id = chat_id
        self.run_id = run_id
        self._policy = policy
        self._notify = notify
        self._retry_seconds = retry_seconds
        self.answered = False
        """Whether the last round stored is the run's answer (no calls): a run handed over then ends instead."""
        self.frozen = False
        """Set when the run is handed over: what the agent appends while it is stopped (a round whose unfinished
        calls it answers itself) is not stored, and the server that continues the run finishes that round."""
        self.usage: Callable[[], Usage] | None = None
        """The run's usage so far, stored with each round (`Store.append_messages`): a server that continues the run
        counts on from the usage of the rounds it finds stored."""
        self.unsaved: list[Message] | None = None
        """A round the store could not take (it was away for longer than the retries): the run writes it at
        its end."""
        self.answer: Answer | None = None
        """The run's answer (a round without calls), held for the run's end, which stores it in the transaction
        that records the end (`Runner._finish`): one commit a run less, and nothing waits for it in between (the
        agent's next step is the run's end). An append after it (an output retry asking again) stores it first."""

    def _check(self, conversation_id: str | None) -> None:
        if conversation_id not in (None, self.chat_id):
            raise UserError(f"This run's memory holds chat {self.chat_id!r}; it cannot read or write conversation "
                            f"{conversation_id!r}.")

    async def load(self, conversation_id: str | None = None) -> list[Message]:
        self._check(conversation_id)
        # Exactly the branch this run answers: the path from the root to its last row, whatever branch the chat
        # shows now (a chat is a tree, see store/_tree.py); files referenced by blob id get their bytes. A run
        # that answers a chat's first message was given that branch (its one row, as stored): the first load
        # takes it instead of a read, which every new chat paid for.
        history, self._history = self._history, None
        if history is None:
            history = await self._store.run_history(self.chat_id, self.run_id)
        return history if self._files is None else await resolve(history, self._files)

    async def append(self, messages: Sequence[Message], conversation_id: str | None = None) -> None:
        self._check(conversation_id)
        if self.frozen:
            return
        safe = [self._policy.message(m) for m in messages]
        if self._files is not None:  # a tool's files become blobs: the row keeps references only
            with anyio.CancelScope(shield=True):
                safe = await keep_result_files(safe, self._files, user_id=self._user_id, chat_id=self.chat_id)
        if self.answer is not None:  # the model is asked again: what it answered is stored before that request
            held, self.answer = self.answer, None
            await self._commit_round(held.messages, held.safe)
        last = safe[-1] if safe else None
        if last is not None and last.role == "assistant" and not (last.tool_calls or last.invalid_tool_calls):
            self.answer = Answer(messages=list(messages), safe=safe)
            self.answered = True
            return
        await self._commit_round(list(messages), safe)

    async def _commit_round(self, messages: list[Message], safe: list[Message]) -> None:
        """One round committed (retried while the store is away), then reported (`notify`)."""
        if self._storing is not None:
            self._storing(safe)
        try:
            with anyio.CancelScope(shield=True):
                usage = usage_dict(self.usage()) if self.usage is not None else None
                rows = await durably(lambda: self._store.append_messages(self.chat_id, safe, run_id=self.run_id,
                                                                         usage=usage),
                                     seconds=self._retry_seconds, what="storing a round", run_id=self.run_id,
                                     chat_id=self.chat_id)
        except StoreUnavailable:  # away for longer than the retries: kept for the run's end
            self.unsaved = safe
            raise
        self.answered = False
        self._notify(Saved(messages=messages, rows=rows))

    async def claim_resume(self, state_id: str, conversation_id: str | None = None) -> bool:
        """The store's once-only claim of a saved state (for agents that resume through their memory)."""
        return await self._store.claim_resume(state_id, conversation_id or self.chat_id)
