// Draws a chat state into the page, redrawing only what changed.
//
// The reducer shares every unchanged object between states, so a node is patched only when the object
// it was drawn from is a different one (`!==`). A tool card is redrawn the moment its own call changes,
// in the order the events arrive; growing Markdown text is redrawn at most once per animation frame.
//
// Safety: everything from the server (model text, thinking, tool names, arguments, results, errors,
// titles) enters the page as text nodes or through markdown.js, which builds elements only: no HTML
// string is ever parsed, and no attribute is taken from data except links that passed markdown.safeUrl.

import { fileViews } from "./attachments.js";
import { addCodeCopyButtons, copyButton } from "./copy.js";
import { updateMarkdown } from "./markdown.js";
import { CardStatus, stepFromRow } from "./cards.js";
import { cardsOf, conversationItems } from "./selectors.js";

const STATUS_LABEL = {
  streaming: "receiving arguments",
  pending: "waiting to run",
  awaiting_approval: "needs your approval",
  executing: "running",
  done: "done",
  error: "failed",
  denied: "denied",
  invalid: "invalid call, not run",
  unanswered: "no result",
};

const RUN_STATUS = {
  running: "working…",
  completed: "",
  paused: "paused: waiting for your decision",
  resumed: "paused for approval",
  cancelled: "Stopped",
  failed: "failed",
  interrupted: "interrupted (the server stopped)",
};

// An interrupted run also carries an error sentence; it did not fail. A stopped one says only "Stopped":
// the person asked for it, so it is neither an error nor news.
const RUN_ERROR_LABEL = {
  failed: "The run failed: ",
  interrupted: "Interrupted: ",
};

function el(tag, className = null, text = null) {
  const node = document.createElement(tag);
  if (className !== null) node.className = className;
  if (text !== null) node.textContent = text;
  return node;
}

/** A JSON value as readable text: strings as they are, everything else pretty-printed. */
export function jsonText(value) {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

/** Argument text: pretty JSON once it parses, the raw text before. */
export function argumentsView(argsText) {
  if (argsText.trim() === "") return { text: "", parsed: false };
  try {
    return { text: JSON.stringify(JSON.parse(argsText), null, 2), parsed: true };
  } catch {
    return { text: argsText, parsed: false };
  }
}

export function formatSeconds(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "";
  if (seconds < 10) return `${seconds.toFixed(seconds < 1 ? 2 : 1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}

export function usageLine(run) {
  const parts = [];
  const u = run.usage;
  if (u) {
    const fmt = (n) => n.toLocaleString("en-US");
    if (u.input_tokens != null || u.output_tokens != null) {
      parts.push(`${fmt(u.input_tokens ?? 0)} in · ${fmt(u.output_tokens ?? 0)} out tokens`);
    }
    if (u.cache_read_tokens) parts.push(`${fmt(u.cache_read_tokens)} cached`);
    if (u.reasoning_tokens) parts.push(`${fmt(u.reasoning_tokens)} reasoning`);
  }
  if (run.stepsCount != null) parts.push(`${run.stepsCount} step${run.stepsCount === 1 ? "" : "s"}`);
  if (run.duration != null) parts.push(formatSeconds(run.duration));
  return parts.join(" · ");
}

/**
 * Keep `parent`'s children in the order of `items`, creating and dropping nodes by key; a node is
 * patched when its item's `data` (or `extra`) is another object than last time.
 */
function reconcileChildren(parent, items, cache, create, patch) {
  const seen = new Set();
  let previous = null;
  for (const item of items) {
    seen.add(item.key);
    let entry = cache.get(item.key);
    if (entry === undefined) {
      entry = { node: create(item), data: null, extra: undefined };
      cache.set(item.key, entry);
    }
    if (entry.data !== item.data || entry.extra !== item.extra) {
      patch(entry.node, item, entry.data);
      entry.data = item.data;
      entry.extra = item.extra;
    }
    const wanted = previous === null ? parent.firstChild : previous.nextSibling;
    if (wanted !== entry.node) parent.insertBefore(entry.node, wanted);
    previous = entry.node;
  }
  for (const [key, entry] of cache) {
    if (!seen.has(key)) {
      entry.node.remove();
      cache.delete(key);
    }
  }
}

export class ConversationView {
  /**
   * @param {HTMLElement} root the conversation container
   * @param {{onDecide: (approvalId: string, approved: boolean, reason: string | null) => void,
   *          onUndecide: (approvalId: string) => void, onDismiss: (noticeId: number) => void,
   *          now?: () => number}} handlers
   */
  constructor(root, handlers) {
    this.root = root;
    this.handlers = handlers;
    this.now = handlers.now ?? (() => performance.now());
    this.items = el("div", "items");
    this.notices = el("div", "notices");
    this.root.replaceChildren(this.items, this.notices);
    this.itemNodes = new Map();
    this.noticeNodes = new Map();
    this.pendingText = new Map(); // element -> Markdown text to draw on the next frame
    this.frame = null;
    this.clock = null;
    this.running = new Map(); // card element -> startedAt, for the elapsed time of executing calls
    this.state = null;
  }

  /** Draw `state`, touching only what changed since the last call. */
  update(state) {
    if (state === this.state) return;
    const stick = this.nearBottom();
    this.state = state;
    const items = conversationItems(state).map((item) => ({
      key: item.key, kind: item.kind, data: item.row ?? item.run ?? item.outbox ?? item.summary, extra: item.summary,
    }));
    reconcileChildren(this.items, items, this.itemNodes, (item) => this.createItem(item), (node, item, old) => this.patchItem(node, item, old));
    const notices = state.notices.map((n) => ({ key: n.id, data: n }));
    reconcileChildren(this.notices, notices, this.noticeNodes, (item) => this.createNotice(item.data), () => {});
    this.tick();
    if (stick) this.scrollToEnd();
  }

  nearBottom() {
    const scroller = this.root;
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
  }

  scrollToEnd() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  // ---- items: stored rows, runs, the message being sent

  createItem(item) {
    if (item.kind === "run") {
      const node = el("section", "run");
      node.dataset.runId = item.data.id;
      node.append(el("div", "run-user"), el("div", "run-steps"), el("footer", "run-meta"));
      node.stepNodes = new Map();
      return node;
    }
    if (item.kind === "outbox") {
      const node = this.userBubble(item.data.text, false);
      node.classList.add("sending");
      return node;
    }
    if (item.kind === "summary") {
      const node = el("footer", "run-meta stored-run");
      node.dataset.runId = item.data.run_id;
      return node;
    }
    const row = item.data;
    if (row.kind === "user") return this.userBubble(textOf(row.messages[0]), true, row.messages[0].parts);
    const node = el("div", "stored");
    node.dataset.rowId = row.id;
    node.append(this.createStep());
    return node;
  }

  patchItem(node, item, old) {
    if (item.kind === "run") this.patchRun(node, item.data, old);
    else if (item.kind === "summary") this.patchSummary(node, item.data);
    else if (item.kind === "row" && item.data.kind !== "user") this.patchStep(node.firstChild, stepFromRow(item.data, item.extra), null, null);
  }

  /** How a stored run ended, after its last row: the same small print a followed run ends with. */
  patchSummary(node, summary) {
    node.dataset.status = summary.status;
    this.drawRunMeta(node, { status: summary.status, error: summary.error ?? null, usage: summary.usage ?? null,
      stepsCount: summary.steps ?? null, duration: summary.duration ?? null });
  }

  userBubble(text, copyable = true, parts = []) {
    const node = el("div", "user-message");
    node.append(el("div", "bubble", text));
    const files = fileViews(document, parts);
    if (files.length > 0) node.firstChild.append(el("div", "message-files"));
    if (files.length > 0) node.firstChild.lastChild.append(...files);
    if (copyable) node.append(el("div", "message-actions"));
    if (copyable) node.lastChild.append(copyButton(() => text, "Copy"));
    return node;
  }

  patchRun(node, run, old) {
    node.dataset.status = run.status;
    const [user, stepsNode, meta] = node.children;
    if (old === null || old.userRow !== run.userRow) {
      user.replaceChildren(...(run.userRow ? [this.userBubble(textOf(run.userRow.messages[0]), true, run.userRow.messages[0].parts)] : []));
    }
    const steps = run.steps.filter((s) => s.blocks.length > 0).map((s) => ({ key: s.index, data: s }));
    reconcileChildren(stepsNode, steps, node.stepNodes, () => this.createStep(), (stepNode, item, previous) =>
      this.patchStep(stepNode, item.data, previous, run));
    if (old !== null && old.status !== run.status) {
      // Pausing or resuming decides whether the approval buttons work, though no card changed.
      for (const entry of node.stepNodes.values()) {
        for (const [key, block] of entry.node.blockNodes) {
          if (key.endsWith(":tools")) this.patchTools(block.node, block.data, entry.data, run);
        }
      }
    }
    if (old !== null && old.status === run.status && old.usage === run.usage && old.error === run.error &&
        old.restarts === run.restarts) return;
    this.drawRunMeta(meta, run);
  }

  /** A run's last line: its error, then its status and usage in small print. */
  drawRunMeta(meta, run) {
    meta.replaceChildren();
    // Said once: an error a step already shows (the provider's, say) is not repeated under the run.
    const shown = new Set((run.steps ?? []).flatMap((s) => s.blocks.filter((b) => b.kind === "error").map((b) => b.message)));
    if (run.error && run.status !== "cancelled" && !shown.has(run.error.message)) {
      const line = el("div", "error-line");
      line.setAttribute("role", "alert");
      const what = RUN_ERROR_LABEL[run.status] ?? RUN_ERROR_LABEL.failed;
      line.append(el("strong", null, what), document.createTextNode(run.error.message || run.error.code || ""));
      meta.append(line);
    }
    if (run.restarts > 0) meta.append(el("p", "run-resumed", "Resumed after the server restarted."));
    const label = RUN_STATUS[run.status] ?? run.status;
    const small = el("small", "run-usage");
    small.textContent = [label, usageLine(run)].filter(Boolean).join(" · ");
    meta.append(small);
  }

  // ---- steps: text, thinking, the tool aggregate, errors

  createStep() {
    const node = el("div", "step");
    node.blockNodes = new Map();
    return node;
  }

  patchStep(node, step, old, run) {
    const blocks = step.blocks.map((block, i) => ({ key: `${i}:${block.kind}`, data: block }));
    reconcileChildren(node, blocks, node.blockNodes, (item) => this.createBlock(item.data),
      (blockNode, item) => this.patchBlock(blockNode, item.data, step, run));
    // The tool aggregate reads the step's cards, which change without its block changing.
    if (old !== null && old.cards !== step.cards) {
      for (const [key, entry] of node.blockNodes) if (key.endsWith(":tools")) this.patchTools(entry.node, entry.data, step, run);
    }
    // Text the provider cut off stays, said to be incomplete: the step failed, or its message says so.
    const cut = step.message?.metadata?.incomplete === true || step.blocks.some((b) => b.kind === "error");
    for (const [key, entry] of node.blockNodes) {
      if (key.endsWith(":text") && entry.node.classList.contains("incomplete") !== cut) {
        entry.node.classList.toggle("incomplete", cut);
        entry.node.querySelector(".incomplete-note").hidden = !cut;
      }
    }
  }

  createBlock(block) {
    switch (block.kind) {
      case "text": {
        // The Markdown, then the message's actions (copy its source text).
        const node = el("div", "text-block");
        const cut = el("p", "incomplete-note", "Incomplete: the answer stopped here.");
        cut.hidden = true;
        node.append(el("div", "md"), cut, el("div", "message-actions"));
        node.lastChild.append(copyButton(() => node.sourceText ?? "", "Copy"));
        return node;
      }
      case "thinking": {
        const details = el("details", "thinking");
        details.append(el("summary", null, block.redacted ? "Thinking (hidden by the provider)" : "Thinking"), el("div", "thinking-text"));
        return details;
      }
      case "tools": {
        const node = el("div", "tools-aggregate");
        node.setAttribute("role", "group");
        node.append(el("div", "tools-summary"), el("div", "tool-cards"));
        node.cardNodes = new Map();
        return node;
      }
      case "error": {
        const node = el("div", "error-line");
        node.setAttribute("role", "alert");
        return node;
      }
      default:
        return el("div", `part part-${block.kind}`);
    }
  }

  patchBlock(node, block, step, run) {
    switch (block.kind) {
      case "text":
        node.sourceText = block.text;
        this.drawMarkdown(node.firstChild, block.text);
        break;
      case "thinking":
        node.lastChild.textContent = block.text;
        break;
      case "tools":
        this.patchTools(node, block, step, run);
        break;
      case "error":
        node.replaceChildren(el("strong", null, "Error: "), document.createTextNode(block.message || "The model's answer failed."));
        break;
      case "provider_tool":
        node.replaceChildren(this.providerTool(block.part));
        break;
      case "file":
        node.textContent = `[file: ${block.part.name ?? block.part.media_type}]`;
        break;
      default:
        break;
    }
  }

  drawMarkdown(node, text) {
    if (!node.firstChild) {
      updateMarkdown(node, text);
      addCodeCopyButtons(node);
      return;
    }
    this.pendingText.set(node, text);
    if (this.frame === null) {
      this.frame = requestAnimationFrame(() => {
        this.frame = null;
        const stick = this.nearBottom();
        for (const [target, latest] of this.pendingText) {
          updateMarkdown(target, latest);
          addCodeCopyButtons(target);
        }
        this.pendingText.clear();
        if (stick) this.scrollToEnd();
      });
    }
  }

  providerTool(part) {
    const card = el("article", "tool-card provider-tool");
    const head = el("header");
    head.append(el("span", "tool-name", part.name), el("span", "tool-status", `${part.provider} · ${part.status ?? "ran on the provider"}`));
    card.append(head);
    if (part.arguments != null) card.append(el("pre", "tool-args", jsonText(part.arguments)));
    if (part.result != null) card.append(el("pre", "tool-result", jsonText(part.result)));
    return card;
  }

  // ---- tool cards

  patchTools(node, block, step, run) {
    const cards = cardsOf(step);
    const counts = {};
    for (const card of cards) counts[card.status] = (counts[card.status] ?? 0) + 1;
    const summary = [`${cards.length} tool call${cards.length === 1 ? "" : "s"}`];
    for (const status of ["executing", "done", "error", "awaiting_approval", "invalid", "denied"]) {
      if (counts[status]) summary.push(`${counts[status]} ${STATUS_LABEL[status]}`);
    }
    node.firstChild.textContent = summary.join(" · ");
    const items = cards.map((card) => ({ key: card.id, data: card }));
    const paused = run !== null && run.status === "paused";
    reconcileChildren(node.lastChild, items, node.cardNodes, (item) => this.createCard(item.data),
      (cardNode, item, old) => this.patchCard(cardNode, item.data, old, paused));
    // A run that pauses or resumes changes whether the approval buttons work, not the cards.
    if (node.paused !== paused) {
      node.paused = paused;
      for (const entry of node.cardNodes.values()) this.patchApproval(entry.node, entry.data, paused);
    }
  }

  createCard(card) {
    const node = el("article", "tool-card");
    node.dataset.callId = card.id;
    const head = el("header");
    head.append(el("span", "tool-name"), el("span", "tool-status"), el("span", "tool-time"));
    const args = el("details", "tool-args");
    args.open = true;
    args.append(el("summary", null, "Arguments"), el("pre"));
    const reason = el("p", "tool-reason");
    const result = el("details", "tool-result");
    result.append(el("summary", null, "Result"), el("pre"));
    const approval = el("div", "approval");
    node.append(head, args, reason, result, approval);
    return node;
  }

  patchCard(node, card, old, paused) {
    const [head, args, reason, result] = node.children;
    node.dataset.status = card.status;
    // A call stopped with its run is not a failure of the tool: said neutrally.
    const stopped = card.status === CardStatus.ERROR && errorMessage(card) === "cancelled";
    node.classList.toggle("stopped", stopped);
    if (old === null || old.name !== card.name) head.children[0].textContent = card.name || "(unnamed tool)";
    head.children[1].textContent = stopped ? "stopped" : STATUS_LABEL[card.status] ?? card.status;
    if (old === null || old.argsText !== card.argsText) {
      const view = argumentsView(card.argsText);
      args.lastChild.textContent = view.text;
      args.classList.toggle("parsed", view.parsed);
      args.hidden = view.text === "" && card.status !== CardStatus.STREAMING;
    }
    reason.hidden = card.status !== CardStatus.INVALID;
    if (card.status === CardStatus.INVALID) reason.textContent = card.reason ?? "";
    if (old === null || old.hasResult !== card.hasResult || old.result !== card.result) {
      result.hidden = !card.hasResult;
      if (card.hasResult) {
        const error = errorMessage(card);
        result.firstChild.textContent = error === null ? "Result" : card.status === CardStatus.DENIED ? "Denied"
          : stopped ? "Stopped" : "Error";
        result.lastChild.textContent = stopped ? "Stopped before it finished." : error ?? jsonText(card.result);
        result.open = error !== null || result.lastChild.textContent.length < 2000;
        result.classList.toggle("is-error", error !== null && !stopped);
      }
      // A tool's files, once stored (by reference): images shown, others as download chips (attachments.js).
      const files = fileViews(document, (card.files ?? []).filter((f) => f.blob_id));
      node.querySelector(":scope > .tool-files")?.remove();
      if (files.length > 0) {
        const box = el("div", "tool-files");
        box.append(...files);
        result.after(box);
      }
    }
    if (card.status === CardStatus.EXECUTING && card.startedAt !== null) this.running.set(node, card.startedAt);
    else this.running.delete(node);
    const time = head.children[2];
    if (card.duration !== null && card.status !== CardStatus.EXECUTING) time.textContent = formatSeconds(card.duration);
    else if (card.status !== CardStatus.EXECUTING) time.textContent = "";
    this.patchApproval(node, card, paused);
  }

  patchApproval(node, card, paused) {
    const box = node.lastChild;
    const key = `${card.status}|${paused}|${card.decision?.approved}|${card.decision?.sent}|${card.approvalId}|${card.storedDecision}`;
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    box.replaceChildren();
    if (card.status !== CardStatus.APPROVAL) {
      // What was decided stays on the card, from this page's decision or the one the server recorded.
      const approved = card.decision?.approved ?? card.storedDecision;
      if (approved === true || approved === false) {
        const reason = card.decision?.reason ?? card.storedReason ?? null;
        box.append(el("p", "decided", approved ? "You approved this call." : `You denied this call${reason ? `: ${reason}` : "."}`));
      }
      return;
    }
    if (!paused) {
      box.append(el("p", "hint", "Waiting for the run to pause before it can be decided."));
      return;
    }
    if (card.decision?.sent) {
      box.append(el("span", "hint", card.decision.approved ? "Approved: the run goes on." : "Denied: the run goes on."));
      return;
    }
    if (card.decision !== null) {
      const undo = el("button", "secondary", "Undo");
      undo.type = "button";
      undo.addEventListener("click", () => this.handlers.onUndecide(card.approvalId));
      box.append(el("span", "hint", card.decision.approved ? "Approved: sent once every waiting call is decided."
        : "Denied: sent once every waiting call is decided."), undo);
      return;
    }
    const approve = el("button", "approve", "Approve");
    approve.type = "button";
    const deny = el("button", "deny", "Deny");
    deny.type = "button";
    const reason = el("input", "deny-reason");
    reason.type = "text";
    reason.placeholder = "Reason for denying (optional)";
    reason.setAttribute("aria-label", `Reason for denying ${card.name}`);
    approve.addEventListener("click", () => this.handlers.onDecide(card.approvalId, true, null));
    deny.addEventListener("click", () => this.handlers.onDecide(card.approvalId, false, reason.value.trim() || null));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        deny.click();
      }
    });
    box.append(approve, deny, reason);
  }

  /** Refresh the elapsed time of executing calls (four times a second while any runs). */
  tick() {
    const now = this.now();
    for (const [node, startedAt] of this.running) {
      if (!node.isConnected) {
        this.running.delete(node);
        continue;
      }
      node.querySelector(".tool-time").textContent = formatSeconds(Math.max(0, (now - startedAt) / 1000));
    }
    if (this.running.size > 0 && this.clock === null) {
      this.clock = setInterval(() => this.tick(), 250);
    } else if (this.running.size === 0 && this.clock !== null) {
      clearInterval(this.clock);
      this.clock = null;
    }
  }

  createNotice(notice) {
    const node = el("div", `notice notice-${notice.level}`);
    node.setAttribute("role", "alert");
    const close = el("button", "dismiss", "Dismiss");
    close.type = "button";
    close.addEventListener("click", () => this.handlers.onDismiss(notice.id));
    node.append(el("span", null, notice.message), close);
    return node;
  }

  destroy() {
    if (this.clock !== null) clearInterval(this.clock);
    if (this.frame !== null) cancelAnimationFrame(this.frame);
    this.clock = null;
    this.frame = null;
  }
}

/** The text of a user message (its text parts). */
export function textOf(message) {
  return (message?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

/** The error sentence of an error result (`{"error": "..."}`), or null for a result that is not an error. */
function errorMessage(card) {
  if (!card.isError && card.status !== CardStatus.INVALID && card.status !== CardStatus.DENIED) return null;
  const result = card.result;
  if (result !== null && typeof result === "object" && typeof result.error === "string") return result.error;
  return jsonText(result);
}
