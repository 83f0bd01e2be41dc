"""Replicas share files through the SQL blob store: each replica on its own machine (here, its own folder), one
PostgreSQL holding the rows and the bytes."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from tests.server.support import GateServer, text

from .test_replicas import Replica

pytestmark = pytest.mark.anyio


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6, 4), "orange").save(out, "PNG")
    return out.getvalue()


async def test_a_file_uploaded_to_one_replica_is_read_by_another_and_deleted_through_a_third(
        replica: Replica, gate: GateServer) -> None:
    gate.script("shared-file", text("An orange picture."))
    a, b, c = replica(), replica(), replica()
    assert len({p.folder for p in (a, b, c)}) == 3  # no folder in common: only the database
    data = _png()
    async with a.api() as on_a, b.api() as on_b, c.api() as on_c:
        chat = await on_a.new_chat()
        stored = await on_a.client.post(f"/api/chats/{chat}/files", params={"name": "o.png"}, content=data)
        assert stored.status_code == 201, stored.text
        file = stored.json()
        downloaded = await on_b.client.get(file["url"])
        assert downloaded.status_code == 200 and downloaded.content == data
        # A message on B referencing it: B's run reads the bytes from the database for the model.
        events = await on_b.run(chat, "What is this? [[shared-file]]", files=[file["id"]])
        assert events[-1].type == "run_finished"
        assert base64.b64encode(data).decode() in str(gate.bodies[-1])
        assert (await on_c.client.delete(f"/api/chats/{chat}")).status_code == 204
        assert (await on_a.client.get(file["url"])).status_code == 404
