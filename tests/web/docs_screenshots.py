"""The screenshots docs/guides/web-page.md shows, taken in Chromium from `toolwire serve` with no arguments.

    scripts/docs-screenshots               # rewrites docs/images/web-page/*.png
    scripts/docs-screenshots FOLDER        # writes them elsewhere (tests/web/test_docs_screenshots.py does)

It starts the real command in a temporary folder (SQLite, the offline model, the demo tools, `--fake-delay 0`),
asks the weather of three cities, and photographs the page at desktop width, light and dark, and at phone
width. Pages are 1 CSS pixel per device pixel and cut to the viewport, so each PNG stays small (tens of kB).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from toolwire.demo_tools import SUGGESTIONS

from .conftest import CHROMIUM_ARGS, chromium_path
from .test_e2e_demo import Serve

ROOT = Path(__file__).resolve().parents[2]
DOCS_IMAGES = ROOT / "docs" / "images" / "web-page"
SHOTS = {  # file name: (width, height, colour scheme, where the conversation is scrolled: "start" or "end")
    "chat-light.png": (1000, 640, "light", "start"),
    "chat-dark.png": (1000, 640, "dark", "start"),
    "chat-phone.png": (390, 720, "light", "end"),
}
SCROLL = {"start": "document.querySelector('#conversation').scrollTop = 0",
          "end": "document.querySelector('#conversation').scrollTop = 1e9"}


def take(folder: Path) -> list[Path]:
    """Write the screenshots into `folder`; the paths written."""
    path = chromium_path()
    if path is None:
        raise SystemExit("Chromium is missing: run scripts/test-browser (as root).")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as home, sync_playwright() as playwright:
        serve = Serve(Path(home))
        serve.start("--fake-delay", "0")
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1000, "height": 640}, device_scale_factor=1)
            page = context.new_page()
            page.goto(f"{serve.url}#token={serve.token}")
            page.get_by_role("button", name=SUGGESTIONS[0]).click()
            expect(page.locator(".run").last).to_have_attribute("data-status", "completed", timeout=30_000)
            expect(page.locator(".tool-card")).to_have_count(3)
            for name, (width, height, scheme, scroll) in SHOTS.items():
                page.set_viewport_size({"width": width, "height": height})
                page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
                if width < 760:  # one column: the page lays itself out for a phone when it loads
                    page.reload()
                    expect(page.locator(".tool-card")).to_have_count(3)
                page.evaluate(SCROLL[scroll])
                page.screenshot(path=str(folder / name))
                written.append(folder / name)
            context.close()
        finally:
            browser.close()
            serve.stop()
    return written


if __name__ == "__main__":
    for written in take(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS_IMAGES):
        print(f"{written} ({written.stat().st_size // 1024} kB)")
