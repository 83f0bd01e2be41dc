"""What drawing a long finished answer costs the chat page, measured in Chromium.

    python -m bench.page_markdown                 # 9,000 characters, 7 fresh pages per case, a table
    python -m bench.page_markdown --chars 20000 --pages 3 --json bench/results/page_markdown.json

Opening a chat draws each stored answer once: `ConversationView.update` builds the Markdown (parsed by
micromark, code highlighted by lowlight) and scrolls to the end, which lays the page out. The figure is the
main thread's CPU time of that one task (its `tdur` in Chromium's trace), not its wall time: on a shared,
loaded machine the wall time mostly measures the neighbours.

Cases, each in a fresh page (a new V8 isolate state for the page's scripts, as a person opening the page):

- `open, cold`: the first answer the page draws, before anything was parsed (what a reload shows);
- `open, after idle warm-up`: the same once the page's start-up warm-up (markdown.js `warmUpMarkdown`, run in
  idle time while the page waits for the server) has run;
- `open, warm`: the same answer drawn again in a fresh view after four earlier draws (the JIT at its best);
- `the warm-up itself`: what `warmUpMarkdown` costs, in a fresh page;
- `parse only, cold` / `warm`: `parseMarkdownTree` alone, the library's share.

The page's files are served from `src/toolwire/web` to a blank document through Playwright's routing (no
server: what is measured is the page's own drawing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WEB = REPO / "src" / "toolwire" / "web"
ORIGIN = "http://bench.invalid"
BLANK = "<!doctype html><html><body><main id=conversation style='height:760px;overflow:auto'></main></body></html>"

# One section of a typical long answer: a heading, prose with inline marks and links, a list, a code block
# with a known language, a table. Repeated to the length asked for.
SECTION = (
    "## Step {k}: what to change\n\n"
    "The handler reads the **whole body** before it checks the `Content-Length`, so a client can make it "
    "buffer [any amount](https://example.org/limits/{k}) of data; see https://example.com/issue/{k} and "
    "_the notes_ below.\n\n"
    "- read the header first\n- refuse a body over the limit with `413`\n- stream the rest to disk\n\n"
    "```python\ndef read_body_{k}(request, limit=1_000_000):\n"
    "    size = int(request.headers.get(\"content-length\", 0))\n"
    "    if size > limit:\n        raise TooLarge(size)\n    return request.read(size)\n```\n\n"
    "| Case | Limit |\n|---|---:|\n| upload | 10 MB |\n| message | 1 MB |\n\n"
)

# Draws one finished answer the way opening a chat does, in one task, and reports nothing: the trace has it.
OPEN = """async ([text, warm, before]) => {
  const { ConversationView } = await import("/static/render.js");
  const { emptyChat } = await import("/static/reducer.js");
  const markdown = await import("/static/markdown.js");
  if (warm && markdown.warmUpMarkdown) markdown.warmUpMarkdown();
  const draw = (id) => {
    const root = document.getElementById("conversation");
    const view = new ConversationView(root, {onDecide() {}, onUndecide() {}, onDismiss() {}});
    const rows = [
      {id: `u${id}`, kind: "user", run_id: `run${id}`, sequence_number: 1,
       messages: [{role: "user", parts: [{type: "text", text: "Explain the change."}]}]},
      {id: `a${id}`, kind: "assistant", run_id: `run${id}`, sequence_number: 2,
       messages: [{role: "assistant", parts: [{type: "text", text}]}]},
    ];
    view.update({...emptyChat(`chat${id}`), rows});
    return root.scrollHeight;  // the page scrolls to the end: layout is part of the drawing
  };
  for (let k = 0; k < before; k += 1) draw(k);
  await new Promise((resolve) => setTimeout(resolve, 20));
  await new Promise((resolve) => setTimeout(() => { window.__height = draw("measured"); resolve(); }, 0));
}"""

WARM_UP = """async () => {
  const markdown = await import("/static/markdown.js");
  await new Promise((resolve) => setTimeout(resolve, 20));
  await new Promise((resolve) => setTimeout(() => { markdown.warmUpMarkdown(); resolve(); }, 0));
}"""

PARSE = """async ([text, warm, before]) => {
  const libs = await import("/static/vendor/markdown-libs.js");
  for (let k = 0; k < before; k += 1) libs.parseMarkdownTree(text + k);
  await new Promise((resolve) => setTimeout(resolve, 20));
  await new Promise((resolve) => setTimeout(() => { libs.parseMarkdownTree(text); resolve(); }, 0));
}"""

CASES: list[tuple[str, str, bool, int]] = [
    ("open, cold", OPEN, False, 0),
    ("open, after idle warm-up", OPEN, True, 0),
    ("open, warm", OPEN, False, 4),
    ("the warm-up itself", WARM_UP, False, 0),
    ("parse only, cold", PARSE, False, 0),
    ("parse only, warm", PARSE, False, 4),
]


def answer(chars: int) -> str:
    text = ""
    k = 0
    while len(text) < chars:
        text += SECTION.format(k=k)
        k += 1
    return text[:chars]


def _serve(route: Any) -> None:
    path = route.request.url.removeprefix(ORIGIN)
    if not path.startswith("/static/"):
        route.fulfill(body=BLANK, content_type="text/html")
        return
    file = WEB / path.removeprefix("/static/")
    route.fulfill(body=file.read_bytes(), content_type="text/javascript" if file.suffix == ".js" else "text/css")


def measure(browser: Any, script: str, text: str, warm: bool, before: int) -> float:
    """The main thread's CPU milliseconds of the last timer task `script` runs, in a fresh page."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    try:
        page = context.new_page()
        page.route(f"{ORIGIN}/**", _serve)
        page.goto(f"{ORIGIN}/")
        page.add_style_tag(content=(WEB / "style.css").read_text() + (WEB / "markdown.css").read_text())
        cdp = context.new_cdp_session(page)
        events: list[dict[str, Any]] = []
        finished: list[bool] = []
        cdp.on("Tracing.dataCollected", lambda message: events.extend(message["value"]))
        cdp.on("Tracing.tracingComplete", lambda _message: finished.append(True))
        cdp.send("Tracing.start", {"traceConfig": {"includedCategories": ["devtools.timeline"]},
                                   "transferMode": "ReportEvents"})
        page.evaluate(script, [text, warm, before])
        cdp.send("Tracing.end")
        while not finished:
            page.wait_for_timeout(20)
        timers = [e for e in events if e.get("name") == "TimerFire" and e.get("ph") == "X" and "tdur" in e]
        # The measured draw is the last timer the script set (the one before it only waits).
        return float(max(timers, key=lambda e: e["ts"])["tdur"]) / 1000
    finally:
        context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.page_markdown", description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=9000, help="length of the answer (default 9000)")
    parser.add_argument("--pages", type=int, default=7, help="fresh pages per case (default 7)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright
    from tests.web.conftest import CHROMIUM_ARGS, chromium_path

    path = chromium_path()
    if path is None:
        print("Chromium is missing: run scripts/test-browser.", file=sys.stderr)
        return 1
    text = answer(args.chars)
    results: dict[str, list[float]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            for _ in range(args.pages):  # interleaved, so a burst of load on the machine hits every case
                for name, script, warm, before in CASES:
                    results.setdefault(name, []).append(measure(browser, script, text, warm, before))
        finally:
            browser.close()
    print(f"Drawing a finished {len(text):,}-character answer: main-thread CPU ms per draw, {args.pages} fresh pages")
    print("| Case | median | min | max |\n|---|---:|---:|---:|")
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"chars": len(text), "cpu_ms": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
