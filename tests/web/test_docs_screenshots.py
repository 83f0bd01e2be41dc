"""The screenshots of docs/guides/web-page.md: the script that takes them runs, and the page shows small PNGs."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

from .conftest import ROOT, chromium_path, require
from .docs_screenshots import DOCS_IMAGES, SHOTS

MAX_BYTES = 150_000
GUIDE = ROOT / "docs" / "guides" / "web-page.md"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk comes first
    return width, height


def test_the_script_regenerates_the_docs_screenshots(tmp_path: Path) -> None:
    require("Chromium", chromium_path() is not None, "run scripts/test-browser (as root) to install Debian's chromium.")
    done = subprocess.run([ROOT / "scripts" / "docs-screenshots", tmp_path], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    for name, (width, height, _scheme, _scroll) in SHOTS.items():
        shot = tmp_path / name
        assert png_size(shot) == (width, height), name
        assert shot.stat().st_size < MAX_BYTES, f"{name}: {shot.stat().st_size} bytes"


def test_the_guide_shows_the_committed_screenshots() -> None:
    shown = set(re.findall(r"!\[[^\]]+\]\(\.\./images/web-page/([\w.-]+)\)", GUIDE.read_text()))
    assert shown == set(SHOTS)
    for name, (width, height, _scheme, _scroll) in SHOTS.items():
        assert png_size(DOCS_IMAGES / name) == (width, height), name
        assert (DOCS_IMAGES / name).stat().st_size < MAX_BYTES, name
