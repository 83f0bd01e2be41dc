"""The side-by-side benchmark's own logic: the paced model's agent-shaped chat must be a stream toolwire reads into
the text and the two calls it stands for, the client must count each stamped delta once (and only deltas) and see
each protocol's end, and the report must compute the split and the ratios from the numbers it is given.
(No timing here: the benchmark itself is `bench/side_by_side/run`.)"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
from bench.load.provider import answer, chat_shape, deltas_per_chat, shape_marker
from bench.side_by_side.__main__ import KINDS, ChatSeen, Outcome, request_for
from bench.side_by_side.report import markdown, write

from toolwire.messages import TextPart, ToolCallPart
from toolwire.replay import replay

STAMP = re.compile(r"\d{10}\.\d{6} ")


def _body(frames: list[bytes | None]) -> tuple[bytes, int]:
    """The SSE body inside the chunked framing, and the number of beats (waits) between deltas."""
    raw = b"".join(frame for frame in frames if frame is not None)
    body = b""
    while raw:
        size_line, _, raw = raw.partition(b"\r\n")
        size = int(size_line, 16)
        body, raw = body + raw[:size], raw[size + 2:]
    return body, sum(frame is None for frame in frames)


def test_the_first_request_gets_text_then_two_parallel_calls_with_stamped_arguments() -> None:
    body, beats = _body(list(answer("agent", b'{"messages":[{"role":"user","content":"hi"}]}', 2, 3)))
    result = replay("openai-chat", body)
    assert result.finish_reason == "tool_calls"
    text = "".join(part.text for part in result.message.parts if isinstance(part, TextPart))
    assert len(STAMP.findall(text)) == 2
    calls = [part for part in result.message.parts if isinstance(part, ToolCallPart)]
    assert [call.name for call in calls] == ["word_count", "char_count"]
    assert calls[0].id != calls[1].id
    for call in calls:
        assert set(call.arguments) == {"text"}
        assert len(STAMP.findall(call.arguments["text"])) == 3
    assert beats == 2 + 2 * 3  # every stamped delta waits its beat


def test_a_request_with_tool_results_gets_the_final_answer_only() -> None:
    request = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                       {"role": "tool", "tool_call_id": "call_0_0", "content": "3"}]}).encode()
    body, beats = _body(list(answer("agent", request, 4, 3)))
    result = replay("openai-chat", body)
    assert result.finish_reason == "stop"
    assert not [part for part in result.message.parts if isinstance(part, ToolCallPart)]
    assert beats == 4
    assert deltas_per_chat(4, 3) == 4 + 2 * 3 + 4


def test_the_text_shape_never_calls_tools() -> None:
    body, beats = _body(list(answer("text", b"{}", 5, 3)))
    assert replay("openai-chat", body).finish_reason == "stop"
    assert beats == 5


def test_a_chat_may_carry_its_own_shape() -> None:
    marker = shape_marker(1, 1, 2.4)
    request = json.dumps({"messages": [{"role": "user", "content": f"count these {marker}"}]}).encode()
    assert chat_shape(request, 10, 10, 0.2) == (1, 1, 2.4)
    assert chat_shape(b'{"messages":[]}', 10, 10, 0.2) == (10, 10, 0.2)


def _outcome(chats: int = 1, events: int = 2, argument_deltas: int = 1) -> Outcome:
    return Outcome("toolwire-sqlite", chats, events, argument_deltas, 0.2)


def test_native_events_count_text_and_argument_deltas_and_a_completed_run() -> None:
    outcome = _outcome()
    seen = ChatSeen(outcome, "native")
    seen.on_event(b"r-1", b'{"type":"text_delta","text":"1700000000.100000 "}', 1700000000.105)
    seen.on_event(b"r-2", b'{"type":"tool_call_delta","id":"c","arguments":"{\\"text\\":\\"1700000000.300000 "}',
                  1700000000.301)
    seen.on_event(b"r-3", b'{"type":"message_saved","message":{"text":"1700000000.100000 "}}', 1700000001.0)
    assert not seen.finished
    seen.on_event(b"r-4", b'{"type":"run_finished","status":"completed"}', 1700000001.0)
    assert seen.finished and seen.deltas == 2 and outcome.errors == []
    assert [round(x * 1000) for x in outcome.latencies] == [5, 1]


def test_a_failed_native_run_is_an_error() -> None:
    outcome = _outcome()
    seen = ChatSeen(outcome, "native")
    seen.on_event(b"r-1", b'{"type":"run_finished","status":"failed","error":{"code":"model_error"}}', 0.0)
    assert seen.finished and len(outcome.errors) == 1


def test_vercel_events_count_deltas_but_not_the_whole_input_and_end_at_finish_not_finish_step() -> None:
    outcome = _outcome()
    seen = ChatSeen(outcome, "vercel")
    seen.on_event(b"", b'{"type":"text-delta","id":"t","delta":"1700000000.100000 "}', 1700000000.102)
    seen.on_event(b"", b'{"type":"tool-input-delta","toolCallId":"c","inputTextDelta":"1700000000.200000 "}',
                  1700000000.203)
    seen.on_event(b"", b'{"type":"tool-input-available","toolCallId":"c","input":{"text":"1700000000.200000 "}}',
                  1700000001.0)
    seen.on_event(b"", b'{"type":"finish-step"}', 1700000001.0)
    assert not seen.finished
    seen.on_event(b"", b'{"type":"error","errorText":"boom"}', 1700000001.0)
    seen.on_event(b"", b'{"type":"finish","finishReason":"stop"}', 1700000001.0)
    assert seen.finished and seen.deltas == 2 and outcome.deltas == 2
    assert len(outcome.errors) == 1


@pytest.mark.parametrize(("route", "path"), [("native", "/api/chats/c1/messages"), ("vercel", "/api/chat")])
def test_each_route_gets_its_own_request_with_the_text(route: str, path: str) -> None:
    kind = next(kind for kind in KINDS.values() if kind.route == route)
    got_path, body = request_for(kind, "c1", 7, "count [shape 1 1 2]")
    assert got_path == path
    data = json.loads(body)
    if route == "native":
        assert data == {"client_message_id": "m-7", "text": "count [shape 1 1 2]"}
    else:
        assert data["id"] == "c1" and data["messages"][-1]["parts"] == [{"type": "text", "text": "count [shape 1 1 2]"}]


def test_the_cpu_split_is_the_line_through_the_long_and_the_short_pass() -> None:
    long = _outcome(chats=10, events=4, argument_deltas=2)  # 12 deltas per chat
    long.server_cpu = [0.2, 0.1]  # 30 ms per chat
    long.short = _outcome(chats=10, events=1, argument_deltas=1)  # 4 deltas per chat
    long.short.server_cpu = [0.14]  # 14 ms per chat
    per_delta, fixed = long.cpu_split() or (0.0, 0.0)
    assert per_delta == pytest.approx(2.0) and fixed == pytest.approx(6.0)
    summary = long.summary()
    assert summary["cpu_ms_per_chat"] == 30.0 and summary["fixed_cpu_ms_per_chat"] == 6.0


def _result(kind: str, chats: int, p99: float, per_chat: float, per_delta: float, stuck: int = 0) -> dict[str, Any]:
    return {"kind": kind, "label": KINDS[kind].label, "chats": chats, "deltas_per_chat": 40, "skipped": None,
            "errors": 0, "error_kinds": {}, "stuck": stuck, "finished": chats - stuck, "lost": 0,
            "latency_ms": {"p50": p99 / 2, "p99": p99, "max": p99}, "cpu_ms_per_chat": per_chat,
            "cpu_ms_per_delta": per_delta, "fixed_cpu_ms_per_chat": per_chat - 40 * per_delta, "short_pass": None,
            "rss_peak_mb": 50.0, "rss_growth_mb": 5.0, "server_cpu_cores": 0.5, "load_average_before": [1.0, 1, 1]}


def test_the_report_gives_ratios_to_the_floor_and_the_peers_and_judges_the_targets(tmp_path: Path) -> None:
    results = [_result("relay", 200, 4.0, 10.0, 0.2), _result("ai-sdk", 200, 50.0, 30.0, 0.5),
               _result("pydantic-ai", 200, 300.0, 25.0, 0.5), _result("toolwire-sqlite", 200, 40.0, 14.0, 0.25),
               _result("toolwire-pg", 200, 400.0, 20.0, 0.4, stuck=3)]
    skipped = {**_result("ai-sdk", 50, 1, 1, 1), "skipped": "node is missing"}
    args = argparse.Namespace(out=tmp_path, events=10, argument_deltas=10, interval=0.2, ramp_rate=100.0, grace=30.0)
    table = write([*results, skipped], args, "bench/side_by_side/run --sizes 200")
    text = table.read_text()
    assert text == markdown(json.loads((tmp_path / "side_by_side.json").read_text()))
    assert "Not run: Vercel AI SDK (Node) at N = 50: node is missing" in text
    row = next(line for line in text.splitlines() if line.startswith("| toolwire, SQLite, native route | 1.40x"))
    # CPU/chat ÷ floor, pydantic-ai, AI SDK; CPU/delta ÷ the same; fixed ÷ the same; p99 ÷ the same.
    assert row.split(" | ")[1:] == ["1.40x", "0.56x", "0.47x", "1.25x", "0.50x", "0.50x", "2.00x", "0.80x",
                                    "0.40x", "10.00x", "0.13x", "0.80x |"]
    assert "toolwire, SQLite, native route: p99 40.0 ms vs the AI SDK's 50.0 ✓; CPU per chat 1.40x the floor's ✓; " \
           "CPU per delta 1.25x the floor's ✓" in text
    assert "toolwire, PostgreSQL, native route: p99 400.0 ms vs the AI SDK's 50.0 ✗" in text
    assert "| toolwire, PostgreSQL, native route | 197 / **3** |" in text


def test_a_split_the_run_could_not_resolve_gets_no_ratio_and_no_verdict(tmp_path: Path) -> None:
    results = [_result("relay", 12, 4.0, 20.0, 0.9), _result("toolwire-pg", 12, 28.0, 48.0, -0.2)]
    args = argparse.Namespace(out=tmp_path, events=3, argument_deltas=3, interval=0.2, ramp_rate=100.0, grace=10.0)
    text = write(results, args, "bench/side_by_side/run --quick").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| toolwire, PostgreSQL, native route | 2.40x"))
    assert row.split(" | ")[4] == "-"  # CPU/delta ÷ floor
    assert "CPU per delta" not in text.split("### Issue #22's targets")[1]


def test_the_report_gives_the_chats_two_replicas_carry_at_each_one_replica_p99(tmp_path: Path) -> None:
    ones = [{**_result("toolwire-redis-1", n, p99, 25.0, 0.3), "throttled_s": 4.5}
            for n, p99 in ((100, 80.0), (200, 500.0), (300, 40.0))]
    twos = [{**_result("toolwire-redis-2", n, p99, 26.0, 0.3), "throttled_s": 6.0}
            for n, p99 in ((200, 70.0), (400, 300.0))]
    twos.append({**_result("toolwire-redis-2", 600, 20.0, 26.0, 0.3, stuck=5), "throttled_s": 30.0})
    args = argparse.Namespace(out=tmp_path, events=10, argument_deltas=10, interval=0.2, ramp_rate=100.0, grace=30.0,
                              server_cpu=0.4, per_replica=True)
    text = write([*ones, *twos], args, "bench/side_by_side/run --server-cpu 0.4 --per-replica").read_text()
    assert "capped at 0.4 of a core" in text
    assert "toolwire, PostgreSQL + Redis, two replicas at N = 200: 6 s" in text
    tried = "(200: 70.0 ms, 400: 300.0 ms, 600: 20.0 ms)"
    assert f"- one replica at N = 100: p99 80.0 ms; two replicas carried N = 200 at or below it, 2.0x {tried} ✓" in text
    # 600 had stuck chats: not carried, so 400 is the most (not "at least": a larger N was run).
    assert f"- one replica at N = 200: p99 500.0 ms; two replicas carried N = 400 at or below it, 2.0x {tried} ✓" in text
    assert f"- one replica at N = 300: p99 40.0 ms; two replicas carried none of the sizes run at or below it " \
           f"{tried} ✗" in text


def test_repeated_rounds_are_judged_by_the_median_of_ratios_within_each_round(tmp_path: Path) -> None:
    # The floor moves from round to round; toolwire's ratio to the floor of its own round is what counts.
    rounds = [(10.0, 14.0, 40.0, 50.0), (20.0, 24.0, 60.0, 50.0), (12.0, 21.0, 45.0, 40.0)]
    results = []
    for number, (floor, mine, p99, ai_sdk_p99) in enumerate(rounds, start=1):
        results += [{**_result("relay", 200, 4.0, floor, 0.2), "round": number},
                    {**_result("ai-sdk", 200, ai_sdk_p99, 30.0, 0.5), "round": number},
                    {**_result("toolwire-sqlite", 200, p99, mine, 0.25), "round": number}]
    args = argparse.Namespace(out=tmp_path, events=10, argument_deltas=10, interval=0.2, ramp_rate=100.0, grace=30.0)
    text = write(results, args, "bench/side_by_side/run --sizes 200 --repeat 3").read_text()
    assert "### N = 200, round 2: concurrent chats" in text
    # 1.40, 1.20 and 1.75: the median is 1.40 (the pooled 59 ÷ 42 would be 1.40 too, but not in general).
    assert ("- N = 200, toolwire, SQLite, native route, over 3 rounds: CPU per chat ÷ the floor's 1.40x, 1.20x, 1.75x, "
            "median **1.40x** ✓; CPU per delta ÷ the floor's 1.25x, 1.25x, 1.25x, median **1.25x** ✓; p99 at or "
            "below the AI SDK's in 1 of 3 rounds (median 45.0 vs 50.0 ms) ✗") in text
    assert "- N = 200, round 3, toolwire, SQLite, native route: p99 45.0 ms vs the AI SDK's 40.0 ✗; CPU per chat " \
           "1.75x the floor's ✗" in text
