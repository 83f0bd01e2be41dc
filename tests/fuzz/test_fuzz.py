"""Hostile inputs for all seven protocols: mutated recordings and generated streams (hypothesis).

Seeded (derandomized) and time-boxed for CI: about 60 seconds on two cores. A long run sets
`TOOLWIRE_FUZZ_EXAMPLES=N`: N mutated inputs per protocol for the replay test, N/20 over HTTP, N/200
through an agent, and truncation at every byte offset of every stream instead of every 60th of it.
The number of inputs tried is printed at the end of the run (`-p no:cacheprovider -s` shows it).
"""

from __future__ import annotations

import gzip
import os
import random
from collections import Counter
from typing import Any

import anyio
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.fuzz.corpus import PROTOCOLS_FUZZED, corpus
from tests.fuzz.oracle import MUTATIONS, check, mutate
from toolwire import Agent, Message, get_model
from toolwire.agent._history import validate_history
from toolwire.exceptions import ProviderError, StreamError, ToolwireError
from toolwire.messages import InvalidToolCallPart, ToolCallPart

LONG = int(os.environ.get("TOOLWIRE_FUZZ_EXAMPLES", "0") or 0)
TRIED: Counter[str] = Counter()
"""Inputs tried per test and protocol (printed by tests/fuzz/conftest.py)."""

_PROVIDER = {"openai-chat": "openai", "openai-responses": "openai-responses", "anthropic": "anthropic",
             "gemini": "gemini", "ollama": "ollama", "mistral": "mistral", "cohere": "cohere"}
_CONTENT_TYPE = {"ollama": "application/x-ndjson"}


def _settings(examples: int) -> Any:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))


def _draw_input(protocol: str, data: st.DataObject) -> bytes:
    _name, body = data.draw(st.sampled_from(corpus(protocol)), label="recording")
    names = data.draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3), label="mutations")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    return mutate(body, names, random.Random(seed))


@pytest.mark.parametrize("protocol", PROTOCOLS_FUZZED)
@_settings(LONG or 500)
@given(data=st.data())
def test_mutated_streams_replay_to_documented_results(protocol: str, data: st.DataObject) -> None:
    """Byte flips, type substitution at every key path, huge and deep values, invalid UTF-8, NUL bytes,
    split surrogates, framing noise: replay never raises and leaves a usable message."""
    body = _draw_input(protocol, data)
    chunk = data.draw(st.sampled_from([None, 1, 5, 64, 1000]), label="read size")
    if chunk is not None:
        chunk = max(chunk, len(body) // 2000)  # at most a few thousand reads: time goes to variety
    TRIED[f"replay {protocol}"] += 1
    check(protocol, body, chunk_size=chunk, targets=(protocol, data.draw(st.sampled_from(PROTOCOLS_FUZZED))))


@pytest.mark.parametrize(("protocol", "name"), [(p, n) for p in PROTOCOLS_FUZZED for n, _ in corpus(p)])
def test_a_stream_cut_at_any_offset_never_runs_a_call_the_whole_stream_did_not(protocol: str, name: str) -> None:
    """Truncation at every offset (every 60th in CI): runnable calls are calls of the whole stream, the
    text is a prefix of its text, and the cut message is marked incomplete."""
    body = dict(corpus(protocol))[name]
    whole = check(protocol, body, targets=())
    calls = Counter((c.name, orjson.dumps(c.arguments)) for c in whole.message.tool_calls)
    step = 1 if LONG else max(1, len(body) // 60)
    for cut in range(0, len(body), step):
        TRIED[f"truncate {protocol}"] += 1
        result = check(protocol, body[:cut], targets=())
        cut_calls = Counter((c.name, orjson.dumps(c.arguments)) for c in result.message.tool_calls)
        assert not cut_calls - calls, (cut, cut_calls - calls)
        assert whole.message.text.startswith(result.message.text), cut


# -- over HTTP: model.stream and the agent --------------------------------------------------------


def _transport(bodies: list[tuple[bytes, dict[str, str]]], chunk: int) -> httpx.MockTransport:
    queue = list(bodies)

    class Pieces(httpx.AsyncByteStream):
        def __init__(self, body: bytes) -> None:
            self.body = body

        async def __aiter__(self) -> Any:
            for start in range(0, len(self.body), chunk):
                yield self.body[start:start + chunk]

    def handler(request: httpx.Request) -> httpx.Response:
        body, headers = queue.pop(0) if len(queue) > 1 else queue[0]
        return httpx.Response(200, headers=headers, stream=Pieces(body))

    return httpx.MockTransport(handler)


def _encoded(protocol: str, body: bytes, encoding: str, rng: random.Random) -> tuple[bytes, dict[str, str]]:
    headers = {"content-type": _CONTENT_TYPE.get(protocol, "text/event-stream")}
    if encoding == "gzip":
        return gzip.compress(body), {**headers, "content-encoding": "gzip"}
    if encoding == "corrupt gzip":
        packed = bytearray(gzip.compress(body))
        packed[rng.randrange(10, max(11, len(packed)))] ^= 0xFF  # past the header: fails mid-stream
        return bytes(packed), {**headers, "content-encoding": "gzip"}
    if encoding == "wrong encoding":
        return body, {**headers, "content-encoding": rng.choice(["gzip", "deflate"])}
    if encoding == "html":
        return b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>", {"content-type": "text/html"}
    return body, headers


async def _stream(protocol: str, response: tuple[bytes, dict[str, str]], chunk: int) -> None:
    async with httpx.AsyncClient(transport=_transport([response], chunk)) as client:
        model = get_model(f"{_PROVIDER[protocol]}:m", api_key="secret-key-123456", http_client=client)
        events = []
        error: StreamError | None = None
        async with model.stream([Message.user("hi")]) as stream:
            try:
                async for event in stream:
                    events.append(event)
            except StreamError as exc:
                error = exc
        if error is not None:
            partial = error.partial_message
            assert partial is not None and partial.metadata.get("incomplete") is True
            assert partial == stream.message
            assert "secret-key-123456" not in str(error)
        else:
            assert stream.message is not None and "incomplete" not in stream.message.metadata
        assert events and events[-1].type == "message_end"


@pytest.mark.parametrize("protocol", PROTOCOLS_FUZZED)
@_settings(LONG // 20 or 50)
@given(data=st.data())
def test_mutated_and_compressed_bodies_over_http_raise_only_stream_errors(protocol: str, data: st.DataObject) -> None:
    """`model.stream` over a real httpx client: plain, gzip, gzip corrupted mid-stream, a wrong
    content-encoding, an HTML page; only `StreamError`s escape, each with the partial message."""
    body = _draw_input(protocol, data)
    encoding = data.draw(st.sampled_from(["none", "gzip", "corrupt gzip", "wrong encoding", "html"]), label="encoding")
    chunk = max(data.draw(st.sampled_from([1, 16, 512, 65536]), label="read size"), len(body) // 500)
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    TRIED[f"http {protocol}"] += 1
    anyio.run(_stream, protocol, _encoded(protocol, body, encoding, rng), chunk)


def echo(text: str = "") -> str:
    """Echo the text."""
    return text


async def _agent_run(protocol: str, first: tuple[bytes, dict[str, str]], then: tuple[bytes, dict[str, str]]) -> None:
    async with httpx.AsyncClient(transport=_transport([first, then], 4096)) as client:
        agent = Agent(f"{_PROVIDER[protocol]}:m", api_key="k", http_client=client, tools=[echo], max_steps=3)
        messages: list[Message] | None
        try:
            messages = (await agent.run("go")).messages
        except ProviderError as exc:
            messages = exc.messages
            assert messages is not None, exc  # noqa: PT017 - the history carried by the error is the point
        except ToolwireError:
            return
        validate_history([m for m in messages if m.parts] or [Message.user("x")])
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    assert type(part.arguments) is dict
                assert not (isinstance(part, InvalidToolCallPart) and part.id in _ran(messages))


def _ran(messages: list[Message]) -> set[str]:
    """Ids of calls whose result is not the agent's refusal to run them."""
    return {p.call_id for m in messages for p in m.tool_results_parts if not p.is_error}


@pytest.mark.parametrize("protocol", PROTOCOLS_FUZZED)
@_settings(LONG // 200 or 10)
@given(data=st.data())
def test_an_agent_run_on_hostile_streams_raises_only_toolwire_errors_with_a_valid_history(
        protocol: str, data: st.DataObject) -> None:
    body = _draw_input(protocol, data)
    _, text_only = corpus(protocol)[0]
    TRIED[f"agent {protocol}"] += 1
    headers = {"content-type": _CONTENT_TYPE.get(protocol, "text/event-stream")}
    anyio.run(_agent_run, protocol, (body, headers), (text_only, headers))
