"""Taking a test database back to an earlier schema revision, to test the migrations after it on real data."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

from toolwire.store import SQLStore
from toolwire.store._engine import MIGRATIONS


async def downgrade_to(store: SQLStore, revision: str) -> None:
    """Run the packaged migrations' downgrades on the store's database down to `revision` (committed)."""
    def down(conn: Connection) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = conn
        command.downgrade(config, revision)

    async with store.engine.connect() as conn:
        await conn.run_sync(down)
        await conn.commit()
