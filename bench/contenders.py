"""Everything the benchmark measures, each turning the same response bytes into text and parsed tool calls.

A contender is prepared once per stream (clients and models are built outside the timed region, as a
user builds them once) and returns a zero-argument callable; calling it runs one complete response and
returns an `Outcome`, which the suite compares with the stream's expected text and calls.

- `limit`: SSE framing and `orjson.loads` of every payload, nothing else: the floor for any Python reader.
- `httpx limit`: the body read through `httpx.AsyncClient` over the same mock transport toolwire uses,
  with the limit's SSE split and `orjson.loads` of each payload: the floor for any reader built on httpx.
- `httpx read`: the HTTP client alone (no parsing), over the same mock transport.
- `toolwire`: the public path users call, `get_model(..., http_client=...)` and `async with
  model.stream(...)`, iterating every event, with live partial-argument previews on or off.
- peers, as their users use them: the openai SDK's stream helpers (`chat.completions.stream`,
  `responses.stream`), the anthropic SDK's `messages.stream` and pydantic-ai's `request_stream`, over a
  mock transport of their own HTTP client; langchain-core's message chunks
  merged by `add_ai_message_chunks` and by the `+` loop; LiteLLM's `stream_chunk_builder`. langchain-core
  and LiteLLM receive payloads decoded by the same framing as `limit` (their HTTP layers are not
  counted), and build their chunk objects the way their provider integrations do.

Peers are imported lazily: one that is not installed or fails to import is reported and skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from .streams import BenchStream

__all__ = ["CONTENDERS", "READS", "Contender", "Outcome", "chunked", "iter_payloads", "limit", "mock_client",
           "per_event"]

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM would otherwise fetch a price list

USER_PROMPT = "Write the module and run its tests."


@dataclass(slots=True)
class Outcome:
    """What a contender assembled: the text and the tool calls as `(name, parsed arguments)`."""

    text: str
    calls: list[tuple[str, Any]]


Runner = Callable[[], Awaitable[Outcome]] | Callable[[], Outcome]


@dataclass(frozen=True, slots=True)
class Contender:
    """One implementation under test."""

    name: str
    kind: str
    """`limit`, `floor`, `toolwire` or `peer`."""
    protocols: frozenset[str]
    prepare: Callable[[BenchStream, list[bytes]], Runner]
    is_async: bool
    module: str | None = None
    """The distribution whose version is reported (peers)."""


def chunked(body: bytes, size: int) -> list[bytes]:
    """The body as the network would hand it over: `size`-byte reads."""
    return [body[i : i + size] for i in range(0, len(body), size)]


def per_event(body: bytes) -> list[bytes]:
    """The body as a live provider sends it: one read per event (each token event is flushed as made)."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    pieces = body.split(separator)
    return [p + separator for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


READS: dict[str, Callable[[bytes], list[bytes]]] = {
    "event": per_event,
    "16k": lambda body: chunked(body, 16_384),
}
"""The read patterns, headline first: one event per read, and 16 KiB reads (a busy socket's)."""


# -- the limit and the framing shared by the sans-HTTP peers ----------------------------------------


class _Framer:
    """The limit's framing, fed one read at a time: lines split on `\\n`, each `data:` payload decoded."""

    __slots__ = ("count", "tail")

    def __init__(self) -> None:
        self.tail = b""
        self.count = 0

    def feed(self, chunk: bytes) -> None:
        loads = orjson.loads
        lines = (self.tail + chunk if self.tail else chunk).split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            if line[:5] == b"data:":
                if line[5:].strip() != b"[DONE]":
                    loads(line[5:])
                    self.count += 1
            elif line[:1] == b"{":  # NDJSON bodies
                loads(line)
                self.count += 1


def limit(chunks: list[bytes]) -> int:
    """SSE framing plus `orjson.loads` of each payload (or each NDJSON line). Returns the payload count."""
    framer = _Framer()
    feed = framer.feed
    for chunk in chunks:
        feed(chunk)
    return framer.count


def iter_payloads(chunks: list[bytes]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """`(event name, decoded payload)` for each SSE event, framed exactly as `limit` frames them."""
    loads = orjson.loads
    tail = b""
    event: str | None = None
    for chunk in chunks:
        lines = (tail + chunk if tail else chunk).split(b"\n")
        tail = lines.pop()
        for line in lines:
            if line[:5] == b"data:":
                if line[5:].strip() != b"[DONE]":
                    yield event, loads(line[5:])
            elif line[:6] == b"event:":
                event = line[6:].strip().decode()
            elif not line:
                event = None


def _prepare_limit(stream: BenchStream, chunks: list[bytes]) -> Runner:
    def run() -> Outcome:
        limit(chunks)
        return Outcome(stream.text, [(c.name, c.arguments) for c in stream.calls])

    return run


# -- HTTP plumbing: the same chunks through each library's own httpx -----------------------------------


def mock_client(module: Any, stream: BenchStream, chunks: list[bytes]) -> Any:
    """An `AsyncClient` of `module` (httpx, or httpx2 for SDKs built on it) that answers with `chunks`."""

    class Body(module.AsyncByteStream):  # type: ignore[misc, name-defined]
        async def __aiter__(self) -> Any:
            for chunk in chunks:
                yield chunk

    def handler(request: Any) -> Any:
        return module.Response(200, headers={"content-type": stream.content_type}, stream=Body())

    return module.AsyncClient(transport=module.MockTransport(handler))


def _httpx_of(sdk_base_client: Any) -> Any:
    """The httpx flavour an SDK's client is built on (recent Stainless SDKs moved to httpx2)."""
    return getattr(sdk_base_client, "httpx2", None) or httpx


def _prepare_httpx_limit(stream: BenchStream, chunks: list[bytes]) -> Runner:
    client = mock_client(httpx, stream, chunks)

    async def run() -> Outcome:
        framer = _Framer()
        feed = framer.feed
        async with client.stream("POST", "http://bench.invalid/v1") as response:
            async for chunk in response.aiter_bytes():
                feed(chunk)
        return Outcome(stream.text, [(c.name, c.arguments) for c in stream.calls])

    return run


def _prepare_httpx(stream: BenchStream, chunks: list[bytes]) -> Runner:
    client = mock_client(httpx, stream, chunks)

    async def run() -> Outcome:
        async with client.stream("POST", "http://bench.invalid/v1") as response:
            async for _ in response.aiter_bytes():
                pass
        return Outcome(stream.text, [(c.name, c.arguments) for c in stream.calls])

    return run


# -- toolwire --------------------------------------------------------------------------------------

_SPEC = {"openai-chat": "openai:gpt-4o", "anthropic": "anthropic:claude-sonnet-4-5",
         "openai-responses": "openai-responses:gpt-5", "gemini": "gemini:gemini-2.5-flash",
         "ollama": "ollama:llama3.1", "mistral": "mistral:mistral-large-latest", "cohere": "cohere:command-a"}

_SCHEMAS = {
    "write_file": {"type": "object", "additionalProperties": False, "required": ["path", "content"],
                   "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
    "run_tests": {"type": "object", "additionalProperties": False, "required": ["command", "timeout"],
                  "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}}},
}


def _toolwire(previews: bool) -> Callable[[BenchStream, list[bytes]], Runner]:
    def prepare(stream: BenchStream, chunks: list[bytes]) -> Runner:
        from toolwire import Message, get_model
        from toolwire.exceptions import StreamError
        from toolwire.tools import ToolDefinition

        client = mock_client(httpx, stream, chunks)
        model = get_model(_SPEC[stream.protocol], api_key="bench", base_url="http://bench.invalid/v1",
                          http_client=client, previews=previews, max_retries=0)
        messages = [Message.user(USER_PROMPT)]
        tools = [ToolDefinition(name=name, parameters=schema) for name, schema in _SCHEMAS.items()]

        async def run() -> Outcome:
            async with model.stream(messages, tools=tools) as response:
                try:
                    async for _ in response:
                        pass
                except StreamError:
                    pass  # recorded error streams: the partial message is the result
            message = response.message
            assert message is not None
            return Outcome(message.text, [(c.name, c.arguments) for c in message.tool_calls])

        return run

    return prepare


# -- the openai SDK ----------------------------------------------------------------------------------

def _openai_tools() -> list[dict[str, Any]]:
    # The stream helper parses arguments only for strict tools, and refuses non-strict ones.
    return [{"type": "function", "function": {"name": name, "strict": True, "parameters": schema}}
            for name, schema in _SCHEMAS.items()]


def _prepare_openai_sdk(stream: BenchStream, chunks: list[bytes]) -> Runner:
    import openai
    import openai._base_client

    client = openai.AsyncOpenAI(api_key="bench", max_retries=0,
                                http_client=mock_client(_httpx_of(openai._base_client), stream, chunks))
    if stream.protocol == "openai-responses":
        return _openai_sdk_responses(client)
    tools = _openai_tools()

    async def run() -> Outcome:
        async with client.chat.completions.stream(
            model="gpt-4o", messages=[{"role": "user", "content": USER_PROMPT}], tools=tools,  # type: ignore[arg-type, list-item]
        ) as events:
            async for _ in events:
                pass
            completion = await events.get_final_completion()
        message = completion.choices[0].message
        calls = [(c.function.name, c.function.parsed_arguments) for c in message.tool_calls or []]
        return Outcome(message.content or "", calls)

    return run


def _openai_sdk_responses(client: Any) -> Runner:
    tools = [{"type": "function", "name": name, "parameters": schema, "strict": False}
             for name, schema in _SCHEMAS.items()]

    async def run() -> Outcome:
        async with client.responses.stream(model="gpt-4o", input=USER_PROMPT, tools=tools) as events:
            async for _ in events:
                pass
            response = await events.get_final_response()
        calls = [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]
        return Outcome(response.output_text, calls)

    return run


# -- the anthropic SDK -------------------------------------------------------------------------------

def _anthropic_tools() -> list[dict[str, Any]]:
    return [{"name": name, "input_schema": schema} for name, schema in _SCHEMAS.items()]


def _prepare_anthropic_sdk(stream: BenchStream, chunks: list[bytes]) -> Runner:
    import anthropic
    import anthropic._base_client

    client = anthropic.AsyncAnthropic(api_key="bench", max_retries=0,
                                      http_client=mock_client(_httpx_of(anthropic._base_client), stream, chunks))
    tools = _anthropic_tools()

    async def run() -> Outcome:
        async with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64_000, tools=tools,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": USER_PROMPT}],
        ) as events:
            message = await events.get_final_message()
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = [(b.name, b.input) for b in message.content if b.type == "tool_use"]
        return Outcome(text, calls)

    return run


# -- pydantic-ai -------------------------------------------------------------------------------------

def _prepare_pydantic_ai(stream: BenchStream, chunks: list[bytes]) -> Runner:
    from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    model: Any
    if stream.protocol in ("openai-chat", "openai-responses"):
        import openai
        import openai._base_client
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider

        sdk = openai.AsyncOpenAI(api_key="bench", max_retries=0,
                                 http_client=mock_client(_httpx_of(openai._base_client), stream, chunks))
        provider = OpenAIProvider(openai_client=sdk)
        if stream.protocol == "openai-chat":
            model = OpenAIChatModel("gpt-4o", provider=provider)
        else:
            model = OpenAIResponsesModel("gpt-4o", provider=provider)
    else:
        import anthropic
        import anthropic._base_client
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        sdk_a = anthropic.AsyncAnthropic(api_key="bench", max_retries=0,
                                         http_client=mock_client(_httpx_of(anthropic._base_client), stream, chunks))
        model = AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=sdk_a))
    params = ModelRequestParameters(function_tools=[
        ToolDefinition(name=name, parameters_json_schema=schema) for name, schema in _SCHEMAS.items()])
    messages = [ModelRequest(parts=[UserPromptPart(USER_PROMPT)])]

    async def run() -> Outcome:
        async with model.request_stream(messages, None, params) as response:
            async for _ in response:
                pass
        final = response.get()
        text = "".join(p.content for p in final.parts if isinstance(p, TextPart))
        calls = [(p.tool_name, p.args_as_dict()) for p in final.parts if isinstance(p, ToolCallPart)]
        return Outcome(text, calls)

    return run


# -- langchain-core ----------------------------------------------------------------------------------

def _langchain_chunks(stream: BenchStream, chunks: list[bytes]) -> Iterator[Any]:
    """AIMessageChunks as langchain's OpenAI and Anthropic integrations build them from each payload."""
    from langchain_core.messages import AIMessageChunk

    if stream.protocol == "openai-chat":
        for _, payload in iter_payloads(chunks):
            choices = payload.get("choices")
            usage = payload.get("usage")
            if not choices:
                if usage:
                    yield AIMessageChunk(content="", id=payload["id"], usage_metadata={
                        "input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                        "total_tokens": usage["total_tokens"]})
                continue
            delta = choices[0]["delta"]
            tool_chunks = [
                {"type": "tool_call_chunk", "name": (entry.get("function") or {}).get("name"),
                 "args": (entry.get("function") or {}).get("arguments"), "id": entry.get("id"),
                 "index": entry.get("index")}
                for entry in delta.get("tool_calls") or []
            ]
            metadata = {"finish_reason": choices[0]["finish_reason"]} if choices[0].get("finish_reason") else {}
            yield AIMessageChunk(content=delta.get("content") or "", id=payload["id"],
                                 tool_call_chunks=tool_chunks, response_metadata=metadata)
        return
    for event, payload in iter_payloads(chunks):
        kind = payload.get("type", event)
        if kind == "message_start":
            usage = payload["message"]["usage"]
            yield AIMessageChunk(content="", id=payload["message"]["id"], usage_metadata={
                "input_tokens": usage["input_tokens"], "output_tokens": 0, "total_tokens": usage["input_tokens"]})
        elif kind == "content_block_start":
            block = payload["content_block"]
            index = payload["index"]
            if block["type"] == "tool_use":
                yield AIMessageChunk(
                    content=[{**block, "index": index}],
                    tool_call_chunks=[{"type": "tool_call_chunk", "name": block["name"], "args": "",
                                       "id": block["id"], "index": index}])
        elif kind == "content_block_delta":
            delta = payload["delta"]
            index = payload["index"]
            if delta["type"] == "text_delta":
                yield AIMessageChunk(content=[{"index": index, "type": "text", "text": delta["text"]}])
            elif delta["type"] == "input_json_delta":
                yield AIMessageChunk(
                    content=[{"index": index, "type": "input_json_delta", "partial_json": delta["partial_json"]}],
                    tool_call_chunks=[{"type": "tool_call_chunk", "name": None, "args": delta["partial_json"],
                                       "id": None, "index": index}])
        elif kind == "message_delta":
            output = payload["usage"]["output_tokens"]
            yield AIMessageChunk(content="", usage_metadata={"input_tokens": 0, "output_tokens": output,
                                                             "total_tokens": output},
                                 response_metadata={"stop_reason": payload["delta"]["stop_reason"]})


def _langchain_outcome(message: Any) -> Outcome:
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return Outcome(text, [(c["name"], c["args"]) for c in message.tool_calls])


def _prepare_langchain_helper(stream: BenchStream, chunks: list[bytes]) -> Runner:
    from langchain_core.messages.ai import add_ai_message_chunks

    def run() -> Outcome:
        parts = list(_langchain_chunks(stream, chunks))
        return _langchain_outcome(add_ai_message_chunks(parts[0], *parts[1:]))

    return run


def _prepare_langchain_plus(stream: BenchStream, chunks: list[bytes]) -> Runner:
    def run() -> Outcome:
        total: Any = None
        for part in _langchain_chunks(stream, chunks):
            total = part if total is None else total + part
        return _langchain_outcome(total)

    return run


# -- LiteLLM -----------------------------------------------------------------------------------------

def _prepare_litellm(stream: BenchStream, chunks: list[bytes]) -> Runner:
    import litellm
    from litellm.llms.anthropic.chat.handler import ModelResponseIterator
    from litellm.types.utils import ModelResponseStream

    messages = [{"role": "user", "content": USER_PROMPT}]

    def run() -> Outcome:
        if stream.protocol == "openai-chat":
            pieces = [ModelResponseStream(**payload) for _, payload in iter_payloads(chunks)]
        else:
            # LiteLLM's own Anthropic event parser turns each event into an OpenAI-shaped chunk.
            anthropic = ModelResponseIterator(streaming_response=None, sync_stream=True, json_mode=False)
            pieces = [anthropic.chunk_parser(payload) for _, payload in iter_payloads(chunks)]
        final = litellm.stream_chunk_builder(pieces, messages=messages)
        message = final.choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
        return Outcome(message.content or "", calls)

    return run


_BOTH = frozenset({"openai-chat", "anthropic"})
_OPENAI = frozenset({"openai-chat", "openai-responses"})
_ALL = frozenset(_SPEC)

CONTENDERS: list[Contender] = [
    Contender("limit", "limit", _ALL, _prepare_limit, is_async=False),
    Contender("httpx limit", "limit", _ALL, _prepare_httpx_limit, is_async=True, module="httpx"),
    Contender("httpx read", "floor", _ALL, _prepare_httpx, is_async=True, module="httpx"),
    Contender("toolwire", "toolwire", _ALL, _toolwire(previews=True), is_async=True, module="toolwire"),
    Contender("toolwire (no previews)", "toolwire", _ALL, _toolwire(previews=False), is_async=True,
              module="toolwire"),
    Contender("openai SDK", "peer", _OPENAI, _prepare_openai_sdk, is_async=True, module="openai"),
    Contender("anthropic SDK", "peer", frozenset({"anthropic"}), _prepare_anthropic_sdk, is_async=True,
              module="anthropic"),
    Contender("pydantic-ai", "peer", _BOTH | _OPENAI, _prepare_pydantic_ai, is_async=True,
              module="pydantic-ai-slim"),
    Contender("langchain-core helper", "peer", _BOTH, _prepare_langchain_helper, is_async=False,
              module="langchain-core"),
    Contender("langchain-core + loop", "peer", _BOTH, _prepare_langchain_plus, is_async=False,
              module="langchain-core"),
    Contender("LiteLLM", "peer", _BOTH, _prepare_litellm, is_async=False, module="litellm"),
]
"""In table order."""
