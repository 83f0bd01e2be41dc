"""bench/load's `rolling` scenario: rolling restarts of two replicas under concurrent runs (durable runs, issue 26).

    bench/load/run --scenarios rolling --streams 100            # both variants, two restarts each
    bench/load/run --scenarios rolling --streams 6 --restarts 1 --no-write   # a smoke run (tests/test_bench_rolling.py)

On this machine: PostgreSQL and Redis (started as the tests start them), the paced model (`provider.py`, shape
`orders`), two `toolwire serve` replicas A and B with `--drain-handover` and the tools of `rolling_tools.py`,
and this process as every client. Each of `--streams` chats runs one run after another for as long as the
restarts last (so `--streams` runs are going at every moment), each run: `--events` text deltas, a round of two
tool calls that take `--tool-seconds` (`charge`, not idempotent, and `lookup`, idempotent; each execution is
journaled to a file), then `--events` more. Once every chat runs, A is restarted, then B (`--restarts`), as a
rolling deploy does: stop the replica, start its replacement on the same port, wait for `/readyz`, then the next.
Two variants:

- **handover**: SIGTERM; the replica hands its runs over (`--drain-handover`) and exits.
- **kill**: SIGKILL (a deploy past its grace period, a crash); the other replica takes the runs over once their
  lease expires. A non-idempotent call cut mid-execution is answered `interrupted` by design; its run goes on.

The client posts each run to replica *i mod 2* (the other when that one refuses it or is down, as a load balancer
does, with the same `client_message_id`) and follows it on the other replica from its first event, reconnecting
with `Last-Event-ID` to whichever replica is up when its stream breaks. Measured per variant, after the storm:
each run's status as the server stored it (completed / interrupted / failed / stuck), read with
`GET /api/chats/{id}/messages`; executions per call from the journal (a non-idempotent call run twice is a
duplicate); calls answered `interrupted`; `run_resumed` events the followers saw, with the time from the restart
that caused them; event ids that were not gap-free; total wall time. Results: `bench/results/rolling.md` and
`rolling.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.load.__main__ import REPO, RESULTS, TOKEN, start, stop
from bench.load.report import machine
from bench.load.rolling_tools import JOURNAL_ENV
from bench.load.sse_client import open_stream

VARIANTS = ("handover", "kill")
_EVENT_TYPE = re.compile(rb'"type":"(\w+)"')
_STATUS = re.compile(rb'"status":"(\w+)"')
_REASON = re.compile(rb'"reason":"(\w+)"')
_WAIT = 120.0
"""Seconds a client keeps trying to post or follow one run before it counts it as an error."""
_RESTART_STRIDE = 1 << 24
"""Where a run continued before its log held any of its events is numbered from (`server/runs.py`)."""
_STALL = 30.0
"""Seconds a follower waits for the next event before it counts a stall and reconnects (runs send one every
`--interval`, the server a heartbeat every 15 s)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("rolling (--scenarios rolling)")
    group.add_argument("--variants", default=",".join(VARIANTS), help="handover, kill, or both (default)")
    group.add_argument("--restarts", type=int, choices=(1, 2), default=2, help="restart A, or A then B (default)")
    group.add_argument("--events", type=int, default=20, help="text deltas in each of a run's two answers")
    group.add_argument("--tool-seconds", type=float, default=2.0, help="how long each tool call takes")
    group.add_argument("--lease-seconds", type=float, default=5.0, help="the replicas' --lease-seconds")
    group.add_argument("--drain-seconds", type=float, default=30.0,
                       help="the replicas' --drain-seconds: how long running tools get to finish on SIGTERM")
    group.add_argument("--json", type=Path, default=None, metavar="FILE",
                       help="also write the variants' figures to FILE (with --no-write too)")
    group.add_argument("--keep-logs", type=Path, default=None, metavar="FOLDER",
                       help="copy each variant's server logs and tool journal to FOLDER/<variant>")
    group.add_argument("--warm-up", type=float, default=3.0,
                       help="seconds between the last chat's first run and the first restart")


@dataclass
class Replica:
    name: str
    port: int
    folder: Path
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    generation: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.generation += 1
        log = self.folder / f"server-{self.name}-{self.generation}.log"
        self.process, _ = start(self.command, log, rb"Listening on (http://\S+)", self.env)

    def logs(self) -> list[Path]:
        return sorted(self.folder.glob(f"server-{self.name}-*.log"))


@dataclass
class Variant:
    """What one variant measured."""

    name: str
    streams: int
    restarts: list[dict[str, float]] = field(default_factory=list)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Run id → its chat, number, and what its follower saw."""
    errors: list[str] = field(default_factory=list)
    gaps: int = 0
    repeats: int = 0
    reconnects: int = 0
    renumbered: int = 0
    stalls: list[str] = field(default_factory=list)
    """Follow streams that stayed open without the run's next event (`_STALL`)."""
    resumed: list[tuple[str, float]] = field(default_factory=list)
    """(reason, seconds since the restart signal before it) per `run_resumed` seen."""
    wall: float = 0.0
    storm: float = 0.0
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_average_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    summary: dict[str, Any] = field(default_factory=dict)


class Storm:
    """The clients of one variant: every chat runs one run after another until the restarts are over."""

    def __init__(self, variant: Variant, replicas: list[Replica], chats: list[str], events: int) -> None:
        self.variant = variant
        self.replicas = replicas
        self.chats = chats
        self.events = events
        self.over = asyncio.Event()
        self.started = 0
        self.all_started = asyncio.Event()
        self.signals: list[float] = []
        self.headers = {"Authorization": f"Bearer {TOKEN}"}

    async def chat_loop(self, index: int) -> None:
        number = 0
        while number == 0 or not self.over.is_set():
            try:
                await self.one_run(index, number)
            except Exception as exc:  # a bug of the benchmark's: counted, the other chats go on
                self.variant.errors.append(f"chat {index} run {number}: {exc!r}")
                return
            if number == 0:
                self.started += 1
                if self.started == len(self.chats):
                    self.all_started.set()
            number += 1

    def _first_replica(self, index: int) -> int:
        return index % len(self.replicas)

    async def post(self, index: int, number: int) -> tuple[str, int] | None:
        """Start the chat's next run on its replica (or the other, as a load balancer would): its id and number."""
        chat = self.chats[index]
        body = json.dumps({"client_message_id": f"rolling-{index}-{number}", "text": f"order {index}.{number}"})
        deadline = time.monotonic() + _WAIT
        attempt = 0
        while time.monotonic() < deadline:
            replica = self.replicas[(self._first_replica(index) + attempt) % len(self.replicas)]
            attempt += 1
            first: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

            def on_event(event_id: bytes, _data: bytes, _at: float, first: asyncio.Future[bytes] = first) -> None:
                if not first.done():
                    first.set_result(event_id)

            try:
                stream = await open_stream("127.0.0.1", replica.port, "POST", f"/api/chats/{chat}/messages",
                                           headers=self.headers, body=body.encode(), on_event=on_event)
            except OSError:
                await asyncio.sleep(0.1 if attempt % 2 == 0 else 0)
                continue
            try:
                if stream.status != 200:  # 503 while it drains: the other replica takes it
                    await asyncio.sleep(0.1 if attempt % 2 == 0 else 0)
                    continue
                closed = asyncio.ensure_future(asyncio.shield(stream.closed))
                await asyncio.wait([first, closed], timeout=30, return_when=asyncio.FIRST_COMPLETED)
                closed.cancel()
                if first.done():
                    run_number = int(first.result().split(b"-")[0])
                    return stream.headers.get("x-run-id", ""), run_number
            finally:
                stream.close()
        self.variant.errors.append(f"chat {index} run {number}: no replica started it within {_WAIT:.0f} s")
        return None

    async def one_run(self, index: int, number: int) -> None:
        posted = await self.post(index, number)
        if posted is None:
            return
        run_id, run_number = posted
        chat = self.chats[index]
        seen: dict[str, Any] = {"chat": chat, "run_number": run_number, "status": None, "resumed": [],
                                "events": 0, "last_at": 0.0, "pause": 0.0}
        self.variant.runs[run_id] = seen
        expected = 1
        last = f"{run_number}-0"
        attempt = 0
        deadline = time.monotonic() + _WAIT + 60
        variant = self.variant

        def on_event(event_id: bytes, data: bytes, received_at: float) -> None:
            nonlocal expected, last
            run_text, _, index_text = event_id.partition(b"-")
            if int(run_text) != run_number:
                return  # a later run of the chat: not this one's
            position = int(index_text)
            if expected == 1 and position > 1 and position % _RESTART_STRIDE == 1:
                # Continued before it published anything: numbered from the continuation's own range, which
                # hides nothing (docs/guides/durable-runs.md, "What followers see").
                variant.renumbered += 1
            elif position > expected:
                variant.gaps += position - expected
            elif position < expected:
                variant.repeats += 1
                return
            expected = position + 1
            last = event_id.decode()
            seen["events"] += 1
            if seen["last_at"]:  # the longest a follower waited for the run's next event
                seen["pause"] = max(seen["pause"], received_at - seen["last_at"])
            seen["last_at"] = received_at
            kind = _EVENT_TYPE.search(data)
            if kind is None:
                return
            if kind.group(1) == b"run_resumed":
                reason = _REASON.search(data)
                since = [t for t in self.signals if t <= received_at]
                delay = received_at - since[-1] if since else float("nan")
                seen["resumed"].append(reason.group(1).decode() if reason else "?")
                variant.resumed.append((reason.group(1).decode() if reason else "?", delay))
            elif kind.group(1) == b"run_finished":
                status = _STATUS.search(data)
                seen["status"] = status.group(1).decode() if status else "?"

        while seen["status"] is None and time.monotonic() < deadline:
            # The replica the run was not posted to first, then the other after each break.
            replica = self.replicas[(self._first_replica(index) + 1 + attempt) % len(self.replicas)]
            if attempt:
                variant.reconnects += 1
                await asyncio.sleep(0.05 if attempt % 2 else 0.2)
            attempt += 1
            try:
                stream = await open_stream("127.0.0.1", replica.port, "GET", f"/api/chats/{chat}/stream",
                                           headers={**self.headers, "Last-Event-ID": last}, on_event=on_event)
            except OSError:
                continue
            if stream.status != 200:
                stream.close()
                if stream.status != 503:
                    variant.errors.append(f"following: status {stream.status}")
                continue
            connected = time.monotonic()
            seen_before = seen["events"]
            while seen["status"] is None and not stream.closed.done():
                await asyncio.wait([stream.closed], timeout=0.5)
                if seen["events"] != seen_before:
                    connected, seen_before = time.monotonic(), seen["events"]
                elif time.monotonic() - connected > _STALL:
                    variant.stalls.append(f"run {run_id} of chat {chat}: {_STALL:.0f} s without an event on "
                                          f"{replica.name}{replica.generation} after {last} (posted first to "
                                          f"{self.replicas[self._first_replica(index)].name})")
                    break
            stream.close()
        if seen["status"] is None:
            variant.errors.append(f"run {run_id}: no run_finished reached its follower")


async def _wait_ready(replica: Replica, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"{replica.url}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"replica {replica.name} was not ready within {timeout:.0f} s")


async def _restart(replica: Replica, kind: str, storm: Storm) -> dict[str, float]:
    """Stop `replica` as the variant says, then start its replacement on the same port and wait for it."""
    process = replica.process
    assert process is not None
    began = time.monotonic()
    storm.signals.append(time.time())
    if kind == "kill":
        process.kill()
    else:
        process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(process.wait, 120)
    exited = time.monotonic()
    await asyncio.to_thread(replica.start)
    await _wait_ready(replica)
    ready = time.monotonic()
    return {"replica": replica.name, "exit_s": round(exited - began, 2), "ready_s": round(ready - exited, 2)}  # type: ignore[dict-item]


async def _make_chats(url: str, count: int) -> list[str]:
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False,
                                 timeout=60) as client:
        return [str((await client.post("/api/chats", json={})).raise_for_status().json()["id"])
                for _ in range(count)]


async def _storm(variant: Variant, replicas: list[Replica], args: argparse.Namespace) -> None:
    chats = await _make_chats(replicas[0].url, variant.streams)
    storm = Storm(variant, replicas, chats, args.events)
    variant.load_average = os.getloadavg()
    began = time.monotonic()
    tasks = []
    for index in range(len(chats)):
        tasks.append(asyncio.create_task(storm.chat_loop(index)))
        await asyncio.sleep(1 / args.ramp_rate)
    await asyncio.wait_for(storm.all_started.wait(), timeout=_WAIT)
    await asyncio.sleep(args.warm_up)
    for replica in replicas[:args.restarts]:
        variant.restarts.append(await _restart(replica, variant.name, storm))
    storm.over.set()
    variant.storm = time.monotonic() - began
    _, pending = await asyncio.wait(tasks, timeout=_WAIT * 2)
    for task in pending:
        task.cancel()
        variant.errors.append("a chat's runs did not end within the time bound")
    variant.wall = time.monotonic() - began
    variant.load_average_after = os.getloadavg()


async def _stored(variant: Variant, url: str) -> dict[str, Any]:
    """Each run's stored status and the calls of the stored history, read through the HTTP API."""
    statuses: dict[str, str] = {}
    results: dict[str, tuple[str, Any]] = {}
    invalid = 0
    active = 0
    chats = sorted({seen["chat"] for seen in variant.runs.values()})
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False,
                                 timeout=60) as client:
        for chat in chats:
            if (await client.get(f"/api/chats/{chat}")).json()["active_run"] is not None:
                active += 1
            body = (await client.get(f"/api/chats/{chat}/messages")).json()
            statuses.update({run["run_id"]: run["status"] for run in body["runs"]})
            for row in body["messages"]:
                if row["kind"] != "tools_aggregate":
                    continue
                call_message, result_message = row["messages"]
                calls = [p for p in call_message["parts"] if p["type"] in ("tool_call", "invalid_tool_call")]
                answered = [p for p in result_message["parts"] if p["type"] == "tool_result"]
                if [c["id"] for c in calls] != [r["call_id"] for r in answered]:
                    invalid += 1  # every call has exactly one result, in order
                for call, result in zip(calls, answered, strict=False):
                    results[call["id"]] = (call.get("name", "?"), result["result"])
    return {"statuses": statuses, "results": results, "invalid_rounds": invalid, "chats_still_active": active}


def _journal(path: Path) -> tuple[dict[tuple[str, str], int], set[tuple[str, str]], set[str]]:
    """Executions per (tool, call), the executions that ended, and the processes that ran tools."""
    starts: Counter[tuple[str, str]] = Counter()
    ends: set[tuple[str, str]] = set()
    processes: set[str] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            event, name, order, pid = line.split()
            processes.add(pid)
            if event == "start":
                starts[name, order] += 1
            else:
                ends.add((name, order))
    return dict(starts), ends, processes


def _percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(v for v in values if v == v)
    if not ordered:
        return {"p50": None, "p90": None, "max": None}
    return {"p50": round(ordered[len(ordered) // 2], 2), "p90": round(ordered[int(len(ordered) * 0.9)], 2),
            "max": round(ordered[-1], 2)}


def summarize(variant: Variant, stored: dict[str, Any], journal: Path) -> dict[str, Any]:
    statuses: dict[str, str] = stored["statuses"]
    results: dict[str, tuple[str, Any]] = stored["results"]
    starts, ends, processes = _journal(journal)
    counted = Counter(statuses.get(run_id, "missing") for run_id in variant.runs)
    # A run still `running` (or never stored as ended) after its follower gave up is stuck.
    stuck = counted.pop("running", 0) + counted.pop("missing", 0)
    interrupted_calls: Counter[str] = Counter()
    cut_mid_execution = 0
    for call_id, (name, result) in results.items():
        if result == {"error": "interrupted"}:
            interrupted_calls[name] += 1
            if (name, call_id) in starts and (name, call_id) not in ends:
                cut_mid_execution += 1
    executions: Counter[str] = Counter()
    for (name, _), count in starts.items():
        executions[name] += count
    duplicated = sorted(order for (name, order), count in starts.items() if name == "charge" and count > 1)
    reruns = sum(1 for (name, _), count in starts.items() if name == "lookup" and count > 1)
    answered_unrun = sum(1 for call_id, (name, result) in results.items()
                         if result != {"error": "interrupted"} and (name, call_id) not in starts)
    # Executed, but the stored history has no such call: the process stopped before its journal held the call, the
    # step was asked for again, and the model's new calls ran again (a second charge under another call id).
    unstored = Counter(name for (name, order) in starts if order not in results)
    reasons = Counter(reason for reason, _ in variant.resumed)
    return {
        "variant": variant.name, "streams": variant.streams, "restarts": variant.restarts,
        "runs": len(variant.runs), "completed": counted.pop("completed", 0),
        "interrupted": counted.pop("interrupted", 0), "failed": counted.pop("failed", 0), "stuck": stuck,
        "other_statuses": dict(counted),
        "follower_statuses": dict(Counter(str(seen["status"]) for seen in variant.runs.values())),
        "tool_calls_stored": len(results), "executions": dict(executions),
        "charge_duplicated": len(duplicated), "duplicated_orders": duplicated[:10],
        "lookup_rerun": reruns, "calls_interrupted": dict(interrupted_calls),
        "charge_interrupted_cut_mid_execution": cut_mid_execution,
        "results_without_execution": answered_unrun, "executions_not_in_history": dict(unstored),
        "invalid_rounds": stored["invalid_rounds"], "chats_still_active": stored["chats_still_active"],
        "tool_processes": len(processes),
        "run_resumed": sum(reasons.values()), "run_resumed_reasons": dict(reasons),
        "runs_resumed": sum(1 for seen in variant.runs.values() if seen["resumed"]),
        "resumed_after_restart_s": _percentiles([delay for _, delay in variant.resumed]),
        "longest_pause_s": {"resumed runs": _percentiles([s["pause"] for s in variant.runs.values() if s["resumed"]]),
                            "other runs": _percentiles([s["pause"] for s in variant.runs.values() if not s["resumed"]])},
        "event_gaps": variant.gaps, "event_repeats": variant.repeats, "runs_renumbered": variant.renumbered, "follower_reconnects": variant.reconnects,
        "follower_stalls": len(variant.stalls), "first_stalls": variant.stalls[:5],
        "errors": len(variant.errors), "first_errors": variant.errors[:5],
        "storm_s": round(variant.storm, 1), "wall_s": round(variant.wall, 1),
        "load_average_before": [round(v, 2) for v in variant.load_average],
        "load_average_after": [round(v, 2) for v in variant.load_average_after],
    }


def _server_command(args: argparse.Namespace, port: int, database: str, redis_url: str, provider_port: int,
                    tokens: Path) -> list[str]:
    return [sys.executable, "-m", "toolwire", "serve", "--db", database, "--redis", redis_url,
            "--port", str(port), "--model", "openai:load", "--base-url", f"http://127.0.0.1:{provider_port}/v1",
            "--api-key", "load-key", "--tokens-file", str(tokens), "--runs-per-minute", "1000000",
            "--tool-calls-per-minute", "1000000", "--writes-per-minute", "1000000",
            "--max-user-requests", "1000000", "--log-level", "warning",
            "--tools", "bench.load.rolling_tools:TOOLS", "--lease-seconds", str(args.lease_seconds),
            "--drain-handover", "--drain-seconds", str(args.drain_seconds)]


@contextmanager
def _services() -> Iterator[tuple[Any, Any]]:
    sys.path.insert(0, str(REPO))
    from tests.services import ServiceMissing, start_postgres, start_redis

    try:
        with start_postgres() as cluster, start_redis() as redis:
            yield cluster, redis
    except ServiceMissing as exc:
        raise SystemExit(f"bench/load: {exc}; scripts/test-services installs it.") from None


def run_variant(args: argparse.Namespace, name: str, streams: int, cluster: Any, redis: Any) -> dict[str, Any]:
    from tests.services import free_port

    redis.command("FLUSHALL")
    database = cluster.url(cluster.new_database())
    variant = Variant(name=name, streams=streams)
    with tempfile.TemporaryDirectory(prefix="toolwire-rolling-") as temp:
        folder = Path(temp)
        journal = folder / "journal.txt"
        provider, found = start([sys.executable, "-m", "bench.load.provider", "--shape", "orders",
                                 "--events", str(args.events), "--interval", str(args.interval),
                                 "--tool-seconds", str(args.tool_seconds)], folder / "provider.log",
                                rb"Listening on port (\d+)", {**os.environ, "PYTHONPATH": str(REPO)})
        tokens = folder / "tokens.txt"
        tokens.write_text(f"load {TOKEN}\n")
        env = {**os.environ, JOURNAL_ENV: str(journal),
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")])}
        replicas = []
        for replica_name in ("A", "B"):
            port = free_port()
            replicas.append(Replica(name=replica_name, port=port, folder=folder, env=env, command=_server_command(
                args, port, database, redis.url, int(found.group(1)), tokens)))
        try:
            with ThreadPoolExecutor(len(replicas)) as pool:  # side by side: a start is seconds of imports
                list(pool.map(Replica.start, replicas))
            for replica in replicas:
                asyncio.run(_wait_ready(replica))
            print(f"== rolling/{name}: {streams} chats running runs back to back; restarting "
                  f"{' then '.join(r.name for r in replicas[:args.restarts])}; "
                  f"load average {os.getloadavg()[0]:.2f}", flush=True)
            asyncio.run(_storm(variant, replicas, args))
            stored = asyncio.run(_stored(variant, replicas[-1].url))
        finally:
            for replica in replicas:
                if replica.process is not None:
                    stop(replica.process)
            stop(provider)
        for replica in replicas:
            for log in replica.logs():
                if "Traceback" in log.read_text():
                    variant.errors.append(f"{log.name} logged a traceback")
                    print(log.read_text()[-3000:])
        variant.summary = summarize(variant, stored, journal)
        if args.keep_logs is not None:
            shutil.copytree(folder, args.keep_logs / f"{name}-{streams}", dirs_exist_ok=True)
    print(json.dumps(variant.summary, indent=1), flush=True)
    return variant.summary


def run_rolling(args: argparse.Namespace) -> list[dict[str, Any]]:
    summaries = []
    with _services() as (cluster, redis):
        for streams in args.streams or [100]:
            for name in args.variants.split(","):
                if name not in VARIANTS:
                    raise SystemExit(f"bench/load: --variants takes {' and '.join(VARIANTS)}, not {name!r}.")
                summaries.append(run_variant(args, name, streams, cluster, redis))
    if not args.no_write:
        write(summaries, args, RESULTS)
    if args.json is not None:
        args.json.write_text(json.dumps(summaries, indent=1) + "\n")
    return summaries


def _row(s: dict[str, Any]) -> str:
    resumed = s["resumed_after_restart_s"]
    calls = s["calls_interrupted"]
    interrupted_calls = (f"{calls.get('charge', 0)} charge ({s['charge_interrupted_cut_mid_execution']} cut "
                         f"mid-execution) + {calls.get('lookup', 0)} lookup")
    reasons = ", ".join(f"{n} {r}" for r, n in sorted(s["run_resumed_reasons"].items())) or "0"
    return (f"| {s['variant']} | {s['streams']} | {len(s['restarts'])} | {s['runs']} | {s['completed']} | "
            f"**{s['interrupted']}** | {s['failed']} | {s['stuck']} | "
            f"{s['executions'].get('charge', 0)} / **{s['charge_duplicated']}** | "
            f"**{s['executions_not_in_history'].get('charge', 0)}** | {s['lookup_rerun']} | "
            f"{interrupted_calls} | {reasons} | {resumed['p50']} / {resumed['max']} | "
            f"{s['event_gaps']} / {s['event_repeats']} | {s['errors']} | {s['wall_s']} | "
            f"{s['load_average_before'][0]:.1f} |")


def write(summaries: list[dict[str, Any]], args: argparse.Namespace, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"events": args.events, "interval": args.interval, "tool_seconds": args.tool_seconds,
                "lease_seconds": args.lease_seconds, "drain_seconds": args.drain_seconds}
    (folder / "rolling.json").write_text(json.dumps({"machine": machine(), "settings": settings,
                                                     "variants": summaries}, indent=1) + "\n")
    lines = [f"Machine: {machine()}, shared with other work; PostgreSQL, Redis, the model, both replicas and the "
             "client all on it.",
             f"Each run: {args.events} text deltas {args.interval:g} s apart, two tool calls of "
             f"{args.tool_seconds:g} s (`charge`, not idempotent; `lookup`, idempotent), {args.events} more deltas. "
             f"Replicas: `--drain-handover --drain-seconds {args.drain_seconds:g} --lease-seconds "
             f"{args.lease_seconds:g}`.",
             "",
             "| variant | concurrent runs | restarts | runs | completed | **interrupted** | failed | stuck | "
             "`charge` executions / **duplicated** (a call run twice) | **`charge` runs of a call the history lost** "
             "(its step asked again) | `lookup` run again | calls answered `interrupted` | "
             "`run_resumed` seen | restart → resumed p50 / max (s) | event gaps / repeats | errors | wall (s) | "
             "load average |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(s) for s in summaries]
    (folder / "rolling.md").write_text("\n".join(lines) + "\n")
