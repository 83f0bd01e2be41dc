// The CommonMark spec's own examples (npm commonmark-spec, pinned in web-build/package-lock.json) through
// the page's renderer in jsdom. Shared by commonmark.test.mjs and by `node commonmark.mjs --write`, which
// rewrites deviations.json from what the renderer does today (review the diff before committing it).
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

import { renderMarkdown } from "../../../../src/toolwire/web/markdown.js";

const require = createRequire(new URL("../../../../web-build/package.json", import.meta.url));
const { JSDOM } = require("jsdom");
// The spec writes a tab as "→" so that it can be seen; the examples mean a tab.
export const examples = require("commonmark-spec").tests.map((example) => ({
  ...example, markdown: example.markdown.replaceAll("→", "\t"), html: example.html.replaceAll("→", "\t"),
}));
export const specVersion = require("commonmark-spec/package.json").version;
export const DEVIATIONS = fileURLToPath(new URL("deviations.json", import.meta.url));

const dom = new JSDOM("<!doctype html><body></body>");
const doc = dom.window.document;

/** The renderer's HTML for a Markdown text. */
export function render(markdown) {
  const holder = doc.createElement("div");
  holder.append(renderMarkdown(markdown, doc));
  return holder.innerHTML;
}

// Block elements: whitespace next to them is layout, not content (as the spec's own normalize.py says).
const BLOCKS = new Set(["ADDRESS", "ARTICLE", "ASIDE", "BLOCKQUOTE", "BODY", "DD", "DIV", "DL", "DT", "FIGURE",
  "FOOTER", "FORM", "H1", "H2", "H3", "H4", "H5", "H6", "HEADER", "HR", "HTML", "LI", "MAIN", "NAV", "OL", "P",
  "PRE", "SECTION", "TABLE", "TBODY", "TD", "TFOOT", "TH", "THEAD", "TR", "UL"]);

/**
 * HTML in a comparable form, as the spec's normalize.py does: whitespace runs collapsed outside <pre>,
 * whitespace beside block elements dropped, attributes sorted. The renderer's additions that do not change
 * what the Markdown means are removed first: highlight.js token spans inside code (their text stays), the
 * data-lang attribute, the rel/target every link carries and the tabindex of a code block.
 */
export function normalize(html) {
  const holder = doc.createElement("div");
  holder.innerHTML = html; // test code only: the page never parses HTML
  for (const span of [...holder.querySelectorAll("pre span")]) span.replaceWith(...span.childNodes);
  for (const node of holder.querySelectorAll("*")) {
    for (const name of ["data-lang", "rel", "target", "tabindex"]) node.removeAttribute(name);
    const attributes = [...node.attributes].map((a) => [a.name, a.value]).sort();
    for (const [name] of attributes) node.removeAttribute(name);
    for (const [name, value] of attributes) node.setAttribute(name, value);
  }
  holder.normalize();
  clean(holder, false);
  return holder.innerHTML;
}

function clean(node, inPre) {
  for (const child of [...node.childNodes]) {
    if (child.nodeType === 3 && !inPre) {
      const before = child.previousSibling;
      // A hard break is <br> in both; the spec writes a newline after it, the renderer does not.
      let text = (before?.nodeName === "BR" ? child.data.replace(/^\n/, "") : child.data).replace(/\s+/g, " ");
      const after = child.nextSibling;
      if (before === null ? BLOCKS.has(node.nodeName) || node === node.ownerDocument : BLOCKS.has(before.nodeName)) text = text.trimStart();
      if (after === null ? BLOCKS.has(node.nodeName) : BLOCKS.has(after.nodeName)) text = text.trimEnd();
      if (text === "") child.remove();
      else child.data = text;
    } else if (child.nodeType === 1) {
      clean(child, inPre || child.nodeName === "PRE");
    }
  }
}

const SAFE_HREF = /^(https?:\/\/|mailto:)/i;

/**
 * The spec's HTML with the page's link and image rules applied: a link to anything but an absolute
 * http(s)/mailto URL becomes a <span> of its content; an image becomes a link "[image: alt]" (a span when
 * its URL is not safe). What the renderer must show for an example with links or images.
 */
export function withSafetyRules(html) {
  const holder = doc.createElement("div");
  holder.innerHTML = html;
  for (const a of [...holder.querySelectorAll("a")]) {
    if (!SAFE_HREF.test(a.getAttribute("href") ?? "")) {
      const span = doc.createElement("span");
      span.append(...a.childNodes);
      a.replaceWith(span);
    }
  }
  for (const img of [...holder.querySelectorAll("img")]) {
    const src = img.getAttribute("src") ?? "";
    const safe = SAFE_HREF.test(src);
    const link = doc.createElement(safe ? "a" : "span");
    link.setAttribute("class", "md-image");
    if (safe) link.setAttribute("href", src);
    link.textContent = `[image: ${img.getAttribute("alt") || "untitled"}]`;
    img.replaceWith(link);
  }
  return holder.innerHTML;
}

/** Whether the example's Markdown holds raw HTML (or a would-be tag) that the page shows as text. */
export function hasRawHtml(example, shown) {
  return /<[A-Za-z!?/]/.test(example.markdown) && shown.includes("&lt;");
}

/** Whether GitHub Flavored Markdown's autolink literals made a link the spec leaves as text. */
export function hasAutolinkLiteral(example, shown) {
  const links = (html) => (html.match(/<a /g) ?? []).length;
  return links(shown) > links(withSafetyRules(example.html));
}

/** The reasons a listed deviation may give, each with the check that it holds for the example. */
export const REASONS = {
  "gfm-autolink-literal": hasAutolinkLiteral,
  "raw-html": hasRawHtml,
};

/**
 * How the renderer's output relates to the spec's for one example:
 * "spec" (the same), "safety" (the same once the link and image rules are applied to the spec's HTML), or
 * "different" (then deviations.json must list it, with a reason and the exact output).
 */
export function verdict(example, shown) {
  const mine = normalize(shown);
  if (mine === normalize(example.html)) return "spec";
  if (mine === normalize(withSafetyRules(example.html))) return "safety";
  return "different";
}

/** Every example the renderer shows differently from the spec once the safety rules are applied. */
export function differences() {
  const found = {};
  for (const example of examples) {
    const shown = render(example.markdown);
    if (verdict(example, shown) === "different") {
      found[example.number] = { section: example.section, markdown: example.markdown, spec: example.html, safe: shown };
    }
  }
  return found;
}

if (process.argv[2] === "--write") {
  const found = differences();
  const out = { spec: specVersion, examples: {} };
  for (const [number, d] of Object.entries(found)) {
    const example = examples.find((e) => e.number === Number(number));
    const reason = Object.keys(REASONS).find((name) => REASONS[name](example, d.safe)) ?? "TODO: explain or fix";
    out.examples[number] = { reason, ...d };
  }
  writeFileSync(DEVIATIONS, `${JSON.stringify(out, null, 1)}\n`);
  console.log(`${examples.length} examples, ${Object.keys(found).length} deviations written`);
}
