"""`RedisRateLimiter`: the per-user token buckets of `MemoryRateLimiter`, kept in Redis for every replica.

One hash per user and kind (`<prefix>:rate:<kind>:<user id>`, fields `level` and `stamp`), changed only
by one Lua script, so a take is atomic however many replicas ask at once. The clock is Redis's own
(`TIME`), so replicas whose clocks differ still agree. A key expires once its bucket would be full again.
"""

from __future__ import annotations

from typing import Any

import anyio.abc

from ..limits import RateKind
from ._hub import RedisHub

__all__ = ["RedisRateLimiter"]

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
        # Tool calls are spent as they happen; a run may start while any of that budget is left.
        return await self._call(user_id, kind, "check" if kind == "tool_calls" else "take")

    async def spend(self, user_id: str, kind: RateKind, amount: int = 1) -> None:
        await self._call(user_id, kind, "spend", amount)
