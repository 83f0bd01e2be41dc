"""The web client: static files served as they are (plain ES modules and CSS, no build step).

How a server mounts it:
- `GET /` answers `index.html` (`INDEX_HTML`).
- `GET /static/<name>` answers the file `<name>` of this folder; `static_file(name)` finds it and refuses
  anything that is not a page asset (this module, `package.json`, paths leaving the folder).
- The page calls `api/...` relative to its own address, so `/` and `/api/...` must share a path prefix.

The modules: `app.js` (the page), `session.js` (open a chat, follow and resume runs), `api.js` (REST and
event streams over fetch), `sse.js` (the SSE parser), `reducer.js` (the pure event reducer), `cards.js`
(tool-call cards and the steps that hold them, live or stored), `selectors.js` (what the state shows),
`render.js` (the DOM), `search.js` (searching the chats), `markdown.js` (Markdown built as elements, never as
HTML), `copy.js` (copy buttons), `branches.js` (versions, editing, regenerate and retry), `models.js` (the
model picker), `theme.js` (the colour theme); `favicon.svg` is the tab's icon.
`vendor/markdown-libs.js` is the Markdown parser and code highlighter markdown.js draws from (micromark and
lowlight, bundled by scripts/build-web-vendor from web-build/; licences in `vendor/LICENSES.txt`);
`markdown.css` (imported by `style.css`) styles Markdown and the highlighted code.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ASSET_TYPES", "INDEX_HTML", "PAGE_POLICY", "WEB_DIR", "static_file"]

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


PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
               "base-uri 'none'; form-action 'none'")
"""The page's Content-Security-Policy, as its `<meta>` tag says it. The server sends it as a header too, with
`frame-ancestors` (which a `<meta>` policy cannot carry): no other site may frame the page."""


def static_file(name: str, folder: Path = WEB_DIR) -> Path | None:
    """The asset `name` (a path under `/static/`) of `folder`, or `None` when there is no such page asset:
    only the page's own kinds of files are (by extension), never this module or `package.json`."""
    if not name or name.startswith("/") or "\\" in name or "\0" in name:
        return None
    root = folder.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root) or path.suffix not in ASSET_TYPES or not path.is_file():
        return None
    return path
