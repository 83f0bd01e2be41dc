"""The Redis event log, signals and rate limiter against a real Redis, two "processes" (hubs) in one test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import orjson
import pytest

from tests.redis_server import RedisServer
from toolwire.server.eventlog import Cursor, CursorExpired, LogEntry, Position
from toolwire.server.redis import RedisBackends

pytestmark = pytest.mark.anyio


def entry(run: int, index: int, type_: str = "text_delta", **fields: object) -> LogEntry:
    event = {"type": type_, "run_id": f"run_{run}", "step": None, **fields}
    return LogEntry(Cursor(run, index), type_, event, orjson.dumps(event))


def a_run(run: int, count: int) -> list[LogEntry]:
    """`run_started`, `count - 2` text deltas, `run_finished`."""
    middle = [entry(run, i, text=f"t{i}") for i in range(2, count)]
    return [entry(run, 1, "run_started"), *middle, entry(run, count, "run_finished", status="completed")]


@pytest.fixture
def flushed(redis_server: RedisServer) -> RedisServer:
    redis_server.command("FLUSHALL")
    return redis_server


@asynccontextmanager
async def process(server: RedisServer, **options: object) -> AsyncIterator[RedisBackends]:
    """One server process's Redis side (its own hub, connections and reader)."""
    backends = RedisBackends(server.url, **options)  # type: ignore[arg-type]
    try:
        async with anyio.create_task_group() as tg:
            for part in (backends.event_log, backends.signals, backends.rate_limiter):
                await part.start(tg)
            try:
                yield backends
            finally:
                tg.cancel_scope.cancel()
    finally:
        await backends.hub.aclose()


async def test_the_cursor_is_the_stream_entry_id_and_reads_answer_like_the_memory_log(flushed: RedisServer) -> None:
    async with process(flushed, retention_seconds=120) as one:
        log = one.event_log
        for item in a_run(1, 5):
            await log.append("chat_a", [item])
        raw = flushed.command("XRANGE", "toolwire:events:chat_a", "-", "+")
        assert [f"1-{i}" for i in range(1, 6)] == [line for line in raw.split("\r\n") if line.startswith("1-")]
        assert [e.cursor for e in await log.read_after("chat_a", Cursor(1, 2))] == [Cursor(1, i) for i in (3, 4, 5)]
        assert await log.position("chat_a", Cursor(1, 3)) is Position.KNOWN
        assert await log.position("chat_a", Cursor(1, 9)) is Position.BEYOND
        assert await log.position("chat_a", Cursor(2, 0)) is Position.UNKNOWN
        assert await log.last_cursor("chat_a") == Cursor(1, 5)
        assert await log.read_after("chat_a", Cursor(2, 0)) == []  # the next run, not published yet
        for item in a_run(2, 3):
            await log.append("chat_a", [item])
        assert await log.runs_after("chat_a", 1) == [2]
        assert await log.last_cursor("chat_a", 1) == Cursor(1, 5)
        # Another process reads the same stream from Redis, not from a copy of its own.
        async with process(flushed) as two:
            got = await two.event_log.read_after("chat_a", Cursor(1, 0))
            assert [str(e.cursor) for e in got] == ["1-1", "1-2", "1-3", "1-4", "1-5", "2-1", "2-2", "2-3"]
            assert got[-1].event == {"type": "run_finished", "run_id": "run_2", "step": None, "status": "completed"}
            assert two.event_log.redis_reads == 1  # one XREAD for the whole replay


async def test_a_stream_gets_its_ttl_at_run_finished_and_is_trimmed_by_length(flushed: RedisServer) -> None:
    async with process(flushed, retention_seconds=120, max_events_per_chat=100) as one:
        log = one.event_log
        await log.append("chat_t", [entry(1, 1, "run_started")])
        await log.flush()  # appends are written in the background (a run waits only for its run_finished)
        live = await log.ttl("chat_t")
        assert live is not None and live > 3600  # a safety net while the run writes
        await log.append("chat_t", [entry(1, i) for i in range(2, 1000)])
        await log.append("chat_t", [entry(1, 1000, "run_finished")])
        ttl = await log.ttl("chat_t")
        assert ttl is not None and 0 < ttl <= 120
        length = int(flushed.command("XLEN", "toolwire:events:chat_t").strip(":\r\n"))
        assert 100 <= length < 300  # MAXLEN ~ trims whole nodes
        async with process(flushed) as two:
            with pytest.raises(CursorExpired):
                await two.event_log.read_after("chat_t", Cursor(1, 3))
            assert await two.event_log.position("chat_t", Cursor(1, 3)) is Position.EXPIRED
            assert await two.event_log.position("chat_t", Cursor(1, 999)) is Position.KNOWN


async def test_a_follower_in_another_process_gets_every_event_once_through_the_shared_reader(
        flushed: RedisServer) -> None:
    async with process(flushed) as writer, process(flushed) as reader:
        received: dict[int, list[Cursor]] = {n: [] for n in range(40)}

        async def follow(number: int) -> None:
            cursor = Cursor(1, 0)
            log = reader.event_log
            while True:
                entries = await log.read_after("chat_f", cursor)
                if not entries:
                    await log.wait("chat_f", cursor, 5.0)
                    continue
                received[number].extend(e.cursor for e in entries)
                cursor = entries[-1].cursor
                if entries[-1].type == "run_finished":
                    return

        events = a_run(1, 200)
        async with anyio.create_task_group() as tg:
            await writer.event_log.append("chat_f", events[:1])
            for number in received:
                tg.start_soon(follow, number)
            for item in events[1:]:
                await writer.event_log.append("chat_f", [item])
                if item.cursor.index % 20 == 0:
                    await anyio.sleep(0.01)
        expected = [e.cursor for e in events]
        assert all(cursors == expected for cursors in received.values())
        # 40 followers of 200 events (8,000 deliveries): each replays from Redis at first, a few times while
        # the reader takes the chat up, then the process's one reader feeds them all from its copy.
        assert reader.event_log.redis_reads < 40 * 10
        connections = await reader.hub.connections()
        assert sum(connections.values()) <= reader.hub.max_connections + 2


async def test_the_appends_of_many_runs_go_out_in_one_pipeline_on_the_writers_own_connection(
        flushed: RedisServer) -> None:
    async with process(flushed) as one:
        log = one.event_log
        for number in range(50):  # fifty runs append at one moment (none of them waits for its write)
            await log.append(f"chat_{number}", [entry(1, 1, "run_started"), entry(1, 2, text="hi")])
        await log.flush()
        assert log.redis_writes == 1
        for number in range(50):
            assert [str(e.cursor) for e in await log.read_after(f"chat_{number}", Cursor(1, 0))] == ["1-1", "1-2"]
        connections = await one.hub.connections()
        assert connections["writer"] == 1 and connections.get("pool", 0) <= one.hub.max_connections


async def test_wake_ups_asked_for_together_are_sent_together(flushed: RedisServer) -> None:
    async with process(flushed) as one:
        await one.hub.wake()
        before = int(flushed.command("XLEN", f"toolwire:wake:{one.hub.process_id}").strip(":\r\n"))
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one.hub.wake)
        after = int(flushed.command("XLEN", f"toolwire:wake:{one.hub.process_id}").strip(":\r\n"))
        assert 1 <= after - before <= 2


async def test_signals_reach_the_process_that_runs_the_run(flushed: RedisServer) -> None:
    async with process(flushed) as owner, process(flushed) as other:
        watch = owner.signals.watch("run_x")
        untouched = owner.signals.watch("run_y")
        await other.signals.cancel("run_x", "cancel")
        with anyio.fail_after(5):
            await watch.cancelled.wait()
        assert watch.reason == "cancel"
        assert not untouched.cancelled.is_set()


async def test_rate_limits_are_shared_between_processes(flushed: RedisServer) -> None:
    options = {"runs_per_minute": 2, "tool_calls_per_minute": 3}
    async with process(flushed, **options) as one, process(flushed, **options) as two:
        assert await one.rate_limiter.acquire("user_1", "runs") is None
        assert await two.rate_limiter.acquire("user_1", "runs") is None
        wait = await one.rate_limiter.acquire("user_1", "runs")
        assert wait is not None and 0 < wait <= 30
        assert await two.rate_limiter.acquire("user_2", "runs") is None  # per user
        await one.rate_limiter.spend("user_1", "tool_calls", 4)  # one more than the budget
        blocked = await two.rate_limiter.acquire("user_1", "tool_calls")
        assert blocked is not None and blocked > 0


async def test_write_quotas_are_shared_between_processes(flushed: RedisServer) -> None:
    async with process(flushed, writes_per_minute=3) as one, process(flushed, writes_per_minute=3) as two:
        for limiter in (one.rate_limiter, two.rate_limiter, one.rate_limiter):
            assert await limiter.acquire("user_1", "writes") is None
        wait = await two.rate_limiter.acquire("user_1", "writes")  # the fourth, on either process
        assert wait is not None and 0 < wait <= 20
        assert await two.rate_limiter.acquire("user_2", "writes") is None  # per user
        assert await one.rate_limiter.acquire("user_1", "runs") is None  # a budget of its own


async def test_a_follower_reading_from_the_copy_never_sees_a_gap_when_the_copy_is_restarted(
        flushed: RedisServer) -> None:
    async with process(flushed) as writer, process(flushed, max_events_per_chat=10_000) as reader:
        log: Callable[[], object] = lambda: reader.event_log  # noqa: E731
        events = a_run(1, 30)
        await writer.event_log.append("chat_g", events[:10])
        await writer.event_log.flush()
        assert [e.cursor.index for e in await reader.event_log.read_after("chat_g", Cursor(1, 5))] == [6, 7, 8, 9, 10]
        reader.event_log.copy.seed("chat_g", Cursor(1, 20))  # a copy that starts later than the follower
        await writer.event_log.append("chat_g", events[10:])
        got = await reader.event_log.read_after("chat_g", Cursor(1, 10))
        assert [e.cursor.index for e in got] == list(range(11, 31))
        assert log() is reader.event_log


def run_of(run_id: str, run: int, count: int) -> list[LogEntry]:
    """A run with its own id: `run_started`, text deltas, `run_finished`."""
    def one(index: int, type_: str, **fields: object) -> LogEntry:
        event = {"type": type_, "run_id": run_id, "step": None, **fields}
        return LogEntry(Cursor(run, index), type_, event, orjson.dumps(event))

    return [one(1, "run_started"), *(one(i, "text_delta", text=f"{run_id}-{i}") for i in range(2, count)),
            one(count, "run_finished", status="completed")]


async def test_a_copy_of_a_deleted_chat_is_never_served_under_its_reused_id_even_without_the_deletion_signal(
        flushed: RedisServer) -> None:
    async with process(flushed) as one, process(flushed) as two:
        old = run_of("run_old", 1, 6)
        for item in old:
            await one.event_log.append("chat_r", [item])
        follower = two.event_log
        assert [e.cursor for e in await follower.read_after("chat_r", Cursor(1, 0))] == [e.cursor for e in old]
        await follower.wait("chat_r", Cursor(1, 6), 0.2)  # `two` keeps a copy, fed by its reader
        assert follower.copy.holds("chat_r")
        # The stream is deleted behind every replica's back (as if the deletion signal were missed), and the id
        # is used again by a new chat whose first run is shorter.
        flushed.command("DEL", "toolwire:events:chat_r")
        new = run_of("run_new", 1, 3)
        for item in new:
            await one.event_log.append("chat_r", [item])
        await follower.expect_run("chat_r", 1, "run_new")
        got = await follower.read_after("chat_r", Cursor(1, 0))
        assert [e.event["run_id"] for e in got] == ["run_new"] * 3
        assert await follower.position("chat_r", Cursor(1, 5)) is not Position.KNOWN


async def test_a_deletion_reaches_every_process_and_a_late_write_of_the_deleted_run_recreates_nothing(
        flushed: RedisServer) -> None:
    async with process(flushed) as one, process(flushed) as two:
        run = run_of("run_d", 1, 6)
        await one.event_log.append("chat_d", run[:3])
        await one.event_log.flush()
        await two.event_log.read_after("chat_d", Cursor(1, 0))
        await two.event_log.wait("chat_d", Cursor(1, 3), 0.2)
        assert two.event_log.copy.holds("chat_d")
        await two.event_log.discard("chat_d")  # deleted through the other process
        with anyio.fail_after(5):
            while one.event_log.copy.holds("chat_d"):  # noqa: ASYNC110 - the reader forgets it
                await anyio.sleep(0.01)
        await one.event_log.append("chat_d", run[3:])  # the deleted chat's run, still writing
        assert flushed.command("EXISTS", "toolwire:events:chat_d").strip(":\r\n") == "0"
        again = run_of("run_again", 1, 3)  # the id used again: a new run starts a new stream
        await one.event_log.append("chat_d", again)
        got = await two.event_log.read_after("chat_d", Cursor(1, 0))
        assert [e.event["run_id"] for e in got] == ["run_again"] * 3


async def test_after_redis_loses_its_data_the_writer_writes_its_runs_again_before_what_follows(
        flushed: RedisServer) -> None:
    async with process(flushed) as one, process(flushed) as two:
        run = run_of("run_l", 1, 8)
        await one.event_log.append("chat_l", run[:4])
        await one.event_log.flush()
        flushed.command("FLUSHALL")  # Redis loses everything, the processes' own keys too
        await one.event_log.append("chat_l", run[4:])  # the run goes on
        got = await two.event_log.read_after("chat_l", Cursor(1, 2))
        assert [e.cursor.index for e in got] == [3, 4, 5, 6, 7, 8]  # no gap: the first events were written again
        assert one.hub.epoch == 1
