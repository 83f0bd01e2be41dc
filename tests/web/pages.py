"""The chat page as tests see it: what a person does and reads, over any server that speaks the contract.

Nothing here knows which server answers (the scripted contract server, or the real `toolwire serve` in
the end-to-end tests), so the same helpers serve both.
"""

from __future__ import annotations

import json
import time
from typing import Any

from playwright.sync_api import BrowserContext, Locator, Page, expect

# Runs before the page's own scripts: records every status a card shows (in order), and anything that
# would let model output run code (a new script or frame, an on* attribute, a script URL).
WATCH = """
(() => {
  window.__cardLog = [];
  window.__argsLog = [];
  window.__injected = [];
  const scriptUrl = /^\\s*(javascript|vbscript|data):/i;
  const inspect = (node) => {
    if (node.nodeType !== 1) return;
    const tag = node.tagName;
    if (tag === "SCRIPT" && !(node.type === "module" && /\\/static\\/app\\.js$/.test(node.src))) window.__injected.push("script");
    // The page's own file views (attachments.js) show images, from blob: URLs only, in their own containers.
    const ownImage = tag === "IMG" && node.closest(".file-image, .attachment") !== null
      && /^(blob:|$)/.test(node.getAttribute("src") ?? "");
    if (["IFRAME", "OBJECT", "EMBED", "FRAME", "BASE", "META", "LINK", "STYLE", "IMG", "SVG", "svg"].includes(tag)
        && document.readyState === "complete" && !ownImage) window.__injected.push(tag.toLowerCase());
    for (const attr of node.attributes) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on")) window.__injected.push(`${tag.toLowerCase()}[${name}]`);
      if (["href", "src", "action", "formaction", "xlink:href", "srcdoc"].includes(name) && (scriptUrl.test(attr.value) || name === "srcdoc")) {
        window.__injected.push(`${tag.toLowerCase()}[${name}=${attr.value.slice(0, 40)}]`);
      }
    }
  };
  const lastStatus = new Map();
  const logStatus = (id, status) => {
    if (status && lastStatus.get(id) !== status) {
      lastStatus.set(id, status);
      window.__cardLog.push([id, status]);
    }
  };
  // Statuses a card takes within one task (two events read from one network chunk) reach the observer
  // together: each change's old value is the status the card had before it, the last one is on the card.
  const card = (node, oldValue, touched) => {
    if (node.nodeType === 1 && node.classList.contains("tool-card") && node.dataset.callId) {
      logStatus(node.dataset.callId, oldValue);
      touched.add(node);
    }
  };
  const args = (node) => {
    const card = node.closest && node.closest(".tool-card");
    if (node.tagName === "PRE" && node.parentElement.classList.contains("tool-args") && card && card.dataset.callId) {
      window.__argsLog.push([card.dataset.callId, node.textContent, card.dataset.status || ""]);
    }
  };
  new MutationObserver((records) => {
    const touched = new Set();
    for (const record of records) {
      if (record.type === "childList" && record.target.nodeType === 1) args(record.target);
      if (record.type === "attributes") {
        inspect(record.target);
        if (record.attributeName === "data-status") card(record.target, record.oldValue, touched);
        continue;
      }
      for (const node of record.addedNodes) {
        if (node.nodeType !== 1) continue;
        inspect(node);
        for (const inner of node.querySelectorAll("*")) inspect(inner);
      }
    }
    for (const node of touched) logStatus(node.dataset.callId, node.dataset.status);
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeOldValue: true });
})();
"""


class WebPage:
    def __init__(self, context: BrowserContext, base_url: str) -> None:
        self.context = context
        self.base_url = base_url
        self.page: Page = context.new_page()
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.add_init_script(WATCH)
        self.page.on("dialog", self._on_dialog)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    # ---- navigation

    def goto(self, *, token: str | None = None, chat: str | None = None) -> None:
        fragment = "&".join(f"{k}={v}" for k, v in (("token", token), ("chat", chat)) if v)
        self.page.goto(self.base_url + (f"#{fragment}" if fragment else ""))
        self.page.wait_for_load_state("load")

    def reload(self) -> None:
        self.page.reload()
        self.page.wait_for_load_state("load")

    def open_chat(self, chat_id: str) -> None:
        self.page.locator(f'.chat-item[data-chat-id="{chat_id}"] .chat-link').click()
        expect(self.page.locator("#conversation")).to_be_visible()

    def send(self, text: str) -> None:
        box = self.page.locator("#message")
        box.fill(text)
        box.press("Enter")

    # ---- reading the conversation

    def expect_drawn(self, cursor: str) -> None:
        """Wait until the page has drawn the event with this cursor."""
        expect(self.page.locator("#conversation")).to_have_attribute("data-cursor", cursor)

    def wait_until(self, expression: str, timeout: float = 5.0) -> None:
        """Poll a JavaScript expression until it is true (wait_for_function needs eval, which the page's CSP forbids)."""
        deadline = time.monotonic() + timeout
        while not self.page.evaluate(expression):
            assert time.monotonic() < deadline, f"still false after {timeout} s: {expression}"
            time.sleep(0.03)

    def card(self, call_id: str) -> Locator:
        return self.page.locator(f'.tool-card[data-call-id="{call_id}"]')

    def expect_status(self, call_id: str, status: str) -> None:
        expect(self.card(call_id)).to_have_attribute("data-status", status)

    def arguments_text(self, call_id: str) -> str:
        return self.card(call_id).locator(".tool-args pre").text_content() or ""

    def result_text(self, call_id: str) -> str:
        return self.card(call_id).locator(".tool-result pre").text_content() or ""

    def card_log(self) -> list[tuple[str, str]]:
        return [tuple(entry) for entry in self.page.evaluate("window.__cardLog")]

    def arguments_log(self, call_id: str) -> list[tuple[str, str]]:
        """Every argument text the card showed, in order, with the card's status at that moment."""
        return [(text, status) for cid, text, status in self.page.evaluate("window.__argsLog") if cid == call_id]

    def statuses_of(self, call_id: str) -> list[str]:
        return [status for cid, status in self.card_log() if cid == call_id]

    def conversation_text(self) -> str:
        return self.page.locator("#conversation").inner_text()

    def run(self, run_id: str) -> Locator:
        return self.page.locator(f'.run[data-run-id="{run_id}"]')

    def expect_run_status(self, run_id: str, status: str) -> None:
        expect(self.run(run_id)).to_have_attribute("data-status", status)

    def expect_last_run_status(self, status: str, timeout: float = 10_000) -> None:
        """The last run drawn (its id is the server's, unknown to the test) reached `status`."""
        expect(self.page.locator(".run").last).to_have_attribute("data-status", status, timeout=timeout)

    # ---- acting on approvals

    def approve(self, call_id: str) -> None:
        self.card(call_id).get_by_role("button", name="Approve").click()

    def deny(self, call_id: str, reason: str | None = None) -> None:
        if reason is not None:
            self.card(call_id).locator(".deny-reason").fill(reason)
        self.card(call_id).get_by_role("button", name="Deny").click()

    # ---- safety

    def injected(self) -> list[str]:
        return list(self.page.evaluate("window.__injected"))

    def canary(self) -> Any:
        return self.page.evaluate("window.__xss === undefined ? null : window.__xss")

    def problems(self) -> list[str]:
        """Anything that must never happen on any page: script errors, dialogs, injected markup, the canary."""
        found = [f"uncaught error in the page: {e}" for e in self.errors]
        found += [f"a dialog opened: {d}" for d in self.dialogs]
        try:
            found += [f"injected into the page: {i}" for i in self.injected()]
            canary = self.canary()
            if canary is not None:
                found.append(f"an injected script ran: window.__xss = {json.dumps(canary)}")
            scripts = self.page.evaluate("document.scripts.length")
            if scripts != 1:
                found.append(f"the page has {scripts} script elements (1 expected)")
        except Exception as exc:  # a page that was closed by the test itself
            if "closed" not in str(exc):
                raise
        return found

    def screenshot(self, path: Any) -> None:
        self.page.screenshot(path=str(path), full_page=False)
