"""The layers above `model.stream`: the agent's tool loop, and the tiny model turn that follows its tools.

The agent is measured over the same stream as `model.stream`: an `Agent` whose tools are the ones the
stream calls, registered as no-ops, and a model whose mock transport answers the first request with the
stream and the follow-up request (the one carrying the tool results) with a short text answer. What the
agent adds per event is its run's time less `model.stream` on the stream and `model.stream` on the
follow-up answer, in the same round, divided by the stream's events; the no-op tools and the follow-up
request's building stay in (they are a few microseconds per run).

- `agent.stream`: `async with agent.stream(prompt) as run`, every event iterated;
- `agent.run_stream`: `async with agent.run_stream(prompt) as chunks`, every chunk iterated (the
  text-and-messages view chat front ends use);
- `follow-up turn`: `model.stream` over the short answer alone (part of the baseline, not reported on its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson

from .contenders import _SCHEMAS, _SPEC, USER_PROMPT, Contender, Outcome, Runner, per_event
from .streams import BenchStream, responses_event_writer

__all__ = ["AGENT_CONTENDERS", "FOLLOW_UP", "agent_parts", "build_agent", "follow_up_body", "is_follow_up", "replay_client"]

_FOLLOW_UP_TEXT = "Done: the module is written and its tests pass."


def _openai_chat_follow_up() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({
            "id": "chatcmpl-follow", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"

    words = _FOLLOW_UP_TEXT.split(" ")
    body = chunk({"role": "assistant", "content": ""})
    body += b"".join(chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words))
    return body + chunk({}, "stop") + b"data: [DONE]\n\n"


def _anthropic_follow_up() -> bytes:
    def event(name: str, payload: dict[str, Any]) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **payload}) + b"\n\n"

    words = _FOLLOW_UP_TEXT.split(" ")
    body = event("message_start", {"message": {
        "id": "msg_follow", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})
    body += event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    body += b"".join(event("content_block_delta", {"index": 0, "delta": {
        "type": "text_delta", "text": w if i == 0 else " " + w}}) for i, w in enumerate(words))
    body += event("content_block_stop", {"index": 0})
    body += event("message_delta", {"delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                    "usage": {"output_tokens": len(words)}})
    return body + event("message_stop", {})


def _responses_follow_up() -> bytes:
    event = responses_event_writer()

    item = {"id": "msg_follow", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    response = {"id": "resp_follow", "object": "response", "created_at": 1, "status": "in_progress",
                "model": "gpt-5", "output": []}
    body = event({"type": "response.created", "response": response})
    body += event({"type": "response.output_item.added", "output_index": 0, "item": item})
    body += event({"type": "response.content_part.added", "item_id": "msg_follow", "output_index": 0,
                   "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}})
    for i, w in enumerate(_FOLLOW_UP_TEXT.split(" ")):
        body += event({"type": "response.output_text.delta", "item_id": "msg_follow", "output_index": 0,
                       "content_index": 0, "delta": w if i == 0 else " " + w})
    part = {"type": "output_text", "text": _FOLLOW_UP_TEXT, "annotations": []}
    body += event({"type": "response.output_text.done", "item_id": "msg_follow", "output_index": 0,
                   "content_index": 0, "text": _FOLLOW_UP_TEXT})
    body += event({"type": "response.content_part.done", "item_id": "msg_follow", "output_index": 0,
                   "content_index": 0, "part": part})
    done = {**item, "status": "completed", "content": [part]}
    body += event({"type": "response.output_item.done", "output_index": 0, "item": done})
    usage = {"input_tokens": 10, "output_tokens": 9, "total_tokens": 19}
    return body + event({"type": "response.completed",
                         "response": {**response, "status": "completed", "output": [done], "usage": usage}})


FOLLOW_UP: dict[str, Callable[[], bytes]] = {
    "openai-chat": _openai_chat_follow_up, "anthropic": _anthropic_follow_up,
    "openai-responses": _responses_follow_up,
}
"""The short text answer a model gives once it has the tool results, per protocol."""


def follow_up_body(protocol: str) -> bytes:
    return FOLLOW_UP[protocol]()


def is_follow_up(request_body: bytes) -> bool:
    """Whether a model request carries tool results (so the agent is past its tool round)."""
    return (b'"tool_call_id"' in request_body or b'"tool_result"' in request_body
            or b'"function_call_output"' in request_body)


def replay_client(stream: BenchStream, chunks: list[bytes], follow_up: list[bytes]) -> httpx.AsyncClient:
    """An httpx client whose mock transport answers with `chunks`, or `follow_up` once tools have run."""

    class Body(httpx.AsyncByteStream):
        def __init__(self, reads: list[bytes]) -> None:
            self.reads = reads

        async def __aiter__(self) -> Any:
            for chunk in self.reads:
                yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        reads = follow_up if is_follow_up(request.content) else chunks
        return httpx.Response(200, headers={"content-type": stream.content_type}, stream=Body(reads))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def agent_parts(stream: BenchStream, chunks: list[bytes],
                client: httpx.AsyncClient | None = None) -> tuple[Any, list[Any]]:
    """The model replaying the stream (then the follow-up answer) and the stream's tools as no-ops;
    `client` replaces the replaying client."""
    from toolwire import get_model
    from toolwire.tools import Tool

    if client is None:
        client = replay_client(stream, chunks, per_event(follow_up_body(stream.protocol)))
    model = get_model(_SPEC[stream.protocol], api_key="bench", base_url="http://bench.invalid/v1",
                      http_client=client, max_retries=0)

    async def noop(**arguments: Any) -> str:
        return "ok"

    tools = [Tool.from_schema(name, f"The {name} tool.", schema, noop) for name, schema in _SCHEMAS.items()]
    return model, tools


def build_agent(stream: BenchStream, chunks: list[bytes], client: httpx.AsyncClient | None = None,
                **options: Any) -> Any:
    """An `Agent` over the replayed stream, with the stream's tools as no-ops (`options` go to `Agent`)."""
    from toolwire import Agent

    model, tools = agent_parts(stream, chunks, client)
    return Agent(model, tools=tools, **options)


def _outcome_of(messages: Any) -> Outcome:
    """The text and calls of the first assistant message that calls tools (the replayed stream's)."""
    for message in messages:
        if getattr(message, "tool_calls", None):
            return Outcome(message.text, [(c.name, c.arguments) for c in message.tool_calls])
    return Outcome("", [])


def _prepare_agent_stream(stream: BenchStream, chunks: list[bytes]) -> Runner:
    agent = build_agent(stream, chunks)

    async def run() -> Outcome:
        async with agent.stream(USER_PROMPT) as events:
            async for _ in events:
                pass
        return _outcome_of(events.result.messages)

    return run


def _prepare_agent_run_stream(stream: BenchStream, chunks: list[bytes]) -> Runner:
    agent = build_agent(stream, chunks)

    async def run() -> Outcome:
        messages: list[Any] = []
        async with agent.run_stream(USER_PROMPT) as parts:
            async for chunk in parts:
                messages.extend(chunk.messages)
        return _outcome_of(messages)

    return run


def _prepare_follow_up(stream: BenchStream, chunks: list[bytes]) -> Runner:
    from toolwire import Message, get_model

    body = follow_up_body(stream.protocol)
    client = replay_client(stream, per_event(body), [])
    model = get_model(_SPEC[stream.protocol], api_key="bench", base_url="http://bench.invalid/v1",
                      http_client=client, max_retries=0)
    messages = [Message.user(USER_PROMPT)]

    async def run() -> Outcome:
        async with model.stream(messages) as response:
            async for _ in response:
                pass
        # The check compares with the replayed stream's outcome; this turn is a fixed add-on to the baseline.
        return Outcome(stream.text, [(c.name, c.arguments) for c in stream.calls])

    return run


_GENERATED = frozenset(FOLLOW_UP)

AGENT_CONTENDERS: list[Contender] = [
    Contender("follow-up turn", "baseline", _GENERATED, _prepare_follow_up, is_async=True, module="toolwire"),
    Contender("agent.stream", "agent", _GENERATED, _prepare_agent_stream, is_async=True, module="toolwire"),
    Contender("agent.run_stream", "agent", _GENERATED, _prepare_agent_run_stream, is_async=True,
              module="toolwire"),
]
"""Measured in the same rounds as the limit and `model.stream`."""
