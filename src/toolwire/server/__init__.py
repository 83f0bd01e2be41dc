"""The chat server: runs that outlive their requests, an SSE stream that resumes at any event, approvals.

    toolwire serve                       # SQLite in ./toolwire.db, the offline fake model, the demo tools

or, in your own ASGI stack:

    from toolwire import Tool
    from toolwire.server import ChatContext, create_app

    tools = [Tool(f) for f in (get_weather, book_table)]  # built once: a function's schema costs ~5 ms to build
    app = create_app(lambda ctx: Agent(model, tools=tools, memory=ctx.memory,
                                       max_parallel_tools=ctx.max_parallel_tools),
                     store="postgresql://user:password@host/db")

Layout: `app` (the application and its lifespan), `routes` (one handler per endpoint), `runs` (the run manager:
leases, recovery, continuing runs, ordering), `runner` (one run, persisted and published in order), `run_memory`
(the chat as a run's agent sees it, writes retried while the store is away), `journal` (what a run did so far,
written behind its events), `events` (the event vocabulary), `eventlog` (cursors and the per-chat log), `sse`
(following and streaming), `encode/` (one encoder per browser protocol: native, the Vercel AI SDK's UI message
stream, AG-UI), `protocol_routes` (the Vercel and AG-UI endpoints), `approvals` (the paused state), `auth`,
`limits`, `signals`, `schemas` (request bodies and the OpenAPI document), `errors`, `replicas` (the database
lock: one server alone, or replicas), `redis/` (the event log, signals and rate limits of several replicas).
"""

from .app import WEB_DIR as WEB_DIR, ServerConfig as ServerConfig, create_app as create_app
from .eventlog import (
    Cursor as Cursor,
    CursorExpired as CursorExpired,
    EventLog as EventLog,
    InMemoryEventLog as InMemoryEventLog,
    LogEntry as LogEntry,
    Position as Position,
)
from .limits import Limits as Limits, MemoryRateLimiter as MemoryRateLimiter, RateLimiter as RateLimiter
from .model_choice import ModelChoice as ModelChoice
from .runner import AgentFactory as AgentFactory, ChatContext as ChatContext
from .signals import LocalSignals as LocalSignals, RunSignals as RunSignals

__all__ = [
    "WEB_DIR",
    "AgentFactory",
    "ChatContext",
    "Cursor",
    "CursorExpired",
    "EventLog",
    "InMemoryEventLog",
    "Limits",
    "LocalSignals",
    "LogEntry",
    "MemoryRateLimiter",
    "ModelChoice",
    "Position",
    "RateLimiter",
    "RunSignals",
    "ServerConfig",
    "create_app",
]
