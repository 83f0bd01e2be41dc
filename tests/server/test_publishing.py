"""Publishing a run: events that arrive together share an append (one wake-up of each follower), each
keeping its own cursor; journal writes never hold an event back.

The app runs in-process under uvicorn on loopback, its log an `InMemoryEventLog` that records the size of
every append; the model's provider (`httpx.MockTransport`) sends each response body in one read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.server.support import Event, read_events, serve_in_process
from toolwire import Agent, get_model, tool
from toolwire.server import ChatContext, InMemoryEventLog, LogEntry

pytestmark = pytest.mark.anyio



class RecordingLog(InMemoryEventLog):
    def __init__(self) -> None:
        super().__init__()
        self.appends: list[list[str]] = []

    async def append(self, chat_id: str, entries: Sequence[LogEntry]) -> None:
        self.appends.append([entry.type for entry in entries])
        await super().append(chat_id, entries)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _bodies(words: list[str], arguments: str) -> list[bytes]:
    """A response with text and one call, in one read each; then the final answer."""
    first = [_chunk({"role": "assistant", "content": ""})]
    first += [_chunk({"content": word}) for word in words]
    first.append(_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                         "function": {"name": "note", "arguments": ""}}]}))
    first += [_chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[i:i + 10]}}]})
              for i in range(0, len(arguments), 10)]
    first.append(_chunk({}, "tool_calls"))
    second = [_chunk({"role": "assistant", "content": "Done."}), _chunk({}, "stop")]
    return [b"".join(first) + b"data: [DONE]\n\n", b"".join(second) + b"data: [DONE]\n\n"]


@asynccontextmanager
async def serving(bodies: list[bytes], folder: Path, log: InMemoryEventLog) -> AsyncIterator[httpx.AsyncClient]:
    requests = 0

    def provider(request: httpx.Request) -> httpx.Response:
        nonlocal requests
        body = bodies[min(requests, len(bodies) - 1)]
        requests += 1
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    model = get_model("openai:gpt-4o", api_key="k", base_url="http://provider.invalid/v1", max_retries=0,
                      http_client=httpx.AsyncClient(transport=httpx.MockTransport(provider)))

    def factory(ctx: ChatContext) -> Agent:
        return Agent(model, tools=[note], memory=ctx.memory, max_parallel_tools=ctx.max_parallel_tools)

    async with serve_in_process(factory, folder, event_log=log) as client:
        yield client


async def test_a_burst_is_published_in_small_batches_and_every_event_stays_resumable(tmp_path: Path) -> None:
    words = [f" w{i}" for i in range(40)]
    arguments = orjson.dumps({"text": "x" * 200}).decode()
    log = RecordingLog()
    async with serving(_bodies(words, arguments), tmp_path, log) as client:
        chat = (await client.post("/api/chats", json={})).json()["id"]
        async with client.stream("POST", f"/api/chats/{chat}/messages",
                                 json={"client_message_id": "1", "text": "go"}) as response:
            events = [e async for e in read_events(response)]
        # Resuming after any event replays exactly the events after it.
        for middle in (3, 17, 30, len(events) - 2):
            async with client.stream("GET", f"/api/chats/{chat}/stream",
                                     headers={"Last-Event-ID": str(events[middle].id)}) as response:
                replay: list[Event] = [e async for e in read_events(response)]
            assert [(e.id, e.data) for e in replay] == [(e.id, e.data) for e in events[middle + 1:]]

    assert events[-1].type == "run_finished" and events[-1].data["status"] == "completed"
    assert [e.id for e in events] == [f"1-{i}" for i in range(1, len(events) + 1)]
    assert "".join(e.data["text"] for e in events if e.type == "text_delta" and e.data["step"] == 0) == "".join(words)
    sizes = [len(types) for types in log.appends]
    # Batches (how many events one batch gets depends on what the publisher finds waiting when it runs),
    # never beyond eight events; every event published once.
    assert 1 < max(sizes) <= 8 and sum(sizes) == len(events)
    # Nothing waits for a journal write: the events the runner journals share appends with the rest, a step's
    # `step_started` goes out with its first event, and a round's rows with its `step_finished`.
    assert any(len(types) > 1 and {"tool_started", "tool_result", "message_end"} & set(types) for types in log.appends)
    assert ["step_started"] not in log.appends
    for types in log.appends:
        if "step_finished" in types:
            assert types[types.index("step_finished") - 1] == "message_saved"
    assert not any(types == ["message_saved"] for types in log.appends)
