"""Files through the real `toolwire serve`: uploads (limits, sniffing, bombs, a 1 GB body), downloads and their
headers, who may reach which file, files in messages and in tool results, and blobs gone with their chat."""

from __future__ import annotations

import base64
import io
import socket
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from PIL import Image

from tests.server.support import Api, GateServer, ServerProcess, calls, text

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(shared_server: ServerProcess) -> ServerProcess:
    """The tests taking `server` use chats and gate tags of their own: they share one server per database."""
    return shared_server


def png(size: tuple[int, int] = (4, 3), color: str = "red") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "PNG")
    return out.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A PNG a few hundred bytes long that claims 10 billion pixels (a decompression bomb's header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = zlib.compress(b"\x00" * 64)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


async def upload(api: Api, chat_id: str, data: bytes, name: str, content_type: str = "application/octet-stream"
                 ) -> httpx.Response:
    return await api.client.post(f"/api/chats/{chat_id}/files", params={"name": name}, content=data,
                                 headers={"Content-Type": content_type})


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_png_named_pdf_is_stored_as_the_png_it_is_and_served_inline(server: ServerProcess) -> None:
    async with server.api() as api:
        chat = await api.new_chat()
        data = png()
        response = await upload(api, chat, data, "report.pdf", "application/pdf")
        assert response.status_code == 201, response.text
        stored = response.json()
        assert stored["media_type"] == "image/png"
        assert stored["size"] == len(data)
        download = await api.client.get(stored["url"])
        assert download.status_code == 200
        assert download.content == data
        assert download.headers["content-type"] == "image/png"
        assert download.headers["content-disposition"].startswith("inline")
        assert download.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in download.headers["content-security-policy"]


async def test_a_pdf_and_text_are_served_as_attachments(server: ServerProcess) -> None:
    async with server.api() as api:
        chat = await api.new_chat()
        for data, name, media_type in [(PDF, "a.pdf", "application/pdf"), (b"plain words\n", "n.txt", "text/plain")]:
            response = await upload(api, chat, data, name, "image/png")  # the claimed type is ignored
            assert response.status_code == 201, response.text
            assert response.json()["media_type"] == media_type
            download = await api.client.get(response.json()["url"])
            assert download.headers["content-disposition"].startswith("attachment")
            assert download.headers["content-type"].startswith(media_type)
            assert "sandbox" in download.headers["content-security-policy"]


async def test_types_not_allowed_are_refused_from_their_bytes(server: ServerProcess) -> None:
    async with server.api() as api:
        chat = await api.new_chat()
        zipped = b"PK\x03\x04" + b"\x14\x00" * 40
        for data, name in [(zipped, "photo.png"), (b"\x00\x01\x02\x03binary", "notes.txt"),
                           (b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>", "x.png")]:
            response = await upload(api, chat, data, name, "image/png")
            assert response.status_code in (415, 422), response.text
            assert response.json()["error"]["message"].endswith(".")
        empty = await upload(api, chat, b"", "empty.txt")
        assert empty.status_code == 422
        assert empty.json()["error"]["code"] == "empty_file"


async def test_a_decompression_bomb_is_refused_before_it_is_stored(server: ServerProcess) -> None:
    async with server.api() as api:
        chat = await api.new_chat()
        response = await upload(api, chat, bomb_png(), "small.png", "image/png")
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "image_too_large"
        broken = await upload(api, chat, png()[:40], "cut.png", "image/png")
        assert broken.status_code == 422
        assert broken.json()["error"]["code"] == "invalid_image"


async def test_a_file_over_the_limit_is_refused_and_a_declared_one_before_it_is_read(
        serve: Callable[..., ServerProcess]) -> None:
    server = serve("--max-file-mb", "1")
    async with server.api() as api:
        chat = await api.new_chat()
        assert (await upload(api, chat, b"a" * (1024 * 1024), "ok.txt")).status_code == 201
        over = await upload(api, chat, b"a" * (1024 * 1024 + 1), "over.txt")
        assert over.status_code == 413
        assert over.json()["error"]["code"] == "file_too_large"


async def test_a_1_gb_body_is_cut_off_at_the_limit_with_flat_memory(serve: Callable[..., ServerProcess]) -> None:
    """A raw connection streams 1 GB (chunked, no declared length) from a generator; the server answers 413 once
    it has read past the 2 MB limit, and its memory does not grow with what was sent."""
    server = serve("--max-file-mb", "2")
    async with server.api() as api:
        chat = await api.new_chat()
        assert (await upload(api, chat, png(), "warm.png")).status_code == 201  # imports done before measuring
    assert server.process is not None
    before = _rss_kb(server.process.pid)
    address = urlsplit(server.url)
    sock = socket.create_connection((address.hostname, address.port), timeout=30)
    sock.sendall((f"POST /api/chats/{chat}/files?name=huge.txt HTTP/1.1\r\nHost: x\r\n"
                  "Authorization: Bearer alice-token-0123456789abcdef\r\nTransfer-Encoding: chunked\r\n"
                  "Content-Type: text/plain\r\n\r\n").encode())
    piece = b"a" * (1024 * 1024)
    frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    sent = 0
    started = time.monotonic()
    try:
        for _ in range(1024):  # 1 GB, a megabyte at a time, never more than one in memory
            sock.sendall(frame)
            sent += len(piece)
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        pass
    answer = b""
    try:
        while b"\r\n\r\n" not in answer:
            more = sock.recv(65536)
            if not more:
                break
            answer += more
    except (ConnectionResetError, TimeoutError):
        pass
    sock.close()
    elapsed = time.monotonic() - started
    after = _rss_kb(server.process.pid)
    print(f"sent {sent / 1e6:.0f} MB before the cut in {elapsed:.2f} s; server RSS {before} -> {after} kB")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < 200 * 1024 * 1024  # cut off near the limit, not after the whole gigabyte
    assert after - before < 64 * 1024  # memory flat: far less than what was sent
    async with server.api() as api:
        assert (await api.client.get("/healthz")).status_code == 200


async def test_the_quota_and_the_files_per_message_limit(serve: Callable[..., ServerProcess]) -> None:
    server = serve("--max-user-files-mb", "0.01", "--max-files-per-message", "2")
    async with server.api() as api:
        chat = await api.new_chat()
        ids = [(await upload(api, chat, f"file {i}\n".encode() * 100, f"{i}.txt")).json()["id"] for i in range(3)]
        over = await upload(api, chat, b"z" * 9000, "big.txt")
        assert over.status_code == 413
        assert over.json()["error"]["code"] == "storage_quota_exceeded"
        async with api.send(chat, "three files", files=ids) as response:
            assert response.status_code == 422
            assert (await response.aread()).find(b"too_many_files") > 0


async def test_every_file_route_answers_only_the_owner(server: ServerProcess) -> None:
    async with server.api("alice") as alice, server.api("bob") as bob:
        chat = await alice.new_chat()
        file_id = (await upload(alice, chat, png(), "mine.png")).json()["id"]
        # Download: another user gets exactly what a file that never existed gets.
        foreign = await bob.client.get(f"/api/files/{file_id}")
        missing = await bob.client.get("/api/files/file_nothing")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.json() == missing.json()
        # Upload into another user's chat.
        assert (await upload(bob, chat, png(), "into.png")).status_code == 404
        # Referencing another user's file (or one of another chat) in a message.
        bobs_chat = await bob.new_chat()
        async with bob.send(bobs_chat, "look", files=[file_id]) as response:
            assert response.status_code == 422
            assert b"file_not_found" in await response.aread()
        other_chat = await alice.new_chat()
        async with alice.send(other_chat, "look", files=[file_id]) as response:
            assert response.status_code == 422
        # No token at all.
        anonymous = httpx.AsyncClient(base_url=server.url, trust_env=False)
        async with anonymous:
            assert (await anonymous.get(f"/api/files/{file_id}")).status_code == 401
            assert (await anonymous.post(f"/api/chats/{chat}/files", content=png())).status_code == 401
        assert (await alice.client.get(f"/api/files/{file_id}")).status_code == 200


async def test_a_message_references_files_and_the_model_receives_their_bytes(server: ServerProcess,
                                                                          gate: GateServer) -> None:
    gate.script("seen", text("I see a red picture."))
    async with server.api() as api:
        chat = await api.new_chat()
        data = png(color="red")
        file_id = (await upload(api, chat, data, "red.png")).json()["id"]
        events = await api.run(chat, "What is this? [[seen]]", files=[file_id])
        assert events[-1].type == "run_finished"
        rows = await api.rows(chat)
        user_parts = rows[0]["messages"][0]["parts"]
        assert {"type": "file", "media_type": "image/png", "name": "red.png", "blob_id": file_id, "data": None,
                "url": None} in user_parts
        assert base64.b64encode(data).decode() not in str(rows)  # rows hold the reference, never the bytes
    request = str(gate.bodies[-1])
    assert base64.b64encode(data).decode() in request  # resolved to the bytes for the provider


async def test_a_tools_image_is_stored_as_a_blob_and_events_carry_no_bytes(server: ServerProcess,
                                                                         gate: GateServer) -> None:
    gate.script("draw", calls(("paint", {"color": "blue"})), text("Here it is."))
    async with server.api() as api:
        chat = await api.new_chat()
        events = await api.run(chat, "Draw [[draw]]")
        results = [e.data for e in events if e.type == "tool_result"]
        assert results
        assert all(f["data"] is None for f in results[0]["result"]["files"])
        rows = await api.rows(chat)
        stored = [part for row in rows for message in row["messages"] for part in message["parts"]
                  if part["type"] == "tool_result"]
        (file_part,) = stored[0]["files"]
        assert file_part["data"] is None and file_part["blob_id"]
        download = await api.client.get(f"/api/files/{file_part['blob_id']}")
        assert download.status_code == 200
        with Image.open(io.BytesIO(download.content)) as image:
            assert image.size == (8, 6)


@pytest.mark.parametrize("blob_store", ["folder", "sql"])
async def test_blobs_are_gone_after_their_chat_is_deleted(serve: Callable[..., ServerProcess], tmp_path: Path,
                                                          db_url: str, blob_store: str) -> None:
    args = ["--blob-store", blob_store]
    if blob_store == "folder":
        args += ["--blob-folder", str(tmp_path / "blobs")]
    server = serve(*args)
    async with server.api() as api:
        doomed = await api.new_chat()
        kept = await api.new_chat()
        gone = (await upload(api, doomed, png(color="green"), "g.png")).json()
        shared = (await upload(api, doomed, PDF, "s.pdf")).json()
        still = (await upload(api, kept, PDF, "s.pdf")).json()
        assert (await api.client.delete(f"/api/chats/{doomed}")).status_code == 204
        assert (await api.client.get(gone["url"])).status_code == 404
        assert (await api.client.get(shared["url"])).status_code == 404
        assert (await api.client.get(still["url"])).content == PDF
    contents = await _blob_count(db_url, blob_store, tmp_path / "blobs")
    assert contents == 1  # the PDF another chat still names; nothing of the deleted chat's own


async def _blob_count(db_url: str, blob_store: str, folder: Path) -> int:
    if blob_store == "folder":
        return sum(1 for path in folder.glob("??/*") if not path.name.startswith("."))  # noqa: ASYNC240
    from sqlalchemy import func, select

    from toolwire.store import SQLStore
    from toolwire.store._schema import blob_contents

    async with SQLStore(db_url, migrate=False) as store, store.engine.connect() as conn:
        count: Any = (await conn.execute(select(func.count()).select_from(blob_contents))).scalar()
        return int(count)
