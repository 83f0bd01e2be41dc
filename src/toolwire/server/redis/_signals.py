"""`RedisSignals`: cancellations that reach a run on whichever replica runs it.

A cancel for a run of this process fires at once; any other is added to one signals stream
(`<prefix>:signals`, trimmed to the last thousand entries), which every replica's reader follows in the
`XREAD` it makes anyway: the replica running the run stops it, the others ignore it. A stream rather
than pub/sub, so that a replica whose connection dropped for a moment still gets the signals sent
meanwhile when it reads again from the last id it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import anyio.abc

from ..signals import CancelReason, RunWatch
from ._hub import RawEntry, RedisHub

__all__ = ["RedisSignals"]

_REASONS: dict[bytes, CancelReason] = {b"cancel": "cancel", b"shutdown": "shutdown"}


class RedisSignals:
    """`RunSignals` across replicas (see the module docstring)."""

    def __init__(self, hub: RedisHub) -> None:
        self.hub = hub
        self._key = hub.key("signals").encode()
        self._last = b"0-0"
        self._watches: dict[str, RunWatch] = {}
        hub.add_source(self)

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        await self.hub.start(tg)

    async def aclose(self) -> None:
        await self.hub.aclose()

    async def opened(self, hub: RedisHub) -> None:
        newest = await hub.client.execute_command("XREVRANGE", self._key, "+", "-", "COUNT", 1)
        if newest:
            self._last = cast(bytes, newest[0][0])  # signals sent before this process started are not its own

    async def cancel(self, run_id: str, reason: CancelReason = "cancel") -> None:
        watch = self._watches.get(run_id)
        if watch is not None:
            watch.fire(reason)
            return
        await self.hub.client.execute_command("XADD", self._key, "MAXLEN", "~", 1000, "*", "run", run_id,
                                              "reason", reason)

    def watch(self, run_id: str) -> RunWatch:
        return self._watches.setdefault(run_id, RunWatch())

    def release(self, run_id: str) -> None:
        self._watches.pop(run_id, None)

    # -- the reader's side -------------------------------------------------------------------

    def streams(self) -> dict[bytes, bytes]:
        return {self._key: self._last}

    async def deliver(self, key: bytes, entries: list[RawEntry]) -> None:
        self._last = entries[-1][0]
        for _id, fields in entries:
            watch = self._watches.get(fields.get(b"run", b"").decode())
            if watch is not None:
                watch.fire(_REASONS.get(fields.get(b"reason", b""), "cancel"))

    def caught_up(self, keys: Sequence[bytes]) -> None:
        return None

    def lost(self) -> None:
        self._last = b"0-0"  # the stream starts over: every signal in it is new
