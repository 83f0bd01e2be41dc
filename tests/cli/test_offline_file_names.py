"""The offline model of `toolwire serve` sees the files of a message, names included."""

from __future__ import annotations

import httpx
import pytest

from toolwire import Agent, FilePart, Message, TextPart
from toolwire.cli import _offline
from toolwire.testing.fake import FakeRequest, FakeTurn, file_size

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.mark.anyio
async def test_the_offline_model_receives_the_names_types_and_sizes_of_attached_files(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[FakeRequest] = []
    respond = _offline.DemoResponder.respond

    def spy(self: _offline.DemoResponder, request: FakeRequest) -> FakeTurn:
        seen.append(request)
        return respond(self, request)

    monkeypatch.setattr(_offline.DemoResponder, "respond", spy)
    clients: list[httpx.AsyncClient] = []
    photo = FilePart(media_type="image/png", data=PNG, name="dot.png")
    async with _offline.offline_model(delay=0, clients=clients) as (model, _):
        await Agent(model).run(Message(role="user", parts=[TextPart(text="What is this?"), photo]))
    (request,) = seen
    assert [(f.name, f.media_type, file_size(f)) for f in request.user_files()] == [("dot.png", "image/png", 70)]
