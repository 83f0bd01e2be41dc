"""The benchmark run: every contender on the same bytes, in two read patterns, then the table and plot.

    bench/run              # the whole suite (about 15 minutes on 2 cores)
    bench/run --quick      # S and M only, short budgets (a smoke run; writes bench/results/quick/)

Read patterns. `event`, the headline: one SSE event per network read, as a live provider flushes each
token event when it is made. `16k`: 16 KiB reads, what a busy socket hands over. Every contender reads
exactly the same chunks in a pattern.

Method. Time is CPU time of this process (`time.process_time`): the machine is shared, and waiting for
the CPU is then not counted. The limits, toolwire and the agent are measured in interleaved rounds (a
slow spell hits all of them alike), and each ratio is the median of same-round ratios. A peer is a
warm-up run, then timed runs until the size's budget or repeat cap; its figure is the median. Figures
are divided by the number of wire events. The garbage collector stays on (users pay for it) and its young
generations are collected before each timed run. The first run's outcome is compared with the stream's
expected text and calls; a contender that assembles anything else is reported as a mismatch, not timed.

Peers on L run once each, in a fresh child process with a deadline, and are skipped when their cost on
M (grown as it grew from S to M) predicts more than the deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.metadata
import multiprocessing
import os
import platform
import statistics
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .contenders import CONTENDERS, READS, Contender, Outcome, Runner
from .layers import AGENT_CONTENDERS
from .live import long_event, text_latency
from .server_layer import measure_server
from .streams import FIXTURES, GENERATORS, SIZES, BenchStream, fixture_streams, generate

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results"
QUICK_RESULTS = RESULTS / "quick"
"""`--quick` writes here, so that a smoke run never replaces the full results."""

# Per size: (CPU-time budget in seconds, most timed runs) for one peer on one stream ...
_BUDGET = {"S": (0.5, 15), "M": (3.0, 5), "L": (12.0, 5)}
_QUICK_BUDGET = {"S": (0.3, 10), "M": (1.0, 3), "L": (4.0, 2)}
# ... and (budget, most rounds) for the limits, toolwire and the agent, measured together in rounds
# (at least three rounds whatever the budget).
_CORE_BUDGET = {"S": (1.5, 21), "M": (6.0, 15), "L": (14.0, 5)}
_QUICK_CORE_BUDGET = {"S": (0.5, 9), "M": (2.0, 5), "L": (8.0, 3)}
_MIN_ROUNDS = 3


@dataclass(slots=True)
class Measurement:
    protocol: str
    size: str
    reads: str
    """The read pattern (`event` or `16k`)."""
    contender: str
    kind: str
    events: int
    body_bytes: int
    status: str = "ok"
    """`ok`, `skipped`, `mismatch`, `error` or `stopped` (deadline)."""
    note: str = ""
    runs: list[float] = field(default_factory=list)
    limit_ratios: list[float] = field(default_factory=list)
    """Per round, this run's time over the limit's in the same round (contenders measured in rounds)."""
    httpx_ratios: list[float] = field(default_factory=list)
    """Per round, this run's time over the raw-httpx limit's in the same round."""
    added_us: list[float] = field(default_factory=list)
    """Per round, what an agent adds per event over `model.stream` and the follow-up turn (agents only)."""

    @property
    def median(self) -> float | None:
        return statistics.median(self.runs) if self.runs else None

    @property
    def us_per_event(self) -> float | None:
        median = self.median
        return None if median is None else median * 1e6 / self.events


def _same(stream: BenchStream, outcome: Outcome) -> str | None:
    """Why `outcome` differs from what `stream` carries, or None."""
    expected = [(c.name, c.arguments) for c in stream.calls]
    if outcome.calls != expected:
        got = [(name, sorted(args) if isinstance(args, dict) else type(args).__name__) for name, args in outcome.calls]
        return f"tool calls differ: got {got}"
    if outcome.text != stream.text:
        return f"text differs ({len(outcome.text)} characters instead of {len(stream.text)})"
    return None


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.loop = asyncio.new_event_loop()
        self.budget = _QUICK_BUDGET if args.quick else _BUDGET
        self.core_budget = _QUICK_CORE_BUDGET if args.quick else _CORE_BUDGET
        self.results: list[Measurement] = []
        self.started = time.perf_counter()
        self.broken: dict[str, str] = {}
        """Contenders that cannot run at all here (not installed, import error), with the reason."""

    def log(self, text: str) -> None:
        print(text, flush=True)

    # -- one measurement ---------------------------------------------------------------------------

    def call(self, runner: Runner, is_async: bool) -> tuple[float, Outcome]:
        # The young generations only: a full collection walks every loaded peer module (~0.1 s).
        gc.collect(1)
        start = time.process_time()
        if is_async:
            outcome = self.loop.run_until_complete(runner())  # type: ignore[arg-type]
        else:
            outcome = runner()  # type: ignore[assignment]
        return time.process_time() - start, outcome  # type: ignore[return-value]

    def prepare(self, contender: Contender, stream: BenchStream, chunks: list[bytes]) -> Runner | str:
        if contender.name in self.broken:
            return self.broken[contender.name]
        try:
            return contender.prepare(stream, chunks)
        except ImportError as exc:
            reason = f"not available ({type(exc).__name__}: {exc})"
            self.broken[contender.name] = reason
            return reason

    def measure(self, contender: Contender, stream: BenchStream, reads: str,
                chunks: list[bytes]) -> Measurement:
        m = Measurement(stream.protocol, stream.label, reads, contender.name, contender.kind, stream.events,
                        len(stream.body))
        runner = self.prepare(contender, stream, chunks)
        if isinstance(runner, str):
            m.status, m.note = "skipped", runner
            return m
        budget, cap = self.budget.get(stream.label, self.budget["S"])
        try:
            elapsed, outcome = self.call(runner, contender.is_async)
        except Exception as exc:
            m.status, m.note = "error", f"{type(exc).__name__}: {exc}"[:300]
            return m
        if stream.generated:
            wrong = _same(stream, outcome)
            if wrong is not None:
                m.status, m.note = "mismatch", wrong
                return m
        # The first run warms caches and lazy imports (a first request can build hundreds of models) and
        # is not counted; at least one timed run follows.
        spent = elapsed
        while not m.runs or (len(m.runs) < cap and spent < budget):
            elapsed, _ = self.call(runner, contender.is_async)
            m.runs.append(elapsed)
            spent += elapsed
        return m

    def measure_rounds(self, contenders: list[Contender], stream: BenchStream, reads: str,
                       chunks: list[bytes]) -> list[Measurement]:
        """Measure `contenders` (the limit first) in interleaved rounds, so that a slow spell of a shared
        machine hits all of them alike; each round also gives each one's ratio to the limits, and each
        agent's added cost over `model.stream` (previews on) and the follow-up turn."""
        out: list[Measurement] = []
        ready: list[tuple[Measurement, Contender, Runner]] = []
        for contender in contenders:
            m = Measurement(stream.protocol, stream.label, reads, contender.name, contender.kind, stream.events,
                            len(stream.body))
            out.append(m)
            runner = self.prepare(contender, stream, chunks)
            if isinstance(runner, str):
                m.status, m.note = "skipped", runner
                continue
            try:
                _, outcome = self.call(runner, contender.is_async)  # warm-up, and the check
            except Exception as exc:
                m.status, m.note = "error", f"{type(exc).__name__}: {exc}"[:300]
                continue
            wrong = _same(stream, outcome) if stream.generated else None
            if wrong is not None:
                m.status, m.note = "mismatch", wrong
                continue
            ready.append((m, contender, runner))
        budget, cap = self.core_budget.get(stream.label, self.core_budget["S"])
        spent = 0.0
        rounds = 0
        while rounds < cap and (spent < budget or rounds < _MIN_ROUNDS):
            times = []
            for m, contender, runner in ready:
                elapsed, _ = self.call(runner, contender.is_async)
                m.runs.append(elapsed)
                times.append(elapsed)
                spent += elapsed
            by_name = {m.contender: t for (m, _, _), t in zip(ready, times, strict=True)}
            for (m, _, _), elapsed in zip(ready, times, strict=True):
                if "limit" in by_name:
                    m.limit_ratios.append(elapsed / by_name["limit"])
                if "httpx limit" in by_name:
                    m.httpx_ratios.append(elapsed / by_name["httpx limit"])
                if m.kind == "agent" and "toolwire" in by_name and "follow-up turn" in by_name:
                    base = by_name["toolwire"] + by_name["follow-up turn"]
                    m.added_us.append((elapsed - base) * 1e6 / stream.events)
            rounds += 1
        return out

    def measure_in_child(self, contender: Contender, stream: BenchStream, reads: str,
                         deadline: float) -> Measurement:
        """One run in a fresh process, stopped at `deadline` seconds (peers on L).

        The child rebuilds the stream from its seed and warms the peer up on S first; the deadline counts
        from the start of the timed run (wall-clock time; the figure reported is the run's CPU time).
        """
        m = Measurement(stream.protocol, stream.label, reads, contender.name, contender.kind, stream.events,
                        len(stream.body))
        if contender.name in self.broken:
            m.status, m.note = "skipped", self.broken[contender.name]
            return m
        context = multiprocessing.get_context("spawn")
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_child_run, args=(
            stream.protocol, stream.label, self.args.seed, reads, contender.name, send))
        process.start()
        send.close()
        try:
            if not receive.poll(300) or receive.recv() != "ready":
                raise EOFError
            started = time.perf_counter()
            if receive.poll(deadline):
                status, elapsed, detail = receive.recv()
                if status == "error":
                    m.status, m.note = "error", detail
                elif detail is not None:
                    m.status, m.note = "mismatch", detail
                else:
                    m.runs.append(elapsed)
                    m.note = "one run"
            else:
                m.status = "stopped"
                m.note = f"stopped after {time.perf_counter() - started:.0f} s (deadline {deadline:.0f} s)"
        except (EOFError, OSError):
            m.status, m.note = "error", "the child process ended before reporting a result"
        finally:
            if process.is_alive():
                process.kill()
            process.join()
        return m

    # -- the suite ---------------------------------------------------------------------------------

    def run_stream(self, stream: BenchStream, reads: str) -> None:
        chunks = READS[reads](stream.body)
        self.log(f"\n{stream.protocol} {stream.label}, {reads} reads: {stream.events:,} events, "
                 f"{len(stream.body):,} bytes in {len(chunks):,} reads [{time.perf_counter() - self.started:.0f} s]")
        core = [c for c in CONTENDERS if c.kind != "peer" and stream.protocol in c.protocols]
        core += [c for c in AGENT_CONTENDERS if stream.protocol in c.protocols and stream.generated]
        for m in self.measure_rounds(core, stream, reads, chunks):
            self.results.append(m)
            self.log(f"  {m.contender:<24} {_fmt_result(m)}")
        if self.args.no_peers:
            return
        for contender in CONTENDERS:
            if stream.protocol not in contender.protocols or contender.kind != "peer":
                continue
            if stream.label == "L":
                m = self.peer_on_l(contender, stream, reads)
            else:
                m = self.measure(contender, stream, reads, chunks)
            self.results.append(m)
            self.log(f"  {contender.name:<24} {_fmt_result(m)}")

    def peer_on_l(self, contender: Contender, stream: BenchStream, reads: str) -> Measurement:
        deadline = self.args.peer_deadline
        skipped = Measurement(stream.protocol, "L", reads, contender.name, "peer", stream.events, len(stream.body),
                              status="skipped")
        if self.args.quick:
            skipped.note = "not run with --quick"
            return skipped
        at_m = self.find(stream.protocol, "M", reads, contender.name)
        if at_m is not None and at_m.us_per_event is not None:
            # M's per-event cost, growing from M to L as it grew from S to M (peers that re-parse or
            # re-concatenate what they accumulated grow faster than linearly).
            at_s = self.find(stream.protocol, "S", reads, contender.name)
            growth = 1.0
            if at_s is not None and at_s.us_per_event:
                growth = max(1.0, at_m.us_per_event / at_s.us_per_event)
            predicted = at_m.us_per_event * growth * stream.events / 1e6
            if predicted > deadline:
                skipped.note = (f"predicted to take {predicted:.0f} s for one run (its per-event cost on M, "
                                f"growing x{growth:.1f} as from S to M), over the {deadline:.0f} s deadline")
                return skipped
        return self.measure_in_child(contender, stream, reads, deadline)

    def find(self, protocol: str, size: str, reads: str, contender: str) -> Measurement | None:
        for m in self.results:
            if m.protocol == protocol and m.size == size and m.reads == reads and m.contender == contender:
                return m
        return None

    def fixtures(self, protocol: str) -> list[dict[str, Any]]:
        """limit and toolwire on each recorded stream of `protocol`, per-event reads (the calls are checked
        in tests/wire)."""
        rows: list[dict[str, Any]] = []
        wanted = [c for c in CONTENDERS if c.name in ("limit", "toolwire")]
        for stream in fixture_streams(protocol):
            chunks = READS["event"](stream.body)
            row: dict[str, Any] = {"fixture": stream.label, "events": stream.events}
            for contender in wanted:
                runner = self.prepare(contender, stream, chunks)
                if isinstance(runner, str):
                    row[contender.name] = None
                    continue
                runs = []
                try:
                    self.call(runner, contender.is_async)
                    for _ in range(15 if not self.args.quick else 3):
                        runs.append(self.call(runner, contender.is_async)[0])
                except Exception as exc:
                    row[contender.name] = None
                    row["note"] = f"{type(exc).__name__}"
                    continue
                row[contender.name] = statistics.median(runs) * 1e6 / max(stream.events, 1)
            rows.append(row)
        return rows


def _child_run(protocol: str, size: str, seed: int, reads: str, name: str, send: Any) -> None:
    """In a spawned process: warm `name` up on S (three runs), report ready, then time one run on `size`."""
    try:
        bench = Bench(argparse.Namespace(quick=True, seed=seed))
        contender = next(c for c in CONTENDERS if c.name == name)
        small = generate(protocol, "S", seed)
        for _ in range(3):
            bench.call(contender.prepare(small, READS[reads](small.body)), contender.is_async)
        stream = generate(protocol, size, seed)
        runner = contender.prepare(stream, READS[reads](stream.body))
        send.send("ready")
        elapsed, outcome = bench.call(runner, contender.is_async)
        send.send(("ok", elapsed, _same(stream, outcome)))
    except BaseException as exc:
        send.send(("error", 0.0, f"{type(exc).__name__}: {exc}"[:300]))


def _fmt_result(m: Measurement) -> str:
    if m.us_per_event is None:
        return f"{m.status}: {m.note}"
    extra = ""
    if m.limit_ratios and m.kind not in ("limit", "baseline"):
        extra = f", {statistics.median(m.limit_ratios):.2f}x the limit"
        if m.httpx_ratios:
            extra += f", {statistics.median(m.httpx_ratios):.2f}x the httpx limit"
    if m.added_us:
        extra += f", adds {statistics.median(m.added_us):.2f} µs/event"
    return f"{m.us_per_event:9.2f} µs/event  ({len(m.runs)} runs{extra}{'; ' + m.note if m.note else ''})"


# -- memory ------------------------------------------------------------------------------------------


def peak_memory(bench: Bench, stream: BenchStream, reads: str) -> dict[str, Any]:
    """tracemalloc's peak while toolwire (previews on) streams `stream`, against the body's size."""
    contender = next(c for c in CONTENDERS if c.name == "toolwire")
    runner = contender.prepare(stream, READS[reads](stream.body))
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    outcome = bench.loop.run_until_complete(runner())  # type: ignore[arg-type]
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {"protocol": stream.protocol, "reads": reads, "contender": contender.name, "peak_bytes": peak,
            "body_bytes": len(stream.body), "ratio": peak / len(stream.body), "ok": _same(stream, outcome) is None}


# -- entry point ---------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("toolwire", "httpx", "orjson", "starlette", "uvicorn", "openai", "anthropic", "pydantic-ai-slim",
                 "langchain-core", "litellm"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="S and M only, short budgets, written to bench/results/quick/ (a smoke run)")
    parser.add_argument("--protocols", default=",".join(GENERATORS), help="comma-separated protocol names")
    parser.add_argument("--sizes", default=None, help="comma-separated sizes (default S,M,L; S,M with --quick)")
    parser.add_argument("--reads", default=",".join(READS),
                        help="comma-separated read patterns: event (one SSE event per read), 16k (default both)")
    # 20 s keeps the whole run near 15 minutes: peers on L run in both read patterns.
    parser.add_argument("--peer-deadline", type=float, default=20.0,
                        help="seconds one peer run on L may take before it is stopped (default 20)")
    parser.add_argument("--no-peers", action="store_true", help="toolwire, the limits and the layers only")
    parser.add_argument("--no-server", action="store_true", help="skip the server layer")
    parser.add_argument("--no-readme", action="store_true",
                        help="do not paste the tables into docs/benchmarks.md (a whole run does by default)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None,
                        help="where results.md and plot.png go (default bench/results, or bench/results/quick)")
    args = parser.parse_args(argv)
    out = args.out or (QUICK_RESULTS if args.quick else RESULTS)
    sizes = (args.sizes or ("S,M" if args.quick else "S,M,L")).split(",")
    protocols = [p for p in args.protocols.split(",") if p]
    patterns = [r for r in args.reads.split(",") if r]
    unknown = [r for r in patterns if r not in READS]
    if unknown:
        parser.error(f"unknown read pattern {unknown[0]!r}; choose among {', '.join(READS)}")

    bench = Bench(args)
    started = time.perf_counter()
    bench.log(f"toolwire benchmark: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"reads {', '.join(patterns)}, seed {args.seed}")
    memory: list[dict[str, Any]] = []
    latency: list[dict[str, Any]] = []
    long_events: list[dict[str, Any]] = []
    server: list[dict[str, Any]] = []
    fixtures: dict[str, list[dict[str, Any]]] = {}
    for protocol in protocols:
        for size in sizes:
            stream = generate(protocol, size, args.seed)
            for reads in patterns:
                bench.run_stream(stream, reads)
                if size == "L":
                    memory.append(peak_memory(bench, stream, reads))
                    row = memory[-1]
                    bench.log(f"  peak memory, {row['contender']}: {row['peak_bytes'] / 1e6:.1f} MB "
                              f"= {row['ratio']:.2f}x the body")
            del stream
        latency.append(text_latency(protocol, 20 if args.quick else 100, args.seed))
        row = latency[-1]
        bench.log(f"  text delta to the caller, per-event reads: raw httpx {row['raw_us']:.1f} µs, toolwire "
                  f"{row['toolwire_us']:.1f} µs, through the agent {row['agent_us']:.1f} µs")
    for protocol in [p for p in ("openai-chat", "anthropic") if p in protocols]:
        long_events.append(long_event(protocol, 2 if args.quick else 5))
        row = long_events[-1]
        if row["status"] == "ok":
            bench.log(f"  one 8 MB event, {protocol}: 1 KiB reads {row['small_s']:.3f} s, 16 KiB reads "
                      f"{row['large_s']:.3f} s ({row['ratio']:.2f}x)")
    if not args.no_server:
        # S and M: the slope between them splits the server's cost per event from its cost per run.
        server_sizes = [s for s in ("S", "M") if s in sizes] or sizes[:1]
        for protocol in protocols:
            for size in server_sizes:
                for reads in patterns:
                    bench.log(f"\nserver layer, {protocol} {size}, {reads} reads "
                              f"[{time.perf_counter() - started:.0f} s]")
                    budget, cap = (3.0, 3) if args.quick else (8.0, 7)
                    server.append(measure_server(protocol, size, args.seed, reads, budget, cap))
                    row = server[-1]
                    if row["status"] == "ok":
                        bench.log(f"  agent alone {row['agent_us']:.2f} µs/event; native route adds "
                                  f"{row['native_added_us']:.2f}, Vercel route {row['vercel_added_us']:.2f} "
                                  f"µs/event ({row['rounds']} rounds)")
                    else:
                        bench.log(f"  {row['status']}: {row['note']}")
    bench.log(f"\nrecorded streams [{time.perf_counter() - started:.0f} s]")
    for folder in sorted(p.name for p in FIXTURES.iterdir()) if FIXTURES.is_dir() else []:
        if _protocol_available(folder):
            fixtures[folder] = bench.fixtures(folder)
    elapsed = time.perf_counter() - started
    bench.log(f"\nfinished in {elapsed:.0f} s")

    from .report import write_report

    def summary(m: Measurement) -> dict[str, Any]:
        return dict(asdict(m), us_per_event=m.us_per_event,
                    limit_ratio=statistics.median(m.limit_ratios) if m.limit_ratios else None,
                    httpx_limit_ratio=statistics.median(m.httpx_ratios) if m.httpx_ratios else None,
                    added_us_per_event=statistics.median(m.added_us) if m.added_us else None)

    data = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": _cpu_name()},
        "versions": versions(),
        "reads": patterns,
        "seed": args.seed,
        "quick": args.quick,
        "elapsed_s": elapsed,
        "sizes": {s: SIZES[s] for s in sizes},
        "measurements": [summary(m) for m in bench.results],
        "memory": memory,
        "latency": latency,
        "long_event": long_events,
        "server": server,
        "fixtures": fixtures,
        "broken": bench.broken,
    }
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "results.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    write_report(data, out)
    bench.log(f"wrote {out / 'results.md'}, {out / 'readme-table.md'} and {out / 'plot.png'}")
    # Only a whole run speaks for the docs: a partial or quick one would show a partial table there.
    whole = (not args.quick and args.out is None and not args.no_peers and not args.no_server
             and sizes == ["S", "M", "L"] and set(protocols) == set(GENERATORS) and set(patterns) == set(READS))
    if whole and not args.no_readme:
        from .report import paste_into_readme

        readme = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
        if paste_into_readme(readme, (out / "readme-table.md").read_text()):
            bench.log(f"updated the tables in {readme}")
        else:
            bench.log(f"{readme} has no benchmark markers; paste {out / 'readme-table.md'} by hand")
    return 0


def _protocol_available(folder: str) -> bool:
    from .contenders import _SPEC

    protocol = "openai-chat" if folder == "openai-compatible" else folder
    if protocol not in _SPEC:
        return False
    try:
        from toolwire.wire import protocol_class

        protocol_class(protocol)
    except Exception:
        return False
    return True


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
