"""Files and blob stores, on SQLite and PostgreSQL, with the bytes in a folder and in the database itself."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from toolwire.messages import FilePart, Message, TextPart
from toolwire.store import SQLStore
from toolwire.store._schema import blob_chunks, blob_contents
from toolwire.store.blobs import (
    CHUNK_BYTES,
    BlobStore,
    Files,
    FolderBlobStore,
    QuotaExceeded,
    SQLBlobStore,
    spool_bytes,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["folder", "sql"])
def files(request: pytest.FixtureRequest, store: SQLStore, tmp_path: Path) -> Files:
    blobs: BlobStore = FolderBlobStore(tmp_path / "blobs") if request.param == "folder" else SQLBlobStore(store)
    assert isinstance(blobs, BlobStore)
    return Files(store, blobs)


async def _contents(files: Files) -> list[str]:
    return sorted(await files.blobs.put_before(float("inf")))


async def _read(files: Files, file_id: str) -> bytes:
    found = await files.read_all(file_id)
    assert found is not None
    return found[1]


async def test_a_file_is_kept_once_per_content_and_read_back_whole(files: Files, store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id)
    data = bytes(range(256)) * (3 * CHUNK_BYTES // 256 + 7)  # several chunks and a part of one
    first = await files.add(user.id, chat.id, spool_bytes(data, media_type="application/pdf", name="a.pdf"))
    second = await files.add(user.id, chat.id, spool_bytes(data, media_type="application/pdf", name="b.pdf"))
    assert first.id != second.id
    assert first.sha256 == second.sha256 == hashlib.sha256(data).hexdigest()
    assert await _contents(files) == [first.sha256]  # the bytes once
    assert await _read(files, second.id) == data
    assert await files.usage(user.id) == 2 * len(data)  # each file counts


async def test_rows_hold_references_and_never_the_bytes(files: Files, store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id)
    record = await files.add(user.id, chat.id, spool_bytes(b"%PDF-1.4 x" * 1000, media_type="application/pdf",
                                                           name="r.pdf"))
    await store.append_messages(chat.id, [Message(role="user", parts=[
        TextPart(text="see"), FilePart(media_type="application/pdf", name="r.pdf", blob_id=record.id)])])
    (row,) = await store.list_messages(chat.id)
    assert record.id in row.message_json
    assert len(row.message_json) < 400


async def test_files_belong_to_their_user(files: Files, store: SQLStore) -> None:
    alice = await store.ensure_user("alice")
    bob = await store.ensure_user("bob")
    chat = await store.create_chat(alice.id)
    record = await files.add(alice.id, chat.id, spool_bytes(b"hello", media_type="text/plain", name="h.txt"))
    assert await files.get(alice.id, record.id) == record
    assert await files.get(bob.id, record.id) is None
    assert await files.in_chat(chat.id, [record.id, "file_missing"]) == {record.id: record}


async def test_the_quota_refuses_a_file_and_keeps_nothing_of_it(files: Files, store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id)
    await files.add(user.id, chat.id, spool_bytes(b"a" * 600, media_type="text/plain", name="a"), quota=1000)
    with pytest.raises(QuotaExceeded):
        await files.add(user.id, chat.id, spool_bytes(b"b" * 600, media_type="text/plain", name="b"), quota=1000)
    assert len(await _contents(files)) == 1
    assert await files.usage(user.id) == 600


async def test_deleting_a_chat_deletes_its_blobs_but_not_those_another_chat_names(files: Files,
                                                                                    store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    doomed = await store.create_chat(user.id)
    kept = await store.create_chat(user.id)
    shared = await files.add(user.id, doomed.id, spool_bytes(b"shared", media_type="text/plain", name="s"))
    await files.add(user.id, kept.id, spool_bytes(b"shared", media_type="text/plain", name="s"))
    only = await files.add(user.id, doomed.id, spool_bytes(b"only here", media_type="text/plain", name="o"))
    contents = await files.chat_contents(doomed.id)
    assert await store.delete_chat(user.id, doomed.id)
    await files.release(contents)
    assert await _contents(files) == [shared.sha256]
    assert await files.read_all(only.id) is None
    if isinstance(files.blobs, SQLBlobStore):
        async with store.engine.connect() as conn:
            assert (await conn.execute(select(func.count()).select_from(blob_chunks))).scalar() == 1
            assert (await conn.execute(select(func.count()).select_from(blob_contents))).scalar() == 1


async def test_the_sweep_deletes_what_a_crash_between_delete_and_release_left(files: Files, store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    chat = await store.create_chat(user.id)
    other = await store.create_chat(user.id)
    await files.add(user.id, chat.id, spool_bytes(b"orphan to be", media_type="text/plain", name="o"))
    alive = await files.add(user.id, other.id, spool_bytes(b"still named", media_type="text/plain", name="a"))
    assert await store.delete_chat(user.id, chat.id)  # and the process dies before `release`
    assert len(await _contents(files)) == 2
    assert await files.sweep(grace_seconds=3600) == 0  # put a moment ago: maybe an upload between put and row
    assert await files.sweep(grace_seconds=0) == 1
    assert await _contents(files) == [alive.sha256]
    assert await _read(files, alive.id) == b"still named"


async def test_a_file_added_to_a_missing_chat_fails_and_the_sweep_takes_its_bytes(files: Files,
                                                                                     store: SQLStore) -> None:
    user = await store.ensure_user("alice")
    with pytest.raises(IntegrityError):  # the database refuses the row (foreign key)
        await files.add(user.id, "chat_missing", spool_bytes(b"x", media_type="text/plain", name="x"))
    assert await files.sweep(grace_seconds=0) == 1
    assert await _contents(files) == []
