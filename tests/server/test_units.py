"""The server's pure parts, without a server: cursors, the in-memory log, result caps, rate limits, events."""

from __future__ import annotations

import anyio
import orjson
import pytest

from toolwire.events import TextDelta, ToolCallDelta, ToolCallEnd, ToolResultEvent, Usage, event_to_dict
from toolwire.messages import Message, ToolCallPart, ToolResultPart
from toolwire.server import Cursor, CursorExpired, InMemoryEventLog, LogEntry, MemoryRateLimiter, Position
from toolwire.server.encode import NativeEncoder
from toolwire.server.events import RunPublisher, model_event, usage_dict
from toolwire.server.limits import ResultPolicy


def entry(run: int, index: int, type_: str = "text_delta") -> LogEntry:
    data = {"type": type_, "run_id": f"r{run}", "step": None}
    return LogEntry(Cursor(run, index), type_, data, orjson.dumps(data))


def test_cursors_parse_and_order_as_pairs_of_numbers() -> None:
    assert Cursor.parse("3-17") == Cursor(3, 17)
    assert str(Cursor(12, 0)) == "12-0"
    assert Cursor(2, 10) > Cursor(2, 9) > Cursor(1, 100)  # "2-10" < "2-9" as strings; not here
    for bad in ("", "3", "3-", "-1", "0-1", "a-b", "1-2-3", "1-99999999999999999"):
        with pytest.raises(ValueError, match="event id"):
            Cursor.parse(bad)


@pytest.mark.anyio
async def test_the_log_reads_after_any_cursor_and_drops_the_oldest() -> None:
    log = InMemoryEventLog(max_events_per_chat=5)
    await log.append("c", [entry(1, i) for i in range(1, 4)])
    await log.append("c", [entry(1, 4, "run_finished"), entry(2, 1, "run_started")])
    assert [e.cursor for e in await log.read_after("c", Cursor(1, 2))] == [Cursor(1, 3), Cursor(1, 4), Cursor(2, 1)]
    assert [e.cursor for e in await log.read_after("c", Cursor(1, 4))] == [Cursor(2, 1)]
    assert await log.read_after("c", Cursor(2, 1)) == []
    assert await log.read_after("c", Cursor(3, 0)) == []  # the next run, not started yet
    await log.append("c", [entry(2, 2)])  # six events: the first is dropped
    assert await log.position("c", Cursor(1, 0)) is Position.EXPIRED
    with pytest.raises(CursorExpired):
        await log.read_after("c", Cursor(1, 0))
    assert (await log.read_after("c", Cursor(1, 1)))[0].cursor == Cursor(1, 2)
    assert await log.position("c", Cursor(1, 9)) is Position.BEYOND
    assert await log.position("c", Cursor(7, 0)) is Position.UNKNOWN
    assert await log.last_cursor("c") == Cursor(2, 2)
    assert await log.last_cursor("c", 1) == Cursor(1, 4)
    assert await log.runs_after("c", 1) == [2]


@pytest.mark.anyio
async def test_waiting_wakes_up_on_new_events_and_times_out_otherwise() -> None:
    log = InMemoryEventLog()
    await log.append("c", [entry(1, 1)])
    assert await log.wait("c", Cursor(1, 0), 5)  # already there
    assert not await log.wait("c", Cursor(1, 1), 0.05)

    async def later() -> None:
        await anyio.sleep(0.05)
        await log.append("c", [entry(1, 2)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(later)
        with anyio.fail_after(2):
            assert await log.wait("c", Cursor(1, 1), 10)


@pytest.mark.anyio
async def test_the_log_forgets_finished_chats_first_when_over_its_total() -> None:
    log = InMemoryEventLog(max_total_events=6)
    await log.append("old", [entry(1, 1), entry(1, 2, "run_finished")])
    await log.append("busy", [entry(1, 1), entry(1, 2)])  # no run_finished: still running
    await log.append("new", [entry(1, 1), entry(1, 2), entry(1, 3)])
    assert await log.position("old", Cursor(1, 1)) is Position.UNKNOWN
    assert await log.position("busy", Cursor(1, 1)) is Position.KNOWN
    assert log.total_events == 5
    await log.discard("busy")
    assert await log.position("busy", Cursor(1, 1)) is Position.UNKNOWN


@pytest.mark.anyio
async def test_published_events_are_numbered_and_encoded_once() -> None:
    log = InMemoryEventLog()
    publisher = RunPublisher(log, chat_id="c", run_id="run_1", run_number=3)
    await publisher.run_event("run_started", None, chat_id="c")
    await publisher.event(TextDelta(text="hi\nthere"), 0)
    entries = await log.read_after("c", Cursor(3, 0))
    assert [str(e.cursor) for e in entries] == ["3-1", "3-2"]
    frame = NativeEncoder().encode(entries[1])
    assert frame == b'id: 3-2\ndata: {"type":"text_delta","text":"hi\\nthere","run_id":"run_1","step":0}\n\n'
    assert publisher.published == 2


@pytest.mark.anyio
async def test_argument_previews_are_published_on_a_schedule_that_keeps_a_call_linear() -> None:
    log = InMemoryEventLog(max_events_per_chat=100_000)
    publisher = RunPublisher(log, chat_id="c", run_id="run_1", run_number=1)
    fragments = ['{"content": "', *["abcd"] * 5000, '"}']
    text = ""
    for fragment in fragments:
        text += fragment
        # What a model event holds: the preview so far (here, a fresh object with every fragment).
        await publisher.event(ToolCallDelta(id="c1", index=0, arguments_delta=fragment,
                                            arguments={"content": text[len('{"content": "'):]}), 0)
    final = {"content": "abcd" * 5000}
    await publisher.event(ToolCallEnd(index=0, call=ToolCallPart(id="c1", name="write", arguments=final,
                                                        arguments_raw=orjson.dumps(final).decode())), 0)
    events = [e.event for e in await log.read_after("c", Cursor(1, 0), limit=10_000)]
    deltas = [e for e in events if e["type"] == "tool_call_delta"]
    assert "".join(e["arguments_delta"] for e in deltas) == "".join(fragments)  # every fragment, in order
    sent = [e["arguments"] for e in deltas if e["arguments"] is not None]
    # Every delta carries the preview while the text is short, then each time it grew by a quarter...
    assert all(e["arguments"] is not None for e in deltas[:200])
    assert 250 < len(sent) < 280  # ~256 below 1 KiB, then one per quarter of growth up to 20 KB: ~14
    # Linear: at most ~1 KiB² / 8 for the short part, then five times the final size (every delta: 50 MB).
    assert sum(len(orjson.dumps(p)) for p in sent) < 140_000 + 5 * len(orjson.dumps(final))
    # ...each one the call's preview at that delta, and the end carries the whole arguments.
    assert sent[-1]["content"].startswith(sent[-2]["content"])
    assert events[-1]["call"]["arguments"] == final


def test_fast_event_dicts_equal_event_to_dict() -> None:
    events = [TextDelta(text="a"), ToolCallDelta(id="c", index=0, arguments_delta='{"x', arguments={"x": None}),
              ToolResultEvent(result=ToolResultPart(call_id="c", name="t", result={"ok": 1}), duration=0.5,
                              metadata={"k": "v"})]
    for event in events:
        assert model_event(event) == event_to_dict(event)
    assert usage_dict(Usage(input_tokens=3)) == {"input_tokens": 3, "output_tokens": None, "cache_read_tokens": None,
                                                 "cache_write_tokens": None, "reasoning_tokens": None}


def test_results_are_redacted_and_capped_with_a_marker() -> None:
    policy = ResultPolicy(max_bytes=100, secrets=["hunter22", "hunter22-long", "x", "short12"])
    small = {"note": "pw is hunter22-long and hunter22", "list": ["hunter22"], "hunter22": 1, "x": "short12"}
    assert policy.value(small) == {"note": "pw is [REDACTED] and [REDACTED]", "list": ["[REDACTED]"],
                                   "[REDACTED]": 1, "x": "short12"}  # under 8 characters: not secrets
    untouched = {"fine": True}
    assert policy.value(untouched) is untouched
    big = policy.value("y" * 500)
    assert big["truncated"] is True and big["original_bytes"] == 502 and len(big["preview"]) == 100
    part = ToolResultPart(call_id="c", name="t", result="hunter22")
    message = policy.message(Message.tool_results([part]))
    assert message.tool_results_parts[0].result == "[REDACTED]"
    odd = policy.value({1: object()})  # not JSON: made plain JSON (here its text), never an error
    assert isinstance(odd, str) and orjson.loads(orjson.dumps(odd)) == odd
    assert policy.value({"n": 2**70}) == "{'n': 1180591620717411303424}"  # beyond what JSON encoders take


@pytest.mark.anyio
async def test_rate_limits_refill_over_time() -> None:
    limiter = MemoryRateLimiter(runs_per_minute=2, tool_calls_per_minute=60)
    assert await limiter.acquire("u", "runs") is None
    assert await limiter.acquire("u", "runs") is None
    wait = await limiter.acquire("u", "runs")
    assert wait is not None and 0 < wait <= 30
    assert await limiter.acquire("other", "runs") is None
    await limiter.spend("u", "tool_calls", 61)
    assert (await limiter.acquire("u", "tool_calls") or 0) > 0


def test_a_run_failed_by_another_library_says_so_without_its_code_or_message() -> None:
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    from toolwire.server.runner import _describe
    from toolwire.store import StoreError

    pool = _describe(PoolTimeout("QueuePool limit of size 5 overflow 10 reached, connection timed out"))
    assert pool["code"] == "internal_error" and "QueuePool" not in pool["message"]
    assert "TimeoutError" in pool["message"] and "try again" in pool["message"]
    assert _describe(StoreError("The database is away.")) == {"code": "store_error", "message": "The database is away."}


@pytest.mark.anyio
async def test_log_waits_end_on_append_on_timeout_and_on_cancellation_leaving_no_waiter_behind() -> None:
    log = InMemoryEventLog()
    await log.append("c", [entry(1, 1)])
    assert await log.wait("c", Cursor(1, 0), 5.0)  # already there
    assert not await log.wait("c", Cursor(1, 1), 0.01)  # timed out
    with anyio.move_on_after(0.01):
        await log.wait("c", Cursor(1, 1), 5.0)  # cancelled
    assert log._chats["c"].waiters == []
    woken: list[bool] = []

    async def follower() -> None:
        woken.append(await log.wait("c", Cursor(1, 1), 5.0))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(follower)
        await anyio.sleep(0.01)
        assert len(log._chats["c"].waiters) == 3
        await log.append("c", [entry(1, 2)])
    assert woken == [True, True, True]
    assert log._chats["c"].waiters == []


@pytest.mark.anyio
async def test_a_hand_over_ends_the_streams_open_and_any_opened_after_it() -> None:
    from toolwire.server.sse import StreamCloser

    closer = StreamCloser()
    ended: list[str] = []

    async def stream(name: str) -> None:
        frames = anyio.CancelScope()
        closer.add(frames)
        try:
            with frames:
                await anyio.sleep(30)
            ended.append(name)
        finally:
            closer.discard(frames)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream, "open")
            await anyio.sleep(0.05)
            assert ended == []
            closer.close()
        await stream("after")
    assert ended == ["open", "after"]
    assert not closer._scopes  # each stream took its scope back
