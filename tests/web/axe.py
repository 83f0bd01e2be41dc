"""axe-core (Deque's accessibility engine, pinned in web-build/package-lock.json) run on a page in Chromium.

`axe_violations(page)` evaluates axe's script in the page through the DevTools protocol (no script element
is added, and the page's Content-Security-Policy, which allows no inline script, stays in force), runs it on
the whole document and returns one line per violation. `assert_accessible(page)` asserts there is none,
in light and in dark colour schemes (the page follows `prefers-color-scheme`).
"""

from __future__ import annotations

import subprocess
from functools import cache
from typing import Any

from .conftest import ROOT, require

AXE = ROOT / "web-build" / "node_modules" / "axe-core" / "axe.min.js"
# WCAG 2.0/2.1/2.2 A and AA, and axe's best practices (landmarks, headings, region).
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]


@cache
def axe_source() -> str:
    if not AXE.is_file():
        done = subprocess.run([str(ROOT / "scripts" / "build-web-vendor"), "--deps-only"], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        require("axe-core (web-build/node_modules)", done.returncode == 0 and AXE.is_file(),
                f"scripts/build-web-vendor --deps-only failed:\n{done.stderr}")
    return AXE.read_text()


def axe_violations(page: Any) -> list[str]:
    """Every axe violation on the page now: `rule (impact): help — selectors`."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    result = page.evaluate("""async (tags) => {
        const found = await window.axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
        return found.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map((n) => `${n.target.join(" ")}: ${n.failureSummary.replace(/\\s+/g, " ")}`) }));
    }""", TAGS)
    return [f"{v['id']} ({v['impact']}): {v['help']} — {'; '.join(v['nodes'][:5])}" for v in result]


def assert_accessible(page: Any, screen: str) -> None:
    """No axe violation on the page's current screen, in the light and in the dark colour scheme."""
    problems = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.wait_for_timeout(50)  # let the style follow the scheme before axe reads colours
        problems += [f"{screen}, {scheme}: {violation}" for violation in axe_violations(page)]
    page.emulate_media(color_scheme="light")
    assert problems == [], "\n".join(problems)
