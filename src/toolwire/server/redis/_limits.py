"""`RedisRateLimiter`: the per-user token buckets of `MemoryRateLimiter`, kept in Redis for every replica.

One hash per user and kind (`<prefix>:rate:<kind>:<user id>`, fields `level` and `stamp`), changed only
by one Lua script, so a take is atomic however many replicas ask at once. The clock is Redis's own
(`TIME`), so replicas whose clocks differ still agree. A key expires once its bucket would be full again.

While Redis is away: starting a run (`acquire`) fails closed, with the Redis error the server answers
503 with `Retry-After` (a run started then could not stream anyway); counting what a running run spends
(`spend`) fails open: a run already admitted never fails because accounting did. What could not be
counted is kept here, per user, and counted with that user's next call that reaches Redis (at most
`_MAX_UNCOUNTED` users are kept; past that, the oldest user's count is forgotten, with a warning).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.abc

from ..limits import RateKind
from ._hub import RedisHub

__all__ = ["RedisRateLimiter"]

logger = logging.getLogger("toolwire.server")

_SPEND_PATIENCE = 1.0
"""Seconds a run waits for its spending to be counted before it goes on (and the count is kept here)."""

_MAX_UNCOUNTED = 10_000
"""Users whose spending is kept here while Redis is away (see the module docstring)."""

# ARGV: capacity per minute, mode ("take", "check" or "spend"), amount. Returns the seconds to wait, or
# -1 when allowed, as a string (Lua numbers come back from Redis as integers).
_BUCKET = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local capacity = tonumber(ARGV[1])
local mode = ARGV[2]
local stored = redis.call('HMGET', KEYS[1], 'level', 'stamp')
local level = tonumber(stored[1]) or capacity
local stamp = tonumber(stored[2]) or now
level = math.min(capacity, level + (now - stamp) * capacity / 60)
local wait = -1
if mode == 'take' then
  if level >= 1 then level = level - 1 else wait = (1 - level) * 60 / capacity end
elseif mode == 'check' then
  if level <= 0 then wait = (1 - level) * 60 / capacity end
else
  level = math.max(-capacity, level - tonumber(ARGV[3]))
end
redis.call('HSET', KEYS[1], 'level', tostring(level), 'stamp', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil((capacity - level) * 60 / capacity) + 1)
return tostring(wait)
"""


class RedisRateLimiter:
    """A `RateLimiter` shared by every replica (see the module docstring)."""

    def __init__(self, hub: RedisHub, *, runs_per_minute: int, tool_calls_per_minute: int,
                 writes_per_minute: int = 120) -> None:
        self.hub = hub
        self._rates: dict[RateKind, int] = {"runs": runs_per_minute, "tool_calls": tool_calls_per_minute,
                                            "writes": writes_per_minute}
        self._script: Any = None
        self._uncounted: dict[tuple[str, RateKind], int] = {}

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        await self.hub.start(tg)
        self._script = self.hub.client.register_script(_BUCKET)

    async def aclose(self) -> None:
        await self.hub.aclose()

    async def _call(self, user_id: str, kind: RateKind, mode: str, amount: int = 0) -> float | None:
        if self._script is None:
            self._script = self.hub.client.register_script(_BUCKET)
        key = self.hub.key("rate", kind, user_id)
        answer = await self._script(keys=[key], args=[self._rates[kind], mode, amount])
        wait = float(answer)
        return None if wait < 0 else wait

    async def acquire(self, user_id: str, kind: RateKind) -> float | None:
        owed = self._uncounted.pop((user_id, kind), 0)
        if owed:
            try:
                await self._call(user_id, kind, "spend", owed)
            except Exception:
                self._uncounted[(user_id, kind)] = self._uncounted.get((user_id, kind), 0) + owed
                raise
        # Tool calls are spent as they happen; a run may start while any of that budget is left.
        return await self._call(user_id, kind, "check" if kind == "tool_calls" else "take")

    async def spend(self, user_id: str, kind: RateKind, amount: int = 1) -> None:
        owed = self._uncounted.pop((user_id, kind), 0)
        try:
            with anyio.fail_after(_SPEND_PATIENCE):  # the run waits for this: never for Redis's retries
                await self._call(user_id, kind, "spend", amount + owed)
        except Exception as exc:  # Redis away: the run goes on, its spending is counted later
            if len(self._uncounted) >= _MAX_UNCOUNTED:
                forgotten = next(iter(self._uncounted))
                del self._uncounted[forgotten]
                logger.warning("Forgot uncounted %s of a user: more than %d users spent while Redis was away",
                               forgotten[1], _MAX_UNCOUNTED)
            self._uncounted[(user_id, kind)] = owed + amount
            logger.warning("Counting %s of user %s failed (%s); counted when Redis answers again", kind, user_id,
                           exc)
