"""toolwire's chat server side by side with the floor and its peers, under the same load, in one run.

    bench/side_by_side/run                      # N = 50, 200, 500, 1,000 chats, every server (estimated 35 minutes)
    bench/side_by_side/run --quick              # a smoke run: 4 and 12 chats of 2.4 s, into bench/results/quick/
    bench/side_by_side/run --sizes 200 --servers relay,ai-sdk,toolwire-sqlite

Everything runs on this machine, on loopback: the paced model (`bench.load.provider --shape agent`), the
server under test, and this process as the client (`bench.load.sse_client`). Per server and N, on a fresh
model process and fresh servers (and a fresh PostgreSQL database and Redis server where the server uses
them), N chats are started at `--ramp-rate` per second. Each chat is one user message whose answer takes two
model requests: text, two tool calls streamed in parallel (their argument fragments interleaved), the tools
run by the server, their results sent back, and a final text answer. Every text chunk and argument fragment
is a delta stamped by the model with the moment it was written; the client reads the stamp back from the
server's event for that delta (`text_delta`/`tool_call_delta` on toolwire's native route, `text-delta`/
`tool-input-delta` on the Vercel AI SDK's UI message stream), so its latency is what the whole server adds.

The servers (`--servers`): the floor (`relay.py`), toolwire on SQLite and on PostgreSQL on its native route
and on its Vercel route, pydantic-ai's `VercelAIAdapter` (`pydantic_ai_server.py`), the Vercel AI SDK on
node:http (`node/server.mjs`), and toolwire on PostgreSQL + Redis with one replica and with two (chat *i* on
replica *i mod 2*). Reported per server and N (`report.py`): errors, stuck chats (not finished by the end:
the ramp, one chat's length and `--grace`), deltas lost, p50/p99 added latency, the server processes' CPU
(from /proc/<pid>/stat, from before the first chat is created to the end) per delta and per chat, their
RSS, and the ratios to the floor and to each peer.

On a machine with few cores, `--server-cpu 0.4` caps each server process at 0.4 of a core (`cpu_cap.py`) and
`--per-replica` gives the two-replica server twice the chats: together they show whether two replicas carry twice
what one carries, which an uncapped run on 2 cores cannot (the replicas share the cores with everything else).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
import uuid
from array import array
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from bench.load.__main__ import (
    REPO,
    RESULTS,
    TOKEN,
    Server,
    cpu_seconds,
    machine_busy_seconds,
    make_chats,
    rss_bytes,
    services,
    start,
    start_servers,
    stop,
)
from bench.load.provider import deltas_per_chat, shape_marker
from bench.load.sse_client import SSEStream, open_stream
from bench.side_by_side.cpu_cap import CpuCapUnavailable, cpu_capped, cpu_throttled_seconds
from bench.side_by_side.tools import TOOLS_MODULE

HERE = Path(__file__).resolve().parent
PEER_PYTHON = HERE / ".venv" / "bin" / "python"
NODE_SERVER = HERE / "node" / "server.mjs"
_LISTENING = rb"Listening on (http://\S+)"
_STAMP = re.compile(rb"(\d{10}\.\d{6}) ")
_DELTA = {"native": re.compile(rb'"type":"(?:text_delta|tool_call_delta)"'),
          "vercel": re.compile(rb'"type":"(?:text-delta|tool-input-delta)"')}
_FINISHED = {"native": re.compile(rb'"type":"run_finished"'), "vercel": re.compile(rb'"type":"finish"[,}]')}
_VERCEL_FAILED = re.compile(rb'"type":"(?:error|abort)"')
PROMPT = "Count the words and the characters of two texts, then say what you found."


@dataclass(frozen=True)
class Kind:
    """One server of the comparison: what runs and which route the client posts to."""

    name: str
    label: str
    program: str  # relay | pydantic-ai | ai-sdk | toolwire
    route: str = "vercel"  # native | vercel
    store: str | None = None  # sqlite | postgresql (toolwire)
    replicas: int = 1
    redis: bool = False
    src: str | None = None
    """The source tree toolwire runs from (`--before`); this repository's `src` when None."""


KINDS = {kind.name: kind for kind in [
    Kind("relay", "minimal Starlette relay (the floor)", "relay"),
    Kind("pydantic-ai", "pydantic-ai VercelAIAdapter", "pydantic-ai"),
    Kind("ai-sdk", "Vercel AI SDK (Node)", "ai-sdk"),
    Kind("toolwire-sqlite", "toolwire, SQLite, native route", "toolwire", "native", "sqlite"),
    Kind("toolwire-sqlite-vercel", "toolwire, SQLite, Vercel route", "toolwire", "vercel", "sqlite"),
    Kind("toolwire-pg", "toolwire, PostgreSQL, native route", "toolwire", "native", "postgresql"),
    Kind("toolwire-pg-vercel", "toolwire, PostgreSQL, Vercel route", "toolwire", "vercel", "postgresql"),
    Kind("toolwire-redis-1", "toolwire, PostgreSQL + Redis, one replica", "toolwire", "native", "postgresql", 1, True),
    Kind("toolwire-redis-2", "toolwire, PostgreSQL + Redis, two replicas", "toolwire", "native", "postgresql", 2,
         True),
]}


class Unavailable(RuntimeError):
    """A server cannot run here (its packages are not installed); the message says how to install them."""


@dataclass
class Outcome:
    """One pass of chats of one shape on one server: what the client saw and what the server spent."""

    kind: str
    chats: int
    events: int
    argument_deltas: int
    interval: float
    errors: list[str] = field(default_factory=list)
    stuck: int = 0
    finished: int = 0
    lost: int = 0
    deltas: int = 0
    latencies: array[float] = field(default_factory=lambda: array("d"))
    chat_seconds: array[float] = field(default_factory=lambda: array("d"))
    """Each finished chat's time from its POST to its end (the nominal length is its deltas times the interval):
    a server that holds chats back before they stream shows it here, not in the latency of their deltas."""
    duration: float = 0.0
    server_cpu: list[float] = field(default_factory=list)
    """CPU seconds of each server process over the run."""
    rss_before: list[int] = field(default_factory=list)
    rss_peak: list[int] = field(default_factory=list)
    client_cpu: float = 0.0
    provider_cpu: float = 0.0
    machine_busy: float = 0.0
    throttled: float | None = None
    """Seconds the kernel held the server processes back for using their `--server-cpu` quota."""
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    skipped: str | None = None
    short: Outcome | None = None
    """The pass of short chats on the same servers (as long in time, 4 deltas each), for the cost per delta."""

    @property
    def deltas_per_chat(self) -> int:
        return deltas_per_chat(self.events, self.argument_deltas)

    def cpu_ms_per_chat(self) -> float | None:
        return sum(self.server_cpu) * 1000 / self.chats if self.chats and self.server_cpu else None

    def cpu_split(self) -> tuple[float, float] | None:
        """(ms per delta, fixed ms per chat): the line through this pass's CPU per chat and the short pass's."""
        long, short = self.cpu_ms_per_chat(), self.short and self.short.cpu_ms_per_chat()
        if long is None or short is None or self.short is None or \
                self.deltas_per_chat == self.short.deltas_per_chat:
            return None
        per_delta = (long - short) / (self.deltas_per_chat - self.short.deltas_per_chat)
        return per_delta, short - per_delta * self.short.deltas_per_chat

    def percentile_ms(self, q: float) -> float | None:
        ordered = sorted(self.latencies)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1) if ordered else None

    def chat_seconds_at(self, q: float) -> float | None:
        ordered = sorted(self.chat_seconds)
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2) if ordered else None

    def summary(self) -> dict[str, Any]:
        cpu = sum(self.server_cpu)
        per_chat, split, short = self.cpu_ms_per_chat(), self.cpu_split(), self.short
        return {
            "kind": self.kind, "label": KINDS[self.kind].label if self.kind in KINDS else self.kind,
            "chats": self.chats,
            "deltas_per_chat": self.deltas_per_chat if not self.skipped else 0, "interval": self.interval,
            "skipped": self.skipped,
            "errors": len(self.errors), "error_kinds": dict(Counter(re.sub(r"bench-\S+|\d+", "#", e)
                                                                   for e in self.errors)),
            "stuck": self.stuck, "finished": self.finished, "lost": self.lost, "deltas_received": self.deltas,
            "latency_ms": {"p50": self.percentile_ms(0.5), "p99": self.percentile_ms(0.99),
                           "max": self.percentile_ms(1.0)},
            "chat_seconds": {"p50": self.chat_seconds_at(0.5), "p99": self.chat_seconds_at(0.99),
                             "nominal": round(self.deltas_per_chat * self.interval, 2)},
            "duration_s": round(self.duration, 1),
            "server_cpu_s": round(cpu, 3), "server_cpu_cores": round(cpu / self.duration, 2) if self.duration else None,
            "cpu_ms_per_chat": None if per_chat is None else round(per_chat, 2),
            "cpu_ms_per_delta": None if split is None else round(split[0], 4),
            "fixed_cpu_ms_per_chat": None if split is None else round(split[1], 2),
            "short_pass": None if short is None else {
                "deltas_per_chat": short.deltas_per_chat, "interval": short.interval, "stuck": short.stuck,
                "errors": len(short.errors), "cpu_ms_per_chat": round(short.cpu_ms_per_chat() or 0.0, 2)},
            "rss_peak_mb": round(sum(self.rss_peak) / 2**20, 1),
            "rss_growth_mb": round((sum(self.rss_peak) - sum(self.rss_before)) / 2**20, 1),
            "client_cpu_cores": round(self.client_cpu, 2), "provider_cpu_cores": round(self.provider_cpu, 2),
            "machine_busy_cores": round(self.machine_busy, 2), "load_average_before": self.load_average,
            "throttled_s": None if self.throttled is None else round(self.throttled, 2),
        }


class ChatSeen:
    """What the client saw of one chat: its stamped deltas (each one's added latency), its end, its errors."""

    __slots__ = ("delta", "deltas", "finished", "finished_event", "outcome", "route")

    def __init__(self, outcome: Outcome, route: str) -> None:
        self.outcome = outcome
        self.route = route
        self.delta = _DELTA[route]
        self.finished_event = _FINISHED[route]
        self.deltas = 0
        self.finished = False

    def on_event(self, _event_id: bytes, data: bytes, received_at: float) -> None:
        if self.delta.search(data):
            found = _STAMP.search(data)
            if found:
                self.deltas += 1
                self.outcome.deltas += 1
                self.outcome.latencies.append(received_at - float(found.group(1)))
        elif self.finished_event.search(data):
            self.finished = True
            if self.route == "native" and b'"status":"completed"' not in data:
                self.outcome.errors.append(f"The run did not complete: {data[:300]!r}")
        elif self.route == "vercel" and _VERCEL_FAILED.search(data):
            self.outcome.errors.append(f"The stream reported a failure: {data[:300]!r}")


def request_for(kind: Kind, chat_id: str | None, number: int, text: str) -> tuple[str, bytes]:
    """The path and body of chat `number`'s message: toolwire's native request (to the chat `chat_id`, or without one
    the chat and its first message in one request), or what `useChat` posts."""
    if kind.route == "native":
        message = {"client_message_id": f"m-{number}", "text": text}
        if chat_id is None:
            return "/api/chats", json.dumps({"message": message}).encode()
        return f"/api/chats/{chat_id}/messages", json.dumps(message).encode()
    message = {"id": f"m-{number}", "role": "user", "parts": [{"type": "text", "text": text}]}
    return "/api/chat", json.dumps({"id": chat_id, "trigger": "submit-message", "messages": [message]}).encode()


async def takes_first_message(server: Server) -> bool:
    """Whether the server's `POST /api/chats` takes the chat's first message (its OpenAPI document says so)."""
    async with httpx.AsyncClient(base_url=server.url, trust_env=False, timeout=30) as client:
        document = (await client.get("/openapi.json")).json()
    return "message" in document["components"]["schemas"]["ChatCreate"]["properties"]


async def exercise(kind: Kind, servers: list[Server], args: argparse.Namespace, outcome: Outcome) -> None:
    """Start `outcome.chats` chats at the ramp rate and read each to its end or to the deadline."""
    chats, per_chat = outcome.chats, outcome.deltas_per_chat
    # Creating a chat is part of a chat's cost. Every server makes the chat with its first message; a toolwire
    # from before `POST /api/chats` took a `message` (a `--before` tree) needs the chat made first.
    ids: list[str | None]
    if kind.route == "native":
        ids = [None] * chats if await takes_first_message(servers[0]) else list(await make_chats(servers[0], chats))
    else:
        ids = [f"bench-{number}-{uuid.uuid4().hex[:12]}" for number in range(chats)]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    text = f"{PROMPT} {shape_marker(outcome.events, outcome.argument_deltas, outcome.interval)}"
    streams: list[SSEStream] = []

    async def one(number: int) -> None:
        server = servers[number % len(servers)]
        seen = ChatSeen(outcome, kind.route)
        path, body = request_for(kind, ids[number], number, text)
        posted = time.monotonic()
        try:
            stream = await open_stream(*server.host_port, "POST", path, headers=headers, body=body,
                                       on_event=seen.on_event)
            streams.append(stream)
            if stream.status != 200:
                outcome.errors.append(f"POST {path} answered {stream.status}")
                stream.close()
                return
            await stream.closed
        except OSError as exc:
            outcome.errors.append(f"{exc!r}")
            return
        if not seen.finished:
            outcome.errors.append("The stream closed before the chat finished.")
            return
        outcome.finished += 1
        outcome.chat_seconds.append(time.monotonic() - posted)
        outcome.lost += max(0, per_chat - seen.deltas)

    ramp = chats / args.ramp_rate
    tasks = []
    for number in range(chats):
        tasks.append(asyncio.create_task(one(number)))
        await asyncio.sleep(ramp / chats)
    _, pending = await asyncio.wait(tasks, timeout=per_chat * outcome.interval + args.grace)
    outcome.stuck = len(pending)
    for task in pending:
        task.cancel()
    for stream in streams:
        stream.close()
    await asyncio.gather(*pending, return_exceptions=True)


async def measure(kind: Kind, servers: list[Server], provider_pid: int, args: argparse.Namespace,
                  outcome: Outcome) -> Outcome:
    """Run the outcome's chats, with the server processes' CPU and RSS, the model's and this client's CPU around."""
    outcome.load_average = os.getloadavg()
    pids = [server.process.pid for server in servers]
    outcome.rss_before = [rss_bytes(pid) for pid in pids]
    outcome.rss_peak = list(outcome.rss_before)
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            for number, pid in enumerate(pids):
                outcome.rss_peak[number] = max(outcome.rss_peak[number], rss_bytes(pid))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    cpu_before = [cpu_seconds(pid) for pid in pids]
    throttled_before = [cpu_throttled_seconds(pid) for pid in pids] if args.server_cpu else []
    provider_before = cpu_seconds(provider_pid)
    machine_before = machine_busy_seconds()
    client_before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.monotonic()
    await exercise(kind, servers, args, outcome)
    outcome.duration = time.monotonic() - began
    outcome.server_cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
    if args.server_cpu:
        outcome.throttled = sum((cpu_throttled_seconds(pid) or 0.0) - (before or 0.0)
                                for pid, before in zip(pids, throttled_before, strict=True))
    outcome.provider_cpu = (cpu_seconds(provider_pid) - provider_before) / outcome.duration
    outcome.machine_busy = (machine_busy_seconds() - machine_before) / outcome.duration
    client_after = resource.getrusage(resource.RUSAGE_SELF)
    outcome.client_cpu = (client_after.ru_utime + client_after.ru_stime - client_before.ru_utime -
                          client_before.ru_stime) / outcome.duration
    done.set()
    await sampler
    return outcome


async def drive(kind: Kind, servers: list[Server], provider_pid: int, args: argparse.Namespace,
                chats: int) -> Outcome:
    """`--warmup` chats first (lazy imports, caches, a JIT's first compilations are not what a chat costs), then
    the measured chats, then (unless `--no-split`) as many short chats on the same servers: as long in time
    (so as many at once), with 4 deltas each; the two passes' CPU per chat give the cost of a delta and of a chat.
    """
    shape = {"events": args.events, "argument_deltas": args.argument_deltas, "interval": args.interval}
    if args.warmup:
        warmup = await measure(kind, servers, provider_pid, args, Outcome(kind.name, args.warmup, **shape))
        if warmup.errors or warmup.stuck:
            print(f"   warm-up: {warmup.stuck} stuck, errors: {warmup.errors[:3]}", flush=True)
    outcome = await measure(kind, servers, provider_pid, args, Outcome(kind.name, chats, **shape))
    if args.split:
        short_interval = args.interval * outcome.deltas_per_chat / deltas_per_chat(1, 1)
        outcome.short = await measure(kind, servers, provider_pid, args,
                                      Outcome(kind.name, chats, events=1, argument_deltas=1, interval=short_interval))
    return outcome


@contextmanager
def running(kind: Kind, folder: Path, provider_port: int, server_cpu: float | None) -> Iterator[list[Server]]:
    """The kind's server processes, listening (each capped at `server_cpu` of a core when given); stopped at the
    end."""
    provider_url = f"http://127.0.0.1:{provider_port}/v1"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    servers: list[Server] = []
    with ExitStack() as stack:
        if kind.program == "toolwire":
            if kind.store == "sqlite":
                database, redis_url = str(folder / "bench.db"), None
            else:
                database, _, redis_url = stack.enter_context(services(kind.redis))
            servers = start_servers(kind.replicas, folder, database, provider_port, redis_url,
                                    extra=["--tools", TOOLS_MODULE, "--max-steps", "5"],
                                    src=Path(kind.src) if kind.src else None)
        else:
            if kind.program == "relay":
                command = [sys.executable, "-m", "bench.side_by_side.relay"]
            elif kind.program == "pydantic-ai":
                if not PEER_PYTHON.exists():
                    raise Unavailable(f"{PEER_PYTHON} is missing: bench/side_by_side/run makes it.")
                command = [str(PEER_PYTHON), "-m", "bench.side_by_side.pydantic_ai_server"]
            else:
                if shutil.which("node") is None or not (NODE_SERVER.parent / "node_modules").is_dir():
                    raise Unavailable("node or bench/side_by_side/node/node_modules is missing: bench/side_by_side/"
                                      "run installs the locked packages with `npm ci`.")
                command = ["node", str(NODE_SERVER)]
            process, found = start([*command, "--provider", provider_url, "--port", "0"],
                                   folder / "server-0.log", _LISTENING, env)
            servers = [Server(url=found.group(1).decode(), process=process)]
        try:
            if server_cpu:
                stack.enter_context(cpu_capped([server.process.pid for server in servers], server_cpu))
            yield servers
        finally:
            for server in servers:
                stop(server.process)


def run_one(kind: Kind, chats: int, args: argparse.Namespace) -> Outcome:
    """One server at one N, on a model process and servers started for it alone."""
    with tempfile.TemporaryDirectory(prefix="toolwire-side-") as temp:
        folder = Path(temp)
        provider, found = start([sys.executable, "-m", "bench.load.provider", "--shape", "agent",
                                 "--events", str(args.events), "--argument-deltas", str(args.argument_deltas),
                                 "--interval", str(args.interval)], folder / "provider.log",
                                rb"Listening on port (\d+)", {**os.environ, "PYTHONPATH": str(REPO)})
        try:
            with running(kind, folder, int(found.group(1)), args.server_cpu) as servers:
                print(f"== {kind.name}: {chats} chats on {len(servers)} process(es); load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
                outcome = asyncio.run(drive(kind, servers, provider.pid, args, chats))
            for log in sorted(folder.glob("server-*.log")):
                text = log.read_text(errors="replace")
                if "Traceback" in text or "Error:" in text:
                    outcome.errors.append(f"{log.name} logged an error")
                    print(text[-2000:], flush=True)
        except (Unavailable, CpuCapUnavailable) as exc:
            print(f"== {kind.name}: skipped: {exc}", flush=True)
            outcome = Outcome(kind.name, chats, args.events, args.argument_deltas, args.interval, skipped=str(exc))
        finally:
            stop(provider)
    summary = outcome.summary()
    print(f"   {summary['finished']} finished, {summary['stuck']} stuck, {summary['errors']} errors, "
          f"{summary['lost']} lost; latency ms {summary['latency_ms']}; chat s {summary['chat_seconds']}; CPU ms per chat {summary['cpu_ms_per_chat']} "
          f"(per delta {summary['cpu_ms_per_delta']}, fixed {summary['fixed_cpu_ms_per_chat']}); short pass "
          f"{summary['short_pass']}; RSS peak {summary['rss_peak_mb']} MB", flush=True)
    return outcome


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda text: [int(n) for n in text.split(",")], default=None,
                        help="concurrent chats, each in turn (default: 50,200,500,1000; --quick: 4,12)")
    parser.add_argument("--servers", default=",".join(KINDS), help=f"which servers (default: all: {','.join(KINDS)})")
    parser.add_argument("--events", type=int, default=None, help="text deltas per answer (default: 10; --quick: 3)")
    parser.add_argument("--argument-deltas", type=int, default=None,
                        help="argument deltas per tool call (default: 10; --quick: 3)")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between a chat's deltas (5 per second)")
    parser.add_argument("--ramp-rate", type=float, default=100.0, help="chats started per second")
    parser.add_argument("--grace", type=float, default=None,
                        help="seconds a chat may take beyond its own length and the ramp before it counts as stuck "
                             "(default: 30; --quick: 10)")
    parser.add_argument("--warmup", type=int, default=2, help="chats run on each server before the measured ones")
    parser.add_argument("--no-split", dest="split", action="store_false",
                        help="no pass of short chats (then no CPU per delta, only per chat)")
    parser.add_argument("--before", type=Path, default=None,
                        help="another toolwire source tree (a checkout's src/ folder, say of main): each toolwire "
                             "server also runs from it, right after this tree's, labelled '(before)'")
    parser.add_argument("--server-cpu", type=float, default=None, metavar="CORES",
                        help="cap each server process at this fraction of a core (a cgroup each; needs root)")
    parser.add_argument("--per-replica", action="store_true",
                        help="N is chats per replica: a server of two replicas gets 2 N")
    parser.add_argument("--repeat", type=int, default=1, metavar="K",
                        help="run every server K times at each N, in rounds (each round every server once, in turn); "
                             "the report adds each server's median over the rounds of its ratios to that round's "
                             "floor and AI SDK (default 1)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small N, short chats")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: bench/results, "
                                                                "--quick: bench/results/quick)")
    args = parser.parse_args()
    quick = args.quick
    args.sizes = args.sizes or ([4, 12] if quick else [50, 200, 500, 1000])
    args.events = args.events if args.events is not None else (3 if quick else 10)
    args.argument_deltas = args.argument_deltas if args.argument_deltas is not None else (3 if quick else 10)
    args.grace = args.grace if args.grace is not None else (10.0 if quick else 30.0)
    args.out = args.out or (RESULTS / "quick" if quick else RESULTS)
    unknown = set(args.servers.split(",")) - set(KINDS)
    if unknown:
        parser.error(f"unknown servers {sorted(unknown)}; choose among {', '.join(KINDS)}")
    args.kinds = []
    for name in args.servers.split(","):
        kind = KINDS[name]
        args.kinds.append(kind)
        if args.before is not None and kind.program == "toolwire":
            if not (args.before / "toolwire" / "__init__.py").is_file():
                parser.error(f"--before {args.before} holds no toolwire package: name a checkout's src folder")
            before = replace(kind, name=f"{name}-before", label=f"{kind.label} (before)",
                             src=str(args.before.resolve()))
            KINDS[before.name] = before
            args.kinds.append(before)
    return args


def main() -> None:
    args = parse_args()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit[1], limit[1]))
    results = []
    for chats in args.sizes:
        # Rounds, not K passes of one server then K of the next: whatever else slows the machine for a while
        # (its neighbours, a cron job) then falls on every server of a round alike, and a ratio within a round
        # cancels it out.
        for round_ in range(1, args.repeat + 1):
            for kind in args.kinds:
                summary = run_one(kind, chats * (kind.replicas if args.per_replica else 1), args).summary()
                if args.repeat > 1:
                    summary["round"] = round_
                results.append(summary)
    from bench.side_by_side.report import write

    command = " ".join(["bench/side_by_side/run", *sys.argv[1:]])
    print(f"Results: {write(results, args, command)}")


if __name__ == "__main__":
    main()
