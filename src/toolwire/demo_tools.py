"""Example tools: what `toolwire demo` runs, and handy for trying `toolwire chat` without writing any.

    toolwire chat openai:gpt-4.1-mini --tool toolwire.demo_tools:get_weather --tool toolwire.demo_tools:convert_currency

They answer from small built-in tables, with no network, after a pause of their own (0.2 to 1.5
seconds; the weather's depends on the city), so a round of parallel calls visibly finishes in a
different order than it was made.
`book_table` always fails: it shows how an exception inside a tool becomes an error result that the
model reads and can explain, instead of ending the run.

`toolwire serve` offers three more (`SERVE_TOOLS`): `book_hotel` waits for a person's approval before it runs,
`save_note` takes a long text, so its argument visibly streams into the page, and `make_chart` returns a
bar chart drawn with Pillow as a PNG file with its result (`ToolReturn`), which the page shows. `SUGGESTIONS` are the
prompts the page offers in an empty chat, one for each thing the demo shows.

Arguments carry `examples` in their schemas; the automatic fake provider picks its arguments from
them, so the offline demo asks about Lisbon like its prompt does.
"""

from __future__ import annotations

import base64
import io
import zlib
from typing import Annotated, Any

import anyio
from pydantic import Field

from .exceptions import ToolError
from .messages import FilePart
from .tools import Tool, ToolReturn, tool

__all__ = [
    "DEMO_PROMPT",
    "DEMO_SYSTEM",
    "DEMO_TOOLS",
    "SERVE_TOOLS",
    "SUGGESTIONS",
    "book_hotel",
    "book_table",
    "convert_currency",
    "find_restaurants",
    "get_weather",
    "make_chart",
    "save_note",
]

DEMO_PROMPT = (
    "I'm in Lisbon this weekend. What's the weather, where can I eat seafood, how much is 250 USD in euros, "
    "and can you book a table for two at 20:00?"
)
DEMO_SYSTEM = "You are a concise travel assistant. Call every tool you need at once, then answer briefly."

_CONDITIONS = ["sunny", "partly cloudy", "light rain", "windy", "overcast"]
_RATES_PER_USD = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.3, "CHF": 0.88, "CAD": 1.36}
_RESTAURANTS = {
    "seafood": ["Cervejaria do Cais", "Marisqueira Azul", "O Pescador"],
    "vegetarian": ["Horta Viva", "Folha Verde"],
    "pizza": ["Forno Velho", "Massa Madre"],
}


def _number(text: str, low: int, high: int) -> int:
    """A stable number for a text (Python's own hash changes between runs)."""
    return low + zlib.crc32(text.lower().encode()) % (high - low + 1)


@tool
async def get_weather(city: Annotated[str, Field(examples=["Lisbon"])]) -> dict[str, Any]:
    """The current weather in a city.

    Args:
        city: The city name, e.g. "Lisbon".
    """
    # The slowest tool of the demo (its result arrives last), and slower for some cities than for others,
    # so the weather of several cities asked at once comes back out of order.
    await anyio.sleep(0.6 + _number(city + "/delay", 0, 6) * 0.15)
    return {
        "city": city,
        "temperature_c": _number(city, 8, 31),
        "conditions": _CONDITIONS[_number(city + "/sky", 0, len(_CONDITIONS) - 1)],
        "wind_kmh": _number(city + "/wind", 3, 40),
    }


@tool
async def find_restaurants(
    city: Annotated[str, Field(examples=["Lisbon"])],
    cuisine: Annotated[str, Field(examples=["seafood"])] = "seafood",
) -> list[dict[str, Any]]:
    """Restaurants in a city that serve a cuisine, best rated first.

    Args:
        city: The city to search in.
        cuisine: The kind of food, e.g. "seafood" or "vegetarian".
    """
    await anyio.sleep(0.5)
    names = _RESTAURANTS.get(cuisine.lower(), [f"{cuisine.title()} House"])
    ratings = {name: _number(f"{city}/{name}", 38, 49) / 10 for name in names}
    best = sorted(names, key=lambda name: -ratings[name])[:2]
    return [{"name": name, "rating": ratings[name]} for name in best]


@tool
async def convert_currency(
    amount: Annotated[float, Field(gt=0, examples=[250])],
    from_currency: Annotated[str, Field(examples=["USD"])],
    to_currency: Annotated[str, Field(examples=["EUR"])],
) -> dict[str, Any]:
    """Convert an amount of money between currencies at today's rate.

    Args:
        amount: How much money.
        from_currency: ISO 4217 code of the currency to convert from, e.g. "USD".
        to_currency: ISO 4217 code of the currency to convert to, e.g. "EUR".
    """
    await anyio.sleep(0.3)
    source, target = from_currency.upper(), to_currency.upper()
    for code in (source, target):
        if code not in _RATES_PER_USD:
            known = ", ".join(sorted(_RATES_PER_USD))
            raise ToolError(f"The currency {code!r} is not supported; use one of {known}.")
    rate = _RATES_PER_USD[target] / _RATES_PER_USD[source]
    return {"amount": amount, "from": source, "to": target, "rate": round(rate, 4),
            "converted": round(amount * rate, 2)}


@tool
async def book_table(
    restaurant: Annotated[str, Field(examples=["Cervejaria do Cais"])],
    people: Annotated[int, Field(ge=1, le=20, examples=[2])],
    time: Annotated[str, Field(examples=["20:00"])],
) -> dict[str, Any]:
    """Book a table at a restaurant for tonight.

    Args:
        restaurant: The restaurant's name.
        people: How many people the table is for.
        time: The time of the booking, 24-hour "HH:MM".
    """
    await anyio.sleep(0.2)
    # Always fails, on purpose: the demo shows a tool's exception travelling back as an error result.
    raise ConnectionError(f"the booking service did not answer while booking {restaurant} for {people} at {time}")


DEMO_TOOLS: list[Tool[..., Any]] = [get_weather, find_restaurants, convert_currency, book_table]
"""The demo's tools, in the order they are offered (and called) — not the order they finish."""


@tool(requires_approval=True)
async def book_hotel(
    city: Annotated[str, Field(examples=["Porto"])],
    nights: Annotated[int, Field(ge=1, le=30, examples=[2])],
    guests: Annotated[int, Field(ge=1, le=8, examples=[2])] = 2,
) -> dict[str, Any]:
    """Book a hotel room. Spends money, so a person approves each booking first.

    Args:
        city: The city of the hotel.
        nights: How many nights, from tonight.
        guests: How many people the room is for.
    """
    await anyio.sleep(0.4)
    hotel = ["Casa do Rio", "Hotel Ribeira", "Pensão Azul"][_number(city, 0, 2)]
    return {"hotel": hotel, "city": city, "nights": nights, "guests": guests,
            "price_eur": nights * _number(city + "/price", 80, 160), "confirmation": f"HX-{_number(city, 1000, 9999)}"}


@tool
async def save_note(
    title: Annotated[str, Field(examples=["Packing list"])],
    text: Annotated[str, Field(examples=["- passport"])],
) -> dict[str, Any]:
    """Save a note for later.

    Args:
        title: A short title.
        text: The note itself (Markdown).
    """
    await anyio.sleep(0.2)
    return {"saved": title, "characters": len(text), "lines": text.count("\n") + 1}


@tool
async def make_chart(
    title: Annotated[str, Field(examples=["Rain in Lisbon (mm)"])],
    values: Annotated[list[float], Field(examples=[[12, 30, 7, 21, 16]], min_length=1, max_length=24)],
) -> ToolReturn:
    """Draw a bar chart of some numbers and return it as a PNG image.

    Args:
        title: What the chart shows.
        values: The numbers, one bar each (at most 24).
    """
    png = await anyio.to_thread.run_sync(_bar_chart, title, values)
    return ToolReturn({"chart": title, "bars": len(values), "highest": max(values)},
                      files=[FilePart(media_type="image/png", name="chart.png", data=base64.b64encode(png).decode())])


def _bar_chart(title: str, values: list[float]) -> bytes:
    from PIL import Image, ImageDraw  # the server's extra: only `toolwire serve` offers this tool

    width, height, margin = 480, 280, 32
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((margin, 8), title[:60], fill="#1f2937")
    top = max(max(values), 1e-9)
    span = (width - 2 * margin) / len(values)
    for index, value in enumerate(values):
        bar = max(0.0, value) / top * (height - 2 * margin - 16)
        left = margin + index * span + span * 0.15
        draw.rectangle((left, height - margin - bar, left + span * 0.7, height - margin), fill="#2563eb")
    draw.line((margin, height - margin, width - margin, height - margin), fill="#1f2937", width=2)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


SERVE_TOOLS: list[Tool[..., Any]] = [*DEMO_TOOLS, book_hotel, save_note, make_chart]
"""What `toolwire serve` offers when no tools are configured: the demo's, one that asks for approval
(`book_hotel`), one with a long argument (`save_note`) and one that returns an image (`make_chart`)."""

SUGGESTIONS: tuple[str, ...] = (
    "What's the weather in Paris, Tokyo and Lima?",
    "Book a hotel room in Porto for two nights.",
    "Book a table for two at Cervejaria do Cais at 20:00.",
    "Write a packing list for a weekend in Lisbon and save it as a note.",
)
"""The prompts the page suggests with the demo tools: parallel calls that finish out of order, a call that
waits for approval, a tool that fails and is explained, and a long argument streaming in."""
