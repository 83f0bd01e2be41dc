"""The offline model of `toolwire serve`: the automatic fake provider, reading what a message asks of the demo tools.

`AutoResponder` calls every tool it is offered, whatever the message says. With the demo tools that makes
"What's the weather in Paris, Tokyo and Lima?" book a restaurant table. This responder reads the user's
last message first: the weather in several cities is one `get_weather` call per city, all in one round
(so they run in parallel and answer in the order they finish); words about food, money or bookings add
those tools. A message that asks for none of them, or tools other than the demo's, get what
`AutoResponder` does: every tool offered. The follow-up request with the results is answered by
`AutoResponder` too (a summary of what the tools returned).

`offline_model` runs it: `toolwire serve` and `toolwire chat fake` (and `run fake`) use the same offline
model, on a fake OpenAI-compatible server on a loopback port, through the same HTTP and parsing code a
real provider gets.

Cities are the capitalised words of the message that do not begin a sentence (and are not all capitals,
like `USD`): a guess good enough for a demo, and the fake model never pretends to be more.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from ..models import Model, get_model
from ..testing import AutoResponder, FakeProviderServer
from ..testing.fake import FakeRequest, FakeText, FakeThinking, FakeToolCall
from ..tools import ToolDefinition

__all__ = ["FAKE_MODEL", "DemoResponder", "cities_in", "offline_model"]

FAKE_MODEL = "fake"
"""The model name that asks `serve`, `chat` and `run` for the offline model."""

_CONNECTIONS = httpx.Limits(max_connections=None, max_keepalive_connections=256)

_MAX_CITIES = 6

# Which demo tool a message asks for, by the words it uses.
_ASKS: dict[str, re.Pattern[str]] = {
    "get_weather": re.compile(r"\b(weather|forecast|temperature|rain\w*|sunny|snow\w*|wind\w*|warm|cold)\b", re.I),
    "find_restaurants": re.compile(r"\b(restaurants?|eat|food|dinner|lunch|seafood|vegetarian|pizza|cuisine)\b",
                                   re.I),
    "convert_currency": re.compile(r"\b(convert\w*|currenc\w*|exchange|usd|eur|gbp|jpy|chf|cad|euros?|dollars?|"
                                   r"pounds?|yen)\b", re.I),
    "book_table": re.compile(r"\b(book\w*|reserv\w*|table)\b", re.I),
}

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_TOKEN = re.compile(r"[\w'\u2019-]+|[^\w\s]")


def cities_in(text: str) -> list[str]:
    """The capitalised names in `text` that do not begin a sentence, in order, without repeats."""
    found: list[str] = []
    for sentence in _SENTENCE.split(text):
        name: list[str] = []
        for position, match in enumerate(_TOKEN.finditer(sentence)):
            word = match.group()  # a word, or a punctuation mark (which ends a name)
            proper = position > 0 and word[0].isupper() and not word.isupper() and word not in ("I", "I'm")
            if proper:
                name.append(word)
                continue
            if name:
                found.append(" ".join(name))
                name = []
        if name:
            found.append(" ".join(name))
    return list(dict.fromkeys(found))


class DemoResponder(AutoResponder):
    """`AutoResponder` that calls the demo tools a message asks for (see the module docstring)."""

    def call_parts(self, request: FakeRequest, tools: list[ToolDefinition],
                   round_index: int) -> list[FakeText | FakeThinking | FakeToolCall]:
        said = request.last_user_text()
        wanted = [t for t in tools if t.name in _ASKS and _ASKS[t.name].search(said)]
        if not wanted or any(t.name not in _ASKS for t in tools):
            return super().call_parts(request, tools, round_index)
        cities = cities_in(said)[:_MAX_CITIES]
        # The arguments AutoResponder would make (from the schemas' examples), with the cities named.
        made = [p for p in AutoResponder(seed=self.seed, preamble=False, chunks=self.chunks)
                .call_parts(request, wanted, round_index) if isinstance(p, FakeToolCall)]
        calls: list[FakeToolCall] = []
        for part in made:
            arguments = part.arguments if isinstance(part.arguments, dict) else {}
            if part.name == "get_weather" and cities:
                calls += [dataclasses.replace(part, arguments={**arguments, "city": city}) for city in cities]
            elif "city" in arguments and cities:
                calls.append(dataclasses.replace(part, arguments={**arguments, "city": cities[0]}))
            else:
                calls.append(part)
        parts: list[FakeText | FakeThinking | FakeToolCall] = []
        if self.preamble:
            weather = [c.arguments["city"] for c in calls if c.name == "get_weather" and isinstance(c.arguments, dict)]
            others = list(dict.fromkeys(c.name for c in calls if c.name != "get_weather"))
            said_parts = ([f"check the weather in {_listed(weather)}"] if weather else []) + \
                ([f"use {_listed(others)}"] if others else [])
            parts.append(FakeText(text=f"Let me {' and '.join(said_parts)}.", chunks=self.chunks))
        return [*parts, *calls]


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@asynccontextmanager
async def offline_model(*, delay: float, clients: list[httpx.AsyncClient]) -> AsyncIterator[tuple[Model, str]]:
    """The offline model and a sentence describing it, for as long as the block lasts.

    The model's HTTP client is appended to `clients`, whose owner closes it (the server closes its
    factory's clients at shutdown, after the last run).
    """
    responder = DemoResponder(delay=delay)
    async with FakeProviderServer("openai-chat", responder, api_key="demo") as server:
        # trust_env=False: the fake is on loopback; a proxy from the environment must not apply.
        client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(60.0, connect=5.0), limits=_CONNECTIONS)
        clients.append(client)
        try:
            yield (get_model(f"{server.provider}:demo-model", base_url=server.base_url, api_key="demo",
                             http_client=client),
                   f"the offline fake model (a fake OpenAI-compatible server on {server.url})")
        finally:
            await client.aclose()
