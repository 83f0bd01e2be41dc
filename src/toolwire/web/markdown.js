// Markdown for model text, safe by construction.
//
// Parsing is a library's job: micromark (CommonMark 0.31 + GitHub Flavored Markdown, through
// mdast-util-from-markdown) turns the text into a syntax tree, and lowlight (highlight.js grammars) turns a
// fenced code block into a tree of token spans. Both come from vendor/markdown-libs.js, one ES module built
// from a lock file by scripts/build-web-vendor. This module only walks the two trees and builds DOM nodes
// through createElement and text nodes: no HTML string is ever built or parsed.
//
// The safety rules, where the page departs from CommonMark's HTML on purpose:
// - Raw HTML (a `<div>` block, an inline `<img onerror=...>`, `<script>`) is shown as the characters it is:
//   the parser reads it as text (web-build/entry.js turns CommonMark's HTML constructs off), so the Markdown
//   around and inside it still counts.
// - Links keep only absolute http(s) and mailto URLs; any other link (`javascript:`, `data:`, a relative
//   path) shows its text without a link.
// - Images are never loaded: a model (or a web page it read) can smuggle data out through an image URL, so
//   an image becomes a link "[image: alt]" the person can choose to follow.
// - Every link opens in a new tab without the page (rel="noopener noreferrer nofollow").
// A soft line break stays a newline in the text, as CommonMark says; the page's style shows it as a line
// break (white-space: pre-line), as chats do.

import { lowlight, normalizeUri, parseMarkdownTree } from "./vendor/markdown-libs.js";

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
// Deeper nesting (quotes in lists in quotes...) is shown as its plain text: no reader needs it, and a
// recursive walk must not run out of stack on a hostile text.
const MAX_DEPTH = 32;
// Highlighting a very long block on every streamed frame costs more than it gives: longer ones stay plain.
const MAX_HIGHLIGHT_CHARS = 50_000;
// A fence's language is looked up as a grammar only when it looks like a grammar name.
const LANGUAGE = /^[\w+#.-]{1,32}$/;

/**
 * The href a link may carry, or null. Only absolute http, https and mailto URLs, judged by the same URL
 * parser the browser uses (so `java\tscript:` or ` javascript:` are seen as what they are); the href is the
 * URL percent-encoded as CommonMark's reference renderer writes it.
 */
export function safeUrl(raw) {
  const text = String(raw).trim();
  let url;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (!SAFE_PROTOCOLS.has(url.protocol)) return null;
  const href = normalizeUri(text);
  // The encoded form must mean the same URL: re-check it, in case encoding changed what the parser sees.
  try {
    return SAFE_PROTOCOLS.has(new URL(href).protocol) ? href : null;
  } catch {
    return null;
  }
}

// Containers opened on one line ("> > > ..." or "- - - ... x") cost the parser time that grows with the
// square of their number, and a few thousand exhaust its stack: past MAX_LINE_NESTING, the next marker is
// escaped (a backslash CommonMark drops), so the rest of the line is text. (Inside a code block such a line
// would show that backslash; no one writes 33 nested markers in code.)
const MAX_LINE_NESTING = 32;
const NESTED_LINE = new RegExp(`^[ \\t]*(?:(?:>|(?:[-*+]|\\d{1,9}[.)])(?=[ \\t]|$))[ \\t]*){${MAX_LINE_NESTING + 1},}`, "gm");
const MARKER = /(>|[-*+]|\d{1,9}[.)])[ \t]*/y;

function limitNesting(text) {
  return text.replace(NESTED_LINE, (line) => {
    MARKER.lastIndex = line.length - line.trimStart().length;
    for (let k = 0; k < MAX_LINE_NESTING; k += 1) MARKER.exec(line);
    const at = MARKER.lastIndex;
    const marker = MARKER.exec(line)[1];
    const escapeAt = /\d/.test(marker[0]) ? at + marker.length - 1 : at; // "12." becomes "12\."
    return `${line.slice(0, escapeAt)}\\${line.slice(escapeAt)}`;
  });
}

/** The Markdown syntax tree (mdast) of a text. */
export function markdownTree(text) {
  return parseMarkdownTree(limitNesting(String(text)));
}

/** Markdown text as a DocumentFragment built from elements and text nodes only. */
export function renderMarkdown(text, doc = document) {
  const fragment = doc.createDocumentFragment();
  fragment.append(...drawBlocks(markdownTree(text), doc).map((block) => block.node));
  return fragment;
}

// A sample with every construct an answer usually has, for warmUpMarkdown.
const WARM_UP = "## A\n\nText **b** _i_ `c` [l](https://example.org/) https://example.com ~~d~~.\n\n"
  + "- a\n- b\n\n1. a\n2. b\n\n> q\n\n```python\ndef f(x):\n    return [x * 2 for x in range(3)]\n```\n\n"
  + "| a | b |\n|---|---:|\n| 1 | 2 |\n\n---\n";

/**
 * Parse, highlight and draw a small sample once, off the page. The first answer the page draws costs about
 * twice what the same answer costs later (the parser's code is compiled lazily, and runs slowly until
 * the engine has seen it run): the page calls this while it waits for the server's first answers, so that
 * time is spent before there is anything to show rather than when a chat opens (bench/page_markdown.py).
 */
export function warmUpMarkdown(doc = document, rounds = 2) {
  for (let k = 0; k < rounds; k += 1) renderMarkdown(WARM_UP.repeat(k + 1), doc);
}

/** The DOM node of each top-level block of a tree ({block, node}; blocks that show nothing are left out). */
function drawBlocks(tree, doc) {
  const context = { doc, definitions: definitionsOf(tree) };
  const flow = true;
  return tree.children.map((block) => ({ block, node: draw(block, context, 0, false, flow) }))
    .filter((drawn) => drawn.node !== null);
}

// Streaming: a message grows by appended text and is drawn again on every frame, and parsing is what
// costs (micromark is correct, not fast: a 9 kB answer costs ~100x the old hand-written parser). CommonMark
// parses blocks line by line, and a top-level block closed by a *complete* line never changes again, so
// those blocks are kept (parsed and drawn once) and only the text from the first block that may still change
// is parsed again. Link reference definitions (and footnote definitions) reach back to earlier text: a
// message with one (or with a carriage return) is parsed whole every time.
const streams = new WeakMap(); // target element -> {stable: text drawn for good, nodes: its DOM nodes}
// Anywhere, not only at a line's start: a definition inside a quote or a list item counts for the whole text.
const DEFINITION = /\[[^\]\n]+\]:/;

/**
 * Show Markdown `text` in `target` (its children are replaced). When the text extends what `target` showed
 * last, the blocks that cannot change any more are kept and only the rest is parsed and drawn again; the
 * result is the same as `target.replaceChildren(renderMarkdown(text))` (tests/web/js check this).
 */
export function updateMarkdown(target, text, doc = document) {
  const value = String(text);
  let state = streams.get(target);
  // A carriage return is a line ending to micromark and not to the line counting below: parse whole.
  if (state === undefined || !value.startsWith(state.stable) || DEFINITION.test(value) || value.includes("\r")) {
    state = { stable: "", nodes: [] };
  }
  const tail = value.slice(state.stable.length);
  const drawn = drawBlocks(markdownTree(tail), doc);
  target.replaceChildren(...state.nodes, ...drawn.map((d) => d.node));

  // Keep every block followed by a block that starts on a complete line of the tail: the line that closed
  // it can no longer change. The last block, and any closed only by the unfinished last line, are redone.
  const lastLine = tail.endsWith("\n") ? Number.POSITIVE_INFINITY : countLines(tail);
  let keep = 0;
  for (let k = 1; k < drawn.length; k += 1) {
    if (drawn[k].block.position.start.line < lastLine) keep = k;
  }
  if (keep > 0) {
    const cut = lineStart(tail, drawn[keep].block.position.start.line);
    state = { stable: state.stable + tail.slice(0, cut), nodes: [...state.nodes, ...drawn.slice(0, keep).map((d) => d.node)] };
  }
  streams.set(target, state);
}

function countLines(text) {
  let lines = 1;
  for (let at = text.indexOf("\n"); at >= 0; at = text.indexOf("\n", at + 1)) lines += 1;
  return lines;
}

/** The offset where line `line` (1-based) of `text` starts. */
function lineStart(text, line) {
  let at = 0;
  for (let k = 1; k < line; k += 1) at = text.indexOf("\n", at) + 1;
  return at;
}

/** Link reference definitions by identifier; the first one of a label wins, as CommonMark says. */
function definitionsOf(tree) {
  const found = new Map();
  const stack = [tree];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node.type === "definition") {
      if (!found.has(node.identifier) || found.get(node.identifier).position.start.offset > node.position.start.offset) {
        found.set(node.identifier, node);
      }
    } else if (node.children !== undefined) {
      stack.push(...node.children);
    }
  }
  return found;
}

function element(doc, tag, className = null) {
  const node = doc.createElement(tag);
  if (className !== null) node.setAttribute("class", className);
  return node;
}

// The mdast nodes whose children are blocks (the others hold phrasing: text, emphasis, links...).
const FLOW = new Set(["root", "blockquote", "listItem", "footnoteDefinition"]);

function appendAll(parent, owner, context, depth, tight) {
  const flow = FLOW.has(owner.type);
  for (const node of owner.children) {
    const drawn = draw(node, context, depth, tight, flow);
    if (drawn !== null) parent.append(drawn);
  }
  return parent;
}

function container(tag, node, context, depth, className = null) {
  return appendAll(element(context.doc, tag, className), node, context, depth + 1, false);
}

/**
 * The DOM of one mdast node (null for nodes that show nothing). In a tight list, paragraphs show bare;
 * `flow` says the node is a block (its parent holds blocks).
 */
function draw(node, context, depth, tight, flow) {
  const doc = context.doc;
  if (depth > MAX_DEPTH) return doc.createTextNode(plainText(node));
  switch (node.type) {
    case "text":
      return doc.createTextNode(node.value);
    case "paragraph":
      if (tight) return appendAll(doc.createDocumentFragment(), node, context, depth + 1, false);
      return container("p", node, context, depth);
    case "heading":
      return container(`h${node.depth}`, node, context, depth);
    case "thematicBreak":
      return doc.createElement("hr");
    case "blockquote":
      return container("blockquote", node, context, depth);
    case "list":
      return list(node, context, depth);
    case "code":
      return codeBlock(node, doc);
    case "html":
      // The parser reads raw HTML as text; should an html node ever come, it is text too (a block: a paragraph).
      if (flow) return appendText(element(doc, "p", "md-html"), doc, node.value);
      return doc.createTextNode(node.value);
    case "emphasis":
      return container("em", node, context, depth);
    case "strong":
      return container("strong", node, context, depth);
    case "delete":
      return container("del", node, context, depth);
    case "inlineCode": {
      // CommonMark: line endings inside a code span are spaces.
      const code = element(doc, "code");
      code.append(doc.createTextNode(node.value.replace(/\r\n?|\n/g, " ")));
      return code;
    }
    case "break":
      return doc.createElement("br");
    case "link":
      return link(node, node, context, depth);
    case "linkReference": {
      const definition = context.definitions.get(node.identifier);
      return definition === undefined ? container("span", node, context, depth) : link(node, definition, context, depth);
    }
    case "image":
      return image(node.alt, node.url, doc);
    case "imageReference":
      return image(node.alt, context.definitions.get(node.identifier)?.url ?? null, doc);
    case "definition":
      return null;
    case "table":
      return table(node, context, depth);
    case "footnoteReference":
      return appendText(element(doc, "sup", "md-footnote-ref"), doc, `[${node.label ?? node.identifier}]`);
    case "footnoteDefinition": {
      const note = element(doc, "div", "md-footnote");
      note.append(appendText(element(doc, "span", "md-footnote-label"), doc, `[${node.label ?? node.identifier}] `));
      return appendAll(note, node, context, depth + 1, false);
    }
    default:
      // A node type this renderer does not know (a future GFM construct) still shows its text.
      return doc.createTextNode(plainText(node));
  }
}

function appendText(parent, doc, text) {
  parent.append(doc.createTextNode(text));
  return parent;
}

function plainText(node) {
  if (typeof node.value === "string") return node.value;
  if (typeof node.alt === "string") return node.alt;
  return (node.children ?? []).map(plainText).join("");
}

function list(node, context, depth) {
  const doc = context.doc;
  const tag = doc.createElement(node.ordered ? "ol" : "ul");
  if (node.ordered && node.start !== null && node.start !== undefined && node.start !== 1) {
    tag.setAttribute("start", String(node.start));
  }
  // As CommonMark's HTML: a list is loose when it or any of its items is spread (blank lines between
  // blocks); a tight list shows its paragraphs without paragraph spacing.
  const loose = node.spread === true || node.children.some((item) => item.spread === true);
  for (const item of node.children) {
    const li = doc.createElement("li");
    if (item.checked === true || item.checked === false) {
      const box = appendText(element(doc, "span", "md-task"), doc, item.checked ? "☑ " : "☐ ");
      box.setAttribute("role", "img");
      box.setAttribute("aria-label", item.checked ? "done" : "not done");
      li.append(box);
    }
    appendAll(li, item, context, depth + 1, !loose);
    tag.append(li);
  }
  return tag;
}

function codeBlock(node, doc) {
  const code = doc.createElement("code");
  const lang = (node.lang ?? "").trim();
  if (lang !== "") {
    code.setAttribute("class", `language-${lang}`);
    code.setAttribute("data-lang", lang);
  }
  // The block's lines each end with a newline, as in CommonMark's HTML (and in what a copy button copies).
  const text = node.value === "" ? "" : `${node.value}\n`;
  const known = LANGUAGE.test(lang) && lowlight.registered(lang.toLowerCase());
  if (known && text.length <= MAX_HIGHLIGHT_CHARS) {
    appendTokens(code, lowlight.highlight(lang.toLowerCase(), text).children, doc);
  } else if (text !== "") {
    code.append(doc.createTextNode(text));
  }
  const pre = doc.createElement("pre");
  pre.setAttribute("tabindex", "0"); // a long line scrolls sideways: the keyboard must reach it too
  pre.append(code);
  return pre;
}

/** lowlight's tree (hast: spans with highlight.js token classes, and text) as DOM nodes. */
function appendTokens(parent, nodes, doc) {
  for (const node of nodes) {
    if (node.type === "text") {
      parent.append(doc.createTextNode(node.value));
    } else if (node.type === "element") {
      // Class names come from highlight.js's grammars, never from the text; kept to the token-name shape.
      const names = (node.properties?.className ?? []).filter((name) => /^[\w-]{1,40}$/.test(name));
      const span = element(doc, "span", names.length > 0 ? names.join(" ") : null);
      appendTokens(span, node.children ?? [], doc);
      parent.append(span);
    }
  }
}

function link(node, target, context, depth) {
  const href = safeUrl(target.url);
  if (href === null) return container("span", node, context, depth);
  const a = linkAttributes(container("a", node, context, depth), href);
  if (target.title) a.setAttribute("title", target.title);
  return a;
}

function linkAttributes(a, href) {
  a.setAttribute("href", href); // only ever an absolute http(s)/mailto URL (safeUrl)
  a.setAttribute("rel", "noopener noreferrer nofollow");
  a.setAttribute("target", "_blank");
  return a;
}

function image(alt, url, doc) {
  const label = `[image: ${alt || "untitled"}]`;
  const href = url === null ? null : safeUrl(url);
  if (href === null) return appendText(element(doc, "span", "md-image"), doc, label);
  return linkAttributes(appendText(element(doc, "a", "md-image"), doc, label), href);
}

function table(node, context, depth) {
  const doc = context.doc;
  const align = node.align ?? [];
  const [head, ...rows] = node.children;
  const row = (tableRow, cellTag) => {
    const tr = doc.createElement("tr");
    tableRow.children.forEach((cell, k) => {
      const td = appendAll(element(doc, cellTag, align[k] ? `align-${align[k]}` : null), cell, context, depth + 2, false);
      tr.append(td);
    });
    return tr;
  };
  const thead = doc.createElement("thead");
  thead.append(row(head, "th"));
  const tableNode = doc.createElement("table");
  tableNode.append(thead);
  if (rows.length > 0) {
    const tbody = doc.createElement("tbody");
    for (const tableRow of rows) tbody.append(row(tableRow, "td"));
    tableNode.append(tbody);
  }
  const scroll = element(doc, "div", "table-scroll");
  scroll.setAttribute("tabindex", "0"); // a wide table scrolls sideways: the keyboard must reach it too
  scroll.append(tableNode);
  return scroll;
}
