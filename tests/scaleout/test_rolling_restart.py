"""A rolling restart: the replica that takes over a stopped replica's runs keeps every lease it holds alive while it
takes them over, however long that takes (bench/load's `rolling` scenario, docs/guides/durable-runs.md).

Real replicas on one PostgreSQL database and one Redis, the gate as their model. The replica that takes the runs
over reaches Redis through a proxy that delivers Redis's answers late (a slow network, or a busy Redis), so that
taking over each run costs it a few round trips and the round that takes them all lasts several leases; a third
replica that runs nothing (`--max-runs 0`) and continues nothing (`--max-continuations 0`) ends every run whose
lease expired while a process held it: exactly what another replica would do to a run whose lease lapsed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import anyio
import pytest

from tests.scaleout.test_durable_runs import collect, gap_free
from tests.server.support import Event, GateServer, ServerProcess, read_events, text, until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]  # three replicas per test on a loaded machine

Replica = Callable[..., ServerProcess]
LEASE = 1.0
RUNS = 10
DELAY = 0.15
"""Seconds each answer of Redis arrives late at the replica that takes the runs over: at RUNS runs, its takeover
round lasts several times LEASE (each takeover reads and appends to the run's log)."""


class SlowProxy:
    """A TCP proxy on loopback whose answers (target → client) arrive `delay` seconds late, in order, without
    holding up the ones behind them (latency, not a narrower pipe)."""

    def __init__(self, host: str, port: int, delay: float) -> None:
        self.target = (host, port)
        self.delay = delay
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="slow-proxy")
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    def start(self) -> None:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._client, "127.0.0.1", 0),
                                                        self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:  # each pump reads the end of its stream, and its client's task returns
            writer.close()
        await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 10)
        await self._server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        self._writers.append(writer)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.append(upstream_writer)
        await asyncio.gather(self._pump(reader, upstream_writer, 0.0), self._pump(upstream_reader, writer, self.delay),
                             return_exceptions=True)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, delay: float) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    sink.close()
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                sink.write(data)
                await sink.drain()

        delivering = asyncio.ensure_future(deliver())
        try:
            while data := await source.read(65536):
                queue.put_nowait((loop.time() + delay, data))
            queue.put_nowait((0.0, b""))
            await delivering
        finally:
            delivering.cancel()
            await asyncio.gather(delivering, return_exceptions=True)


async def test_runs_taken_over_in_a_long_round_keep_their_leases(
        replica: Replica, gate: GateServer, redis_url: str) -> None:
    """A is stopped with `--drain-handover` while RUNS runs stream; B takes them all over in a round that lasts
    several leases. Each run's lease stays B's all along (renewed while the round goes on), so the reaper C ends
    none of them: every run completes, continued exactly once, its events gap-free."""
    where = urlsplit(redis_url)
    proxy = SlowProxy(where.hostname or "127.0.0.1", where.port or 6379, DELAY)
    proxy.start()
    try:
        a = replica("--drain-handover", lease_seconds=LEASE)
        b = replica("--redis", f"redis://127.0.0.1:{proxy.port}/0", redis=False, lease_seconds=LEASE)
        c = replica("--max-runs", "0", "--max-continuations", "0", lease_seconds=LEASE)
        scripts = [gate.script(f"roll-{n}", text("An answer cut off by the restart.", chunks=8),
                               text("The answer after the handover.", chunks=2), gated=True) for n in range(RUNS)]
        followed: list[list[Event]] = [[] for _ in range(RUNS)]
        async with a.api() as on_a, c.api() as on_c, anyio.create_task_group() as tg:
            chats = [await on_a.new_chat() for _ in range(RUNS)]
            for n, chat in enumerate(chats):
                async with on_a.send(chat, f"[[roll-{n}]] go") as response:
                    async for event in read_events(response):
                        if event.type == "run_started":
                            break
                tg.start_soon(collect, on_c, chat, None, followed[n])
                scripts[n].release(2)
            await until(lambda: all(any(e.type == "text_delta" for e in events) for events in followed), timeout=30)
            assert a.process is not None
            a.process.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: a.process.wait(timeout=60))  # type: ignore[union-attr]
            await until(lambda: all(any(e.type == "run_resumed" for e in events) for events in followed),
                        timeout=RUNS * DELAY * 20 + 30)
            await anyio.sleep(LEASE * 3)  # the reaper looks three times a lease: a lapsed lease is found by now
            for script in scripts:
                script.open()
            await until(lambda: all(events and events[-1].type == "run_finished" for events in followed), timeout=60)
        started = time.monotonic()
        b.stop()  # while its Redis proxy is still there
        stop_seconds = time.monotonic() - started
    finally:
        proxy.stop()
    assert stop_seconds < 10, stop_seconds

    statuses = [events[-1].data["status"] for events in followed]
    assert statuses == ["completed"] * RUNS, statuses  # none was ended `interrupted` by the reaper
    for events in followed:
        kinds = [e.type for e in events]
        assert kinds.count("run_resumed") == 1, kinds  # taken over once, by B, and never again
        resumed = events[kinds.index("run_resumed")]
        assert resumed.data["reason"] == "handover"
        gap_free(events)


async def test_renewing_leases_never_waits_for_a_run_another_transaction_holds(shared_db: str) -> None:
    """A replica renews its runs' leases while its writer's transactions hold some of their rows, and another
    replica's take-over transactions others, in whatever order they come: a renewal that waited for one of those
    rows while holding others was a deadlock PostgreSQL broke by failing the renewal (bench/load's `rolling`
    scenario logged it every few seconds at 100 runs, until leases lapsed). The renewal skips a row another
    transaction holds (that lease is renewed at the next round) instead of waiting for it."""
    from sqlalchemy import text as sql
    from sqlalchemy.ext.asyncio import create_async_engine

    from toolwire.messages import Message
    from toolwire.store import SQLStore, new_id

    async with SQLStore(shared_db) as store:
        owner = await store.ensure_user("alice")
        started = []
        for _ in range(2):
            chat = await store.create_chat(owner.id, "a chat")
            started.append((await store.start_run(chat.id, user_message=Message.user("go"), client_message_id=new_id("c"),
                                                  owner="proc_a", lease_seconds=30)).run.id)
        engine = create_async_engine(shared_db.replace("postgresql://", "postgresql+asyncpg://", 1))
        try:
            async with engine.connect() as holder:
                # Another transaction holds the second run's row (a writer's batch, a take-over) and keeps it.
                await holder.execute(sql("UPDATE runs SET steps = steps WHERE id = :id"), {"id": started[1]})
                with anyio.fail_after(20):  # without the skip the renewal waits as long as the holder holds the row
                    renewed = await store.renew_leases("proc_a", started, 30)
                assert renewed == 1  # the first run's lease; the second one's at the next round
                await holder.rollback()
            assert await store.renew_leases("proc_a", started, 30) == 2
        finally:
            await engine.dispose()


async def test_a_replica_that_handed_its_runs_over_ends_its_streams_whole(
        replica: Replica, gate: GateServer) -> None:
    """A follower on a replica stopped with `--drain-handover` follows a run that goes on elsewhere. Once the replica
    handed its runs over, its streams end whole (no `run_finished`: the client follows on from another replica with
    its last id) instead of staying open until uvicorn's shutdown timeout cut them off, with a traceback in the log,
    and held the stop that long (bench/load's `rolling` scenario: 8 to 19 s per replica)."""
    a = replica("--drain-handover", lease_seconds=LEASE)
    b = replica(lease_seconds=LEASE)
    script = gate.script("elsewhere", text("A long answer that goes on on B.", chunks=8), gated=True)
    async with a.api() as on_a, b.api() as on_b:
        chat = await on_b.new_chat()
        async with on_b.send(chat, "[[elsewhere]] go") as response:
            async for event in read_events(response):
                if event.type == "run_started":
                    break
        seen: list[Event] = []
        async with on_a.follow(chat) as response:
            assert response.status_code == 200
            script.release(2)
            async for event in read_events(response):  # raises if the stream is cut off instead of ended
                seen.append(event)
                if event.type == "text_delta":
                    assert a.process is not None
                    a.process.send_signal(signal.SIGTERM)
        assert "run_finished" not in [e.type for e in seen]
        exited = await anyio.to_thread.run_sync(lambda: a.process.wait(timeout=60))  # type: ignore[union-attr]
        assert exited == -signal.SIGTERM
        assert "timeout graceful shutdown exceeded" not in a.stderr() + (a.folder / "server-1.out").read_text()
        script.open()
        rest = await collect(on_b, chat, str(seen[-1].id))  # the client follows on from B with its last id
        assert rest[-1].type == "run_finished" and rest[-1].data["status"] == "completed"
        gap_free(seen + rest)
