"""`create_app` as a library: the browser headers (`server/browser.py`) and the page's folder (only its assets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.support import serve_in_process
from toolwire import Agent
from toolwire.exceptions import UserError
from toolwire.server import ServerConfig, create_app
from toolwire.testing import ScriptedModel


@pytest.mark.anyio
async def test_create_app_sends_the_headers_and_serves_only_assets_of_its_own_folder(tmp_path: Path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>mine</title>")
    (web / "app.js").write_text("export {};")
    (web / "secrets.env").write_text("KEY=1")
    config = ServerConfig(web_dir=web, frame_ancestors="'self' https://portal.example.com")
    async with serve_in_process(lambda ctx: Agent(ScriptedModel([])), tmp_path, config=config) as client:
        page = await client.get("/")
        assert page.text == "<!doctype html><title>mine</title>"
        policy = page.headers["content-security-policy"]
        assert policy.endswith("; frame-ancestors 'self' https://portal.example.com")
        assert "x-frame-options" not in page.headers  # it would forbid what the policy allows
        assert (await client.get("/static/app.js")).status_code == 200
        assert (await client.get("/static/secrets.env")).status_code == 404
        me = await client.get("/api/me")
        assert me.json() == {"name": "dev", "suggestions": []} and me.headers["x-content-type-options"] == "nosniff"
    with pytest.raises(UserError, match="cannot be empty"):
        create_app(lambda ctx: None, store=f"sqlite:///{tmp_path / 'x.db'}",
                   config=ServerConfig(frame_ancestors="'self'\r\nSet-Cookie: a=b"))
