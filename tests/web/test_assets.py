"""The page's files: every module it imports is a servable asset, and none can turn text into markup."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolwire.web import ASSET_TYPES, INDEX_HTML, WEB_DIR, static_file

MODULES = sorted(WEB_DIR.glob("*.js"))


def test_everything_the_page_loads_is_served() -> None:
    page = INDEX_HTML.read_text()
    loaded = re.findall(r'(?:src|href)="static/([^"]+)"', page)
    assert sorted(loaded) == ["app.js", "favicon.svg", "style.css"]
    imported = {name for module in MODULES for name in re.findall(r'from "\./([^"]+)"', module.read_text())}
    assert imported == {"api.js", "attachments.js", "branches.js", "cards.js", "copy.js", "markdown.js", "models.js", "reducer.js", "render.js", "search.js", "selectors.js",
                        "session.js", "sse.js", "theme.js", "vendor/markdown-libs.js"}
    styles = set(re.findall(r'@import url\("([^"]+)"\)', (WEB_DIR / "style.css").read_text()))
    assert styles == {"markdown.css"}
    for name in [*loaded, *imported, *styles]:
        asset = static_file(name)
        assert asset is not None, name
        assert asset.suffix in ASSET_TYPES


@pytest.mark.parametrize("name", ["", "../../pyproject.toml", "__init__.py", "package.json", "/etc/passwd",
                                  "..\\index.html", "missing.js", "index.html\0.js", "."])
def test_static_file_refuses_what_is_not_a_page_asset(name: str) -> None:
    assert static_file(name) is None


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_no_module_turns_strings_into_markup_or_code(module: Path) -> None:
    source = module.read_text()
    if module.name == "attachments.js":  # images from blob: URLs only, set in its one guarded function
        guarded = re.search(r"function showBlob\(img, url\) \{\n.*?\n\}\n", source, re.S)
        assert guarded is not None and 'if (!url.startsWith("blob:")) throw' in guarded.group(0)
        source = source.replace(guarded.group(0), "")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setAttribute(\"on", "srcdoc", ".src =", "createContextualFragment", "DOMParser"):
        assert sink not in source, f"{module} uses {sink}"


def test_the_palette_is_stated_once() -> None:
    """Each colour of style.css is declared once, as light-dark(light, dark); the theme sets only color-scheme."""
    css = (WEB_DIR / "style.css").read_text()
    declared = re.findall(r"^\s*(--[\w-]+):\s*([^;]+);", css, flags=re.MULTILINE)
    names = [name for name, _ in declared]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    colours = {name: value for name, value in declared if "#" in value}
    assert colours, "the palette is declared in style.css"
    assert all(value.startswith("light-dark(") for value in colours.values()), colours
    assert "prefers-color-scheme" not in css, "the system's setting reaches the palette through color-scheme"
