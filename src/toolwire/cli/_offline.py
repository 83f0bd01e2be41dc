"""The offline model of `toolwire serve`: the automatic fake provider, reading what a message asks of the demo tools.

`AutoResponder` calls every tool it is offered, whatever the message says. With the demo tools that makes
"Hello!" book a restaurant table. This responder reads the user's last message first: the weather in
several cities is one `get_weather` call per city, all in one round (so they run in parallel and answer in
the order they finish); words about food, money, a table, a hotel or a note add those tools ("plan" asks
for the weather, restaurants, money and a table at once). A message
that asks for none of them is answered in prose, without tools, saying what the demo can do. The results
are summed up in sentences (the weather of each city, the booking that failed and why), not as JSON.
Offered tools other than the demo's, it behaves as `AutoResponder` does: every tool offered.

Tool calls stream their arguments in small pieces at three times the frame delay (`--fake-delay`), so that
at the default speed a person sees them arrive; the long note of `save_note` takes a few seconds.

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
from typing import Any

import httpx
import orjson

from .._net import AsyncioNetwork
from .._transport import ShardedTransport
from ..messages import FilePart, ToolResultPart
from ..models import HTTPModel, Model
from ..providers import get_provider
from ..testing import AutoResponder, FakeProviderServer
from ..testing.fake import FakeRequest, FakeText, FakeThinking, FakeToolCall, FakeTurn
from ..tools import ToolDefinition

__all__ = ["FAKE_MODEL", "DemoResponder", "cities_in", "offline_model", "summary_of"]

FAKE_MODEL = "fake"
"""The model name that asks `serve`, `chat` and `run` for the offline model."""

_CONNECTIONS = httpx.Limits(max_connections=None, max_keepalive_connections=256)

_MAX_CITIES = 6
_CALL_SLOWDOWN = 3
"""Frames of a response with tool calls come this many times slower than `delay`: argument streaming is
what the demo shows, and at the text's pace it would be over before anyone saw it."""
_ARGUMENT_CHUNK = 4
_NOTE_CHUNK = 8

# Which demo tool a message asks for, by the words it uses.
_ASKS: dict[str, re.Pattern[str]] = {
    "get_weather": re.compile(r"\b(weather|forecast|temperature|rain\w*|sunny|snow\w*|wind\w*|warm|cold)\b", re.I),
    "find_restaurants": re.compile(r"\b(restaurants?|eat|food|dinner|lunch|seafood|vegetarian|pizza|cuisine)\b",
                                   re.I),
    "convert_currency": re.compile(r"\b(convert\w*|currenc\w*|exchange|usd|eur|gbp|jpy|chf|cad|euros?|dollars?|"
                                   r"pounds?|yen)\b", re.I),
    "book_table": re.compile(r"\b(tables?|reserv\w*)\b", re.I),
    "book_hotel": re.compile(r"\b(hotels?|rooms?)\b", re.I),
    "save_note": re.compile(r"\b(notes?|packing list)\b", re.I),
    "make_chart": re.compile(r"\b(charts?|graphs?|plot)\b", re.I),
}

# "Plan my evening": the classic four at once (what README's curl example shows).
_PLAN = re.compile(r"\bplan\b", re.I)
_PLANNED = ("get_weather", "find_restaurants", "convert_currency", "book_table")

_GREETING = re.compile(r"^\W*(hello|hi|hey|good (morning|afternoon|evening)|bonjour|hallo|hola)\b", re.I)
_WHAT_IT_DOES = (
    "I am the offline demo model of toolwire: no API key, no network, the same streaming and tool calls as a "
    "real model. Ask me about the weather in a few cities, restaurants, converting money, booking a table or "
    "a hotel room, or saving a note, and watch the tool cards: calls running in parallel, a booking waiting "
    "for your approval, a failing tool explained. The suggested prompts show each of them."
)

_PACKING_LIST = """# Weekend in Lisbon

## Clothes
- light jacket for the evening wind off the river
- comfortable shoes: the hills and the cobbles are steep
- one smarter outfit for dinner

## Bags and papers
- passport or ID card
- the hotel's address, written down
- a small bag for the tram

## Other things
- sunscreen and sunglasses
- a refillable water bottle
- a phone charger and a travel adapter (type F)
- some euros in cash for the pastelarias
"""


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


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_TOKEN = re.compile(r"[\w'\u2019-]+|[^\w\s]")


class DemoResponder(AutoResponder):
    """`AutoResponder` that calls the demo tools a message asks for (see the module docstring)."""

    @staticmethod
    def _demo(tools: list[ToolDefinition]) -> bool:
        return bool(tools) and all(t.name in _ASKS for t in tools)

    def respond(self, request: FakeRequest) -> FakeTurn:
        offered = list(request.tools)
        if self._demo(offered) and request.tool_choice in (None, "auto"):
            results = request.pending_results()
            if results and request.tool_rounds() >= self.rounds:
                return self.turn([FakeText(text=summary_of(results, _calls_of(request)), chunks=self.chunks)])
            received = _files_received(request)
            if received and not results:
                return self.turn([FakeText(text=received, chunks=self.chunks)])
            if not self.choose(request):
                said = request.last_user_text()
                text = f"Hello! {_WHAT_IT_DOES}" if _GREETING.search(said) else _WHAT_IT_DOES
                return self.turn([FakeText(text=text, chunks=self.chunks)])
        turn = super().respond(request)
        if any(isinstance(p, FakeToolCall) for p in turn.parts):
            turn = dataclasses.replace(turn, delay=turn.delay * _CALL_SLOWDOWN)
        return turn

    def choose(self, request: FakeRequest) -> list[ToolDefinition]:
        offered = list(request.tools)
        if not self._demo(offered) or request.tool_choice not in (None, "auto"):
            return super().choose(request)
        said = request.last_user_text()
        plan = _PLAN.search(said) is not None
        return [t for t in offered if _ASKS[t.name].search(said) or (plan and t.name in _PLANNED)]

    def call_parts(self, request: FakeRequest, tools: list[ToolDefinition],
                   round_index: int) -> list[FakeText | FakeThinking | FakeToolCall]:
        if not self._demo(tools):
            return super().call_parts(request, tools, round_index)
        said = request.last_user_text()
        cities = cities_in(said)[:_MAX_CITIES]
        # The arguments AutoResponder would make (from the schemas' examples), with the cities named.
        made = [p for p in AutoResponder(seed=self.seed, preamble=False, chunks=self.chunks)
                .call_parts(request, tools, round_index) if isinstance(p, FakeToolCall)]
        calls: list[FakeToolCall] = []
        for part in made:
            arguments = part.arguments if isinstance(part.arguments, dict) else {}
            part = dataclasses.replace(part, chunks=self.chunks if self.chunks is not None else _ARGUMENT_CHUNK)
            if part.name == "get_weather" and cities:
                calls += [dataclasses.replace(part, arguments={**arguments, "city": city}) for city in cities]
            elif part.name == "save_note":
                calls.append(dataclasses.replace(part, arguments={"title": _note_title(said), "text": _PACKING_LIST},
                                                 chunks=self.chunks if self.chunks is not None else _NOTE_CHUNK))
            elif "city" in arguments and cities:
                calls.append(dataclasses.replace(part, arguments={**arguments, "city": cities[0]}))
            else:
                calls.append(part)
        parts: list[FakeText | FakeThinking | FakeToolCall] = []
        if self.preamble:
            weather = [c.arguments["city"] for c in calls if c.name == "get_weather" and isinstance(c.arguments, dict)]
            others = list(dict.fromkeys(_DOING.get(c.name, f"use {c.name}") for c in calls if c.name != "get_weather"))
            said_parts = ([f"check the weather in {_listed(weather)}"] if weather else []) + others
            parts.append(FakeText(text=f"Let me {_listed(said_parts)}.", chunks=self.chunks))
        return [*parts, *calls]


_DOING = {
    "find_restaurants": "look for restaurants",
    "convert_currency": "convert the money",
    "book_table": "book the table",
    "book_hotel": "book the room (you approve it first)",
    "save_note": "write the note and save it",
    "make_chart": "draw the chart",
}


def _files_received(request: FakeRequest) -> str:
    """What the offline model says of the files of the user's last message (their names, types and sizes): it
    sees no more of them than that, and says so. Empty when the message has none."""
    last = next((m for m in reversed(request.messages) if m.role == "user"
                 and not m.tool_results_parts), None)
    files = [p for p in last.parts if isinstance(p, FilePart)] if last is not None else []
    if not files:
        return ""
    described = []
    for part in files:
        size = len(part.data) * 3 // 4 - part.data[-2:].count("=") if part.data else None
        kind = "an image" if part.media_type.startswith("image/") else "a file"
        named = f"{part.name}, " if part.name else ""
        described.append(f"{kind} ({named}{part.media_type}{f', {_size(size)}' if size is not None else ''})")
    count = "one file" if len(files) == 1 else f"{len(files)} files"
    return (f"I received {count}: {_listed(described)}. I am the offline demo model, so I cannot look inside "
            "them; a real model reads them (start the server with a provider's key set).")


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    return f"{size / 1024:.1f} kB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def _note_title(said: str) -> str:
    return "Packing list" + (f" for {cities[0]}" if (cities := cities_in(said)) else "")


def _calls_of(request: FakeRequest) -> dict[str, tuple[str, dict[str, Any]]]:
    """Call id → (tool name, arguments), from the assistant messages of the request."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    for message in request.messages:
        for call in message.tool_calls:
            calls[call.id] = (call.name, dict(call.arguments))
    return calls


def summary_of(results: list[ToolResultPart], calls: dict[str, tuple[str, dict[str, Any]]] | None = None) -> str:
    """The demo's answer after a round of tool results: what each tool found (or why it failed), in sentences."""
    known = calls or {}
    weather: list[str] = []
    sentences: list[str] = []
    for result in results:
        name, arguments = known.get(result.call_id, (result.name, {}))
        name = result.name or name
        value = result.result
        # Protocols without an error flag on results (OpenAI chat) carry toolwire's `{"error": ...}`.
        error = value.get("error") if isinstance(value, dict) and len(value) == 1 else None
        if result.is_error or isinstance(error, str):
            sentences.append(_failed(name, arguments, str(error if error is not None else value)))
        elif name == "get_weather" and isinstance(value, dict):
            weather.append(f"- **{value.get('city')}**: {value.get('temperature_c')} °C and {value.get('conditions')}, "
                           f"wind {value.get('wind_kmh')} km/h")
        else:
            sentences.append(_found(name, arguments, value))
    parts: list[str] = []
    if weather:
        parts.append("Here is the weather:\n\n" + "\n".join(weather))
    parts.extend(sentences)
    return "\n\n".join(parts) or "The tools returned nothing."


def _found(name: str, arguments: dict[str, Any], value: Any) -> str:
    if name == "find_restaurants" and isinstance(value, list) and value:
        places = [f"**{r.get('name')}** (rated {r.get('rating')})" for r in value if isinstance(r, dict)]
        cuisine, city = arguments.get("cuisine", "food"), arguments.get("city", "town")
        return f"For {cuisine} in {city}, try {_listed(places, 'or')}."
    if name == "convert_currency" and isinstance(value, dict):
        amount, converted = _number(value.get("amount")), _number(value.get("converted"))
        return f"{amount} {value.get('from')} is {converted} {value.get('to')} at today's rate of {value.get('rate')}."
    if name == "book_hotel" and isinstance(value, dict):
        return (f"Your room at **{value.get('hotel')}** in {value.get('city')} is booked for {value.get('nights')} "
                f"nights ({value.get('guests')} guests, {value.get('price_eur')} EUR). The confirmation number is "
                f"{value.get('confirmation')}.")
    if name == "make_chart" and isinstance(value, dict):
        return f"Here is the chart of **{value.get('chart')}** ({value.get('bars')} bars)."
    if name == "save_note" and isinstance(value, dict):
        return f"I saved the note **{value.get('saved')}** ({value.get('lines')} lines)."
    shown = value if isinstance(value, str) else orjson.dumps(value).decode()
    return f"{name} returned {shown[:300]}."


def _failed(name: str, arguments: dict[str, Any], error: str) -> str:
    reason = error.rstrip(".")
    if name == "book_table":
        where = arguments.get("restaurant", "the restaurant")
        return (f"I could not book the table at {where}: {reason}. The booking service seems to be down; try again "
                "later, or call the restaurant.")
    if name == "book_hotel":
        return f"I did not book the room: {reason}."
    return f"{name} did not work: {reason}."


def _number(value: Any) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".") if isinstance(value, int | float) else str(value)


def _listed(items: list[str], last: str = "and") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]


@asynccontextmanager
async def offline_model(*, delay: float, clients: list[httpx.AsyncClient]) -> AsyncIterator[tuple[Model, str]]:
    """The offline model and a sentence describing it, for as long as the block lasts.

    The model's HTTP client is appended to `clients`, whose owner closes it (the server closes its
    factory's clients at shutdown, after the last run).
    """
    responder = DemoResponder(delay=delay)
    async with FakeProviderServer("openai-chat", responder, api_key="demo") as server:
        # trust_env=False: the fake is on loopback; a proxy from the environment must not apply.
        client = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(60.0, connect=5.0),
                                   transport=ShardedTransport(limits=_CONNECTIONS, trust_env=False,
                                                              network=AsyncioNetwork()))
        clients.append(client)
        try:
            # `file_labels`: each attached file's name travels on a line before it, so the responder sees it.
            provider = get_provider(server.provider)
            provider = dataclasses.replace(provider, options={**provider.options, "file_labels": True})
            yield (HTTPModel(provider, "demo-model", base_url=server.base_url, api_key="demo", http_client=client),
                   f"the offline fake model (a fake OpenAI-compatible server on {server.url})")
        finally:
            await client.aclose()
