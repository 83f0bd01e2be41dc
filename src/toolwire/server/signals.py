"""Signals to a run from outside the task that runs it: cancellation.

A run is cancelled by whoever asks (a cancel request, a client that disconnects with
`on_disconnect: "cancel"`, a deleted chat, shutdown); the run's own task stops it. `LocalSignals`
does that inside one process. With several server processes the request may arrive at another
replica than the one running the run: a `RunSignals` over Redis pub/sub delivers it there, behind the
same two calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import anyio

__all__ = ["CancelReason", "LocalSignals", "RunSignals"]

CancelReason: TypeAlias = Literal["cancel", "shutdown", "handover"]
"""`cancel`: a person asked (the run ends `cancelled`); `shutdown`: the server is stopping (`interrupted`);
`handover`: the server is stopping and hands the run over (it stops without ending, another server continues it;
fired on this process's own runs only)."""


@runtime_checkable
class RunSignals(Protocol):
    async def cancel(self, run_id: str, reason: CancelReason = "cancel") -> None:
        """Ask the run to stop (wherever it runs); returns at once."""
        ...

    def watch(self, run_id: str) -> RunWatch:
        """For the task running `run_id`: the signals sent to it (`release` when the run ended)."""
        ...

    def release(self, run_id: str) -> None: ...


class RunWatch:
    """What a running run listens to: set once when it is asked to stop. `on_fire`, when set, is called then
    (on the loop that fires it): the run stops its work from there, with no task of its own waiting."""

    __slots__ = ("cancelled", "on_fire", "reason")

    def __init__(self) -> None:
        self.cancelled = anyio.Event()
        self.reason: CancelReason = "cancel"
        self.on_fire: Callable[[], object] | None = None

    def fire(self, reason: CancelReason) -> None:
        if not self.cancelled.is_set():
            self.reason = reason
            self.cancelled.set()
            if self.on_fire is not None:
                self.on_fire()


class LocalSignals:
    """`RunSignals` for runs in this process."""

    def __init__(self) -> None:
        self._watches: dict[str, RunWatch] = {}

    async def cancel(self, run_id: str, reason: CancelReason = "cancel") -> None:
        watch = self._watches.get(run_id)
        if watch is not None:
            watch.fire(reason)

    def watch(self, run_id: str) -> RunWatch:
        return self._watches.setdefault(run_id, RunWatch())

    def release(self, run_id: str) -> None:
        self._watches.pop(run_id, None)
