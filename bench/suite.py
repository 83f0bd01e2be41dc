"""The benchmark run: every contender on the same bytes, then the results table and plot.

    bench/run              # the whole suite (a few minutes on 2 cores)
    bench/run --quick      # S and M only, fewer repeats (a smoke run)

Method. Each stream is cut into `--chunk-size` reads (16 KiB by default, what a busy server's socket
reads hand over) and every contender reads exactly those chunks. A measurement is a warm-up run,
then timed runs (at least one) until the size's time budget or repeat cap is reached; the reported
figure is the median, divided by the number of wire events. The garbage collector stays on (users pay for it) and is run
before each timed run (its young generations). The first run's outcome is compared with the stream's expected text and calls;
a contender that assembles anything else is reported as a mismatch, not timed.

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

from .contenders import CONTENDERS, Contender, Outcome, Runner, chunked
from .streams import FIXTURES, GENERATORS, SIZES, BenchStream, fixture_streams, generate

__all__ = ["main"]

RESULTS = Path(__file__).resolve().parent / "results"

# Per size: (time budget in seconds, most timed runs) for one peer on one stream ...
_BUDGET = {"S": (1.0, 30), "M": (8.0, 9), "L": (12.0, 5)}
_QUICK_BUDGET = {"S": (0.3, 10), "M": (1.0, 3), "L": (4.0, 2)}
# ... and (budget, most rounds) for the limit, httpx and toolwire, which are measured together in rounds.
_CORE_BUDGET = {"S": (3.0, 41), "M": (10.0, 21), "L": (40.0, 7)}
_QUICK_CORE_BUDGET = {"S": (0.5, 9), "M": (2.0, 5), "L": (8.0, 3)}


@dataclass(slots=True)
class Measurement:
    protocol: str
    size: str
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
        start = time.perf_counter()
        if is_async:
            outcome = self.loop.run_until_complete(runner())  # type: ignore[arg-type]
        else:
            outcome = runner()  # type: ignore[assignment]
        return time.perf_counter() - start, outcome  # type: ignore[return-value]

    def prepare(self, contender: Contender, stream: BenchStream, chunks: list[bytes]) -> Runner | str:
        if contender.name in self.broken:
            return self.broken[contender.name]
        try:
            return contender.prepare(stream, chunks)
        except ImportError as exc:
            reason = f"not available ({type(exc).__name__}: {exc})"
            self.broken[contender.name] = reason
            return reason

    def measure(self, contender: Contender, stream: BenchStream, chunks: list[bytes]) -> Measurement:
        m = Measurement(stream.protocol, stream.label, contender.name, contender.kind, stream.events,
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

    def measure_rounds(self, contenders: list[Contender], stream: BenchStream,
                       chunks: list[bytes]) -> list[Measurement]:
        """Measure `contenders` (the limit first) in interleaved rounds, so that a slow spell of a shared
        machine hits all of them alike; each round also gives each one's ratio to the limit."""
        out: list[Measurement] = []
        ready: list[tuple[Measurement, Contender, Runner]] = []
        for contender in contenders:
            m = Measurement(stream.protocol, stream.label, contender.name, contender.kind, stream.events,
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
        while rounds < cap and spent < budget:
            times = []
            for m, contender, runner in ready:
                elapsed, _ = self.call(runner, contender.is_async)
                m.runs.append(elapsed)
                times.append(elapsed)
                spent += elapsed
            for (m, _, _), elapsed in zip(ready, times, strict=True):
                m.limit_ratios.append(elapsed / times[0])
            rounds += 1
        return out

    def measure_in_child(self, contender: Contender, stream: BenchStream, deadline: float) -> Measurement:
        """One run in a fresh process, stopped at `deadline` seconds (peers on L).

        The child rebuilds the stream from its seed and warms the peer up on S first; the deadline counts
        from the start of the timed run.
        """
        m = Measurement(stream.protocol, stream.label, contender.name, contender.kind, stream.events,
                        len(stream.body))
        if contender.name in self.broken:
            m.status, m.note = "skipped", self.broken[contender.name]
            return m
        context = multiprocessing.get_context("spawn")
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_child_run, args=(
            stream.protocol, stream.label, self.args.seed, self.args.chunk_size, contender.name, send))
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

    def run_stream(self, stream: BenchStream) -> None:
        chunks = chunked(stream.body, self.args.chunk_size)
        self.log(f"\n{stream.protocol} {stream.label}: {stream.events:,} events, {len(stream.body):,} bytes "
                 f"[{time.perf_counter() - self.started:.0f} s]")
        core = [c for c in CONTENDERS if c.kind != "peer" and stream.protocol in c.protocols]
        for m in self.measure_rounds(core, stream, chunks):
            self.results.append(m)
            self.log(f"  {m.contender:<24} {_fmt_result(m)}")
        for contender in CONTENDERS:
            if stream.protocol not in contender.protocols or contender.kind != "peer":
                continue
            if stream.label == "L":
                m = self.peer_on_l(contender, stream, chunks)
            else:
                m = self.measure(contender, stream, chunks)
            self.results.append(m)
            self.log(f"  {contender.name:<24} {_fmt_result(m)}")

    def peer_on_l(self, contender: Contender, stream: BenchStream, chunks: list[bytes]) -> Measurement:
        deadline = self.args.peer_deadline
        at_m = self.find(stream.protocol, "M", contender.name)
        if self.args.quick:
            m = Measurement(stream.protocol, "L", contender.name, "peer", stream.events, len(stream.body),
                            status="skipped", note="not run with --quick")
            return m
        if at_m is not None and at_m.us_per_event is not None:
            # M's per-event cost, growing from M to L as it grew from S to M (peers that re-parse or
            # re-concatenate what they accumulated grow faster than linearly).
            at_s = self.find(stream.protocol, "S", contender.name)
            growth = 1.0
            if at_s is not None and at_s.us_per_event:
                growth = max(1.0, at_m.us_per_event / at_s.us_per_event)
            predicted = at_m.us_per_event * growth * stream.events / 1e6
            if predicted > deadline:
                return Measurement(stream.protocol, "L", contender.name, "peer", stream.events, len(stream.body),
                                   status="skipped",
                                   note=f"predicted to take {predicted:.0f} s for one run (its per-event cost on M, "
                                        f"growing x{growth:.1f} as from S to M), over the {deadline:.0f} s deadline")
        return self.measure_in_child(contender, stream, deadline)

    def find(self, protocol: str, size: str, contender: str) -> Measurement | None:
        for m in self.results:
            if m.protocol == protocol and m.size == size and m.contender == contender:
                return m
        return None

    def fixtures(self, protocol: str) -> list[dict[str, Any]]:
        """limit and toolwire on each recorded stream of `protocol` (the calls are checked in tests/wire)."""
        rows: list[dict[str, Any]] = []
        wanted = [c for c in CONTENDERS if c.name in ("limit", "toolwire")]
        for stream in fixture_streams(protocol):
            chunks = chunked(stream.body, self.args.chunk_size)
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


def _child_run(protocol: str, size: str, seed: int, chunk_size: int, name: str, send: Any) -> None:
    """In a spawned process: warm `name` up on S (three runs), report ready, then time one run on `size`."""
    try:
        bench = Bench(argparse.Namespace(quick=True, chunk_size=chunk_size, seed=seed))
        contender = next(c for c in CONTENDERS if c.name == name)
        small = generate(protocol, "S", seed)
        for _ in range(3):
            bench.call(contender.prepare(small, chunked(small.body, chunk_size)), contender.is_async)
        stream = generate(protocol, size, seed)
        runner = contender.prepare(stream, chunked(stream.body, chunk_size))
        send.send("ready")
        elapsed, outcome = bench.call(runner, contender.is_async)
        send.send(("ok", elapsed, _same(stream, outcome)))
    except BaseException as exc:
        send.send(("error", 0.0, f"{type(exc).__name__}: {exc}"[:300]))


def _fmt_result(m: Measurement) -> str:
    if m.us_per_event is None:
        return f"{m.status}: {m.note}"
    ratio = f", {statistics.median(m.limit_ratios):.2f}x the limit" if m.limit_ratios and m.kind != "limit" else ""
    return f"{m.us_per_event:9.2f} µs/event  ({len(m.runs)} runs{ratio}{'; ' + m.note if m.note else ''})"


# -- memory and latency --------------------------------------------------------------------------------


def peak_memory(bench: Bench, stream: BenchStream, previews: bool) -> dict[str, Any]:
    """tracemalloc's peak while toolwire streams `stream`, against the body's size."""
    name = "toolwire" if previews else "toolwire (no previews)"
    contender = next(c for c in CONTENDERS if c.name == name)
    chunks = chunked(stream.body, bench.args.chunk_size)
    runner = contender.prepare(stream, chunks)
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    outcome = bench.loop.run_until_complete(runner())  # type: ignore[arg-type]
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {"protocol": stream.protocol, "contender": name, "peak_bytes": peak, "body_bytes": len(stream.body),
            "ratio": peak / len(stream.body), "ok": _same(stream, outcome) is None}


def first_text_latency(bench: Bench, protocol: str, trials: int) -> dict[str, Any]:
    """Time from the chunk holding the first text delta leaving the transport to the caller seeing it:
    toolwire's `text_delta` event against a raw httpx `aiter_bytes()` read of the same chunk."""
    import httpx

    from toolwire import Message, get_model
    from toolwire.events import TextDelta

    from .contenders import _SPEC

    stream = generate(protocol, "S")
    events = stream.body.split(b"\n\n")
    first = next(i for i, e in enumerate(events) if b'"I\'ll"' in e)  # every script's first text token
    head = b"\n\n".join(events[:first]) + b"\n\n"
    delta = events[first] + b"\n\n"
    rest = b"\n\n".join(events[first + 1 :])
    stamps: list[float] = []

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield head
            stamps.append(time.perf_counter())
            yield delta
            yield rest

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = get_model(_SPEC[protocol], api_key="bench", http_client=client, max_retries=0)
    messages = [Message.user("hi")]

    async def raw() -> float:
        seen = 0.0
        async with client.stream("POST", "http://bench.invalid/v1") as response:
            count = 0
            async for _ in response.aiter_bytes():
                count += 1
                if count == 2:
                    seen = time.perf_counter()
        return seen - stamps[-1]

    async def toolwire() -> float:
        seen = 0.0
        async with model.stream(messages) as response:
            async for event in response:
                if not seen and type(event) is TextDelta:
                    seen = time.perf_counter()
        return seen - stamps[-1]

    raw_times: list[float] = []
    toolwire_times: list[float] = []
    for _ in range(trials):
        raw_times.append(bench.loop.run_until_complete(raw()))
        toolwire_times.append(bench.loop.run_until_complete(toolwire()))
    raw_median = statistics.median(raw_times)
    toolwire_median = statistics.median(toolwire_times)
    return {"protocol": protocol, "raw_us": raw_median * 1e6, "toolwire_us": toolwire_median * 1e6,
            "overhead_us": (toolwire_median - raw_median) * 1e6, "trials": trials}


# -- entry point ---------------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("toolwire", "httpx", "orjson", "openai", "anthropic", "pydantic-ai-slim", "langchain-core",
                 "litellm"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="S and M only, short budgets (a smoke run)")
    parser.add_argument("--protocols", default=",".join(GENERATORS), help="comma-separated protocol names")
    parser.add_argument("--sizes", default=None, help="comma-separated sizes (default S,M,L; S,M with --quick)")
    parser.add_argument("--chunk-size", type=int, default=16_384, help="bytes per network read (default 16384)")
    parser.add_argument("--peer-deadline", type=float, default=60.0,
                        help="seconds one peer run on L may take before it is stopped (default 60)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results.md and plot.png go")
    args = parser.parse_args(argv)
    sizes = (args.sizes or ("S,M" if args.quick else "S,M,L")).split(",")
    protocols = [p for p in args.protocols.split(",") if p]

    bench = Bench(args)
    started = time.perf_counter()
    bench.log(f"toolwire benchmark: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"{args.chunk_size}-byte reads, seed {args.seed}")
    memory: list[dict[str, Any]] = []
    latency: list[dict[str, Any]] = []
    fixtures: dict[str, list[dict[str, Any]]] = {}
    for protocol in protocols:
        for size in sizes:
            stream = generate(protocol, size, args.seed)
            bench.run_stream(stream)
            if size == "L":
                for previews in (True, False):
                    memory.append(peak_memory(bench, stream, previews))
                    row = memory[-1]
                    bench.log(f"  peak memory, {row['contender']}: {row['peak_bytes'] / 1e6:.1f} MB "
                              f"= {row['ratio']:.2f}x the body")
            del stream
        latency.append(first_text_latency(bench, protocol, 50 if args.quick else 300))
        row = latency[-1]
        bench.log(f"  first text delta: raw httpx {row['raw_us']:.1f} µs, toolwire {row['toolwire_us']:.1f} µs "
                  f"(overhead {row['overhead_us']:.1f} µs)")
    bench.log(f"\nrecorded streams [{time.perf_counter() - started:.0f} s]")
    for folder in sorted(p.name for p in FIXTURES.iterdir()) if FIXTURES.is_dir() else []:
        if _protocol_available(folder):
            fixtures[folder] = bench.fixtures(folder)
    elapsed = time.perf_counter() - started
    bench.log(f"\nfinished in {elapsed:.0f} s")

    from .report import write_report

    data = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": _cpu_name()},
        "versions": versions(),
        "chunk_size": args.chunk_size,
        "seed": args.seed,
        "quick": args.quick,
        "elapsed_s": elapsed,
        "sizes": {s: SIZES[s] for s in sizes},
        "measurements": [dict(asdict(m), us_per_event=m.us_per_event,
                              limit_ratio=statistics.median(m.limit_ratios) if m.limit_ratios else None)
                         for m in bench.results],
        "memory": memory,
        "latency": latency,
        "fixtures": fixtures,
        "broken": bench.broken,
    }
    raw = args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "results.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    write_report(data, args.out)
    bench.log(f"wrote {args.out / 'results.md'} and {args.out / 'plot.png'}")
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
