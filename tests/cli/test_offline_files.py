"""The offline model and files: it says what it received (names, types, sizes), and `make_chart` returns a PNG."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from toolwire import Agent
from toolwire.cli._offline import offline_model
from toolwire.demo_tools import SERVE_TOOLS, make_chart
from toolwire.messages import FilePart, Message, TextPart, ToolResultPart

pytestmark = pytest.mark.anyio


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (5, 5)).save(out, "PNG")
    return out.getvalue()


async def test_the_offline_model_describes_the_files_it_received() -> None:
    image = _png()
    message = Message(role="user", parts=[
        TextPart(text="What are these?"),
        FilePart(media_type="image/png", data=base64.b64encode(image).decode(), name="photo.png"),
        FilePart(media_type="application/pdf", data=base64.b64encode(b"%PDF-1.4 x" * 300).decode(), name="r.pdf")])
    async with offline_model(delay=0.0, clients=[]) as (model, _):
        result = await Agent(model, tools=SERVE_TOOLS).run(message)
    assert result.output.startswith("I received 2 files: ")
    assert f"an image (photo.png, image/png, {len(image)} bytes)" in result.output  # names travel as file_labels
    assert "a file (r.pdf, application/pdf, 2.9 kB)" in result.output


async def test_make_chart_returns_a_png_the_offline_model_asks_for() -> None:
    async with offline_model(delay=0.0, clients=[]) as (model, _):
        result = await Agent(model, tools=[make_chart]).run("Make a chart of these numbers")
    (part,) = [p for m in result.messages for p in m.parts if isinstance(p, ToolResultPart)]
    (chart,) = part.files
    assert chart.media_type == "image/png" and chart.data is not None
    with Image.open(io.BytesIO(base64.b64decode(chart.data))) as drawn:
        assert drawn.size == (480, 280)
    assert "Here is the chart of" in result.output
