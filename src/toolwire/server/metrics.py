"""Server metrics at `GET /metrics`, in the Prometheus text format, through the official client library.

Off unless enabled (`ServerConfig(metrics=True, metrics_token=...)`, `toolwire serve --metrics`): then
`/metrics` answers the scraper that sends `Authorization: Bearer <metrics token>`, and 404 otherwise. The
metrics token is not a user's token: the figures are the whole server's (every user's runs), and a
scraper's credential should open nothing else.

What is measured, and where:

- `toolwire_active_runs`: runs this process is executing, read from the run manager when scraped.
- `toolwire_followers`: event streams open on this process (SSE responses, any browser protocol).
- `toolwire_events_published_total`: events appended to the event log; `rate()` of it is events per second.
  Counted once per append (a batch of streamed events is one append): one integer increment, no labels.
- `toolwire_runs_finished_total{status}`: runs that ended here, by the status of their `run_finished`
  (completed, failed, cancelled, interrupted, paused; a recovered run counts where it was recovered).
- `toolwire_store_operation_seconds{operation}`: each `Store` call of the server, by method name.
- `toolwire_redis_operation_seconds{operation}` (with `--redis`): each call of the Redis-backed rate limiter
  (`limiter.acquire`, `limiter.spend`), signals (`signals.cancel`...) and event log (`log.last_cursor`,
  `log.discard`...), blocking waits excepted; and `toolwire_redis_append_seconds` (a count and a sum, no
  buckets): how long each append waited for its pipelined write. Appends and follower reads are on the
  per-event path: an append adds to two plain numbers instead of a histogram's locked buckets, and reads
  (mostly answered from this process's copy of the stream) are not timed.
- `toolwire_limit_refusals_total{limit}`: requests refused by a per-user limit: `runs`, `tool_calls`,
  `writes` (the rate limits) and the token budgets (`daily_input_tokens`, ...; `budgets.py`).

Each process keeps its own figures in its own registry (several apps in one process do not mix): behind a
load balancer, scrape every replica (each `toolwire serve` is one process) and sum in PromQL.

The store, log and limiter are measured by wrapping them where the app is built (`observe`): neither they
nor the run manager know about metrics, and nothing is wrapped when metrics are off.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from ..exceptions import UserError
from ._proxy import Forwarding
from .errors import ApiError

if TYPE_CHECKING:
    from ..store import Store
    from .eventlog import EventLog, LogEntry
    from .limits import RateLimiter

__all__ = ["Measured", "ServerMetrics", "measured", "metrics_endpoint", "of_scope"]

RUN_STATUSES = ("completed", "failed", "cancelled", "interrupted", "paused")
RATE_LIMITS = ("runs", "tool_calls", "writes")
BUDGET_LIMITS = ("daily_input_tokens", "daily_output_tokens", "monthly_input_tokens", "monthly_output_tokens")

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds: a local SQLite write or a Redis round trip is well under a millisecond, a loaded database's tens."""

_NOT_TIMED = frozenset({"wait", "watch", "release", "sweep", "start", "aclose", "close", "open", "read_after"})
"""Calls of the log, limiter and signals that block until something happens (or that set up or tear down
connections): their duration is not Redis latency. `read_after` is a follower's per-event read."""


class ServerMetrics:
    """The server's Prometheus metrics (see the module docstring), in a registry of their own.

    Args:
        token: The bearer token `/metrics` requires (at least 16 characters).
    """

    def __init__(self, *, token: str) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError as exc:  # pragma: no cover - the server extra installs it
            raise UserError("Server metrics need prometheus_client: pip install 'toolwire[server]'.") from exc
        if len(token) < 16:
            raise UserError("The metrics token must be at least 16 characters long; use a long random string.")
        self._token = token.encode()
        registry = self.registry = CollectorRegistry()
        self.active_runs = Gauge("toolwire_active_runs", "Runs this process is executing.", registry=registry)
        self.followers = Gauge("toolwire_followers", "Event streams open on this process.", registry=registry)
        self._log: _CountedLog | None = None
        registry.register(_EventsCollector(self))
        self.runs_finished = Counter("toolwire_runs_finished", "Runs that ended in this process, by status.",
                                     ["status"], registry=registry)
        self.store_seconds = Histogram("toolwire_store_operation_seconds", "Duration of each store call.",
                                       ["operation"], buckets=_LATENCY_BUCKETS, registry=registry)
        self.redis_seconds = Histogram("toolwire_redis_operation_seconds",
                                       "Duration of each call of the Redis-backed log, limiter and signals.",
                                       ["operation"], buckets=_LATENCY_BUCKETS, registry=registry)
        self.refusals = Counter("toolwire_limit_refusals", "Requests refused by a per-user limit, by limit.",
                                ["limit"], registry=registry)
        # Every label value known in advance is shown from the start (at 0), so `rate()` sees the first one.
        for status in RUN_STATUSES:
            self.runs_finished.labels(status)
        for limit in (*RATE_LIMITS, *BUDGET_LIMITS):
            self.refusals.labels(limit)

    def observe(self, *, store: Store, log: EventLog, limiter: RateLimiter,
                signals: Any) -> tuple[Store, EventLog, RateLimiter, Any]:
        """The store, log, limiter and signals the server should use: the same, measured."""
        redis = self.redis_seconds if getattr(log, "shared", False) else None
        timed_store = cast("Store", _Timed(store, self.store_seconds, "", frozenset()))
        self._log = _CountedLog(log, self, redis)
        counted_log = cast("EventLog", self._log)
        counted_limiter = cast("RateLimiter", _CountedLimiter(limiter, self.refusals, redis))
        timed_signals = _Timed(signals, redis, "signals.", _NOT_TIMED) if redis is not None else signals
        return timed_store, counted_log, counted_limiter, timed_signals

    @property
    def events_published(self) -> int:
        return self._log.published if self._log is not None else 0

    def exposition(self) -> tuple[bytes, str]:
        """The metrics in the Prometheus text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def authorized(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._token)


@dataclass(frozen=True, slots=True)
class Measured:
    """What the server uses: the store, log, limiter and signals given, measured when metrics are on."""

    store: Store
    log: EventLog
    limiter: RateLimiter
    signals: Any


def measured(config: Any, *, store: Store, log: EventLog, limiter: RateLimiter, signals: Any,
             ) -> tuple[ServerMetrics | None, Measured]:
    """The app's metrics (`None` when `config.metrics` is off) and what the server should use (see `observe`)."""
    if not config.metrics:
        return None, Measured(store, log, limiter, signals)
    if not config.metrics_token:
        raise UserError("Metrics need a token for the scraper to send (metrics_token, or --metrics-token or "
                        "TOOLWIRE_METRICS_TOKEN for toolwire serve): the figures are the whole server's.")
    metrics = ServerMetrics(token=config.metrics_token)
    return metrics, Measured(*metrics.observe(store=store, log=log, limiter=limiter, signals=signals))


def of_scope(scope: Scope) -> ServerMetrics | None:
    """The metrics of the app serving this request, if they are on."""
    app = scope.get("app")
    return getattr(app.state, "metrics", None) if app is not None else None


async def metrics_endpoint(request: Request) -> Response:
    """`GET /metrics` (routed only when metrics are on)."""
    metrics = of_scope(request.scope)
    assert metrics is not None
    if not metrics.authorized(request):
        raise ApiError(401, "unauthorized", "Scraping /metrics needs the metrics token: send it as "
                                            "'Authorization: Bearer <token>' (--metrics-token).",
                       headers={"WWW-Authenticate": 'Bearer realm="toolwire metrics"'})
    body, media_type = metrics.exposition()
    return Response(body, media_type=media_type)


class _EventsCollector:
    """The per-event path's figures, read from the counted log's plain numbers at each scrape."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, SummaryMetricFamily

        log = self._metrics._log
        yield CounterMetricFamily("toolwire_events_published", "Events appended to the event log.",
                                  value=log.published if log is not None else 0)
        if log is not None and log._redis is not None:
            yield SummaryMetricFamily("toolwire_redis_append_seconds", "Time each append to the Redis event log "
                                      "waited for its pipelined write.", count_value=log.appends_timed,
                                      sum_value=log.append_seconds)

    def describe(self) -> Any:
        return self.collect()


class _Timed(Forwarding):
    """Times each call of the wrapped object's coroutine methods (`skip` excepted) into `histogram`."""

    def __init__(self, wrapped: Any, histogram: Any, prefix: str, skip: frozenset[str]) -> None:
        super().__init__(wrapped)
        self._histogram = histogram
        self._prefix = prefix
        self._skip = skip

    def wrap_method(self, name: str, method: Any) -> Any:
        import inspect

        if name in self._skip or not inspect.iscoroutinefunction(method):
            return method
        return _timed(method, self._histogram.labels(self._prefix + name))


def _timed(method: Callable[..., Any], child: Any) -> Callable[..., Any]:
    observe = child.observe

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            observe(time.perf_counter() - started)

    return timed


class _CountedLog(_Timed):
    """Counts each append's events and each `run_finished` (always an append's last entry), and, when the log
    lives in Redis, times its calls."""

    def __init__(self, log: Any, metrics: ServerMetrics, redis: Any) -> None:
        super().__init__(log, redis, "log.", _NOT_TIMED)
        self._redis = redis
        self.published = 0
        """Events appended: a plain integer on the per-event path (prometheus_client's `Counter.inc` takes a
        lock and costs more than the rest of this method); the collector reads it when scraped."""
        self._finished = metrics.runs_finished
        # Bound once: the append below is on the per-event path.
        self._append = self._timed_append if redis is not None else log.append
        self._log_append = log.append
        self.append_seconds = 0.0
        self.appends_timed = 0

    def wrap_method(self, name: str, method: Any) -> Any:
        return method if self._redis is None else super().wrap_method(name, method)

    def append(self, chat_id: str, entries: Sequence[LogEntry], *args: Any, **kwargs: Any) -> Any:
        # Not a coroutine itself: it returns the log's own, so a counted append adds no frame to await.
        self.published += len(entries)
        if entries and entries[-1].type == "run_finished":
            status = entries[-1].event.get("status")
            if isinstance(status, str):
                self._finished.labels(status).inc()
        return self._append(chat_id, entries, *args, **kwargs)

    async def _timed_append(self, chat_id: str, entries: Sequence[LogEntry], *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            await self._log_append(chat_id, entries, *args, **kwargs)
        finally:
            self.append_seconds += time.perf_counter() - started
            self.appends_timed += 1


class _CountedLimiter(_Timed):
    """Counts refusals by limit: a rate limit's wait, or a token budget's refusal (`budget_exceeded`)."""

    def __init__(self, limiter: Any, refusals: Any, redis: Any) -> None:
        super().__init__(limiter, redis, "limiter.", _NOT_TIMED)
        self._redis = redis
        self._refusals = refusals
        self._acquire = self.wrap_method("acquire", limiter.acquire) if redis is not None else limiter.acquire

    def wrap_method(self, name: str, method: Any) -> Any:
        return method if self._redis is None else super().wrap_method(name, method)

    async def acquire(self, user_id: str, kind: str) -> float | None:
        try:
            wait: float | None = await self._acquire(user_id, kind)
        except ApiError as exc:
            limit = getattr(exc, "limit", None)
            if isinstance(limit, str):
                self._refusals.labels(limit).inc()
            raise
        if wait is not None:
            self._refusals.labels(kind).inc()
        return wait
