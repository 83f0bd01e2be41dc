"""`toolwire serve`: the chat server, with nothing to configure.

    toolwire serve                                   # ./toolwire.db, offline fake model, demo tools
    toolwire serve --model anthropic:claude-haiku-4-5 --tools mytools:TOOLS --db postgresql://...
    toolwire serve --model openai:gpt-4.1-mini --model fake         # two models: the page offers a picker
    toolwire serve --models-file models.toml                        # models with labels and settings
    toolwire serve --mcp "uvx mcp-server-time" --mcp-url http://localhost:9000/mcp

Without `--model` it offers the default model of each provider whose key is set in the environment, then
the offline fake model (`FakeProviderServer` on a loopback port, real HTTP, answering with
`_offline.DemoResponder`: the demo tools a message asks for, e.g. the weather of each city it names), with
the demo tools; `--model` (repeatable) or `--models-file` name the models instead (`_models.py`), and each
chat chooses among them (docs/guides/models.md). Without `--token` or
`--tokens-file` it makes a token for the user `local` and prints the URL to open, which carries it; on a
SQLite file the token is kept beside it (`toolwire.db.token`, mode 0600) and reused at the next start, so
an open page stays signed in across restarts (`_token_file`).

`--mcp` / `--mcp-url` servers are connected once, before the server listens, and shared by every run
(their tools are listed again when a server announces a change); a server that cannot be reached stops
the start with one line. The demo tools are offered only when neither `--tools` nor an MCP server is.

Several replicas share one PostgreSQL database and one Redis (`--redis redis://...`): each chat's live
event stream, cancellations and rate limits go through Redis, so any replica can follow, resume and
cancel any run. A server without `--redis` must be alone on its database, and says so at start-up
(`toolwire.server.replicas`).

uvicorn runs with httptools and `server.connections`' limits: request heads are bounded (414/431), must
arrive within `--header-timeout` (408), idle kept-alive connections close after `--timeout-keep-alive`,
and past `--limit-concurrency` open connections a request gets 503 (docs/guides/security.md: "Connection limits and the
reverse proxy"). A running event stream is never cut by these.

Ctrl-C (or SIGTERM) stops accepting runs (`/readyz` turns 503), lets running ones finish for up to
`--drain-seconds`, interrupts what is left (each records its end and its followers get `run_finished`),
then exits. A second Ctrl-C stops at once. With `--drain-handover` the running runs are handed over
instead: each stops without ending once its running tools finished, and another server continues it.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from collections.abc import Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from .._fresh_loop import run_in_new_loop
from ..exceptions import ToolwireError, UserError
from ..models import Model
from ..tools import Tool
from ..toolsets import Toolset
from ._connections import (
    add_browser_arguments,
    add_connection_arguments,
    check_connection_arguments,
    connection_limits,
)
from ._files import add_file_arguments, file_config
from ._models import ServeModel, automatic_models, command_line_models, file_models, open_models, secrets_of
from ._operations import add_operations_arguments, operations_config
from ._render import error_line
from ._token_file import kept_token, token_file_for
from ._tools import add_mcp_arguments, load_tools, mcp_toolsets

# What the `server` extra installs that the rest of the command does not: missing, `serve` names the extra.
_SERVER_MODULES = frozenset({"starlette", "sqlalchemy", "aiosqlite", "alembic", "ag_ui", "msgspec", "httptools"})


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the chat server (HTTP API, event stream, web client)",
                       description="Serve chats over HTTP: runs outlive their requests, events stream as SSE and "
                                   "resume at any event id. With no options: SQLite in ./toolwire.db and an offline "
                                   "fake model with the demo tools.")
    p.add_argument("--db", default="toolwire.db", metavar="URL",
                   help="sqlite:///path.db (or a path), or postgresql://user:password@host/db (default: toolwire.db)")
    p.add_argument("--redis", default=None, metavar="URL",
                   help="redis://host:6379/0: share live event streams, cancellations and rate limits with the other "
                        "replicas on the same database (needed for more than one server process)")
    p.add_argument("--db-pool-size", type=int, default=None, metavar="N",
                   help="PostgreSQL connections this process keeps open (default: 20, and as many more during a "
                        "burst); the replicas' sum must stay under the server's max_connections")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="the port (default: 8000; 0 picks a free one)")
    p.add_argument("--model", "-m", action="append", default=[], metavar="PROVIDER:MODEL",
                   help="a model chats may use (repeatable; the first is the default); 'fake' for the offline fake "
                        "(default: each provider whose key is set, then the offline fake)")
    p.add_argument("--models-file", default=None, metavar="FILE",
                   help="a TOML file of [[models]] tables (model, id, label, base_url, api_key_env, temperature, "
                        "max_tokens), instead of --model (docs/guides/models.md)")
    p.add_argument("--tools", action="append", default=[], metavar="MODULE:OBJECT",
                   help="tools to offer (repeatable): a @tool, a function or a list of them (default: the demo tools)")
    add_mcp_arguments(p)
    p.add_argument("--system", default=None, help="a system prompt")
    p.add_argument("--base-url", default=None,
                   help="send each --model's requests to this base URL instead of the provider's")
    p.add_argument("--api-key", default=None,
                   help="each --model's API key (default: its provider's environment variable)")
    p.add_argument("--max-steps", type=int, default=20, help="the most model requests one run may make")
    p.add_argument("--tool-timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a tool after this long (its result is then an error the model reads)")
    p.add_argument("--token", default=None, help="the API token of the user 'local' (default: a new random one)")
    p.add_argument("--tokens-file", default=None, metavar="FILE", help="a file of `USER TOKEN` lines")
    p.add_argument("--lease-seconds", type=float, default=15.0,
                   help="a run's lease; a run whose server died is recovered this long after (default: 15)")
    p.add_argument("--heartbeat-seconds", type=float, default=15.0, help="idle time before a `: ping` (default: 15)")
    p.add_argument("--max-events-per-chat", type=int, default=10_000,
                   help="events kept per chat for resuming streams (older event ids get 410)")
    p.add_argument("--event-retention", type=float, default=900.0, metavar="SECONDS",
                   help="how long a chat's events are kept for resuming after its run ended (default: 900)")
    p.add_argument("--drain-seconds", type=float, default=0.0, metavar="SECONDS",
                   help="on SIGTERM, how long running runs may go on to finish before they are interrupted")
    p.add_argument("--drain-handover", action="store_true",
                   help="on SIGTERM, hand running runs over to another server (or the next start) instead of "
                        "waiting for them; their running tools get up to --drain-seconds to finish")
    p.add_argument("--max-continuations", type=int, default=2, metavar="N",
                   help="how many times a run whose server stopped is continued elsewhere before it ends "
                        "interrupted (default: 2; 0: ended at once)")
    p.add_argument("--replica-wait", type=float, default=10.0, metavar="SECONDS",
                   help="at start-up, how long to wait for another server on the same database to go away")
    p.add_argument("--max-runs", type=int, default=None, metavar="N",
                   help="the most runs this process executes at once; more get 503 server_busy (default: no cap)")
    p.add_argument("--multitask-strategy", choices=("reject", "enqueue", "interrupt", "rollback"), default="reject",
                   help="what a message sent while its chat's run is going does, unless the request says: reject "
                        "(409), enqueue (runs when the run ends), interrupt (cancels the run, then runs) or rollback "
                        "(cancels the run and answers from before its turn, which stays on a branch of its own) "
                        "(default: reject)")
    p.add_argument("--max-tool-concurrency", type=int, default=8, help="tool calls running at once per chat")
    p.add_argument("--runs-per-minute", type=int, default=60, help="runs one user may start per minute")
    p.add_argument("--tool-calls-per-minute", type=int, default=600, help="tool calls one user may start per minute")
    p.add_argument("--writes-per-minute", type=int, default=120,
                   help="writes one user may make per minute: chats created, renamed, deleted, messages, decisions, "
                        "cancellations (default: 120)")
    p.add_argument("--max-user-requests", type=int, default=64, metavar="N",
                   help="requests of one user this process answers at once, open streams included (default: 64)")
    p.add_argument("--max-body-bytes", type=int, default=1_000_000,
                   help="largest request body, and largest last message of /api/chat and /api/agui (default: "
                        "1000000)")
    p.add_argument("--max-history-bytes", type=int, default=4_000_000,
                   help="largest body of /api/chat and /api/agui, whose clients send the whole chat each time "
                        "(default: 4000000)")
    p.add_argument("--max-message-chars", type=int, default=32_000, help="longest message text")
    p.add_argument("--max-tool-result-bytes", type=int, default=65_536, help="largest tool result kept and streamed")
    add_file_arguments(p)
    p.add_argument("--redact", action="append", default=[], metavar="SECRET",
                   help="a secret to replace by [REDACTED] in tool results (repeatable; the API key always is); "
                        "values shorter than 8 characters are not secrets and are left alone")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin allowed to call the API from its pages, e.g. http://localhost:3000 "
                        "(repeatable; '*' for any)")
    add_connection_arguments(p)
    add_browser_arguments(p)
    add_operations_arguments(p)
    p.add_argument("--fake-delay", type=float, default=0.02,
                   help="seconds between the fake model's stream frames (default: 0.02)")
    p.add_argument("--db-retry-seconds", type=float, default=20.0, metavar="SECONDS",
                   help="how long a run retries its writes while the database is away before it fails with "
                        "store_unavailable (default: 20)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"],
                   help="the least severe events logged to stderr (default: warning: every failure, retry and "
                        "recovery)")
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="one line per event: text, or one JSON object (time, level, logger, message, run_id, "
                        "chat_id) (default: text)")
    p.set_defaults(func=run)


@dataclass
class _Factory:
    """Builds each run's agent on the model its chat chose (`ctx.model`, an id of `models`; the first is the
    default), each model built once and shared by every run (one HTTP connection pool)."""

    models: dict[str, Model]
    tools: list[Tool[..., Any]]
    system: str | None
    max_steps: int
    tool_timeout: float | None = None
    toolsets: list[Toolset] = field(default_factory=list)  # opened once by `_serve`, shared by every run
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def __call__(self, ctx: Any) -> Any:
        from ..agent import Agent

        # An id the server does not offer never reaches here (the run resolves it to the default); a factory
        # called outside the server, without one, gets the default too.
        model = self.models.get(ctx.model) if ctx.model is not None else None
        if model is None:
            model = next(iter(self.models.values()))
        return Agent(model, tools=self.tools, system=self.system, max_steps=self.max_steps, memory=ctx.memory,
                     max_parallel_tools=ctx.max_parallel_tools, tool_timeout=self.tool_timeout,
                     toolsets=self.toolsets)

    async def aclose(self) -> None:
        for model in self.models.values():
            aclose = getattr(model, "aclose", None)
            if aclose is not None:
                await aclose()
        for client in self.clients:
            await client.aclose()


def _pick_models(args: argparse.Namespace) -> list[ServeModel]:
    """The models the options name (`_models.py`), each line about them printed."""
    if args.models_file is not None:
        if args.model or args.base_url or args.api_key:
            raise UserError("Give --models-file or --model, not both; --base-url and --api-key are set per model in "
                            "the file (base_url, api_key_env).")
        models, left_out = file_models(args.models_file)
        for line in left_out:
            print(line, flush=True)
        return models
    if args.model:
        return command_line_models(args.model, api_key=args.api_key, base_url=args.base_url)
    if args.base_url:
        raise UserError("--base-url needs --model too (provider:model), to say which wire protocol to speak.")
    found, said = automatic_models()
    if said is not None:
        print(said, flush=True)
    return found


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"Cannot listen on {host}:{port} ({exc.strerror or exc}); choose another --port "
                        "(0 picks a free one).") from None
    # Accepted connections inherit it: without it a response written in two parts (headers, then body) waits
    # for the client's delayed ACK, ~40 ms per response on Linux loopback.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _pool_options(args: argparse.Namespace) -> dict[str, Any]:
    """`--db-pool-size N` as engine options (PostgreSQL only; SQLite writers queue on one lock whatever the pool):
    N connections, and N more in a burst, of which the hot reads' own pool takes half (`store/_reads.py`) and the
    main pool's burst overflow the rest."""
    if args.db_pool_size is None:
        return {}
    from ..store._engine import normalize_url

    if normalize_url(args.db).get_backend_name() != "postgresql":
        raise UserError("--db-pool-size sizes the PostgreSQL connection pool; drop it with a SQLite database.")
    from ..store._reads import read_pool_size

    size = args.db_pool_size
    return {"pool_size": size, "max_overflow": max(0, size - read_pool_size({"pool_size": size}))}


def _check_options(args: argparse.Namespace) -> None:
    """The options' mistakes that need nothing of the server, told before its modules are imported (which
    takes a second and more): a mistyped option is answered at once."""
    if args.token and args.tokens_file:
        raise UserError("Give --token or --tokens-file, not both.")
    if args.token and len(args.token) < 16:
        raise UserError("--token must be at least 16 characters long; use a long random string.")
    if args.db_pool_size is not None and args.db_pool_size < 1:
        raise UserError("--db-pool-size must be at least 1.")
    check_connection_arguments(args)


async def _serve(args: argparse.Namespace) -> None:
    from .._tokens import generate_token, read_tokens_file

    _check_options(args)
    models = _pick_models(args)  # the models' mistakes too, before the server's imports
    kept: Path | None = None
    if args.tokens_file:
        tokens = read_tokens_file(args.tokens_file)
    elif args.token:
        tokens = {"local": [args.token]}
    else:
        kept = token_file_for(args.db)  # read or written once every option is known to be good
        tokens = {"local": [generate_token()]}

    import uvicorn

    from ..server import Limits, ServerConfig, create_app
    from ..server.connections import uvicorn_options
    from ..store import SQLStore
    from ..store._engine import redacted_url

    toolsets = mcp_toolsets(args)
    demo = not args.tools and not toolsets
    if demo:
        from ..demo_tools import DEMO_SYSTEM, SERVE_TOOLS, SUGGESTIONS
    tools = list(SERVE_TOOLS) if demo else load_tools(args.tools)
    system = args.system if args.system is not None else (DEMO_SYSTEM if demo else None)
    store = SQLStore(args.db, engine_options=_pool_options(args))
    secrets = [*args.redact, *secrets_of(models)]
    limits = Limits(max_body_bytes=args.max_body_bytes, max_message_chars=args.max_message_chars,
                    max_tool_concurrency=args.max_tool_concurrency, runs_per_minute=args.runs_per_minute,
                    tool_calls_per_minute=args.tool_calls_per_minute, writes_per_minute=args.writes_per_minute,
                    max_user_requests=args.max_user_requests, max_history_bytes=args.max_history_bytes,
                    max_tool_result_bytes=args.max_tool_result_bytes, redact=tuple(secrets))
    if args.max_continuations < 0:
        raise UserError("--max-continuations must be 0 or more (0 ends a run whose server stopped at once).")
    config = ServerConfig(limits=limits, lease_seconds=args.lease_seconds, heartbeat_seconds=args.heartbeat_seconds,
                          max_events_per_chat=args.max_events_per_chat, log_retention_seconds=args.event_retention,
                          drain_seconds=args.drain_seconds, replica_wait_seconds=args.replica_wait,
                          max_runs=args.max_runs, cors_origins=tuple(args.cors_origin),
                          multitask_strategy=args.multitask_strategy, max_continuations=args.max_continuations,
                          drain_handover=args.drain_handover,
                          store_retry_seconds=args.db_retry_seconds, frame_ancestors=args.frame_ancestors,
                          suggestions=SUGGESTIONS if demo else (), models=tuple(m.choice for m in models),
                          **operations_config(args), **file_config(args))
    shared: dict[str, Any] = {}
    if args.redis:
        from ..server.redis import RedisBackends

        shared = RedisBackends(args.redis, max_events_per_chat=args.max_events_per_chat,
                               retention_seconds=args.event_retention, runs_per_minute=args.runs_per_minute,
                               tool_calls_per_minute=args.tool_calls_per_minute,
                               writes_per_minute=args.writes_per_minute).app_options()
    sock = _listen(args.host, args.port)
    clients: list[httpx.AsyncClient] = []
    async with AsyncExitStack() as opened, open_models(models, fake_delay=args.fake_delay,
                                                        clients=clients) as (built, described):
        # MCP connections belong to this task (a stdio server is a child process it must stop itself).
        for toolset in toolsets:
            await opened.enter_async_context(toolset)
        if kept is not None:
            tokens = {"local": [kept_token(kept, generate_token)]}
        factory = _Factory(models=built, tools=tools, system=system, max_steps=args.max_steps,
                           tool_timeout=args.tool_timeout, toolsets=toolsets, clients=clients)
        app = create_app(factory, store=store, tokens=tokens, config=config, **shared)
        state = app.state.toolwire
        uv_config = uvicorn.Config(app, lifespan="on", log_level=args.log_level,
                                   access_log=args.log_level in ("debug", "info"), ws="none",
                                   timeout_graceful_shutdown=int(config.shutdown_grace_seconds) + 2,
                                   **uvicorn_options(connection_limits(args)))
        server = _uvicorn_server(uv_config, state.manager.drain)
        _quiet_startup_failure(state)
        port = sock.getsockname()[1]
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host
        base = f"http://{'[' + shown + ']' if ':' in shown else shown}:{port}"

        async def announce() -> None:
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.02)
            _tune_garbage_collector()
            offered = [t.name for t in tools] + [t.name for ts in toolsets for t in getattr(ts, "tools", [])]
            tool_names = ", ".join(offered) or "none"
            print(f"toolwire serve · {redacted_url(store.url)} · {described} · tools: {tool_names}", flush=True)
            print(f"Listening on {base}", flush=True)
            if args.tokens_file:
                print(f"Tokens: {len(tokens)} user(s) from {args.tokens_file}. Open {base}/#token=<your token>",
                      flush=True)
            else:
                if kept is not None:
                    print(f"Token of the user 'local': kept in {kept} (reused at every start; delete the file for "
                          "a new one)", flush=True)
                print(f"Open {base}/#token={tokens['local'][0]}", flush=True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            try:
                await server.serve(sockets=[sock])
            except SystemExit:  # uvicorn's exit when the app's start-up failed
                if state.startup_error is None:
                    raise
            tg.cancel_scope.cancel()
        if state.startup_error is not None:
            raise state.startup_error


def _tune_garbage_collector() -> None:
    """Two settings of CPython's cyclic garbage collector for a long-running server, once start-up is over:

    - `gc.freeze()`: what start-up made (modules, the app, the schema: ~100,000 objects that live as long as the
      process) is left out of every later collection; a full collection walked all of them.
    - a first threshold of 10,000 instead of 700: a chat allocates thousands of short-lived containers (events,
      dicts, futures), and at 700 the collector ran a young collection every few events. Most of what it then
      scanned was still in use, so each run cost ~2 ms for nothing.

    Measured with `bench/side_by_side` (200 concurrent chats on SQLite, the collector's own time from
    `gc.callbacks`): 1.49 s of 12.6 s of server CPU (12 %) before, 0.21 s (2 %) after. RSS peak is the same
    (128 vs 127 MB). Garbage in reference cycles waits longer to be freed: a full collection comes about fourteen
    times less often (every ~1,400 chats of that benchmark instead of every ~100)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def _quiet_startup_failure(state: Any) -> None:
    """When start-up fails with a toolwire error (Redis unreachable, another server on the database), the
    command prints its sentence; uvicorn's own report of it (a traceback) is left out."""
    import logging

    def keep(record: logging.LogRecord) -> bool:
        return state.startup_error is None

    logging.getLogger("uvicorn.error").addFilter(keep)


def _uvicorn_server(config: Any, drain: Callable[[], Coroutine[Any, Any, None]]) -> Any:
    """uvicorn's server, telling the run manager to wind down the moment a stop is asked for: it refuses new
    runs and, after the drain, interrupts the running ones, so that streams end (with `run_finished`)
    instead of holding the shutdown until its timeout. uvicorn itself stops (closing its listening socket)
    once the drain is over; a second signal stops it at once."""
    import uvicorn

    tasks: set[asyncio.Task[None]] = set()

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if tasks or self.should_exit:
                super().handle_exit(sig, frame)
                return

            async def wind_down() -> None:
                try:
                    await drain()
                finally:
                    super(Server, self).handle_exit(sig, frame)

            task = asyncio.get_running_loop().create_task(wind_down())
            tasks.add(task)

    return Server(config)


def run(args: argparse.Namespace) -> int:
    from ._logs import configure_logging

    configure_logging(args.log_level, args.log_format)
    try:
        run_in_new_loop(_serve, args)
    except (ToolwireError, OSError) as exc:
        sys.stdout.flush()
        sys.stderr.write(error_line(exc) + "\n")
        return 1
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in _SERVER_MODULES:
            raise
        from .._install import install_hint

        sys.stderr.write(f"toolwire: toolwire serve needs the server extra ({exc.name} is not installed): "
                         f"{install_hint('server')}.\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
