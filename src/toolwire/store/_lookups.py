"""Cached lookups that every request makes (token → user, the chat it names), with a bounded staleness.

`LOOKUP_CACHE_SECONDS` bounds how old a cached answer may be. Inside one process nothing is ever stale:
a write this store commits updates or drops the entry right after its commit (before any later batch), and
a lookup that read the database before that write committed cannot put its older answer back (every entry
carries a stamp; a fill older than the newest change of its key, or than the last forgotten change, is
dropped). Across replicas another process's change (a revoked token, a renamed or deleted chat) is seen
here at most `LOOKUP_CACHE_SECONDS` later; see docs/guides/store-writes.md.

Only found answers are cached: a token or a chat that does not exist is asked of the database every time,
so a token added or a chat created by another replica works at once, and nobody fills the cache with
guesses.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["LOOKUP_CACHE_ENTRIES", "LOOKUP_CACHE_SECONDS", "Lookups"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

LOOKUP_CACHE_SECONDS = 1.0
"""How long a cached token or chat lookup is trusted: the longest another replica's revocation, rename or
deletion takes to be seen by this one. One second spares a busy chat's requests (a message, its stream, the
stream's reconnects) their lookups, and keeps a revoked token's grace shorter than a client's retry."""

LOOKUP_CACHE_ENTRIES = 10_000
"""Entries each cache keeps (the least recently used go first): about 10 MB at most, far more than the
chats and tokens that are busy within one `LOOKUP_CACHE_SECONDS`."""

_now = time.monotonic
"""The cache's clock (a test moves it instead of sleeping)."""

_GONE = object()
"""A tombstone: the key changed (or was deleted) here; older fills are refused until it expires."""


class Lookups(Generic[_K, _V]):
    """A bounded, time-limited cache whose writers win over concurrent readers (see the module docstring).

    A reader takes a `ticket()` before it reads the database and offers its answer with `fill(key, value,
    ticket)`; a writer calls `put` or `forget` after its commit.
    """

    def __init__(self, seconds: float = LOOKUP_CACHE_SECONDS, entries: int = LOOKUP_CACHE_ENTRIES) -> None:
        self.seconds = seconds
        self._entries = entries
        self._items: OrderedDict[_K, tuple[object, float, int]] = OrderedDict()
        self._clock = 0
        self._floor = 0
        """Fills with a ticket older than this are refused: the stamp of the newest entry evicted or cleared."""

    def get(self, key: _K) -> _V | None:
        found = self._items.get(key)
        if found is None:
            return None
        value, expires, _ = found
        if _now() >= expires:
            self._drop(key)
            return None
        if value is _GONE:
            return None
        self._items.move_to_end(key)
        return value  # type: ignore[return-value]

    def ticket(self) -> int:
        return self._clock

    def fill(self, key: _K, value: _V, ticket: int) -> None:
        """Keep a value read from the database, unless something changed it here since `ticket` was taken."""
        if ticket < self._floor:
            return
        found = self._items.get(key)
        if found is not None and found[2] > ticket:
            return
        self._store(key, value)

    def put(self, key: _K, value: _V) -> None:
        """A value this process just committed."""
        self._store(key, value)

    def forget(self, key: _K) -> None:
        """The key changed here in a way the cache cannot follow (a revocation, a deletion)."""
        self._store(key, _GONE)

    def clear(self) -> None:
        self._clock += 1
        self._floor = self._clock
        self._items.clear()

    def _store(self, key: _K, value: object) -> None:
        self._clock += 1
        if self.seconds <= 0:  # caching off
            return
        self._items[key] = (value, _now() + self.seconds, self._clock)
        self._items.move_to_end(key)
        while len(self._items) > self._entries:
            self._drop(next(iter(self._items)))

    def _drop(self, key: _K) -> None:
        # What the dropped entry knew of its key's last change is kept as the floor, so no older fill comes back.
        _, _, stamp = self._items.pop(key)
        self._floor = max(self._floor, stamp)
