"""The server layer: what `toolwire serve`'s app adds per event, from the provider's chunk to the SSE frame.

Method. A child process runs the real application (`toolwire.server.create_app`, SQLite in a temporary
folder, the in-memory event log) on uvicorn on a loopback socket. Its agent factory builds, for every
run, an `Agent` over a model whose mock transport replays the generated stream (then a short follow-up
answer once the no-op tools have run), exactly as `bench/layers.py` does in-process. The parent is the
client: it posts a message on the native route (`POST /api/chats/{id}/messages`) or on the Vercel AI SDK
route (`POST /api/chat`) and reads the SSE response to its end over real HTTP.

What is measured is the server process's CPU time (`time.process_time()` in the server, read through a
probe route the benchmark adds in front of the app; the probe's own cost is measured and subtracted), so
the client's reading is not counted. In the same round the server also runs the same agent directly
(`agent.stream` with no server around it, on its own event loop, in its own process): the server's added
CPU per event is the route's CPU less that run's, divided by the stream's wire events. It therefore
holds everything between the agent and the socket: the run manager, storing the rounds in SQLite,
publishing to the event log, the follower, the protocol's encoder, Starlette and uvicorn's writes.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from .contenders import READS, USER_PROMPT
from .streams import generate

__all__ = ["measure_server"]

_TOKEN = "bench-token-0123456789abcdef"
_PROBE = "/__bench/"


def _with_probes(app: Any, direct_run: Any) -> Any:
    """The app, with `/__bench/cpu` (this process's CPU seconds) and `/__bench/agent` (the CPU seconds
    of one direct agent run) answered before it."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_PROBE):
            if scope["path"] == _PROBE + "agent":
                start = time.process_time()
                await direct_run()
                value = time.process_time() - start
            else:
                value = time.process_time()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": orjson.dumps(value)})
            return
        await app(scope, receive, send)

    return wrapped


def _serve(protocol: str, size: str, seed: int, reads: str, sock: socket.socket, ready: Any) -> None:
    """In the child: the app on uvicorn, on `sock`, until the parent ends the process."""
    import uvicorn

    from toolwire import Agent
    from toolwire.server import ServerConfig, create_app
    from toolwire.server.limits import Limits

    from .layers import agent_parts

    stream = generate(protocol, size, seed)
    chunks = READS[reads](stream.body)
    model, tools = agent_parts(stream, chunks)

    def factory(ctx: Any) -> Any:
        return Agent(model, tools=tools, memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    direct = Agent(model, tools=tools)

    async def direct_run() -> None:
        async with direct.stream(USER_PROMPT) as run:
            async for _ in run:
                pass

    folder = tempfile.mkdtemp(prefix="toolwire-bench-")
    limits = Limits(runs_per_minute=1_000_000, tool_calls_per_minute=10_000_000, writes_per_minute=1_000_000,
                    max_user_requests=1_000_000)
    config = ServerConfig(web_dir=None, limits=limits, max_events_per_chat=max(10_000, 4 * stream.events))
    app = create_app(factory, store=f"sqlite:///{Path(folder) / 'bench.db'}", tokens={"bench": [_TOKEN]},
                     config=config)
    server = uvicorn.Server(uvicorn.Config(_with_probes(app, direct_run), log_level="warning", lifespan="on"))
    ready.send(stream.events)
    server.run(sockets=[sock])


class _Client:
    def __init__(self, port: int) -> None:
        import httpx

        self.http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120,
                                      headers={"authorization": f"Bearer {_TOKEN}"})
        self.count = 0

    async def cpu(self) -> float:
        await asyncio.sleep(0.02)  # lets the server finish what the last response left (a run's end)
        return float(orjson.loads((await self.http.get(_PROBE + "cpu")).content))

    async def direct(self) -> float:
        return float(orjson.loads((await self.http.get(_PROBE + "agent")).content))

    async def _read(self, method: str, url: str, body: dict[str, Any]) -> bytes:
        parts = []
        async with self.http.stream(method, url, json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(f"{url} answered {response.status_code}: {(await response.aread())[:300]!r}")
            async for chunk in response.aiter_bytes():
                parts.append(chunk)
        return b"".join(parts)

    async def native(self) -> tuple[float, bytes]:
        chat = orjson.loads((await self.http.post("/api/chats", json={})).content)
        before = await self.cpu()
        body = await self._read("POST", f"/api/chats/{chat['id']}/messages",
                                {"text": USER_PROMPT, "client_message_id": f"m-{chat['id']}"})
        return await self.cpu() - before, body

    async def vercel(self) -> tuple[float, bytes]:
        self.count += 1
        message = {"id": f"m{self.count}", "role": "user", "parts": [{"type": "text", "text": USER_PROMPT}]}
        before = await self.cpu()
        body = await self._read("POST", "/api/chat", {"id": f"bench-{self.count}", "messages": [message]})
        return await self.cpu() - before, body


def _check(route: str, body: bytes) -> str | None:
    """Why a route's response is not a whole run that called both tools, or None."""
    if route == "native":
        if b'"type":"run_finished","status":"completed"' not in body or body.count(b'"type":"tool_result"') < 2:
            return "the native stream did not carry a finished run with two tool results"
    elif not body.rstrip().endswith(b"data: [DONE]") or body.count(b"tool-output-available") < 2:
        return "the Vercel stream did not carry two tool outputs and [DONE]"
    return None


async def _rounds(port: int, events: int, budget: float, cap: int) -> dict[str, Any]:
    client = _Client(port)
    try:
        for route in ("native", "vercel"):  # warm-up, and the check
            _, body = await getattr(client, route)()
            wrong = _check(route, body)
            if wrong is not None:
                return {"status": "mismatch", "note": wrong}
        await client.direct()
        probes = [await client.cpu() for _ in range(6)]
        probe = statistics.median(b - a for a, b in itertools.pairwise(probes))
        runs: dict[str, list[float]] = {"agent": [], "native": [], "vercel": []}
        added: dict[str, list[float]] = {"native": [], "vercel": []}
        started = time.perf_counter()
        spent = 0.0
        while len(runs["agent"]) < cap and (spent < budget or len(runs["agent"]) < 3):
            direct = await client.direct()
            runs["agent"].append(direct)
            for route in ("native", "vercel"):
                cpu, _ = await getattr(client, route)()
                cpu -= probe
                runs[route].append(cpu)
                added[route].append((cpu - direct) * 1e6 / events)
            spent = time.perf_counter() - started
        return {"status": "ok", "rounds": len(runs["agent"]), "probe_us": probe * 1e6,
                "agent_us": statistics.median(runs["agent"]) * 1e6 / events,
                "native_us": statistics.median(runs["native"]) * 1e6 / events,
                "vercel_us": statistics.median(runs["vercel"]) * 1e6 / events,
                "native_added_us": statistics.median(added["native"]),
                "vercel_added_us": statistics.median(added["vercel"])}
    finally:
        await client.http.aclose()


def measure_server(protocol: str, size: str, seed: int, reads: str, budget: float, cap: int) -> dict[str, Any]:
    """The server layer on one stream and read pattern (see the module docstring)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_serve, args=(protocol, size, seed, reads, sock, send), daemon=True)
    process.start()
    send.close()
    row: dict[str, Any] = {"protocol": protocol, "size": size, "reads": reads}
    try:
        if not receive.poll(120):
            return {**row, "status": "error", "note": "the server process did not start"}
        events = receive.recv()
        row["events"] = events
        row.update(asyncio.run(_wait_and_measure(port, events, budget, cap)))
    except Exception as exc:
        row.update(status="error", note=f"{type(exc).__name__}: {exc}"[:300])
    finally:
        process.terminate()
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()
        sock.close()
    return row


async def _wait_and_measure(port: int, events: int, budget: float, cap: int) -> dict[str, Any]:
    import httpx

    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as probe:
        while True:
            try:
                if (await probe.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not answer /healthz within 60 s")
            await asyncio.sleep(0.1)
    return await _rounds(port, events, budget, cap)
