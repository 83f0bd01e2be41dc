"""`create_app`: the chat server as a Starlette application, to run with uvicorn or mount anywhere.

    from toolwire import Agent
    from toolwire.server import ChatContext, create_app

    def make_agent(ctx: ChatContext) -> Agent:
        return Agent(model, tools=[...], memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    app = create_app(make_agent, store="sqlite:///chats.db", tokens={"alice": ["a-long-random-token"]})

The app's lifespan opens the store (running migrations), takes the server's lock on its database (one
server alone, or replicas sharing a log: `replicas`), registers the configured tokens, starts the event
log, signals and rate limiter when they have a `start(task_group)` (the Redis ones connect there), starts
the run manager (which first recovers runs a dead process left) and, on shutdown, interrupts running
runs so that they record their end and their followers close, then closes everything.

With `toolwire.telemetry.instrument()` on, each request gets a SERVER span (`server/tracing.py`) and
each run's `invoke_agent` span is a child of the request that started it.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..exceptions import ToolwireError, UserError
from ..store import SQLStore, Store, StoreUnavailable
from ..store.blobs import Files, FolderBlobStore, SQLBlobStore
from ..web import static_file
from .account import me
from .branches import regenerate, switch_leaf
from .browser import BrowserHeaders
from .budgets import BudgetedLimiter, TokenBudgets
from .errors import ApiError, handle_api_error, handle_http_exception, handle_store_unavailable, handle_unexpected
from .eventlog import EventLog, InMemoryEventLog
from .files import download_file, upload_file
from .limits import Limits, MemoryRateLimiter, RateLimiter, ReleaseUserRequests, ResultPolicy, UserRequests
from .metrics import measured, metrics_endpoint
from .model_choice import ModelChoice, ServerModels, list_models
from .protocol_routes import agui_run, vercel_chat, vercel_history, vercel_stop, vercel_stream
from .replicas import hold_replica_lock
from .routes import (
    ServerState,
    cancel_run,
    create_chat,
    decide,
    delete_chat,
    get_chat,
    healthz,
    index,
    list_chats,
    list_messages,
    openapi,
    post_message,
    readyz,
    search_chats,
    stream,
    update_chat,
)
from .run_memory import STORE_RETRY_SECONDS
from .runner import AgentFactory
from .runs import MultitaskStrategy, RunManager
from .schemas import openapi_document
from .signals import LocalSignals, RunSignals
from .tracing import RequestSpans
from .uploads import FileLimits

__all__ = ["WEB_DIR", "ServerConfig", "create_app"]

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
"""Where the web client's files are (served at `/` and `/static/...` when present)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How the server behaves; every field has a working default.

    Attributes:
        limits: Request, chat and user limits (see `Limits`).
        lease_seconds: How long a run's lease lasts without renewal (renewed every third of it). A run
            whose process died is recovered once its lease expired, so this bounds how long its chat
            stays busy after a crash.
        heartbeat_seconds: Idle time after which a follower gets a `: ping` comment.
        shutdown_grace_seconds: On shutdown, how long running runs get to record their end.
        drain_seconds: On a stop asked for by a signal (`toolwire serve`), how long running runs may go on
            to finish by themselves, while `/readyz` says 503 and new runs are refused, before they are
            interrupted (0: interrupted at once).
        max_continuations: How many times a run whose process stopped (a crash, a kill, a restart) is continued
            by the server that takes over its lease before it ends `interrupted` instead
            (docs/guides/durable-runs.md); 0 ends such runs at once, as before.
        drain_handover: On a stop asked for by a signal, hand the running runs over instead of letting them
            finish: each stops (once its running tool calls finished, for up to `drain_seconds`) without
            ending, and another server (or this one's next start) continues it at once; not counted against
            `max_continuations`.
        store_retry_seconds: How long a run retries a write while its database is away (a restart, an
            outage, a full disk) before it fails with `store_unavailable`; within it the run goes on as if
            nothing happened. Requests never wait: they answer 503 `store_unavailable` at once.
        replica_wait_seconds: At start-up, how long to wait for the database's server lock (see
            `replicas`) before failing.
        max_runs: The most runs this process executes at once; beyond, new runs get 503 `server_busy`
            (a replica at capacity sheds load instead of slowing every stream it serves). `None`: no cap.
        max_events_per_chat: Events kept per chat in the in-memory log (older cursors get 410).
        log_retention_seconds: How long a chat's events are kept after its last run ended.
        web_dir: The web client's folder (`None` to serve none).
        cors_origins: Browser origins allowed to call the API from pages they serve (a `useChat` front end
            on its own development server, say); `"*"` allows any. None by default: same origin only.
        frame_ancestors: Who may show the server's pages in a frame, as a Content-Security-Policy source
            list (`'self'`, `https://portal.example.com`). `'none'` by default: no site may frame the
            signed-in page (and trick a click on its Approve button).
        metrics: Serve Prometheus metrics at `/metrics` (`server/metrics.py`), to scrapers that send
            `metrics_token` as a bearer token. Off by default (then `/metrics` is a 404).
        metrics_token: The token `/metrics` requires (at least 16 characters; needed with `metrics`).
        budgets: Per-user daily and monthly token budgets (`server/budgets.py`); `None`: no budgets.
        suggestions: Prompts the web page offers in an empty chat (`GET /api/me` hands them out); `toolwire
            serve` gives the demo's when it offers the demo tools. None by default.
        files: Limits on uploaded files (`FileLimits`; docs/guides/files.md).
        blob_store: Where files' bytes are kept: `"folder"`, `"sql"` (the store's database, shared by replicas),
            or `"auto"` (a folder beside a SQLite file, the database otherwise).
        blob_folder: The folder of `"folder"` (default: the SQLite file's path + `.blobs`).
        sweep_seconds: How often the blobs no file names any more (a crash's leftovers) are swept, the first
            time at start-up.
        multitask_strategy: What a message sent while its chat's run is going does when the request does not
            say (`reject`, `enqueue`, `interrupt` or `rollback`; docs/guides/double-texting.md). `reject` by
            default (409).
        models: The models a chat may choose from (`ModelChoice`: id and label), the first being the default;
            each run hands its chat's choice to the agent factory as `ChatContext.model` (docs/guides/models.md).
            None by default: no choice (`ChatContext.model` is `None`).
    """

    limits: Limits = field(default_factory=Limits)
    lease_seconds: float = 15.0
    heartbeat_seconds: float = 15.0
    shutdown_grace_seconds: float = 5.0
    drain_seconds: float = 0.0
    max_continuations: int = 2
    drain_handover: bool = False
    store_retry_seconds: float = STORE_RETRY_SECONDS
    replica_wait_seconds: float = 10.0
    max_runs: int | None = None
    max_events_per_chat: int = 10_000
    log_retention_seconds: float = 900.0
    web_dir: Path | None = WEB_DIR
    cors_origins: tuple[str, ...] = ()
    frame_ancestors: str = "'none'"
    metrics: bool = False
    metrics_token: str | None = None
    budgets: TokenBudgets | None = None
    suggestions: tuple[str, ...] = ()
    files: FileLimits = field(default_factory=FileLimits)
    blob_store: Literal["auto", "folder", "sql"] = "auto"
    blob_folder: Path | None = None
    sweep_seconds: float = 3600.0

    multitask_strategy: MultitaskStrategy = "reject"
    models: tuple[ModelChoice, ...] = ()


def _files_for(store: Store, config: ServerConfig) -> Files | None:
    """The server's `Files` in an `SQLStore` (the file rows live in its database); none in another store."""
    if not isinstance(store, SQLStore):
        return None
    database = store.url.database or ""
    on_disk = store.dialect == "sqlite" and database not in ("", ":memory:") and not database.startswith("file:")
    kind = config.blob_store if config.blob_store != "auto" else ("folder" if on_disk or config.blob_folder else "sql")
    if kind == "sql":
        return Files(store, SQLBlobStore(store))
    folder = config.blob_folder or (Path(database + ".blobs") if on_disk else None)
    if folder is None:
        raise UserError("--blob-store folder needs --blob-folder with a database that is not a SQLite file.")
    return Files(store, FolderBlobStore(folder))


class PageAssets(StaticFiles):
    """The page's own files (`toolwire.web.static_file`: by extension), never the package's Python files or
    its `package.json`; anything else is a 404."""

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if self.directory is None or static_file(path, Path(self.directory)) is None:
            return "", None
        return super().lookup_path(path)


def create_app(
    agent_factory: AgentFactory,
    *,
    store: Store | str | None = None,
    tokens: Mapping[str, Sequence[str]] | None = None,
    config: ServerConfig | None = None,
    event_log: EventLog | None = None,
    signals: RunSignals | None = None,
    rate_limiter: RateLimiter | None = None,
) -> Starlette:
    """The chat server application.

    Args:
        agent_factory: Called for every run with a `ChatContext`; returns the `Agent` (sync or async).
            Build it with `memory=ctx.memory` and `max_parallel_tools=ctx.max_parallel_tools`. If the
            factory has an `aclose()`, it is awaited at shutdown (to close a shared model's client).
        store: A `Store`, or a database URL for an `SQLStore` (default `sqlite:///toolwire.db`).
        tokens: User name → API tokens to accept (replacing the tokens configured earlier); tokens
            already in the store (added with `Store.add_token`) stay valid either way.
        config: Limits, leases, heartbeats (see `ServerConfig`).
        event_log: Where events are published and followed (default: this process's memory).
        signals: How cancellation reaches a run (default: within this process).
        rate_limiter: Per-user rate limits (default: counted in this process, from `config.limits`).
    """
    config = config or ServerConfig()
    if not config.frame_ancestors.strip() or any(c in config.frame_ancestors for c in ";,\r\n"):
        raise UserError("frame_ancestors is a list of sources separated by spaces, such as \"'self' "
                        "https://portal.example.com\", or \"'none'\"; it cannot be empty or hold ';' or ','.")
    if config.multitask_strategy not in ("reject", "enqueue", "interrupt", "rollback"):
        raise UserError(f"multitask_strategy is reject, enqueue, interrupt or rollback, not "
                        f"{config.multitask_strategy!r}.")
    limits = config.limits
    models = ServerModels(config.models)
    the_store: Store = store if store is not None and not isinstance(store, str) else SQLStore(store or "toolwire.db")
    log = event_log or InMemoryEventLog(max_events_per_chat=config.max_events_per_chat,
                                        retention_seconds=config.log_retention_seconds)
    limiter = rate_limiter or MemoryRateLimiter(limits.runs_per_minute, limits.tool_calls_per_minute,
                                                limits.writes_per_minute)
    run_signals = signals or LocalSignals()
    # Budgets are checked as the manager admits a run (budgets.py); metrics wrap what they measure (metrics.py).
    budgeted = BudgetedLimiter(limiter, config.budgets, the_store) if config.budgets is not None else limiter
    metrics, used = measured(config, store=the_store, log=log, limiter=budgeted, signals=run_signals)
    files = _files_for(the_store, config)
    manager = RunManager(
        store=used.store, log=used.log, signals=used.signals, factory=agent_factory, limits=limits,
        limiter=used.limiter, policy=ResultPolicy(max_bytes=limits.max_tool_result_bytes, secrets=limits.redact),
        lease_seconds=config.lease_seconds, drain_seconds=config.drain_seconds, max_runs=config.max_runs,
        store_retry_seconds=config.store_retry_seconds, multitask_strategy=config.multitask_strategy, models=models,
        max_continuations=config.max_continuations, drain_handover=config.drain_handover,
    )
    state = ServerState(store=used.store, manager=manager, log=used.log, limits=limits,
                        heartbeat=config.heartbeat_seconds,
                        openapi=orjson.dumps(openapi_document(max_message_chars=limits.max_message_chars)),
                        web_dir=config.web_dir, user_requests=UserRequests(limits.max_user_requests),
                        suggestions=config.suggestions, files=files, file_limits=config.files, models=models)
    manager.files = files

    # The log, signals and limiter may be one object or share a connection: each is started and closed once.
    components = list({id(c): c for c in (log, run_signals, limiter)}.values())

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await the_store.open()
        try:
            async with hold_replica_lock(the_store, shared=bool(getattr(log, "shared", False)),
                                         wait_seconds=config.replica_wait_seconds) as alone:
                manager.alone = alone
                if tokens is not None:
                    await the_store.replace_tokens(tokens)
                async with anyio.create_task_group() as tg:
                    for component in components:
                        start = getattr(component, "start", None)
                        if start is not None:
                            await start(tg)
                    await manager.start(tg)
                    if files is not None:
                        tg.start_soon(_sweep_every, files, config.sweep_seconds)
                    try:
                        yield
                    finally:
                        with anyio.CancelScope(shield=True):
                            await manager.begin_shutdown()
                            await manager.wait_idle(config.shutdown_grace_seconds)
                        for component in components:  # a run's end no longer waits for an unreachable log
                            stop_waiting = getattr(component, "stop_waiting", None)
                            if stop_waiting is not None:
                                stop_waiting()
                        tg.cancel_scope.cancel()
        except ToolwireError as exc:
            state.startup_error = exc  # `toolwire serve` prints it as one sentence
            raise
        finally:
            with anyio.CancelScope(shield=True):
                for component in components:
                    aclose = getattr(component, "aclose", None)
                    if aclose is not None:
                        await aclose()
                closer = getattr(agent_factory, "aclose", None)
                if closer is not None:
                    outcome = closer()
                    if inspect.isawaitable(outcome):
                        await outcome
                await the_store.close()

    chat = "/api/chats/{chat_id}"
    routes: list[Route | Mount] = [
        Route("/", index, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/api/me", me, methods=["GET"]),
        Route("/api/models", list_models, methods=["GET"]),
        Route("/api/chats", create_chat, methods=["POST"]),
        Route("/api/chats", list_chats, methods=["GET"]),
        Route("/api/search", search_chats, methods=["GET"]),
        Route(chat, get_chat, methods=["GET"]),
        Route(chat, update_chat, methods=["PATCH"]),
        Route(chat, delete_chat, methods=["DELETE"]),
        Route(chat + "/messages", list_messages, methods=["GET"]),
        Route(chat + "/messages", post_message, methods=["POST"]),
        Route(chat + "/messages/{message_id}/regenerate", regenerate, methods=["POST"]),
        Route(chat + "/leaf", switch_leaf, methods=["PUT"]),
        Route(chat + "/stream", stream, methods=["GET"]),
        Route(chat + "/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
        Route(chat + "/approvals", decide, methods=["POST"]),
        Route(chat + "/files", upload_file, methods=["POST"]),
        Route("/api/files/{file_id}", download_file, methods=["GET"]),
        # Other protocols' front ends (docs/guides/browser-protocols.md).
        Route("/api/chat", vercel_chat, methods=["POST"]),
        Route("/api/chat/{chat_id}/stream", vercel_stream, methods=["GET"]),
        Route("/api/chat/{chat_id}/stop", vercel_stop, methods=["POST"]),
        Route("/api/chat/{chat_id}/messages", vercel_history, methods=["GET"]),
        Route("/api/agui", agui_run, methods=["POST"]),
    ]
    if metrics is not None:
        metrics.active_runs.set_function(lambda: manager.running)
        routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))
    if config.web_dir is not None and config.web_dir.is_dir():
        routes.append(Mount("/static", PageAssets(directory=config.web_dir), name="static"))
    handlers: dict[Any, Any] = {ApiError: handle_api_error, HTTPException: handle_http_exception,
                                StoreUnavailable: handle_store_unavailable, Exception: handle_unexpected}
    # Only a server given backends of its own (Redis's), or a process that uses redis already, can meet Redis's
    # errors: importing redis takes a sixth of a second of every other server's start.
    if any(given is not None for given in (event_log, signals, rate_limiter)) or "redis" in sys.modules:
        with contextlib.suppress(ImportError):
            # Redis away answers 503 (errors.py); handled here rather than on the 500 path, which re-raises and
            # makes uvicorn drop the connection before the client reads the answer.
            from redis.exceptions import ConnectionError as RedisAway, TimeoutError as RedisSlow

            handlers.update({RedisAway: handle_unexpected, RedisSlow: handle_unexpected})
    # Outermost: a request's span covers what CORS answers too, and continues the caller's trace.
    middleware = [Middleware(RequestSpans, routes=routes), Middleware(ReleaseUserRequests),
                  Middleware(BrowserHeaders, frame_ancestors=config.frame_ancestors)]
    if config.cors_origins:
        # Bearer tokens, not cookies: no credentials mode; the headers a streaming client reads are exposed.
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                                     allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                                     allow_headers=["authorization", "content-type", "last-event-id"],
                                     expose_headers=["x-run-id", "x-chat-id", "location",
                                                     "x-vercel-ai-ui-message-stream"],
                                     max_age=600))
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers, middleware=middleware)
    app.state.toolwire = state
    app.state.metrics = metrics
    return app


async def _sweep_every(files: Files, seconds: float) -> None:
    """Delete blobs no file names (see `Files.sweep`) at start-up and then every `seconds`."""
    while True:
        try:
            await files.sweep()
        except Exception:  # an outage: the next sweep tries again
            logging.getLogger("toolwire.server").warning("sweeping unreferenced blobs failed", exc_info=True)
        await anyio.sleep(seconds)
