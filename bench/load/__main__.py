"""The chat server under load: a thousand concurrent streams on one process, then on two replicas with Redis.

    bench/load/run                                  # both scenarios, 1,000 streams of 60 s each
    bench/load/run --streams 100,300,1000 --seconds 30   # each scenario at each count (the README table)
    bench/load/run --streams 100 --seconds 10 --scenarios one --no-write   # a smoke run
    bench/load/run --scenarios rolling --streams 100   # rolling restarts under runs (rolling.py says what it does)

Everything runs on this machine, on loopback: a PostgreSQL server and a Redis server started here (as the
tests start them), the model (`provider.py`: a text chunk every `--interval` seconds, stamped with the
moment it was written), `toolwire serve` processes, and this process as the client (`sse_client.py`).

- **one**: one server; each stream is `POST /api/chats/{id}/messages`, read to its `run_finished`.
- **replicas**: two servers sharing PostgreSQL and Redis; stream *i* is posted to replica *i mod 2*
  (where its run executes; that response is closed at once, the run goes on) and followed on the
  other replica with `GET /api/chats/{id}/stream`, so every event reaches its client through Redis.

Streams are started at `--ramp-rate` per second. Per scenario and count: errors; lost or duplicated
events (event ids must run 1, 2, 3... to `run_finished`, with every text chunk the model sent); added
latency of each text chunk (written by the model → read by the client: the whole server path, including
the model connection; a follower that connects after the run began gets the earlier chunks from the log,
counted apart as caught up); server CPU (cores, averaged over the run); each server's RSS growth (peak
minus before the streams); Redis connections per server process and Redis CPU; the server CPU per event
received (which the machine's other work does not change much) and the cores the whole machine kept busy
(other work included). Results go to
`bench/results/load.md`, `load.json` and `load.png`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.load.sse_client import open_stream

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
TOKEN = "load-token-0123456789abcdef0123"
_TEXT = re.compile(rb'"type":"text_delta","text":"([0-9.]+) "')
_TICKS = os.sysconf("SC_CLK_TCK")
_ERROR_KIND = re.compile(r"^chat_\S+ |: b'.*$")
"""What makes errors of one kind differ (the chat, the event's bytes)."""


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").split(":")
        return host, int(port)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent busy (every core, every process), from /proc/stat."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:7]) - idle) / _TICKS  # steal (the 8th) is time this machine did not get


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def start(command: list[str], log: Path, pattern: bytes, env: dict[str, str] | None = None) -> tuple[
        subprocess.Popen[bytes], re.Match[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(pattern, log.read_bytes())
        if found:
            return process, found
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"{command[2:4]} did not start:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    from tests.services import stop_process

    stop_process(process, timeout=30)


@dataclass
class Outcome:
    scenario: str
    streams: int
    events_per_stream: int
    interval: float
    errors: list[str] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    events: int = 0
    latencies: array[float] = field(default_factory=lambda: array("d"))
    caught_up: int = 0
    start_times: array[float] = field(default_factory=lambda: array("d"))
    """Request sent → the server's headers, per stream (for a follower: its GET on the other replica)."""
    duration: float = 0.0
    server_cpu: list[float] = field(default_factory=list)
    rss_before: list[int] = field(default_factory=list)
    rss_peak: list[int] = field(default_factory=list)
    rss_series: list[list[tuple[float, int]]] = field(default_factory=list)
    redis_connections: dict[str, int] = field(default_factory=dict)
    redis_cpu: float | None = None
    client_cpu: float = 0.0
    provider_cpu: float = 0.0
    machine_busy: float = 0.0
    """Cores the whole machine kept busy during the run: these processes, PostgreSQL, and other work."""
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    per_second: bool = False
    debug: list[tuple[int, float, float]] = field(default_factory=list)

    def percentile(self, q: float, values: array[float] | None = None) -> float:
        ordered = sorted(self.latencies if values is None else values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "streams": self.streams, "events_per_stream": self.events_per_stream,
            "interval": self.interval, "errors": len(self.errors), "first_errors": self.errors[:5],
            "error_kinds": dict(Counter(_ERROR_KIND.sub("", e) for e in self.errors)),
            "lost": self.lost, "duplicated": self.duplicated, "events": self.events,
            "text_events_measured": len(self.latencies), "text_events_caught_up": self.caught_up,
            "latency_ms": {name: round(self.percentile(q) * 1000, 1)
                           for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))},
            "stream_start_ms": {name: round(self.percentile(q, self.start_times) * 1000, 1)
                                for name, q in (("p50", 0.5), ("p99", 0.99))},
            "duration_s": round(self.duration, 1),
            "server_cpu_cores": [round(c, 2) for c in self.server_cpu],
            "rss_before_mb": [round(r / 2**20, 1) for r in self.rss_before],
            "rss_growth_mb": [round((p - b) / 2**20, 1) for p, b in zip(self.rss_peak, self.rss_before, strict=True)],
            "redis_connections_per_process": self.redis_connections,
            "redis_cpu_cores": None if self.redis_cpu is None else round(self.redis_cpu, 2),
            "client_cpu_cores": round(self.client_cpu, 2), "provider_cpu_cores": round(self.provider_cpu, 2),
            "machine_busy_cores": round(self.machine_busy, 2),
            "server_cpu_ms_per_event": round(sum(self.server_cpu) * self.duration * 1000 / self.events, 3)
            if self.events else None,
            "load_average_before": self.load_average,
        }


class Stream:
    """What one client saw: ids in order, text chunks, the end."""

    __slots__ = ("completed", "expected_index", "finished", "opened_at", "outcome", "run", "texts")

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.opened_at = 0.0
        """When the server began streaming to this client (its headers came): earlier events are read back from
        the log as catch-up, not delivered live."""
        self.expected_index = 1
        self.run = b""
        self.texts = 0
        self.finished = False
        self.completed = False

    def on_headers(self, _status: int, received_at: float) -> None:
        self.opened_at = received_at

    def on_event(self, event_id: bytes, data: bytes, received_at: float) -> None:
        outcome = self.outcome
        outcome.events += 1
        run, _, index_text = event_id.partition(b"-")
        index = int(index_text)
        if not self.run:
            self.run = run
        if index > self.expected_index:
            outcome.lost += index - self.expected_index
        elif index < self.expected_index:
            outcome.duplicated += 1
            return
        self.expected_index = index + 1
        found = _TEXT.search(data)
        if found:
            self.texts += 1
            created = float(found.group(1))
            if created < self.opened_at:
                # Written before the server began streaming to this client (a follower asks after the POST that
                # started the run): read back from the log, not delivered live. The wait is in `start_times`.
                outcome.caught_up += 1
                return
            latency = received_at - created
            outcome.latencies.append(latency)
            if outcome.per_second:
                outcome.debug.append((self.texts, received_at, latency))
        elif b'"type":"run_finished"' in data:
            self.finished = True
            self.completed = b'"status":"completed"' in data
            if not self.completed:
                status = re.search(rb'"status":"(\w+)"', data)
                code = re.search(rb'"code":"(\w+)"', data)
                outcome.errors.append(f"run_finished {status.group(1).decode() if status else '?'} "
                                      f"({code.group(1).decode() if code else 'no code'}): {data[:300]!r}")


async def make_chats(server: Server, count: int) -> list[str]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, trust_env=False, timeout=60) as client:
        semaphore = asyncio.Semaphore(16)

        async def one() -> str:
            async with semaphore:
                for attempt in range(3):
                    try:
                        response = await client.post("/api/chats", json={})
                    except httpx.TransportError:
                        # A pooled connection the server closed (its keep-alive timeout) as the request went out.
                        if attempt == 2:
                            raise
                        continue
                    response.raise_for_status()
                    return str(response.json()["id"])
                raise AssertionError("unreachable")

        return list(await asyncio.gather(*(one() for _ in range(count))))


async def run_scenario(name: str, servers: list[Server], provider: subprocess.Popen[bytes], streams: int,
                       events: int, interval: float, ramp: float, redis_command: Any = None,
                       per_second: bool = False) -> Outcome:
    outcome = Outcome(scenario=name, streams=streams, events_per_stream=events, interval=interval,
                      per_second=per_second)
    chats = await make_chats(servers[0], streams)
    outcome.load_average = os.getloadavg()
    pids = [s.process.pid for s in servers]
    outcome.rss_before = [rss_bytes(pid) for pid in pids]
    outcome.rss_peak = list(outcome.rss_before)
    outcome.rss_series = [[] for _ in pids]
    cpu_before = [cpu_seconds(pid) for pid in pids]
    provider_before = cpu_seconds(provider.pid)
    machine_before = machine_busy_seconds()
    client_before = resource.getrusage(resource.RUSAGE_SELF)
    redis_before = redis_command("cpu") if redis_command else None
    headers = {"Authorization": f"Bearer {TOKEN}"}
    began = time.monotonic()
    done = asyncio.Event()

    async def sample() -> None:
        while not done.is_set():
            for number, pid in enumerate(pids):
                rss = rss_bytes(pid)
                outcome.rss_peak[number] = max(outcome.rss_peak[number], rss)
                outcome.rss_series[number].append((time.monotonic() - began, rss))
            if redis_command and time.monotonic() - began > ramp + 2 and not outcome.redis_connections:
                outcome.redis_connections = redis_command("clients")
            await asyncio.sleep(0.5)

    async def one(number: int) -> None:
        chat = chats[number]
        runner = servers[number % len(servers)]
        follower = servers[(number + 1) % len(servers)]
        seen = Stream(outcome)
        body = json.dumps({"client_message_id": f"load-{number}", "text": f"stream {number}"}).encode()
        try:
            asked = time.time()
            if follower is runner:
                stream = await open_stream(*runner.host_port, "POST", f"/api/chats/{chat}/messages",
                                           headers=headers, body=body, on_event=seen.on_event,
                                           on_headers=seen.on_headers)
            else:
                posted = await open_stream(*runner.host_port, "POST", f"/api/chats/{chat}/messages",
                                           headers=headers, body=body, on_event=lambda *_: None)
                posted.close()  # the run goes on without this client
                if posted.status != 200:
                    outcome.errors.append(f"POST answered {posted.status}")
                    return
                asked = time.time()
                stream = await open_stream(*follower.host_port, "GET", f"/api/chats/{chat}/stream",
                                           headers=headers, on_event=seen.on_event, on_headers=seen.on_headers)
            if stream.status != 200:
                outcome.errors.append(f"{chat}: status {stream.status}")
                stream.close()
                return
            outcome.start_times.append(seen.opened_at - asked)
            await stream.closed
            if not seen.finished:
                outcome.errors.append(f"{chat}: the stream closed before run_finished")
            elif seen.completed and seen.texts != events:  # a failed run is an error, not lost events
                outcome.lost += max(0, events - seen.texts)
        except OSError as exc:
            outcome.errors.append(f"{chat}: {exc!r}")

    sampler = asyncio.create_task(sample())
    tasks = []
    for number in range(streams):
        tasks.append(asyncio.create_task(one(number)))
        await asyncio.sleep(ramp / streams)
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=events * interval + ramp + 60)
    except TimeoutError:
        outcome.errors.append("Some streams did not end within the time bound.")
        for task in tasks:
            task.cancel()
    outcome.duration = time.monotonic() - began
    done.set()
    outcome.server_cpu = [(cpu_seconds(pid) - before) / outcome.duration for pid, before in
                          zip(pids, cpu_before, strict=True)]
    outcome.provider_cpu = (cpu_seconds(provider.pid) - provider_before) / outcome.duration
    outcome.machine_busy = (machine_busy_seconds() - machine_before) / outcome.duration
    client_after = resource.getrusage(resource.RUSAGE_SELF)
    outcome.client_cpu = ((client_after.ru_utime + client_after.ru_stime) -
                          (client_before.ru_utime + client_before.ru_stime)) / outcome.duration
    if redis_command:
        outcome.redis_cpu = (redis_command("cpu") - redis_before) / outcome.duration
    await sampler  # after the readings above: its last sleep is not part of the run
    return outcome


@contextmanager
def services(with_redis: bool) -> Iterator[tuple[str, Any, str | None]]:
    """A fresh PostgreSQL database, and a Redis server when asked, started here as the tests start theirs."""
    sys.path.insert(0, str(REPO))
    from tests.services import ServiceMissing, start_postgres, start_redis

    with ExitStack() as stack:
        try:
            cluster = stack.enter_context(start_postgres())
            redis = stack.enter_context(start_redis()) if with_redis else None
        except ServiceMissing as exc:
            raise SystemExit(f"bench/load: {exc}; scripts/test-services installs it.") from None
        database = cluster.url(cluster.new_database())
        if redis is None:
            yield database, None, None
            return

        def redis_command(what: str) -> Any:
            if what == "cpu":
                info = redis.command("INFO", "cpu")
                values = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
                return float(values["used_cpu_sys"]) + float(values["used_cpu_user"])
            counts: dict[str, int] = {}
            for line in redis.command("CLIENT", "LIST").splitlines():
                name = next((f[5:] for f in line.split(" ") if f.startswith("name=toolwire:")), None)
                if name:
                    process = name.split(":")[1]
                    counts[process] = counts.get(process, 0) + 1
            return counts

        yield database, redis_command, redis.url


def start_servers(count: int, folder: Path, database: str, provider_port: int, redis_url: str | None,
                  extra: Sequence[str] = (), src: Path | None = None) -> list[Server]:
    """`count` processes of `toolwire serve` on one database; `extra` arguments go to each (`--tools ...`);
    toolwire is imported from `src` (another tree's, to compare two) or else from this repository's."""
    tokens = folder / "tokens.txt"
    tokens.write_text(f"load {TOKEN}\n")
    # The repository too: `--tools` may name a module of the benchmark's.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src or REPO / "src"), str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    servers = []
    for number in range(count):
        command = [sys.executable, "-m", "toolwire", "serve", "--db", database, "--port", "0",
                   "--model", "openai:load", "--base-url", f"http://127.0.0.1:{provider_port}/v1",
                   "--api-key", "load-key", "--tokens-file", str(tokens), "--runs-per-minute", "1000000",
                   "--tool-calls-per-minute", "1000000", "--writes-per-minute", "1000000",
                   "--max-user-requests", "1000000", "--log-level", "warning"]
        if redis_url:
            command += ["--redis", redis_url]
        command += extra
        process, found = start(command, folder / f"server-{number}.log", rb"Listening on (http://\S+)", env)
        servers.append(Server(url=found.group(1).decode(), process=process))
    return servers


def _print_per_second(outcome: Outcome) -> None:
    """Latency percentiles by the stream's first three text events and the rest, and by second of the run."""
    start = min(at for _, at, _ in outcome.debug)
    by_index: dict[str, list[float]] = {}
    by_time: dict[int, list[float]] = {}
    for index, at, latency in outcome.debug:
        by_index.setdefault("first 3" if index <= 3 else "later", []).append(latency)
        by_time.setdefault(int(at - start), []).append(latency)
    for name, values in sorted(by_index.items()):
        values.sort()
        print(name, len(values), "p50", round(values[len(values) // 2] * 1000), "p99",
              round(values[int(len(values) * 0.99)] * 1000))
    for second, values in sorted(by_time.items()):
        values.sort()
        print("second", second, len(values), "p50", round(values[len(values) // 2] * 1000), "p99",
              round(values[int(len(values) * 0.99)] * 1000), "max", round(values[-1] * 1000))


def run_all(args: argparse.Namespace) -> list[Outcome]:
    outcomes = []
    events = int(args.seconds / args.interval)
    for scenario in args.scenarios.split(","):
        for streams in args.streams or [1000]:
            outcomes.append(run_one(args, scenario, streams, events))
    return outcomes


def run_one(args: argparse.Namespace, scenario: str, streams: int, events: int) -> Outcome:
    """One scenario at one number of streams, on services and servers started for it alone."""
    replicas = scenario == "replicas"
    ramp = streams / args.ramp_rate
    with tempfile.TemporaryDirectory(prefix="toolwire-load-") as temp, services(replicas) as (
            database, redis_command, redis_url):
        folder = Path(temp)
        provider, found = start([sys.executable, "-m", "bench.load.provider", "--events", str(events),
                                 "--interval", str(args.interval)], folder / "provider.log",
                                rb"Listening on port (\d+)", {**os.environ, "PYTHONPATH": str(REPO)})
        servers: list[Server] = []
        try:
            servers = start_servers(2 if replicas else 1, folder, database, int(found.group(1)), redis_url)
            print(f"== {scenario}: {streams} streams x {events} events ({args.interval:g} s apart, started over "
                  f"{ramp:g} s) on {len(servers)} server(s); load average {os.getloadavg()[0]:.2f}", flush=True)
            outcome = asyncio.run(run_scenario(scenario, servers, provider, streams, events, args.interval,
                                               ramp, redis_command, args.per_second))
            for number in range(len(servers)):
                if "Traceback" in (folder / f"server-{number}.log").read_text():
                    outcome.errors.append(f"server {number} logged a traceback")
                    print((folder / f"server-{number}.log").read_text()[-3000:])
            if outcome.debug:
                _print_per_second(outcome)
            print(json.dumps(outcome.summary(), indent=1), flush=True)
            return outcome
        finally:
            for server in servers:
                stop(server.process)
            stop(provider)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=lambda text: [int(n) for n in text.split(",")], default=None,
                        help="concurrent streams; a list (100,300,1000) runs each in turn (default: 1000; rolling: 100)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each stream lasts")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between a stream's text chunks")
    parser.add_argument("--ramp-rate", type=float, default=100.0,
                        help="streams started per second (1,000 streams start over 10 s)")
    parser.add_argument("--scenarios", default="one,replicas")
    parser.add_argument("--no-write", action="store_true", help="print only (no files in bench/results)")
    parser.add_argument("--per-second", action="store_true", help="also print latency percentiles per second")
    from bench.load import rolling

    rolling.add_arguments(parser)
    args = parser.parse_args()
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit[1], limit[1]))
    if args.scenarios == "rolling":
        rolling.run_rolling(args)
        return
    outcomes = run_all(args)
    if not args.no_write:
        from bench.load.report import write

        write(outcomes, RESULTS)


if __name__ == "__main__":
    main()
