"""Several server replicas: the live event log, cancellations and rate limits on Redis.

    from toolwire.server import create_app
    from toolwire.server.redis import RedisBackends

    redis = RedisBackends("redis://localhost:6379/0")
    app = create_app(make_agent, store="postgresql://...", **redis.app_options())

or `toolwire serve --db postgresql://... --redis redis://...`. PostgreSQL stays the source of truth
(chats, messages, runs and their leases, approvals, tokens); Redis holds what is live: each chat's event
stream (`RedisEventLog`), the signals that cancel runs (`RedisSignals`) and the per-user rate limits
(`RedisRateLimiter`). All three share one `RedisHub`: a bounded number of connections per process.

Needs the `redis` extra (`pip install 'toolwire[redis]'`).
"""

from __future__ import annotations

from typing import Any

from ._hub import RedisHub as RedisHub, RedisUnavailable as RedisUnavailable
from ._limits import RedisRateLimiter as RedisRateLimiter
from ._log import RedisEventLog as RedisEventLog
from ._signals import RedisSignals as RedisSignals

__all__ = ["RedisBackends", "RedisEventLog", "RedisHub", "RedisRateLimiter", "RedisSignals", "RedisUnavailable"]


class RedisBackends:
    """The event log, signals and rate limiter of one process, on one Redis (one `RedisHub`).

    Args:
        url: The Redis URL (`redis://[:password@]host:port/db`, `rediss://...`, `unix:///path`).
        prefix: Prefix of every key (lets several deployments share one Redis).
        max_events_per_chat: Entries kept per chat stream.
        retention_seconds: How long a chat's stream is kept after a run ends.
        runs_per_minute: Runs one user may start per minute, over all replicas.
        tool_calls_per_minute: Tool calls one user's runs may start per minute, over all replicas.
        writes_per_minute: Writes one user may make per minute, over all replicas.
        max_connections: The pool for replays, scripts and signals (the reader and the event writer have one
            connection each besides).
    """

    def __init__(self, url: str, *, prefix: str = "toolwire", max_events_per_chat: int = 10_000,
                 retention_seconds: float = 900.0, runs_per_minute: int = 60, tool_calls_per_minute: int = 600,
                 max_connections: int = 4, writes_per_minute: int = 120) -> None:
        try:
            import redis.asyncio  # noqa: F401
        except ImportError:
            from ..._install import install_hint
            from ...exceptions import UserError

            raise UserError(f"Redis support needs the redis extra: {install_hint('redis')}.") from None
        self.hub = RedisHub(url, prefix=prefix, max_connections=max_connections)
        self.event_log = RedisEventLog(self.hub, max_events_per_chat=max_events_per_chat,
                                       retention_seconds=retention_seconds)
        self.signals = RedisSignals(self.hub)
        self.rate_limiter = RedisRateLimiter(self.hub, runs_per_minute=runs_per_minute,
                                             tool_calls_per_minute=tool_calls_per_minute,
                                             writes_per_minute=writes_per_minute)

    def app_options(self) -> dict[str, Any]:
        """`create_app` keyword arguments: `event_log`, `signals` and `rate_limiter`."""
        return {"event_log": self.event_log, "signals": self.signals, "rate_limiter": self.rate_limiter}
