"""The web client: static files served as they are (plain ES modules and CSS, no build step).

How a server mounts it:
- `GET /` answers `index.html` (`INDEX_HTML`).
- `GET /static/<name>` answers the file `<name>` of this folder; `static_file(name)` finds it and refuses
  anything that is not a page asset (this module, `package.json`, paths leaving the folder).
- The page calls `api/...` relative to its own address, so `/` and `/api/...` must share a path prefix.

The modules: `app.js` (the page), `session.js` (open a chat, follow and resume runs), `api.js` (REST and
event streams over fetch), `sse.js` (the SSE parser), `reducer.js` (the pure event reducer),
`selectors.js` (what the state shows), `render.js` (the DOM), `markdown.js` (Markdown built as elements, never as HTML).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ASSET_TYPES", "INDEX_HTML", "WEB_DIR", "static_file"]

WEB_DIR: Path = Path(__file__).resolve().parent
INDEX_HTML: Path = WEB_DIR / "index.html"

ASSET_TYPES: dict[str, str] = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
"""Content types of the files the page loads (module scripts must be served as JavaScript)."""


def static_file(name: str) -> Path | None:
    """The asset `name` (a path under `/static/`), or `None` when there is no such page asset."""
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return None
    path = (WEB_DIR / name).resolve()
    if not path.is_relative_to(WEB_DIR) or path.suffix not in ASSET_TYPES or not path.is_file():
        return None
    return path
