"""Two live-stream properties: how soon a text delta reaches the caller, and one huge event in small reads.

Text latency. The transport hands the S stream over one event per read, pausing 0.5 ms before each read
that carries a text delta (a live model's tokens arrive with gaps, during which the event loop catches
up; a mock transport that never waits would let the agent's producer task run ahead of its consumer),
and notes the moment it hands over that read. The caller notes the moment it holds that delta: a raw
`aiter_bytes()` read (the floor), toolwire's `text_delta` event from `model.stream`, and the same event
through `agent.stream`. Each trial's figure is the median over the stream's text deltas; the reported
figure is the median over trials, and toolwire's overhead is its figure less the raw read's. Wall-clock
time (`perf_counter`): this is a latency, not a cost.

Long event. One event carrying 8 MB of text (a whole file in one delta, as some providers send it) goes
through `model.stream` in 1 KiB reads and in 16 KiB reads, in interleaved rounds (CPU time); framing
that re-scanned what it buffered would make the small reads quadratic. `bench/framing.py` times the
framing alone.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from typing import Any

import httpx
import orjson

from .contenders import _SPEC, USER_PROMPT, chunked, iter_payloads, mock_client, per_event
from .layers import build_agent
from .streams import BenchStream, generate

__all__ = ["long_event", "text_latency"]


def _is_text(protocol: str, payload: dict[str, Any]) -> bool:
    if protocol == "openai-chat":
        choices = payload.get("choices") or []
        return bool(choices and choices[0]["delta"].get("content"))
    if protocol == "anthropic":
        return payload.get("type") == "content_block_delta" and payload["delta"]["type"] == "text_delta"
    return payload.get("type") == "response.output_text.delta" and bool(payload.get("delta"))


def _stamped(stream: BenchStream, chunks: list[bytes], text_reads: set[int], stamps: list[float],
             follow_up: list[bytes] | None = None) -> httpx.AsyncClient:
    """A client replaying `chunks`, appending `perf_counter()` to `stamps` as each text read is handed over."""
    from .layers import is_follow_up

    class Body(httpx.AsyncByteStream):
        def __init__(self, reads: list[bytes], stamp: bool) -> None:
            self.reads, self.stamp = reads, stamp

        async def __aiter__(self) -> Any:
            for i, chunk in enumerate(self.reads):
                if self.stamp and i in text_reads:
                    # A live provider's text arrives after a pause (the model is generating): the loop
                    # is idle, and whatever the earlier reads started has finished, as on a real socket.
                    await asyncio.sleep(0.0005)
                    stamps.append(time.perf_counter())
                yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        if follow_up is not None and is_follow_up(request.content):
            return httpx.Response(200, headers={"content-type": stream.content_type}, stream=Body(follow_up, False))
        return httpx.Response(200, headers={"content-type": stream.content_type}, stream=Body(chunks, True))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def text_latency(protocol: str, trials: int, seed: int = 7) -> dict[str, Any]:
    """Median time from a text delta's read being handed over to the caller holding it (see the docstring)."""
    from toolwire import Message, get_model
    from toolwire.events import TextDelta

    from .layers import follow_up_body

    stream = generate(protocol, "S", seed)
    chunks = per_event(stream.body)
    text_reads = {i for i, chunk in enumerate(chunks)
                  if any(_is_text(protocol, payload) for _, payload in iter_payloads([chunk]))}
    stamps: list[float] = []
    client = _stamped(stream, chunks, text_reads, stamps)
    model = get_model(_SPEC[protocol], api_key="bench", base_url="http://bench.invalid/v1", http_client=client,
                      max_retries=0)
    agent = build_agent(stream, chunks, _stamped(stream, chunks, text_reads, stamps,
                                                 per_event(follow_up_body(protocol))))
    messages = [Message.user(USER_PROMPT)]

    def latencies(seen: list[float]) -> float:
        assert len(seen) == len(stamps) == len(text_reads), (len(seen), len(stamps), len(text_reads))
        return statistics.median(b - a for a, b in zip(stamps, seen, strict=True))

    async def raw() -> float:
        stamps.clear()
        seen: list[float] = []
        async with client.stream("POST", "http://bench.invalid/v1") as response:
            i = 0
            async for _ in response.aiter_bytes():
                if i in text_reads:
                    seen.append(time.perf_counter())
                i += 1
        return latencies(seen)

    async def direct() -> float:
        stamps.clear()
        seen: list[float] = []
        async with model.stream(messages) as response:
            async for event in response:
                if type(event) is TextDelta:
                    seen.append(time.perf_counter())
        return latencies(seen)

    async def through_agent() -> float:
        stamps.clear()
        seen: list[float] = []
        async with agent.stream(USER_PROMPT) as run:
            async for event in run:
                if type(event) is TextDelta and len(seen) < len(text_reads):
                    seen.append(time.perf_counter())
        return latencies(seen[: len(stamps)])

    loop = asyncio.new_event_loop()
    results: dict[str, list[float]] = {"raw": [], "toolwire": [], "agent": []}
    try:
        for _ in range(trials):
            results["raw"].append(loop.run_until_complete(raw()))
            results["toolwire"].append(loop.run_until_complete(direct()))
            results["agent"].append(loop.run_until_complete(through_agent()))
    finally:
        loop.close()
    raw_us = statistics.median(results["raw"]) * 1e6
    toolwire_us = statistics.median(results["toolwire"]) * 1e6
    agent_us = statistics.median(results["agent"]) * 1e6
    return {"protocol": protocol, "reads": "event", "raw_us": raw_us, "toolwire_us": toolwire_us,
            "agent_us": agent_us, "overhead_us": toolwire_us - raw_us, "agent_overhead_us": agent_us - raw_us,
            "trials": trials, "deltas": len(text_reads)}


def _long_body(protocol: str, size: int) -> bytes:
    text = "x" * size
    if protocol == "anthropic":
        def event(name: str, payload: dict[str, Any]) -> bytes:
            return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **payload}) + b"\n\n"

        return (event("message_start", {"message": {
                    "id": "msg_long", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": 1, "output_tokens": 1}}})
                + event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
                + event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})
                + event("content_block_stop", {"index": 0})
                + event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                          "usage": {"output_tokens": 1}})
                + event("message_stop", {}))
    return (b"data: " + orjson.dumps({"id": "chatcmpl-long", "object": "chat.completion.chunk", "created": 1,
                                      "model": "gpt-4o", "choices": [{"index": 0, "delta": {
                                          "role": "assistant", "content": text}, "finish_reason": "stop"}]})
            + b"\n\ndata: [DONE]\n\n")


def long_event(protocol: str, rounds: int, size: int = 8_000_000) -> dict[str, Any]:
    """`model.stream` over one `size`-character text event in 1 KiB and in 16 KiB reads (CPU seconds)."""
    from toolwire import Message, get_model

    body = _long_body(protocol, size)
    loop = asyncio.new_event_loop()
    messages = [Message.user(USER_PROMPT)]
    runners = {}
    stream = BenchStream(protocol, "long", body, 2, "", (), "bench")
    for name, read in (("1k", 1024), ("16k", 16_384)):
        model = get_model(_SPEC[protocol], api_key="bench", base_url="http://bench.invalid/v1",
                          http_client=mock_client(httpx, stream, chunked(body, read)), max_retries=0)

        async def run(model: Any = model) -> int:
            async with model.stream(messages) as response:
                async for _ in response:
                    pass
            assert response.message is not None
            return len(response.message.text)

        runners[name] = run
    times: dict[str, list[float]] = {"1k": [], "16k": []}
    try:
        for run in runners.values():  # warm-up, and the check
            got = loop.run_until_complete(run())
            if got != size:
                return {"protocol": protocol, "status": "mismatch", "note": f"{got} characters instead of {size}"}
        for _ in range(rounds):
            for name, run in runners.items():
                gc.collect(1)
                start = time.process_time()
                loop.run_until_complete(run())
                times[name].append(time.process_time() - start)
    finally:
        loop.close()
    ratios = [a / b for a, b in zip(times["1k"], times["16k"], strict=True)]
    return {"protocol": protocol, "status": "ok", "bytes": len(body), "rounds": rounds,
            "small_s": statistics.median(times["1k"]), "large_s": statistics.median(times["16k"]),
            "ratio": statistics.median(ratios)}
