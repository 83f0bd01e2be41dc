"""Files in the page, in Chromium, against `toolwire serve` with no arguments (the offline model, the demo tools):
an image attached with the button (previewed, removable, uploaded) that the offline model describes, and the
chart `make_chart` returns, shown from the server's download route after a reload."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import expect

from .axe import assert_accessible
from .e2e import Open
from .test_e2e_demo import Serve

BLOB_URL = re.compile(r"^blob:")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def _png(path: Path, color: str) -> Path:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), color).save(out, "PNG")
    path.write_bytes(out.getvalue())
    return path


def test_an_attached_image_is_uploaded_described_and_shown_after_a_reload(serve: Serve, web: Open, tmp_path: Path,
                                                                           screenshots: Path) -> None:
    serve.start()
    page = web(serve.url, token=serve.token)
    chooser = page.page.locator("#attach-input")
    chooser.set_input_files([str(_png(tmp_path / "red.png", "red")), str(_png(tmp_path / "blue.png", "blue"))])
    waiting = page.page.locator(".attachments .attachment")
    expect(waiting).to_have_count(2)
    page.page.get_by_role("button", name="Remove blue.png").click()
    expect(waiting).to_have_count(1)
    expect(waiting.first).to_contain_text("red.png")
    assert_accessible(page.page, "a file waiting to be sent")
    page.send("What is in this picture?")
    page.expect_last_run_status("completed", timeout=20_000)
    expect(page.page.locator(".md").last).to_contain_text("I received one file: an image (red.png, image/png")
    expect(waiting).to_have_count(0)
    image = page.page.locator(".user-message .file-image img")
    expect(image).to_have_count(1)
    page.reload()
    image = page.page.locator(".user-message .file-image img")
    expect(image).to_have_attribute("src", BLOB_URL, timeout=10_000)
    assert page.page.evaluate("(img) => img.naturalWidth", image.element_handle()) == 40
    page.screenshot(screenshots / "files-attached.png")


def test_a_tools_chart_is_shown_from_the_download_route_after_a_reload(serve: Serve, web: Open,
                                                                      screenshots: Path) -> None:
    serve.start()
    page = web(serve.url, token=serve.token)
    page.send("Make a chart of my savings")
    page.expect_last_run_status("completed", timeout=20_000)
    expect(page.page.locator(".md").last).to_contain_text("Here is the chart of")
    page.reload()
    chart = page.page.locator(".tool-card .tool-files .file-image img")
    expect(chart).to_have_count(1, timeout=10_000)
    expect(chart).to_have_attribute("src", BLOB_URL, timeout=10_000)
    page.page.wait_for_function("() => document.querySelector('.tool-files img').naturalWidth > 0")
    assert page.page.evaluate("() => document.querySelector('.tool-files img').naturalWidth") == 480
    # Fetched from the server's own route with the token, shown through a blob: URL (the policy allows no other).
    assert "img-src 'self' blob:" in (page.page.evaluate(
        "() => document.querySelector('meta[http-equiv=Content-Security-Policy]').content"))
    assert_accessible(page.page, "a tool's chart")
    page.screenshot(screenshots / "files-chart.png")
