"""Files and their bytes: `BlobStore` (where the bytes are) and `Files` (whose they are), beside the `Store`.

    files = Files(store, FolderBlobStore("toolwire.db.blobs"))       # or SQLBlobStore(store)
    record = await files.add(user.id, chat.id, spooled)               # a checked upload in a temporary file
    async for chunk in files.read(record): ...

A file belongs to a chat and to the chat's user (`files` rows, cascaded with the chat); its bytes are
content-addressed: kept once per sha256 in a blob store, whichever files name them. Messages hold `FilePart`s
with a `blob_id` (the file's id), never the bytes: rows stay small and the bytes are read only when a provider
request or a download needs them.

Invariants:
- Bytes are put before the row that names them is committed: a row never names bytes that were never there.
- Deleting a chat deletes its rows (the database's cascade) and then every content no row names any more
  (`release`). A crash between the two leaves contents that no row names; `sweep` finds and deletes them,
  sparing those put within its grace period (an upload between its put and its row).
- A user's files count against their quota (the sum of their sizes, a content kept once counted per file),
  checked in the transaction that adds the row (on PostgreSQL under a lock on the user's row, so two uploads
  at once cannot both pass it).

Two blob stores: `FolderBlobStore` (a folder, the default beside a SQLite file: `<db>.blobs/`) and
`SQLBlobStore` (the store's own database, in 256 KiB chunks, so that replicas on one PostgreSQL share blobs
with no other service).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio
from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from ._protocol import StoreError
from ._records import new_id, utc_now
from ._schema import blob_chunks, blob_contents, files, users
from .sql import SQLStore

__all__ = ["CHUNK_BYTES", "BlobStore", "FileRecord", "Files", "FolderBlobStore", "QuotaExceeded", "SQLBlobStore",
           "Spooled", "spool_bytes"]

CHUNK_BYTES = 256 * 1024
"""The size of a chunk read or written at once (and of a `blob_chunks` row)."""


class QuotaExceeded(StoreError):
    """Adding the file would take its user past their storage quota."""

    code = "storage_quota_exceeded"


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRecord:
    """A stored file: `id` is the `blob_id` that message parts hold."""

    id: str
    user_id: str
    chat_id: str
    sha256: str
    media_type: str
    name: str
    size: int
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Spooled:
    """Checked bytes waiting in a temporary file to be added (`Files.add` consumes the file)."""

    path: Path
    sha256: str
    size: int
    media_type: str
    name: str


def spool_bytes(data: bytes, *, media_type: str, name: str) -> Spooled:
    """`data` in a temporary file, for bytes already in memory (a tool's result)."""
    handle, path = tempfile.mkstemp(prefix="toolwire-blob-")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    return Spooled(path=Path(path), sha256=hashlib.sha256(data).hexdigest(), size=len(data), media_type=media_type,
                   name=name)


@runtime_checkable
class BlobStore(Protocol):
    """Where the bytes are, by sha256. Ownership, quotas and references are `Files`'s concern."""

    async def put(self, sha256: str, source: Path) -> None:
        """Keep the bytes of `source` (consumed: moved or deleted) under `sha256`; if they are kept already,
        mark them as just put (the sweep's grace period starts again)."""
        ...

    def read(self, sha256: str) -> AsyncIterator[bytes]:
        """The bytes, a chunk at a time (raises `FileNotFoundError` when there are none)."""
        ...

    async def has(self, sha256: str) -> bool: ...

    async def delete(self, sha256s: Collection[str]) -> None:
        """Delete these contents (those kept; the others are ignored)."""
        ...

    async def put_before(self, moment: float) -> list[str]:
        """The sha256 of every content last put before `moment` (seconds since the epoch): the sweep's candidates."""
        ...


class FolderBlobStore:
    """Blobs as files in a folder, `<folder>/<first two hex digits>/<sha256>`: the default beside a SQLite file."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def _path(self, sha256: str) -> Path:
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            raise ValueError("a blob is named by the hex of its sha256")
        return self.folder / sha256[:2] / sha256

    async def put(self, sha256: str, source: Path) -> None:
        target = self._path(sha256)

        def move() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                os.utime(target)
                source.unlink(missing_ok=True)
                return
            # Into the folder under a temporary name first, then renamed: a reader never sees half a file.
            partial = target.with_name(f".{sha256}.{os.getpid()}.{new_id('part')}")
            try:
                shutil.move(source, partial)
                os.replace(partial, target)
            finally:
                partial.unlink(missing_ok=True)

        await anyio.to_thread.run_sync(move)

    async def read(self, sha256: str) -> AsyncIterator[bytes]:
        async with await anyio.open_file(self._path(sha256), "rb") as handle:
            while chunk := await handle.read(CHUNK_BYTES):
                yield chunk

    async def has(self, sha256: str) -> bool:
        return await anyio.Path(self._path(sha256)).is_file()

    async def delete(self, sha256s: Collection[str]) -> None:
        def unlink() -> None:
            for sha256 in sha256s:
                self._path(sha256).unlink(missing_ok=True)

        await anyio.to_thread.run_sync(unlink)

    async def put_before(self, moment: float) -> list[str]:
        def scan() -> list[str]:
            found = []
            for path in self.folder.glob("??/*"):
                with contextlib.suppress(FileNotFoundError):
                    if not path.name.startswith(".") and path.stat().st_mtime < moment:
                        found.append(path.name)
            return found

        return await anyio.to_thread.run_sync(scan)


class SQLBlobStore:
    """Blobs in the store's own database (`blob_contents`, `blob_chunks` of `CHUNK_BYTES`): replicas sharing a
    PostgreSQL share their blobs with it, with no other service to run."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    def _insert(self, conn: Connection) -> Any:
        return (postgresql.insert(blob_contents) if conn.dialect.name == "postgresql"
                else sqlite.insert(blob_contents))

    async def put(self, sha256: str, source: Path) -> None:
        def write(conn: Connection) -> None:
            now = time.time()
            # A content is written once: the first put inserts it (RETURNING a row), a later one only touches it.
            created = conn.execute(self._insert(conn).values(sha256=sha256, size=source.stat().st_size, touched_at=now)
                                   .on_conflict_do_nothing().returning(blob_contents.c.sha256)).first()
            if created is None:
                conn.execute(update(blob_contents).where(blob_contents.c.sha256 == sha256).values(touched_at=now))
                return
            with source.open("rb") as handle:
                position = 0
                while chunk := handle.read(CHUNK_BYTES):
                    conn.execute(insert(blob_chunks).values(sha256=sha256, position=position, data=chunk))
                    position += 1

        try:
            await self.store.writer.write(write)
        finally:
            source.unlink(missing_ok=True)  # noqa: ASYNC240 - one unlink; an await here could itself be cancelled

    async def read(self, sha256: str) -> AsyncIterator[bytes]:
        # One chunk per query: memory stays at one chunk whatever the size, and no connection is held between them.
        position = 0
        while True:
            async with self.store.engine.connect() as conn:
                data = (await conn.execute(select(blob_chunks.c.data).where(
                    blob_chunks.c.sha256 == sha256, blob_chunks.c.position == position))).scalar()
            if data is None:
                if position == 0 and not await self.has(sha256):
                    raise FileNotFoundError(sha256)
                return
            yield bytes(data)
            position += 1

    async def has(self, sha256: str) -> bool:
        async with self.store.engine.connect() as conn:
            return (await conn.execute(select(blob_contents.c.sha256).where(
                blob_contents.c.sha256 == sha256))).first() is not None

    async def delete(self, sha256s: Collection[str]) -> None:
        names = list(sha256s)
        if not names:
            return

        def remove(conn: Connection) -> None:
            conn.execute(delete(blob_chunks).where(blob_chunks.c.sha256.in_(names)))
            conn.execute(delete(blob_contents).where(blob_contents.c.sha256.in_(names)))

        await self.store.writer.write(remove)

    async def put_before(self, moment: float) -> list[str]:
        async with self.store.engine.connect() as conn:
            return list((await conn.execute(select(blob_contents.c.sha256).where(
                blob_contents.c.touched_at < moment))).scalars())


class Files:
    """A store's files: their rows in the store's database, their bytes in a `BlobStore` (module docstring)."""

    def __init__(self, store: SQLStore, blobs: BlobStore) -> None:
        self.store = store
        self.blobs = blobs

    async def add(self, user_id: str, chat_id: str, spooled: Spooled, *, quota: int | None = None) -> FileRecord:
        """Keep `spooled`'s bytes and add the file to the chat; `QuotaExceeded` (nothing kept) past `quota` bytes."""
        record = FileRecord(id=new_id("file"), user_id=user_id, chat_id=chat_id, sha256=spooled.sha256,
                            media_type=spooled.media_type, name=spooled.name, size=spooled.size, created_at=utc_now())
        if quota is not None and await self.usage(user_id) + spooled.size > quota:  # before any bytes are moved
            spooled.path.unlink(missing_ok=True)
            raise _over(quota)
        await self.blobs.put(spooled.sha256, spooled.path)

        def insert_row(conn: Connection) -> bool:
            if quota is not None:
                # The user's row locked (PostgreSQL; SQLite's writer is alone anyway): uploads queue at the check.
                conn.execute(select(users.c.id).where(users.c.id == user_id).with_for_update())
                used = conn.execute(select(func.coalesce(func.sum(files.c.size), 0)).where(
                    files.c.user_id == user_id)).scalar_one()
                if used + record.size > quota:
                    return False
            conn.execute(insert(files).values(id=record.id, user_id=user_id, chat_id=chat_id, sha256=record.sha256,
                                              media_type=record.media_type, name=record.name, size=record.size,
                                              created_at=record.created_at))
            return True

        if not await self.store.writer.write(insert_row):
            await self.release([record.sha256])
            raise _over(quota or 0)
        if not await self.blobs.has(record.sha256):
            # A chat deleted in the moment between the put and the row released these bytes: the row keeps them now.
            raise StoreError("The file's bytes were deleted while it was being stored; upload it again.")
        return record

    async def get(self, user_id: str, file_id: str) -> FileRecord | None:
        """The file if it exists and belongs to the user (another user's file is `None`)."""
        async with self.store.engine.connect() as conn:
            row = (await conn.execute(select(files).where(files.c.id == file_id, files.c.user_id == user_id))).first()
        return _record(row) if row is not None else None

    async def in_chat(self, chat_id: str, file_ids: Collection[str]) -> dict[str, FileRecord]:
        """Those of `file_ids` that are files of the chat, by id."""
        if not file_ids:
            return {}
        async with self.store.engine.connect() as conn:
            rows = (await conn.execute(select(files).where(files.c.chat_id == chat_id,
                                                           files.c.id.in_(list(file_ids))))).all()
        return {row.id: _record(row) for row in rows}

    async def chat_contents(self, chat_id: str) -> list[str]:
        """The sha256 of the chat's files (read before the chat is deleted, released after)."""
        async with self.store.engine.connect() as conn:
            return list((await conn.execute(select(files.c.sha256).where(files.c.chat_id == chat_id)
                                            .distinct())).scalars())

    async def usage(self, user_id: str) -> int:
        """The bytes the user's files count against their quota."""
        async with self.store.engine.connect() as conn:
            return int((await conn.execute(select(func.coalesce(func.sum(files.c.size), 0)).where(
                files.c.user_id == user_id))).scalar_one())

    def read(self, record: FileRecord) -> AsyncIterator[bytes]:
        return self.blobs.read(record.sha256)

    async def read_all(self, file_id: str) -> tuple[FileRecord, bytes] | None:
        """A file and its bytes, by id alone (for a provider request: the row naming it was the user's already)."""
        async with self.store.engine.connect() as conn:
            row = (await conn.execute(select(files).where(files.c.id == file_id))).first()
        if row is None:
            return None
        record = _record(row)
        try:
            data = b"".join([chunk async for chunk in self.read(record)])
        except FileNotFoundError:
            return None
        return record, data

    async def release(self, sha256s: Collection[str]) -> None:
        """Delete those of these contents that no file names any more (after their chat was deleted)."""
        if not sha256s:
            return
        async with self.store.engine.connect() as conn:
            named = set((await conn.execute(select(files.c.sha256).where(
                files.c.sha256.in_(list(sha256s))).distinct())).scalars())
        await self.blobs.delete([sha for sha in sha256s if sha not in named])

    async def sweep(self, grace_seconds: float = 3600.0) -> int:
        """Delete contents that no file names and that were put more than `grace_seconds` ago (what a crash
        between a chat's deletion and its `release` left, or an upload that died before its row); returns how many."""
        candidates = await self.blobs.put_before(time.time() - grace_seconds)
        orphans: list[str] = []
        for start in range(0, len(candidates), 500):
            batch = candidates[start:start + 500]
            async with self.store.engine.connect() as conn:
                named = set((await conn.execute(select(files.c.sha256).where(files.c.sha256.in_(batch))
                                                .distinct())).scalars())
            orphans.extend(sha for sha in batch if sha not in named)
        await self.blobs.delete(orphans)
        return len(orphans)


def _record(row: Any) -> FileRecord:
    return FileRecord(id=row.id, user_id=row.user_id, chat_id=row.chat_id, sha256=row.sha256,
                      media_type=row.media_type, name=row.name, size=row.size, created_at=row.created_at)


def _over(quota: int) -> QuotaExceeded:
    return QuotaExceeded(f"This file would take you past your storage quota ({quota:,} bytes); delete chats with "
                         "files you no longer need, or upload a smaller file.")

